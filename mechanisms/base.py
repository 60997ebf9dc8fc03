"""The mechanism contract: what a plug-in must tell the accountant.

A mechanism is a frozen dataclass of its parameters with pure, vectorised methods. It describes its
privacy cost by *curves*, never by a single (epsilon, delta):

``rdp(alpha)``
    Renyi-DP curve eps(alpha), an upper bound on D_alpha(M(D) || M(D')) over all neighbouring pairs
    and *both* orders of the pair, for real alpha > 1 (``+inf`` where no bound exists).  For a
    mechanism with an infinite-loss mass ``p_inf > 0`` (an (eps, delta) block) the curve is the RDP of
    the pair conditioned on the complement of that failure event; the accountant then uses
    ``delta_total = p_inf + (1 - p_inf) * delta_rdp`` (joint convexity of the hockey-stick divergence).

``log_mgf(s, direction)``
    log M(s) = log E_P[e^{s L}; L < inf] for complex s with 0 <= Re s < ``max_mgf_order``, where
    L = log(p/q) is the privacy-loss variable of the mechanism's dominating pair (P, Q) for the given
    direction: ``"remove"`` (P is the output distribution *with* the differing record) or ``"add"``
    (the swapped pair).  This is the characteristic function at a shifted argument:
    log phi(t) = log M(i t), and for real s = alpha - 1, log M(s) = (alpha - 1) D_alpha(P || Q).
    Only mechanisms with ``pld_available = True`` implement it; the others are accounted by RDP only.

``pld_atoms(direction)``
    The finite atoms (losses, masses) of the P-measure of L.  ``log_mgf`` minus the atoms' MGF is the
    MGF of an absolutely continuous measure, whose modulus on the line Re s = c is bounded by
    ``exp(log_continuous_envelope(c, t, direction))`` for all |Im s| >= t (non-increasing in t).  Atoms are
    treated exactly by the characteristic-function accountant; only the continuous remainder is
    integrated numerically, so lattice mechanisms (randomized response) are composed exactly.

``infinite_loss_mass``
    P(q = 0): probability of an infinite privacy loss (delta of an (eps, delta)-DP block, 0 otherwise).

Each subclass declares ``name`` (registry key), ``symmetric`` (the remove and add pairs give the same
loss distribution), ``tight`` (the dominating pair is attained by some neighbouring datasets, so a
numerical lower bound on its delta is a lower bound on the mechanism's true privacy profile) and
``relations`` (neighbouring relations under which its parameters are meaningful).

Field checks are declared once per class in ``field_checks`` (field name -> check, see :func:`check`);
the base ``__post_init__`` runs them in the mapping's order and stores the normalised values.  Checks
that involve several fields go in the subclass's ``__post_init__`` after ``super().__post_init__()``; a
subclass with more fields extends its parent's mapping (``{**Parent.field_checks, "x": ...}``).

A mechanism accounted by the curves of another one (its dominating pair: GNMax by the Gaussian pair)
derives from :class:`Delegating` and returns that mechanism from ``dominating()``; every route open to
the dominating mechanism is then open to it.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np

from ._numerics import phase_error as _phase_error

DIRECTIONS = ("remove", "add")
RELATIONS = ("add_remove", "replace_one")


class UnsupportedRoute(ValueError):
    """Raised when a mechanism cannot be accounted by the requested route (e.g. no PLD)."""


def check_direction(direction: str) -> str:
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    return direction


def cost_hint(m: Mechanism) -> Callable[..., float]:
    """``(t_max, c, direction) -> m.mgf_cost(t_max, c, direction)``; a plug-in hint written as
    ``mgf_cost(t_max)`` (before the ``c`` and ``direction`` arguments existed) is called without them."""
    try:
        params = inspect.signature(m.mgf_cost).parameters
    except (TypeError, ValueError):  # (no signature to inspect: pass all)
        return m.mgf_cost
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params.values()) or len(params) >= 3:
        return m.mgf_cost
    if len(params) == 2:
        return lambda t, c, direction="remove": m.mgf_cost(t, c)
    return lambda t, c=0.0, direction="remove": m.mgf_cost(t)


def envelope_cost(m: Mechanism, c: float, direction: str) -> float:
    """``m.envelope_cost(c, direction)``, or ``m.envelope_cost(c)`` for a hint without ``direction``."""
    try:
        n = len(inspect.signature(m.envelope_cost).parameters)
    except (TypeError, ValueError):
        n = 2
    return m.envelope_cost(c, direction) if n >= 2 else m.envelope_cost(c)


class FieldRef:
    """The (already checked) value of another field, as a keyword argument of :func:`check`."""

    __slots__ = ("field",)

    def __init__(self, field: str):
        self.field = field

    def __repr__(self) -> str:
        return f"field_ref({self.field!r})"


def field_ref(field: str) -> FieldRef:
    """Refer to another field in a :func:`check`, e.g. ``check(V.integer, low=1, high=field_ref("n"))``:
    the value is read when the check runs, so that field must come earlier in ``field_checks``."""
    return FieldRef(field)


class Check:
    """A field check: ``fn(label or field name, value, **kwargs)`` returns the normalised value or raises
    (``TypeError`` / ``ValueError`` naming the parameter).  Build it with :func:`check`."""

    __slots__ = ("fn", "kwargs", "label", "optional")

    def __init__(self, fn: Callable[..., Any], label: str | None, optional: bool, kwargs: dict[str, Any]):
        self.fn = fn
        self.label = label
        self.optional = optional
        self.kwargs = kwargs

    def __call__(self, name: str, value: Any, mech: Any = None) -> Any:
        if value is None and self.optional:
            return None
        kw = {k: getattr(mech, v.field) if isinstance(v, FieldRef) else v for k, v in self.kwargs.items()}
        return self.fn(self.label or name, value, **kw)

    def __repr__(self) -> str:
        return f"check({getattr(self.fn, '__name__', self.fn)!r}, label={self.label!r}, " \
               f"optional={self.optional!r}, **{self.kwargs!r})"


def check(fn: Callable[..., Any], /, *, label: str | None = None, optional: bool = False,
          **kwargs: Any) -> Check:
    """Declare a field check for ``Mechanism.field_checks``.

    Parameters
    ----------
    fn : callable ``(name, value, **kwargs) -> value``
        Usually a :mod:`mechanisms.validation` helper (``V.positive``, ``V.real``, ``V.integer``, ...).
    label : str, optional
        The parameter name used in error messages (default: the field name).
    optional : bool
        ``None`` is accepted and stored as is.
    **kwargs
        Passed to ``fn`` (bounds, ...); a :func:`field_ref` is replaced by that field's checked value.

    A plain callable ``(name, value) -> value`` (e.g. ``V.positive``) can stand in ``field_checks``
    without ``check``."""
    return Check(fn, label, optional, kwargs)


FieldCheck = Callable[..., Any]


def apply_checks(obj: Any, checks: Mapping[str, FieldCheck]) -> None:
    """Run ``checks`` (field name -> check, as in ``Mechanism.field_checks``) in order on the attributes
    of ``obj`` and store each normalised value back (``object.__setattr__``: frozen dataclasses too).
    Also for plain functions that share a mechanism's checks (on a ``types.SimpleNamespace``)."""
    for name, chk in checks.items():
        value = getattr(obj, name)
        value = chk(name, value, obj) if isinstance(chk, Check) else chk(name, value)
        object.__setattr__(obj, name, value)


