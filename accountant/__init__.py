"""dpcert accountant: symbolic ledger, certified conversions, certificates, persistence.

>>> from accountant import PrivacyAccountant
>>> from mechanisms import Gaussian
>>> acct = PrivacyAccountant().compose(Gaussian(sigma=1.0), times=10)
>>> cert = acct.certificate(delta=1e-5)

The public names are loaded on first use (PEP 562), so ``import accountant`` and ``dpcert --version``
do not pay for numpy, scipy and numba.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ._version import __version__

_EXPORTS = {
    "Calibration": ".calibration", "calibrate_sigma": ".calibration", "max_sample_rate": ".calibration",
    "max_steps": ".calibration", "Certificate": ".certificate", "IndividualRenyiFilter": ".individual_filter",
    "IndKNNFilter": ".individual_filter", "Ledger": ".ledger", "DPCertAccountant": ".opacus_adapter",
    "BudgetExceeded": ".privacy_accountant", "AccuracyWarning": ".privacy_accountant",
    "PrivacyAccountant": ".privacy_accountant", "PrivacyBudget": ".privacy_accountant",
    "StepsCalibration": ".calibration", "DpEventAccountant": ".interop",
    "calibrate_laplace_svt": ".svt_calibration", "calibrate_gaussian_svt": ".svt_calibration",
}

__all__ = ["routes", "Certificate", "Ledger", "PrivacyAccountant", "PrivacyBudget", "BudgetExceeded",
           "AccuracyWarning",
           "Calibration", "calibrate_sigma", "max_steps", "max_sample_rate", "DPCertAccountant",
           "IndividualRenyiFilter", "IndKNNFilter", "StepsCalibration", "DpEventAccountant",
           "calibrate_laplace_svt", "calibrate_gaussian_svt", "__version__"]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .calibration import Calibration, StepsCalibration, calibrate_sigma, max_sample_rate, max_steps
    from .certificate import Certificate
    from .individual_filter import IndividualRenyiFilter, IndKNNFilter
    from .interop import DpEventAccountant
    from .ledger import Ledger
    from .opacus_adapter import DPCertAccountant
    from .privacy_accountant import AccuracyWarning, BudgetExceeded, PrivacyAccountant, PrivacyBudget
    from .svt_calibration import calibrate_gaussian_svt, calibrate_laplace_svt


def __getattr__(name: str):
    if name == "routes":
        return importlib.import_module(".routes", __name__)
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'accountant' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
