"""dp-accounting DpEvent interoperability (accountant.dp_event, accountant.interop).

Stand-in event classes below mirror dp-accounting 0.6's public attributes (class names and field names),
so the duck-typed paths are tested without dp-accounting; the tests at the end use dp-accounting's own
classes and accountants when it is installed.  References: the mu-GDP closed form of composed Gaussians
(Dong, Roth & Su 2022; solved here with scipy, independently of dpcert's exact route), the definition of
randomized response, and dp-accounting's pessimistic PLD accountant (an upper bound, so it must be at
least dpcert's certified lower bound).
"""

from __future__ import annotations

import math
import sys
from dataclasses import field, make_dataclass
from typing import Any, NamedTuple

import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from accountant import BudgetExceeded, PrivacyAccountant, PrivacyBudget
from accountant.dp_event import (
    NonPrivateEventError,
    UnsupportedEventError,
    ledger_to_dp_event,
    translate,
)
from accountant.interop import DpEventAccountant
from mechanisms import Gaussian, Laplace, PureDP, RandomizedResponse, SampledWithoutReplacement
from mechanisms.poisson_subsampled import PoissonSubsampled, SubsampledLaplace
from mechanisms.subsampled import SubsampledGaussian


# ------------------------------------------------------------------ stand-ins (dp-accounting's attributes)
def _standin(name: str, *fields) -> type:
    """A frozen dataclass with dp-accounting's class name and public fields, defined in this module."""
    return make_dataclass(name, list(fields), frozen=True, namespace={"__module__": __name__})


NoOpDpEvent = _standin("NoOpDpEvent")
NonPrivateDpEvent = _standin("NonPrivateDpEvent")
UnsupportedDpEvent = _standin("UnsupportedDpEvent")
GaussianDpEvent = _standin("GaussianDpEvent", ("noise_multiplier", float))
LaplaceDpEvent = _standin("LaplaceDpEvent", ("noise_multiplier", float))
RandomizedResponseDpEvent = _standin("RandomizedResponseDpEvent", ("noise_parameter", float),
                                     ("num_buckets", int))
SelfComposedDpEvent = _standin("SelfComposedDpEvent", ("event", Any), ("count", int))
ComposedDpEvent = _standin("ComposedDpEvent", ("events", list))
PoissonSampledDpEvent = _standin("PoissonSampledDpEvent", ("sampling_probability", float), ("event", Any))
SampledWithoutReplacementDpEvent = _standin("SampledWithoutReplacementDpEvent", ("source_dataset_size", int),
                                            ("sample_size", int), ("event", Any))
ZCDpEvent = _standin("ZCDpEvent", ("rho", float), ("xi", float, field(default=0.0)))


DiscreteLaplaceDpEvent = _standin("DiscreteLaplaceDpEvent", ("noise_parameter", float), ("sensitivity", int))
MixtureOfGaussiansDpEvent = _standin("MixtureOfGaussiansDpEvent", ("standard_deviation", float),
                                     ("sensitivities", list), ("sampling_probs", list))
SingleEpochTreeAggregationDpEvent = _standin("SingleEpochTreeAggregationDpEvent", ("noise_multiplier", float),
                                             ("step_counts", Any))
RepeatAndSelectDpEvent = _standin("RepeatAndSelectDpEvent", ("event", Any), ("mean", float), ("shape", float))


class _GaussianNT(NamedTuple):  # the to_named_tuple() form
    module_name: str
    class_name: str
    noise_multiplier: float


STANDINS = sys.modules[__name__]


def gdp_epsilon(mu: float, delta: float) -> float:
    """Independent mu-GDP reference: eps solving Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) = delta."""
    def f(e):
        return norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2) - delta
    return brentq(f, 0.0, 100.0 + 10 * mu * mu, xtol=1e-14, rtol=1e-14)