class Mechanism:
    """Base class of all mechanisms (subclasses are frozen dataclasses)."""

    #: field name -> check (a :func:`check` or a callable ``(name, value) -> value``), run in this order
    #: by ``__post_init__``; the returned (normalised) value is stored in the field
    field_checks: ClassVar[Mapping[str, FieldCheck]] = {}

    name: ClassVar[str] = ""
    symmetric: ClassVar[bool] = True
    tight: ClassVar[bool] = True
    pld_available: ClassVar[bool] = False
    poisson_tight: ClassVar[bool] = False  # Poisson-subsampled RDP = the tight L(alpha) (Zhu & Wang 2019)
    relations: ClassVar[tuple[str, ...]] = RELATIONS

    def __post_init__(self) -> None:
        """Run ``field_checks`` in order and store each normalised value; a subclass with checks across
        fields overrides this and calls ``super().__post_init__()`` first."""
        apply_checks(self, self.field_checks)

    # ------------------------------------------------------------------ RDP
    def rdp(self, alpha) -> np.ndarray:  # pragma: no cover - abstract
        """RDP curve eps(alpha) for real alpha > 1, worst case over both directions."""
        raise UnsupportedRoute(f"{type(self).__name__} does not provide an RDP curve")

    @property
    def pure_epsilon(self) -> float:
        """The alpha -> inf end of the RDP curve (pure-DP epsilon); ``inf`` if not pure DP."""
        return math.inf

    @property
    def infinite_loss_mass(self) -> float:
        """Probability of infinite privacy loss (0 except for (eps, delta) blocks)."""
        return 0.0

    @property
    def gdp_mu(self) -> float | None:
        """mu when the mechanism's dominating pair is exactly the Gaussian pair (N(mu, 1), N(0, 1)).

        Plug-in hook of the closed-form mu-GDP route: a ledger whose entries all report a mu composes
        to sqrt(sum k_j mu_j^2)-GDP, certified in closed form.  None (default) for any other pair."""
        return None

    def unbounded_reason(self) -> str | None:
        """Why this mechanism admits no finite (epsilon, delta) bound, or None if it has one.

        Used to explain a vacuous certificate (epsilon = inf).  The default checks the RDP curve on a
        grid of orders; subclasses name the parameter condition that fails."""
        if self.pld_available or math.isfinite(self.pure_epsilon) or self.infinite_loss_mass >= 1.0:
            return None
        try:
            vals = np.asarray(self.rdp(np.geomspace(1.0 + 1e-6, 1e6, 64)), dtype=float)
        except Exception:  # noqa: BLE001 - a mechanism without an RDP curve: nothing to explain here
            return None
        if np.isfinite(vals).any():
            return None
        return "its RDP curve is infinite at every order alpha > 1 and it is not pure DP"

    # ------------------------------------------------------------------ PLD / characteristic function
    @property
    def max_mgf_order(self) -> float:
        """Supremum of real c with M(c) < inf (``inf`` for bounded or Gaussian-tailed losses)."""
        return math.inf

    def log_mgf_phase_error(self, c: float, t_max: float, direction: str = "remove") -> float:
        """Extra error of ``log_mgf`` (form of ``log_mgf_error``) on Re s = c, |Im s| <= t_max: phases t l
        and exponents c l of rounded losses (atoms kernels; also at t_max = 0, the real point, which
        ``ComposedPLD.mgf_err_at`` adds).  Default: pure eps-DP ``phase_error(t_max, 2 eps)``, else 0."""
        e = self.pure_epsilon
        return _phase_error(t_max, 2.0 * e) if math.isfinite(e) else 0.0

    @property
    def log_mgf_error(self) -> float:
        """Error bound e of ``log_mgf``, relative to the MGF on the real axis: the computed value
        M~(s) = exp(log_mgf(s)) satisfies |M~(s) - M(s)| <= (e^e - 1) M(Re s) (and, at real s, it is a
        bound on |log M~(s) - log M(s)|).  The characteristic-function route relies on exactly this
        form (its floating-point term scales the node magnitudes by M(Re s)).  0 for closed forms."""
        return 0.0

    def mgf_cost(self, t_max: float, c: float = 0.0, direction: str = "remove") -> float:
        """Relative cost of ``log_mgf(s, direction)`` per point s with |Im s| <= t_max and Re s = c, or
        0 <= Re s <= c (closed forms: 1).

        The characteristic-function route caps its total work with it; when the cap binds, the
        truncation point is lowered and the certified bracket gets wider (never wrong).  The hint must
        grow at least as fast as the real work (e.g. with |Re s| for quadratures whose range or step
        depends on it): the route's per-query meter relies on it to never start a call that would run
        for minutes.  (A hint written without the ``c`` and ``direction`` arguments is still accepted.)
        """
        return 1.0

    def envelope_cost(self, c: float, direction: str = "remove") -> float:
        """Cost of ``log_envelope_fn(c, direction)`` in the units of :meth:`mgf_cost` (default: 64 MGF
        calls); the characteristic-function route meters its work per query with these hints."""
        return 64.0 * cost_hint(self)(0.0, c, direction)

    def log_mgf(self, s, direction: str = "remove") -> np.ndarray:
        """log E_P[exp(s L); L finite] for complex s with 0 <= Re s < ``max_mgf_order``."""
        raise UnsupportedRoute(
            f"{type(self).__name__} has no privacy-loss distribution; use method='rdp'")

    def log_mgf_real(self, c: float, direction: str = "remove") -> float:
        """``log_mgf`` at one real point c (the line search calls it often; override with a scalar form)."""
        return float(np.real(self.log_mgf(np.array([complex(c)]), direction)[0]))

    def pld_atoms(self, direction: str = "remove") -> tuple[np.ndarray, np.ndarray]:
        """Finite atoms (losses, masses) of the P-measure of the privacy loss (default: none)."""
        return np.empty(0), np.empty(0)

    def pld_cell_masses(self, edges: np.ndarray, direction: str = "remove"):
        """Exact masses of the privacy loss (finite part, under P) on the cells of a sorted grid.

        Parameters
        ----------
        edges : array of n >= 1 sorted finite losses.
        direction : {"remove", "add"} (the same dominating pair as ``log_mgf`` / ``pld_atoms``).

        Returns
        -------
        ``None`` when not available, else ``(m, err)`` with m of length n + 1:
        m[0] = P(L <= e_0), m[i] = P(e_{i-1} < L <= e_i), m[n] = P(e_{n-1} < L < inf), so
        sum(m) = 1 - ``infinite_loss_mass``; an atom on an edge belongs to the cell below.  Masses are
        CDF differences (exact formulas, floating point only).  ``err`` is either an array of per-cell
        bounds |m_i - true_i| <= err_i (preferred: lets the caller weight the errors, e.g. by an
        exponential tilt) or a float bounding sum_i |m_i - true_i|.

        The default covers mechanisms whose continuous part is given exactly by ``pld_exp_pieces``
        (atoms plus closed-form integrals of the exponential pieces, e.g. Laplace); atomic mechanisms
        (``mechanisms.lattice.AtomicMechanism``) histogram their atoms; others return ``None``.
        """
        check_direction(direction)
        pieces = self.pld_exp_pieces(direction)
        if pieces is None:
            return None
        from ._cells import atoms_cell_masses, check_edges, pieces_cell_masses

        e = check_edges(edges)
        l, w = self.pld_atoms(direction)
        m, err = atoms_cell_masses(e, l, w)
        mp_, errp = pieces_cell_masses(e, *pieces)
        return m + mp_, err + errp + 2.0**-53 * (m + mp_)

    def pld_cell_offsets(self, edges: np.ndarray, direction: str = "remove"):
        """Bounds on where the loss sits inside each cell (for the PLD's cell splits), or ``None``.

        Returns ``(lo, hi)``, arrays of length n + 1 (cells as in ``pld_cell_masses``) with
        lo_i <= E[L - e_{i-1} | e_{i-1} < L <= e_i] / (e_i - e_{i-1}) <= hi_i for the cells i = 1..n-1
        of positive mass (the unbounded cells 0 and n are ignored by callers).  Rigorous bounds (floating
        point included).  Default: not available.  (Optional finer hook, looked up by name:
        ``pld_cell_q_masses(edges, direction) -> (mq, err)``, the same cells' masses under Q, i.e.
        E_P[e^{-L}; cell] on the finite cells, per-cell error bounds: the PLD's connect-the-dots split.)
        """
        check_direction(direction)
        return None

    def total_variation(self, direction: str = "remove") -> float | None:
        """delta(0) of the dominating pair, i.e. TV(P, Q) (an upper bound is fine); None if unknown.

        The characteristic-function route uses it as a cap: for eps >= 0 the composed delta(eps) is at
        most TV(prod P, prod Q) <= 1 - prod_j (1 - TV_j)^{k_j} (product of maximal couplings).
        """
        return None

    def pld_exp_pieces(self, direction: str = "remove"):
        """Optional exact form of the continuous part of the P-measure of the privacy loss.

        ``None`` (default) or arrays ``(lo, hi, log_w, rate)`` such that the continuous part has the
        density ``sum_q exp(log_w_q + rate_q l)`` on ``[lo_q, hi_q]`` (``lo_q < hi_q``,
        ``0 <= rate_q <= 1``).  When given, the characteristic-function route integrates every
        composed term with a single continuous factor in closed form (these terms decay only like
        1/|t| on the contour), which makes Laplace-type compositions cheap.  It must agree exactly
        with ``log_mgf`` minus the atoms.
        """
        return None

    def log_continuous_envelope(self, c: float, t: float, direction: str = "remove") -> float:
        """log of an upper bound on |M(c + i t') - A(c + i t')| for all |t'| >= t (non-increasing in t).

        A is the MGF of the atoms.  The default uses only |M_cont(c + i t')| <= M_cont(c) (no decay),
        which is valid for any non-negative measure.  ``-inf`` means no continuous part.
        """
        logm = float(np.real(self.log_mgf(np.array([complex(c)]), direction)[0]))
        losses, masses = self.pld_atoms(direction)
        if not len(losses):
            return logm
        log_atoms = float(np.logaddexp.reduce(np.log(masses) + c * losses))
        if log_atoms >= logm:
            return -math.inf
        return logm + math.log(-math.expm1(log_atoms - logm))

    def log_envelope_fn(self, c: float, direction: str = "remove"):
        """``t -> log_continuous_envelope(c, t, direction)``; override to precompute per-line constants."""
        return lambda t: self.log_continuous_envelope(c, t, direction)

    # ------------------------------------------------------------------ exact profile of one use
    @property
    def exact_profile(self) -> bool:
        """True when :meth:`exact_delta` gives the privacy profile of ONE use in closed form (plug-in hook
        of the single-use exact route, :mod:`accountant.routes`: a ledger holding one use of one such
        mechanism is certified by ``exact_delta`` / ``exact_epsilon`` instead of numerically)."""
        return False

    @property
    def exact_profile_attained(self) -> bool:
        """One use of the mechanism attains the profile of :meth:`exact_delta` (pointwise in eps), so its
        lower end is a lower bound on the mechanism's true delta; default: ``tight``."""
        return self.tight

    def exact_delta(self, epsilon: float, direction: str = "remove") -> tuple[float, float]:
        """Certified (lower, upper) of delta(eps) = sup_S P(S) - e^eps Q(S) for ONE use of the dominating
        pair in ``direction`` (eps >= 0), rigorous in floating point.  Only when ``exact_profile``."""
        raise UnsupportedRoute(f"{type(self).__name__} has no closed-form privacy profile")

    def exact_epsilon(self, delta: float, direction: str = "remove") -> tuple[float, float]:
        """Certified (lower, upper) of eps(delta) = inf{eps >= 0 : delta(eps) <= delta} for one use, from
        :meth:`exact_delta` by certified root finding (:func:`mechanisms._profile.epsilon_bracket`)."""
        from . import validation as V
        from ._profile import epsilon_bracket

        d = V.delta(delta)
        check_direction(direction)
        return epsilon_bracket(lambda e: self.exact_delta(e, direction), d)

    def log_phi(self, t) -> tuple[np.ndarray, np.ndarray]:
        """Log characteristic functions phi(t) = E[exp(i t L)] restricted to finite losses (remove pair
        L_{P,Q} under P, add pair L_{Q,P} under Q); ``t`` real array."""
        s = 1j * np.asarray(t, dtype=float)
        return self.log_mgf(s, "remove"), self.log_mgf(s, "add")

    # ------------------------------------------------------------------ serialisation
    def params(self) -> dict[str, Any]:
        """Constructor parameters as JSON-ready values (nested mechanisms as dicts)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            v = getattr(self, f.name)
            out[f.name] = v.to_dict() if isinstance(v, Mechanism) else v
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "params": self.params()}

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> Mechanism:
        """Rebuild from ``params()``; subclasses with nested mechanisms override this."""
        return cls(**params)  # type: ignore[call-arg]

    def describe(self) -> str:
        """One-line human summary, e.g. ``gaussian(sigma=2, sensitivity=1)``."""
        inner = ", ".join(f"{k}={_fmt(v)}" for k, v in self.params().items())
        return f"{self.name}({inner})"


def _forwarded(name: str) -> property:
    """A read-only property with the value of the dominating mechanism's attribute ``name``."""
    return property(lambda self: getattr(self.dominating(), name), doc=f"``dominating().{name}``.")


