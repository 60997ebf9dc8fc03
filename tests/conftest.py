import os
import sys

# tests import the oracle module ``reference`` from this folder
sys.path.insert(0, os.path.dirname(__file__))

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _no_auto_time_limit(request):
    """Tests compare certificates with references and with each other, so they run without the time limit
    of ``method="auto"`` (CPU time: its answer can depend on the machine's speed);
    ``tests/test_time_limit.py`` tests the limit itself, with explicit ``time_limit=`` values, and tests
    marked ``default_time_limit`` keep the shipped default."""
    from accountant.privacy_accountant import PrivacyAccountant

    if request.node.get_closest_marker("default_time_limit"):
        yield
        return
    defaults = PrivacyAccountant.__init__.__defaults__
    PrivacyAccountant.__init__.__defaults__ = (*defaults[:-1], None)
    try:
        yield
    finally:
        PrivacyAccountant.__init__.__defaults__ = defaults