# ------------------------------------------------------------------ translation (stand-ins)
@pytest.mark.parametrize("relation,unit", [("add_remove", 1.0), ("replace_one", 2.0)])
def test_gaussian_event_matches_gdp_closed_form(relation, unit):
    ev = ComposedDpEvent([SelfComposedDpEvent(GaussianDpEvent(1.5), 3), GaussianDpEvent(2.0)])
    acct = PrivacyAccountant(relation=relation).compose(ev)
    assert acct.ledger.items() == [(Gaussian(1.5, unit), 3), (Gaussian(2.0, unit), 1)]
    mu = unit * math.sqrt(3 / 1.5**2 + 1 / 2.0**2)
    ref = gdp_epsilon(mu, 1e-5)
    cert = acct.certificate(delta=1e-5)
    assert ref <= cert.epsilon <= ref * (1 + 1e-9)
    assert cert.lower_bound <= ref


def test_counts_multiply_and_noop_is_free():
    ev = SelfComposedDpEvent(ComposedDpEvent([NoOpDpEvent(), SelfComposedDpEvent(LaplaceDpEvent(3.0), 4)]), 5)
    assert translate(ev) == [(Laplace(3.0, 1.0), 20)]
    acct = PrivacyAccountant().compose(ev, times=2)
    assert acct.ledger.items() == [(Laplace(3.0, 1.0), 40)]
    assert translate(SelfComposedDpEvent(GaussianDpEvent(1.0), 0)) == []
    assert translate(NoOpDpEvent()) == []


def test_poisson_sampled_events():
    sg = translate(PoissonSampledDpEvent(0.01, GaussianDpEvent(1.1)))
    assert sg == [(SubsampledGaussian(1.1, 0.01), 1)]
    assert translate(PoissonSampledDpEvent(0.2, LaplaceDpEvent(2.0))) == [(SubsampledLaplace(2.0, 0.2), 1)]
    assert translate(PoissonSampledDpEvent(0.0, GaussianDpEvent(1.0))) == []
    assert translate(PoissonSampledDpEvent(1.0, GaussianDpEvent(1.0))) == [(Gaussian(1.0), 1)]
    # several Gaussians on one sample = one Gaussian with s^-2 = sum s_i^-2, rounded to less noise
    ev = PoissonSampledDpEvent(0.1, ComposedDpEvent([GaussianDpEvent(1.0),
                                                     SelfComposedDpEvent(GaussianDpEvent(2.0), 4)]))
    ((m, k),) = translate(ev)
    exact = (1.0 + 4 / 4.0) ** -0.5
    assert k == 1 and isinstance(m, SubsampledGaussian) and m.sample_rate == 0.1
    assert exact * (1 - 1e-14) <= m.sigma <= exact
    # any other single mechanism: the general RDP transform
    ((m, _),) = translate(PoissonSampledDpEvent(0.1, PoissonSampledDpEvent(0.5, LaplaceDpEvent(1.0))))
    assert isinstance(m, PoissonSubsampled)
    with pytest.raises(UnsupportedEventError, match="add/remove"):
        translate(PoissonSampledDpEvent(0.1, GaussianDpEvent(1.0)), "replace_one")
    with pytest.raises(UnsupportedEventError, match="several mechanisms"):
        translate(PoissonSampledDpEvent(0.1, ComposedDpEvent([LaplaceDpEvent(1.0), GaussianDpEvent(1.0)])))
    with pytest.raises(NonPrivateEventError):
        translate(PoissonSampledDpEvent(0.1, NonPrivateDpEvent()))


@pytest.mark.parametrize("p,k", [(0.3, 4), (0.9, 2), (1e-3, 10)])
def test_randomized_response_mapping(p, k):
    ((m, n),) = translate(RandomizedResponseDpEvent(p, k), "replace_one")
    assert n == 1 and isinstance(m, RandomizedResponse) and m.k == k
    # dp-accounting's definition: P(true bucket) = 1 - p + p/k, P(any other) = p/k
    true_eps = math.log((1 - p + p / k) / (p / k))
    assert true_eps <= m.epsilon <= true_eps * (1 + 1e-13)
    with pytest.raises(UnsupportedEventError, match="replace-one"):
        translate(RandomizedResponseDpEvent(p, k), "add_remove")
    assert translate(RandomizedResponseDpEvent(1.0, k), "replace_one") == []
    assert translate(RandomizedResponseDpEvent(p, 1), "replace_one") == []
    with pytest.raises(NonPrivateEventError):
        translate(RandomizedResponseDpEvent(0.0, k), "replace_one")