class Delegating(Mechanism):
    """A mechanism accounted by the curves of another one: the public delegation hook.

    ``dominating()`` returns a mechanism whose dominating pair dominates this one's (e.g. GNMax -> the
    Gaussian pair N(Delta, sigma^2) vs N(0, sigma^2), report-noisy-max with Laplace noise -> pure
    eps-DP).  Every curve method of the contract (RDP, log-MGF, atoms, cells, envelopes, total
    variation, cost hints) and the flags the routes read (``pld_available``, ``symmetric``,
    ``poisson_tight``, ``gdp_mu``) are forwarded to it, so the routes open to the dominating mechanism
    (closed-form mu-GDP, characteristic function, discretised PLD, RDP) are open to this one, with the
    same numbers: upper bounds for this mechanism.  The subclass keeps its own parameters, ``name``,
    ``relations``, ``tight`` flag (the dominating pair may not be attained: say ``tight = False`` unless
    it is) and docstring.  Not forwarded: the single-use closed-form profile (``exact_profile``), which
    a subclass may declare itself.  A subclass that overrides none of the forwarded members is evaluated
    by the routes as its dominating mechanism itself (:func:`accounted_as`), so type-specific routes
    (closed forms, splits) apply to it as well."""

    def dominating(self) -> Mechanism:  # pragma: no cover - abstract
        """The mechanism whose curves this one is accounted by (build it once, e.g. in ``__post_init__``,
        when construction is not cheap)."""
        raise NotImplementedError(f"{type(self).__name__} must define dominating()")

    # flags read on instances by the ledger and the routes, and the scalar ends of the curves
    pld_available = _forwarded("pld_available")  # type: ignore[assignment]
    symmetric = _forwarded("symmetric")  # type: ignore[assignment]
    poisson_tight = _forwarded("poisson_tight")  # type: ignore[assignment]
    pure_epsilon = _forwarded("pure_epsilon")  # type: ignore[assignment]
    infinite_loss_mass = _forwarded("infinite_loss_mass")  # type: ignore[assignment]
    gdp_mu = _forwarded("gdp_mu")  # type: ignore[assignment]
    max_mgf_order = _forwarded("max_mgf_order")  # type: ignore[assignment]
    log_mgf_error = _forwarded("log_mgf_error")  # type: ignore[assignment]

    @property
    def rdp_below_pair(self) -> bool:
        return bool(getattr(self.dominating(), "rdp_below_pair", False))

    # curves
    def rdp(self, alpha):
        return self.dominating().rdp(alpha)

    # the cost hints keep their one-argument form (the inner hint at Re s = 0, "remove"): forwarding c and
    # the direction would change the cf route's work meter and so, at the margin, certificates
    def mgf_cost(self, t_max: float) -> float:
        return self.dominating().mgf_cost(t_max)

    def envelope_cost(self, c: float) -> float:
        return self.dominating().envelope_cost(c)

    def log_mgf(self, s, direction: str = "remove"):
        return self.dominating().log_mgf(s, direction)

    def log_mgf_real(self, c: float, direction: str = "remove") -> float:
        return self.dominating().log_mgf_real(c, direction)

    def pld_atoms(self, direction: str = "remove"):
        return self.dominating().pld_atoms(direction)

    def pld_cell_masses(self, edges, direction: str = "remove"):
        return self.dominating().pld_cell_masses(edges, direction)

    def pld_cell_offsets(self, edges, direction: str = "remove"):
        return self.dominating().pld_cell_offsets(edges, direction)

    def pld_exp_pieces(self, direction: str = "remove"):
        return self.dominating().pld_exp_pieces(direction)

    def total_variation(self, direction: str = "remove"):
        return self.dominating().total_variation(direction)

    def log_continuous_envelope(self, c: float, t: float, direction: str = "remove") -> float:
        return self.dominating().log_continuous_envelope(c, t, direction)

    def log_envelope_fn(self, c: float, direction: str = "remove"):
        return self.dominating().log_envelope_fn(c, direction)

    def log_mgf_phase_error(self, c: float, t_max: float, direction: str = "remove") -> float:
        return self.dominating().log_mgf_phase_error(c, t_max, direction)

    def __getattr__(self, name: str):
        # optional hooks of the inner mechanism (``pld_cell_q_masses`` and its fast path)
        if name in ("pld_cells_and_q_masses", "pld_cell_q_masses"):
            fn = getattr(self.dominating(), name, None)
            if fn is not None:
                return fn
        raise AttributeError(name)


