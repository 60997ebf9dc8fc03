"""dpcert accountant: symbolic ledger, certified conversions, certificates, persistence.

>>> from accountant import PrivacyAccountant
>>> from mechanisms import Gaussian
>>> acct = PrivacyAccountant().compose(Gaussian(sigma=1.0), times=10)
>>> cert = acct.certificate(delta=1e-5)
"""

__version__ = "0.1.0"

from .certificate import Certificate  # noqa: E402
from .ledger import Ledger  # noqa: E402
from .privacy_accountant import BudgetExceeded, PrivacyAccountant, PrivacyBudget  # noqa: E402

__all__ = ["Certificate", "Ledger", "PrivacyAccountant", "PrivacyBudget", "BudgetExceeded", "__version__"]