def test_sampled_without_replacement():
    ev = SampledWithoutReplacementDpEvent(1000, 10, LaplaceDpEvent(0.5))
    ((m, _),) = translate(ev, "replace_one")
    # Laplace with replace-one sensitivity 2: pure eps = 2 / 0.5 = 4, amplified at gamma = 0.01
    assert isinstance(m, SampledWithoutReplacement) and m.delta == 0.0 and m.sample_rate == 0.01
    assert 4.0 <= m.epsilon <= 4.0 * (1 + 1e-13)
    assert m.amplified_epsilon == pytest.approx(math.log1p(0.01 * math.expm1(4.0)), rel=1e-12)
    g = SampledWithoutReplacementDpEvent(1000, 10, GaussianDpEvent(2.0))
    with pytest.raises(UnsupportedEventError, match="without_replacement_delta"):
        translate(g, "replace_one")
    ((m, _),) = translate(g, "replace_one", without_replacement_delta=1e-7)
    ref = gdp_epsilon(2.0 / 2.0, 1e-7)
    assert m.delta == 1e-7 and ref <= m.epsilon <= ref * (1 + 1e-8)
    assert translate(SampledWithoutReplacementDpEvent(10, 10, GaussianDpEvent(2.0)), "replace_one") == [
        (Gaussian(2.0, 2.0), 1)]
    with pytest.raises(UnsupportedEventError, match="replace-one"):
        translate(ev, "add_remove")
    with pytest.raises(ValueError, match="sample_size"):
        translate(SampledWithoutReplacementDpEvent(10, 11, LaplaceDpEvent(1.0)), "replace_one")


def test_refusals_are_clear():
    with pytest.raises(NonPrivateEventError, match="not differentially private"):
        PrivacyAccountant().compose(NonPrivateDpEvent())
    with pytest.raises(NonPrivateEventError, match="noise_multiplier = 0"):
        translate(GaussianDpEvent(0.0))
    with pytest.raises(UnsupportedEventError, match="UnsupportedDpEvent"):
        PrivacyAccountant().compose(ComposedDpEvent([GaussianDpEvent(1.0), UnsupportedDpEvent()]))
    with pytest.raises(UnsupportedEventError, match="RepeatAndSelectDpEvent"):
        translate(RepeatAndSelectDpEvent(GaussianDpEvent(1.0), 3.0, 1.0))
    with pytest.raises(ValueError, match="GaussianDpEvent.noise_multiplier"):
        translate(GaussianDpEvent(-1.0))
    with pytest.raises(ValueError, match="SelfComposedDpEvent.count"):
        translate(SelfComposedDpEvent(GaussianDpEvent(1.0), -2))
    with pytest.raises(TypeError, match="DpEvent"):
        translate(object())
    with pytest.raises(TypeError, match="Mechanism"):
        PrivacyAccountant().compose(object())
    with pytest.raises(ValueError, match="REPLACE_SPECIAL"):
        translate(GaussianDpEvent(1.0), type("R", (), {"name": "REPLACE_SPECIAL"})())


def test_named_tuple_form_is_read():
    nt = _GaussianNT("dp_accounting.dp_event", "GaussianDpEvent", 3.0)
    assert translate(SelfComposedDpEvent(nt, 2)) == [(Gaussian(3.0), 2)]