#: what :class:`Delegating` forwards to ``dominating()`` (every member it defines but ``dominating``; read
#: off the class, so a member added there is covered): a subclass that overrides none of these is
#: accounted by exactly the dominating mechanism's numbers
_FORWARDED_MEMBERS = tuple(name for name in vars(Delegating) if name != "dominating"
                           and (not name.startswith("__") or name == "__getattr__"))


def _forwards_all(cls: type) -> bool:
    """Whether no class between ``cls`` and :class:`Delegating` in the MRO redefines a forwarded member."""
    mro = cls.__mro__
    below = mro[: mro.index(Delegating)]
    return not any(name in k.__dict__ for k in below for name in _FORWARDED_MEMBERS)


def accounted_as(m: Mechanism) -> Mechanism:
    """The mechanism whose curves the routes evaluate for ``m``: ``m.dominating()``, repeatedly, while
    ``m`` is a :class:`Delegating` mechanism that overrides none of the forwarded curves and flags (every
    curve of the two is then the same function, so every route gives the same numbers on either), else
    ``m`` itself.  Routes that special-case a mechanism type (the one-step subsampled-Gaussian closed
    form, the near-atomic splits, the max-statistic lower bound) thus apply to wrappers of that type
    too.  What the wrapper declares for itself is not carried over: ``tight`` (whether its dominating
    pair is attained), ``relations`` and its single-use ``exact_profile``; the ledger keeps those
    (:meth:`accountant.ledger.Ledger.numeric_view`)."""
    seen = 0
    while isinstance(m, Delegating) and _forwards_all(type(m)) and seen < 64:
        m = m.dominating()
        seen += 1
    return m


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, dict) and "name" in v:
        return v["name"]
    return repr(v)


def as_complex_array(s) -> np.ndarray:
    return np.asarray(s, dtype=complex)
