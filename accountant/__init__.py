"""dpcert accountant: symbolic ledger, certified conversions, certificates, persistence.

>>> from accountant import PrivacyAccountant
>>> from mechanisms import Gaussian
>>> acct = PrivacyAccountant().compose(Gaussian(sigma=1.0), times=10)
>>> cert = acct.certificate(delta=1e-5)
"""

__version__ = "0.1.0"

from .calibration import Calibration, calibrate_sigma, max_sample_rate, max_steps  # noqa: E402
from .certificate import Certificate  # noqa: E402
from .individual_filter import IndividualRenyiFilter, IndKNNFilter  # noqa: E402
from .ledger import Ledger  # noqa: E402
from .opacus_adapter import DPCertAccountant  # noqa: E402
from .privacy_accountant import BudgetExceeded, PrivacyAccountant, PrivacyBudget  # noqa: E402

__all__ = ["Certificate", "Ledger", "PrivacyAccountant", "PrivacyBudget", "BudgetExceeded",
           "Calibration", "calibrate_sigma", "max_steps", "max_sample_rate", "DPCertAccountant",
           "IndividualRenyiFilter", "IndKNNFilter",
           "__version__"]