def test_multi_entry_event_with_budget_is_all_or_nothing():
    acct = PrivacyAccountant(budget=PrivacyBudget(1.0, 1e-5))
    big = ComposedDpEvent([GaussianDpEvent(10.0), GaussianDpEvent(0.5)])
    with pytest.raises(BudgetExceeded):
        acct.compose(big)
    assert not acct.ledger
    acct.compose(ComposedDpEvent([GaussianDpEvent(20.0), GaussianDpEvent(30.0)]))
    assert len(acct.ledger) == 2


# ------------------------------------------------------------------ DpEventAccountant (stand-ins)
def test_dp_event_accountant_interface():
    ev = PoissonSampledDpEvent(0.02, GaussianDpEvent(1.2))
    a = DpEventAccountant()
    assert a.supports(ev) and a.supports(NonPrivateDpEvent()) and a.supports(NoOpDpEvent())
    assert not a.supports(UnsupportedDpEvent()) and a.supports(ZCDpEvent(1.0))
    assert not a.supports(RepeatAndSelectDpEvent(GaussianDpEvent(1.0), 3.0, 1.0))
    assert a.compose(ev, count=50) is a
    a.compose(ev, 50).compose(NoOpDpEvent()).compose(GaussianDpEvent(5.0))
    ref = PrivacyAccountant().compose(SubsampledGaussian(1.2, 0.02), 100).compose(Gaussian(5.0))
    assert a.get_epsilon(1e-5) == ref.epsilon(1e-5)
    assert a.get_delta(1.0) == ref.delta(1.0)
    assert a.ledger == ComposedDpEvent([SelfComposedDpEvent(ev, 100), GaussianDpEvent(5.0)])
    with pytest.raises(UnsupportedEventError):
        a.compose(UnsupportedDpEvent())
    assert a.get_epsilon(1e-5) == ref.epsilon(1e-5)  # nothing recorded
    with pytest.raises(ValueError, match="count"):
        a.compose(ev, 0)
    cert = a.certificate(delta=1e-5)
    assert cert.lower_bound <= cert.epsilon
    a.compose(NonPrivateDpEvent())
    assert a.get_epsilon(1e-5) == math.inf and a.get_delta(1.0) == 1.0
    with pytest.raises(NonPrivateEventError):
        a.certificate(delta=1e-5)


def test_replace_one_accountant_and_empty_ledger():
    a = DpEventAccountant(type("NR", (), {"name": "REPLACE_ONE"})())
    assert a.accountant.relation == "replace_one"
    a.compose(RandomizedResponseDpEvent(0.5, 3), 7)
    assert a.accountant.ledger.items()[0][1] == 7
    b = DpEventAccountant()
    b.compose(GaussianDpEvent(1.0))  # stand-in module: the ledger uses it
    assert b.ledger == GaussianDpEvent(1.0)


def test_export_with_standins_round_trips():
    entries = [(SubsampledGaussian(1.1, 0.01), 300), (Gaussian(2.0), 1), (Laplace(4.0, 2.0), 3),
               (SubsampledLaplace(2.0, 0.1), 2)]
    ev = ledger_to_dp_event(entries, "add_remove", module=STANDINS)
    assert ev.events[0] == SelfComposedDpEvent(PoissonSampledDpEvent(0.01, GaussianDpEvent(1.1)), 300)
    assert translate(ev) == [(SubsampledGaussian(1.1, 0.01), 300), (Gaussian(2.0), 1), (Laplace(2.0), 3),
                             (SubsampledLaplace(2.0, 0.1), 2)]
    rr = ledger_to_dp_event([(RandomizedResponse(1.3, 5), 2)], "replace_one", module=STANDINS)
    ((m, k),) = translate(rr, "replace_one")
    assert k == 2 and m.k == 5 and m.epsilon == pytest.approx(1.3, rel=1e-13) and m.epsilon >= 1.3
    assert ledger_to_dp_event([], module=STANDINS) == NoOpDpEvent()
    with pytest.raises(ValueError, match="pure_dp"):
        ledger_to_dp_event([(PureDP(1.0), 1)], module=STANDINS)
    with pytest.raises(ValueError, match="randomized_response"):
        ledger_to_dp_event([(RandomizedResponse(1.0), 1)], "add_remove", module=STANDINS)


