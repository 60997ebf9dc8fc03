"""Adapters: one class per accounting library, one method per benchmark task.

Every method takes the task's parameters and returns a dict with at least ``value`` (the epsilon, sigma,
... the library reports); ``lower``/``upper`` when the library reports an interval.  A task a library
cannot express raises :class:`NotApplicable`.  The adapters construct everything from scratch on every
call (no state between calls), so a repeated call measures a full query, not a cached result.

Peers are optional (the ``peers`` extra: autodp, dp-accounting, prv-accountant; Opacus separately,
it needs torch).  Accuracy settings are each library's documented defaults, or the ones Opacus uses:
dp-accounting PLD ``value_discretization_interval=1e-4``; prv-accountant ``eps_error=0.01``,
``delta_error=delta/1000``; Opacus' calibration ``epsilon_tolerance=0.01``.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
from typing import Any


class NotApplicable(Exception):
    """The library has no API for this task."""


def _version(mod: str) -> str:
    try:
        from importlib import metadata

        return metadata.version(mod)
    except Exception:  # noqa: BLE001
        return "?"


class DPCert:
    name = "dpcert"
    dist = "dpcert"
    modules = ("accountant",)

    def __init__(self):
        from accountant import PrivacyAccountant, calibrate_sigma
        from accountant.audit import load_mechanism_plugins

        load_mechanism_plugins()  # data-adaptive plug-ins register themselves on import
        from mechanisms import Gaussian, Laplace, SubsampledGaussian

        self.PA, self.cal = PrivacyAccountant, calibrate_sigma
        self.G, self.L, self.SG = Gaussian, Laplace, SubsampledGaussian

    def _cert(self, acct, delta, method="auto") -> dict:
        c = acct.certificate(delta=delta, method=method)
        return {"value": c.epsilon, "lower": c.lower_bound, "method": c.method,
                "routes": {k: float(v) for k, v in c.candidates.items()}, "error": c.error}

    def gaussian_eps(self, sigma, k, delta, method="auto"):
        return self._cert(self.PA().compose(self.G(sigma=sigma), k), delta, method)

    def laplace_eps(self, scale, k, delta, method="auto"):
        return self._cert(self.PA().compose(self.L(scale=scale), k), delta, method)

    def dpsgd_eps(self, q, sigma, steps, delta, method="auto"):
        acct = self.PA()
        acct.step(sigma=sigma, sample_rate=q, steps=steps)
        return self._cert(acct, delta, method)

    def schedule_eps(self, phases, delta):
        acct = self.PA()
        for sigma, q, steps in phases:
            acct.step(sigma=sigma, sample_rate=q, steps=steps)
        return self._cert(acct, delta)

    def step_loop(self, n, sigma, q, delta, budget_s, clock):
        acct = self.PA()
        t0 = clock()
        done = 0
        for done in range(1, n + 1):  # noqa: B007
            acct.step(sigma=sigma, sample_rate=q)
            if (done & 1023) == 0 and clock() - t0 > budget_s:
                break
        t_loop = clock() - t0
        out = self._cert(acct, delta) if done == n else {"value": None}
        out.update(calls=done, loop_s=t_loop)
        return out

    def robust_eps(self, q, sigma, steps, deltas):
        acct = self.PA()
        acct.step(sigma=sigma, sample_rate=q, steps=steps)
        return {"value": [acct.epsilon(d) for d in deltas]}

    def calibrate(self, target, delta, q, steps):
        r = self.cal(target, delta, q, steps)
        return {"value": r.value, "evaluations": r.evaluations}

    def plugin_eps(self, spec, times, delta, method="auto"):
        from mechanisms import from_dict

        acct = self.PA().compose(from_dict(spec), times)
        return self._cert(acct, delta, method)


class AutoDP:
    name = "autodp"
    dist = "autodp"
    modules = ("autodp",)

    def __init__(self):
        from autodp import calibrator_zoo, mechanism_zoo, transformer_zoo

        self.mz, self.tz, self.cz = mechanism_zoo, transformer_zoo, calibrator_zoo

    def _compose(self, mechs, counts):
        return self.tz.Composition()(mechs, counts)

    def _sg(self, sigma, q):
        return self.tz.AmplificationBySampling(PoissonSampling=True)(
            self.mz.GaussianMechanism(sigma), q, improved_bound_flag=True)

    def gaussian_eps(self, sigma, k, delta):
        return {"value": float(self._compose([self.mz.GaussianMechanism(sigma)], [k]).get_approxDP(delta))}

    def laplace_eps(self, scale, k, delta):
        return {"value": float(self._compose([self.mz.LaplaceMechanism(b=scale)], [k]).get_approxDP(delta))}

    def dpsgd_eps(self, q, sigma, steps, delta):
        return {"value": float(self._compose([self._sg(sigma, q)], [steps]).get_approxDP(delta))}

    def schedule_eps(self, phases, delta):
        mechs = [self._sg(s, q) for s, q, _ in phases]
        return {"value": float(self._compose(mechs, [t for _, _, t in phases]).get_approxDP(delta))}

    def robust_eps(self, q, sigma, steps, deltas):
        m = self._compose([self._sg(sigma, q)], [steps])
        return {"value": [float(m.get_approxDP(d)) for d in deltas]}

    def calibrate(self, target, delta, q, steps):
        outer = self

        class _DPSGD(self.mz.Mechanism):
            def __init__(self, sigma, name="dpsgd"):
                super().__init__()
                m = outer._compose([outer._sg(sigma, q)], [steps])
                self.get_approxDP = m.get_approxDP
                self.params = {"sigma": sigma}

        mech = self.cz.eps_delta_calibrator()(_DPSGD, target, delta, [0.3, 50.0])
        return {"value": float(mech.params["sigma"])}


class _DPAccounting:
    dist = "dp-accounting"
    modules = ("dp_accounting",)
    kind = "pld"

    def __init__(self):
        import dp_accounting

        self.dpa = dp_accounting

    def _fresh(self):
        if self.kind == "pld":
            return self.dpa.pld.PLDAccountant()
        return self.dpa.rdp.RdpAccountant()

    def _eps(self, event, delta):
        return {"value": float(self._fresh().compose(event).get_epsilon(delta))}

    def _sg(self, sigma, q):
        return self.dpa.PoissonSampledDpEvent(q, self.dpa.GaussianDpEvent(sigma))

    def gaussian_eps(self, sigma, k, delta):
        return self._eps(self.dpa.SelfComposedDpEvent(self.dpa.GaussianDpEvent(sigma), k), delta)

    def laplace_eps(self, scale, k, delta):
        return self._eps(self.dpa.SelfComposedDpEvent(self.dpa.LaplaceDpEvent(scale), k), delta)

    def dpsgd_eps(self, q, sigma, steps, delta):
        return self._eps(self.dpa.SelfComposedDpEvent(self._sg(sigma, q), steps), delta)

    def schedule_eps(self, phases, delta):
        ev = self.dpa.ComposedDpEvent([self.dpa.SelfComposedDpEvent(self._sg(s, q), t) for s, q, t in phases])
        return self._eps(ev, delta)

    def step_loop(self, n, sigma, q, delta, budget_s, clock):
        acct = self._fresh()
        ev = self._sg(sigma, q)
        t0 = clock()
        done = 0
        for done in range(1, n + 1):  # noqa: B007
            acct.compose(ev)
            if clock() - t0 > budget_s:
                break
        t_loop = clock() - t0
        out = {"value": float(acct.get_epsilon(delta))} if done == n else {"value": None}
        out.update(calls=done, loop_s=t_loop)
        return out

    def robust_eps(self, q, sigma, steps, deltas):
        acct = self._fresh().compose(self.dpa.SelfComposedDpEvent(self._sg(sigma, q), steps))
        return {"value": [float(acct.get_epsilon(d)) for d in deltas]}

    def calibrate(self, target, delta, q, steps):
        sigma = self.dpa.calibrate_dp_mechanism(
            self._fresh, lambda s: self.dpa.SelfComposedDpEvent(self._sg(s, q), steps), target, delta,
            self.dpa.LowerEndpointAndGuess(0.3, 1.0))
        return {"value": float(sigma)}


class DPAccountingPLD(_DPAccounting):
    name = "dp_accounting_pld"
    kind = "pld"


class DPAccountingRDP(_DPAccounting):
    name = "dp_accounting_rdp"
    kind = "rdp"


class PRV:
    name = "prv_accountant"
    dist = "prv-accountant"
    modules = ("prv_accountant",)

    def __init__(self):
        import prv_accountant

        self.prv = prv_accountant

    def _run(self, prvs, counts, delta):
        acct = self.prv.PRVAccountant(prvs=prvs, max_self_compositions=counts, eps_error=0.01,
                                      delta_error=delta / 1000)
        lo, est, up = acct.compute_epsilon(delta=delta, num_self_compositions=counts)
        return {"value": float(up), "lower": float(lo), "estimate": float(est)}

    def gaussian_eps(self, sigma, k, delta):
        return self._run([self.prv.privacy_random_variables.GaussianMechanism(noise_multiplier=sigma)], [k],
                         delta)

    def laplace_eps(self, scale, k, delta):
        return self._run([self.prv.privacy_random_variables.LaplaceMechanism(mu=1.0 / scale)], [k], delta)

    def dpsgd_eps(self, q, sigma, steps, delta):
        prv = self.prv.PoissonSubsampledGaussianMechanism(noise_multiplier=sigma, sampling_probability=q)
        return self._run([prv], [steps], delta)

    def schedule_eps(self, phases, delta):
        prvs = [self.prv.PoissonSubsampledGaussianMechanism(noise_multiplier=s, sampling_probability=q)
                for s, q, _ in phases]
        return self._run(prvs, [t for _, _, t in phases], delta)

    def robust_eps(self, q, sigma, steps, deltas):
        return {"value": [self.dpsgd_eps(q, sigma, steps, d)["value"] for d in deltas]}


class _Opacus:
    dist = "opacus"
    modules = ("opacus",)
    cls_name = "RDPAccountant"
    calib = "rdp"

    def __init__(self):
        from opacus import accountants

        self.cls = getattr(accountants, self.cls_name)

    def _eps(self, history, delta):
        a = self.cls()
        a.history = list(history)
        return {"value": float(a.get_epsilon(delta))}

    def gaussian_eps(self, sigma, k, delta):
        return self._eps([(sigma, 1.0, k)], delta)

    def dpsgd_eps(self, q, sigma, steps, delta):
        return self._eps([(sigma, q, steps)], delta)

    def schedule_eps(self, phases, delta):
        return self._eps([(s, q, t) for s, q, t in phases], delta)

    def step_loop(self, n, sigma, q, delta, budget_s, clock):
        a = self.cls()
        t0 = clock()
        done = 0
        for done in range(1, n + 1):  # noqa: B007
            a.step(noise_multiplier=sigma, sample_rate=q)
            if (done & 1023) == 0 and clock() - t0 > budget_s:
                break
        t_loop = clock() - t0
        out = {"value": float(a.get_epsilon(delta))} if done == n else {"value": None}
        out.update(calls=done, loop_s=t_loop)
        return out

    def robust_eps(self, q, sigma, steps, deltas):
        return {"value": [self._eps([(sigma, q, steps)], d)["value"] for d in deltas]}

    def calibrate(self, target, delta, q, steps):
        if self.calib is None:
            raise NotApplicable
        from opacus.accountants.utils import get_noise_multiplier

        return {"value": float(get_noise_multiplier(target_epsilon=target, target_delta=delta, sample_rate=q,
                                                    steps=steps, accountant=self.calib))}


class OpacusRDP(_Opacus):
    name = "opacus_rdp"
    cls_name = "RDPAccountant"
    calib = "rdp"


class OpacusPRV(_Opacus):
    name = "opacus_prv"
    cls_name = "PRVAccountant"
    calib = "prv"


class OpacusGDP(_Opacus):
    """Opacus' GaussianAccountant: a CLT approximation (Bu et al.), not an upper bound."""

    name = "opacus_gdp"
    cls_name = "GaussianAccountant"
    calib = None

    def gaussian_eps(self, sigma, k, delta):
        raise NotApplicable


LIBRARIES: dict[str, Any] = {c.name: c for c in (DPCert, AutoDP, DPAccountingPLD, DPAccountingRDP, PRV,
                                                 OpacusRDP, OpacusPRV, OpacusGDP)}
PEERS = [n for n in LIBRARIES if n != "dpcert"]


def availability() -> dict[str, str | None]:
    """``{library: version}`` for installed libraries, ``None`` for missing ones (found without importing)."""
    out: dict[str, str | None] = {}
    for name, cls in LIBRARIES.items():
        try:
            ok = all(importlib.util.find_spec(m) is not None for m in cls.modules)
        except (ImportError, ValueError):
            ok = False
        out[name] = _version(cls.dist) if ok else None
    return out


def finite(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)