def test_to_dp_event_without_dp_accounting(monkeypatch):
    monkeypatch.setitem(sys.modules, "dp_accounting", None)
    with pytest.raises(ImportError, match="pip install dp-accounting"):
        PrivacyAccountant().compose(Gaussian(1.0)).to_dp_event()


def test_package_never_imports_dp_accounting():
    import subprocess

    code = ("import sys; from accountant import PrivacyAccountant; import accountant.interop as i; "
            "from dataclasses import dataclass\n"
            "@dataclass(frozen=True)\nclass GaussianDpEvent:\n    noise_multiplier: float\n"
            "PrivacyAccountant().compose(GaussianDpEvent(1.0)).epsilon(1e-5)\n"
            "assert 'dp_accounting' not in sys.modules, 'imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=str(__import__("pathlib").Path(
        __file__).resolve().parents[1]))


# ------------------------------------------------------------------ with dp-accounting's own classes
def _dpa():
    return pytest.importorskip("dp_accounting")


def _cases(dpa):
    return [
        ("add_remove",
         dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.01, dpa.GaussianDpEvent(1.0)), 300),
         [(SubsampledGaussian(1.0, 0.01), 300)]),
        ("add_remove", dpa.ComposedDpEvent([dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(3.0), 5),
                                            dpa.GaussianDpEvent(2.0)]),
         [(Gaussian(3.0), 5), (Gaussian(2.0), 1)]),
        ("add_remove", dpa.SelfComposedDpEvent(dpa.LaplaceDpEvent(4.0), 3), [(Laplace(4.0), 3)]),
        ("add_remove", dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.2, dpa.LaplaceDpEvent(2.0)), 4),
         [(SubsampledLaplace(2.0, 0.2), 4)]),
        ("replace_one", dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(4.0), 6), [(Gaussian(4.0, 2.0), 6)]),
        # count 1: dp-accounting 0.6's PLD accountant ignores the count of a RandomizedResponseDpEvent
        ("replace_one", dpa.RandomizedResponseDpEvent(0.4, 3), None),
    ]


def test_dp_accounting_events_give_the_dpcert_ledger_certificate():
    dpa = _dpa()
    for relation, ev, ledger in _cases(dpa):
        acct = PrivacyAccountant(relation=relation).compose(ev)
        if ledger is None:
            continue
        ref = PrivacyAccountant(relation=relation)
        for m, k in ledger:
            ref.compose(m, k)
        assert acct.ledger == ref.ledger
        c1, c2 = acct.certificate(delta=1e-6), ref.certificate(delta=1e-6)
        assert (c1.epsilon, c1.lower_bound, c1.method) == (c2.epsilon, c2.lower_bound, c2.method)


def test_dp_accounting_pld_is_above_dpcert_lower_bound():
    dpa = _dpa()
    rel = {"add_remove": dpa.NeighboringRelation.ADD_OR_REMOVE_ONE,
           "replace_one": dpa.NeighboringRelation.REPLACE_ONE}
    for relation, ev, _ in _cases(dpa):
        pld = dpa.pld.PLDAccountant(rel[relation], value_discretization_interval=1e-3).compose(ev)
        ours = DpEventAccountant(rel[relation]).compose(ev)
        for delta in (1e-3, 1e-6):
            cert = ours.certificate(delta=delta)
            assert cert.lower_bound is not None
            assert pld.get_epsilon(delta) >= cert.lower_bound - 1e-12, (ev, delta)
            assert cert.lower_bound <= cert.epsilon


def test_gaussian_events_against_closed_form_with_dp_accounting():
    dpa = _dpa()
    ev = dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(2.5), 40)
    a = DpEventAccountant(dpa.NeighboringRelation.ADD_OR_REMOVE_ONE).compose(ev)
    ref = gdp_epsilon(math.sqrt(40) / 2.5, 1e-5)
    assert ref <= a.get_epsilon(1e-5) <= ref * (1 + 1e-9)
    assert a.ledger == ev


def test_to_dp_event_builds_dp_accounting_classes():
    dpa = _dpa()
    acct = PrivacyAccountant()
    acct.step(sigma=1.1, sample_rate=0.01, steps=200).compose(Gaussian(3.0)).step(sigma=1.1, sample_rate=0.01)
    ev = acct.to_dp_event()
    assert isinstance(ev, dpa.ComposedDpEvent)
    sg = dpa.PoissonSampledDpEvent(0.01, dpa.GaussianDpEvent(1.1))
    assert ev.events == [dpa.SelfComposedDpEvent(sg, 200), dpa.GaussianDpEvent(3.0), sg]  # run order
    back = PrivacyAccountant().compose(ev)
    assert back.ledger == acct.ledger
    pld = dpa.pld.PLDAccountant(value_discretization_interval=1e-3).compose(ev)
    assert pld.get_epsilon(1e-5) >= acct.certificate(delta=1e-5).lower_bound
    empty = PrivacyAccountant().to_dp_event()
    assert isinstance(empty, dpa.NoOpDpEvent)


def test_readme_dp_event_section_runs():
    _dpa()
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    code = re.search(r"## DpEvents: .*?```python\n(.*?)```", text, re.S).group(1)
    ns: dict = {}
    exec(compile(code, "README DpEvents", "exec"), ns)
    cert, eps, back = ns["cert"], ns["eps"], ns["back"]
    assert cert.lower_bound <= cert.epsilon == eps
    assert back == ns["event"]


# ------------------------------------------------------------------ wave-2 events (stand-ins)
def test_zcdp_event_between_the_gaussian_and_the_classic_conversion():
    from mechanisms import ZCDP

    assert translate(ZCDpEvent(0.1)) == [(ZCDP(rho=0.1), 1)]
    assert translate(ZCDpEvent(0.1, 0.02), "replace_one") == [(ZCDP(rho=0.1, xi=0.02), 1)]
    assert translate(ZCDpEvent(0.0)) == []
    rho, delta = 0.3, 1e-6
    eps = PrivacyAccountant().compose(SelfComposedDpEvent(ZCDpEvent(rho), 4)).epsilon(delta)
    # the Gaussian of mu = sqrt(2 * 4 rho) is 4 rho-zCDP: no valid bound is below its epsilon; the classic
    # rho + 2 sqrt(rho log(1/delta)) (Bun & Steinke 2016, Prop. 1.3) is a valid, looser one
    classic = 4 * rho + 2 * math.sqrt(4 * rho * math.log(1 / delta))
    assert gdp_epsilon(math.sqrt(8 * rho), delta) <= eps <= classic


def test_discrete_laplace_event():
    from mechanisms import DiscreteLaplace

    assert translate(DiscreteLaplaceDpEvent(0.5, 2)) == [(DiscreteLaplace(scale=2.0, sensitivity=2), 1)]
    assert translate(DiscreteLaplaceDpEvent(0.5, 2), "replace_one") == [(DiscreteLaplace(2.0, 4), 1)]
    ((m, _),) = translate(DiscreteLaplaceDpEvent(0.3, 1))
    assert m.scale <= 1 / 0.3 and m.scale == pytest.approx(1 / 0.3, rel=1e-15)
    assert translate(DiscreteLaplaceDpEvent(0.5, 0)) == []
    with pytest.raises(NonPrivateEventError, match="noise_parameter"):
        translate(DiscreteLaplaceDpEvent(0.0, 1))
    # pure DP: delta(eps) = 0 at eps = C a (the largest loss); positive just below it
    acct = PrivacyAccountant().compose(DiscreteLaplaceDpEvent(0.5, 2))
    assert acct.delta(1.0) == 0.0 and acct.delta(0.999) > 0.0


def test_mixture_of_gaussians_event():
    from mechanisms import GaussianMixture

    ev = MixtureOfGaussiansDpEvent(1.5, [0.0, 1.0, 2.0], [0.5, 0.3, 0.2])
    assert translate(ev) == [(GaussianMixture(1.5, [0.0, 1.0, 2.0], [0.5, 0.3, 0.2]), 1)]
    assert translate(MixtureOfGaussiansDpEvent(1.0, [0.0], [1.0])) == []
    with pytest.raises(UnsupportedEventError, match="add/remove"):
        translate(ev, "replace_one")
    with pytest.raises(NonPrivateEventError, match="standard_deviation"):
        translate(MixtureOfGaussiansDpEvent(0.0, [1.0], [1.0]))
    # a single sensitivity c is the Gaussian mechanism of mu = c / s
    one = PrivacyAccountant().compose(MixtureOfGaussiansDpEvent(2.0, [1.0], [1.0])).epsilon(1e-5)
    ref = gdp_epsilon(0.5, 1e-5)
    assert ref * (1 - 1e-12) <= one <= ref * (1 + 1e-6)


def test_single_epoch_tree_aggregation_event():
    from mechanisms import TreeAggregation

    ev = SingleEpochTreeAggregationDpEvent(2.0, [100, 30])
    assert translate(ev) == [(TreeAggregation(sigma=2.0, steps=100), 1)]
    assert translate(SingleEpochTreeAggregationDpEvent(2.0, 7)) == [(TreeAggregation(2.0, 7), 1)]
    assert translate(SingleEpochTreeAggregationDpEvent(2.0, [0])) == []
    with pytest.raises(UnsupportedEventError, match="add/remove"):
        translate(ev, "replace_one")
    with pytest.raises(ValueError, match="step_counts"):
        translate(SingleEpochTreeAggregationDpEvent(2.0, []))
    # the deepest tree has ceil(log2(101)) = 7 levels: a Gaussian of mu = sqrt(7) / 2, twice
    eps = PrivacyAccountant().compose(SelfComposedDpEvent(ev, 2)).epsilon(1e-5)
    ref = gdp_epsilon(math.sqrt(2 * 7) / 2.0, 1e-5)
    assert ref * (1 - 1e-12) <= eps <= ref * (1 + 1e-9)


def test_wave2_export_round_trips():
    from mechanisms import ZCDP, DiscreteLaplace, GaussianMixture, TreeAggregation

    entries = [(ZCDP(0.2, 0.01), 2), (DiscreteLaplace(2.0, 3), 1),
               (GaussianMixture(1.0, [0.0, 1.0], [0.5, 0.5]), 4), (TreeAggregation(3.0, 64), 1)]
    ev = ledger_to_dp_event(entries, "add_remove", module=STANDINS)
    assert translate(ev) == entries
    tree3 = ledger_to_dp_event([(TreeAggregation(3.0, 64, epochs=3), 1)], module=STANDINS)
    assert tree3 == SelfComposedDpEvent(SingleEpochTreeAggregationDpEvent(3.0, 64), 3)
    assert translate(tree3) == [(TreeAggregation(3.0, 64), 3)]
    assert ledger_to_dp_event([(DiscreteLaplace(2.0, 4), 1)], "replace_one", module=STANDINS) == \
        DiscreteLaplaceDpEvent(0.5, 2)
    with pytest.raises(ValueError, match="discrete_laplace"):
        ledger_to_dp_event([(DiscreteLaplace(2.0, 3), 1)], "replace_one", module=STANDINS)
    with pytest.raises(ValueError, match="zcdp"):
        ledger_to_dp_event([(ZCDP(0.2, delta=1e-6), 1)], module=STANDINS)
    with pytest.raises(ValueError, match="tree_aggregation"):
        ledger_to_dp_event([(TreeAggregation(3.0, 64, epochs=2, restart=False), 1)], module=STANDINS)


def test_wave2_events_with_dp_accounting():
    dpa = _dpa()
    add = dpa.NeighboringRelation.ADD_OR_REMOVE_ONE
    # dp-accounting's pessimistic PLD is an upper bound: at least dpcert's certified lower bound
    ev_mod = dpa.dp_event
    for ev in (dpa.SelfComposedDpEvent(ev_mod.DiscreteLaplaceDpEvent(0.4, 1), 5),
               dpa.SelfComposedDpEvent(ev_mod.MixtureOfGaussiansDpEvent(1.0, [0.0, 1.0], [0.5, 0.5]), 3)):
        ours = DpEventAccountant(add).compose(ev)
        pld = dpa.pld.PLDAccountant(add, value_discretization_interval=1e-3).compose(ev)
        cert = ours.certificate(delta=1e-5)
        assert cert.lower_bound is not None and pld.get_epsilon(1e-5) >= cert.lower_bound - 1e-12
        assert ours.ledger == ev
    # tree aggregation: dp-accounting's RDP accountant (REPLACE_SPECIAL) is an upper bound too; ours is the
    # exact Gaussian profile
    tree = dpa.SingleEpochTreeAggregationDpEvent(2.0, [100, 30])
    rdp = dpa.rdp.RdpAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_SPECIAL).compose(tree)
    cert = PrivacyAccountant().compose(tree).certificate(delta=1e-5)
    assert cert.lower_bound <= cert.epsilon <= rdp.get_epsilon(1e-5)
    z = PrivacyAccountant().compose(dpa.ZCDpEvent(0.5))
    peer = dpa.rdp.RdpAccountant().compose(dpa.ZCDpEvent(0.5)).get_epsilon(1e-5)
    assert z.epsilon(1e-5) <= peer * (1 + 1e-9)
    assert isinstance(PrivacyAccountant().compose(dpa.ZCDpEvent(0.5)).to_dp_event(), dpa.ZCDpEvent)
    from mechanisms import DiscreteLaplace, GaussianMixture

    exported = PrivacyAccountant().compose(DiscreteLaplace(2.0)).compose(
        GaussianMixture(1.0, [0.0, 1.0], [0.5, 0.5])).to_dp_event()
    names = [type(e).__name__ for e in exported.events]
    assert names == ["DiscreteLaplaceDpEvent", "MixtureOfGaussiansDpEvent"]


def test_export_amplified_banded_mf_when_its_bound_is_attained():
    """A banded MF whose every column has the largest norm is, per participation, exactly the subsampled
    Gaussian of that norm: exported as the event jax_privacy's amplified_bandmf_event builds; an
    unequal-norm C (an upper bound only) is refused rather than exported as something it is not."""
    from mechanisms import AmplifiedBandedMF

    c = [[0.8, 0.0, 0.0, 0.0], [0.6, 0.8, 0.0, 0.0], [0.0, 0.6, 0.8, 0.0], [0.0, 0.0, 0.6, 1.0]]
    m = AmplifiedBandedMF(C=c, sigma=1.2, sample_rate=0.1, bands=2)
    assert m.tight and m.rounds == 2
    ev = ledger_to_dp_event([(m, m.rounds)], "add_remove", module=STANDINS)
    sens = m.sensitivity
    assert 1.0 <= sens <= 1.0 + 1e-15  # unit column norms, rounded up
    assert ev == SelfComposedDpEvent(PoissonSampledDpEvent(0.1, GaussianDpEvent(1.2 / sens)), 2)
    loose = AmplifiedBandedMF(C=[[1.0, 0.0, 0.0, 0.0], [0.5, 1.0, 0.0, 0.0], [0.0, 0.5, 0.5, 0.0],
                                 [0.0, 0.0, 0.5, 0.5]], sigma=1.2, sample_rate=0.1, bands=2)
    assert not loose.tight
    with pytest.raises(ValueError, match="bandmf"):
        ledger_to_dp_event([(loose, loose.rounds)], "add_remove", module=STANDINS)
