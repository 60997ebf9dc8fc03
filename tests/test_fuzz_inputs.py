"""Fuzzing the CLI parsers and the public API with generated (mostly bad) inputs.

Every input must end in a clear error (CLI: exit 2 and one line on stderr; API: ValueError/TypeError
with a message) or in a valid result (a certificate with no NaN, epsilon/delta in range) -- never an
unexpected exception, a traceback, a hang or a NaN.  The default run generates >= 500 inputs per
target; the slow variants >= 10,000.
"""

from __future__ import annotations

import json
import math
import signal
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accountant import PrivacyAccountant
from accountant.cli import main
from accountant.opacus_adapter import DPCertAccountant
from mechanisms import registry

PER_EXAMPLE_SECONDS = 30  # a hang is a failure, not a stuck test run

# numbers as a user might type them, good and bad
TEXT_VALUES = ["1", "0", "-1", "2", "0.5", "1e-5", "-1e-5", "1e300", "-1e300", "1e-300", "nan", "inf",
               "-inf", "abc", "", " ", "1e", "--", "0x10", "1_000", "1" + "0" * 30, "true", "None", "3.7",
               "-0", "1e400", "4294967297", "0.999999999999", "1.0000001"]
SMALL_VALUES = ["1", "2", "0.5", "3", "0.01", "0.1", "10"]
COMMANDS = ["epsilon", "delta", "rdp", "dpsgd", "mechanisms", "ptr", "nope", ""]
OPTIONS = ["--delta", "--epsilon", "--times", "-k", "--mechanism", "-m", "--method", "--alpha", "--json",
           "--compare", "--relation", "--state", "--sigma", "--scale", "--sample-rate", "-q", "--steps",
           "--epochs", "--batch-size", "--dataset-size", "--epsilon-mech", "--k", "--beta", "--quiet",
           "--sensitivity", "--noise-multiplier", "--test-epsilon", "--false-positive", "--help"]
# mechanisms whose curves are cheap whatever the (valid) parameters: the fuzz looks for crashes, not for
# the cost of legitimately huge problems
CHEAP = ["gaussian", "laplace", "randomized_response", "pure_dp", "approx_dp", "subsampled_gaussian", "gnss",
         "gnss_upper_bound", "nope"]


@contextmanager
def time_limit(seconds: int):
    def on_alarm(signum, frame):
        raise TimeoutError(f"no answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _argv():
    token = st.one_of(st.sampled_from(OPTIONS), st.sampled_from(TEXT_VALUES), st.sampled_from(SMALL_VALUES),
                      st.sampled_from(CHEAP), st.sampled_from(["auto", "cf", "rdp", "exact", "rdp_classic",
                                                               "add_remove", "replace_one"]))
    ptr_sub = st.sampled_from(["certificate", "classic", "pate-params", "select-budget", "zzz"])
    return st.tuples(st.sampled_from(COMMANDS), ptr_sub, st.lists(token, max_size=12)).map(
        lambda t: [t[0], *([t[1]] if t[0] == "ptr" else []), *t[2]] if t[0] else t[2])


MECH_PARAMS = {"gaussian": ["--sigma"], "laplace": ["--scale"],
               "randomized_response": ["--epsilon-mech", "--k"], "pure_dp": ["--epsilon-mech"],
               "approx_dp": ["--epsilon-mech", "--delta-mech"],
               "subsampled_gaussian": ["--sigma", "--sample-rate"], "gnss": ["--sigma", "--beta"]}


def _structured_argv():
    """Well-formed command lines with values drawn from good and bad numbers (reaches the computations)."""
    val = st.one_of(st.sampled_from(SMALL_VALUES), st.sampled_from(TEXT_VALUES))
    method = st.sampled_from(["auto", "cf", "rdp", "exact"])

    @st.composite
    def build(draw):
        kind = draw(st.sampled_from(["epsilon", "delta", "rdp", "dpsgd", "ptr"]))
        if kind == "dpsgd":
            argv = ["dpsgd", "--sigma", draw(val), "--delta", draw(val)]
            if draw(st.booleans()):
                argv += ["--sample-rate", draw(val)]
            else:
                argv += ["--batch-size", draw(val), "--dataset-size", draw(val)]
            argv += ["--steps", draw(val)] if draw(st.booleans()) else ["--epochs", draw(val)]
            return argv + ["--method", draw(method)] + (["--json"] if draw(st.booleans()) else [])
        if kind == "ptr":
            sub = draw(st.sampled_from(["certificate", "classic", "pate-params", "select-budget"]))
            opts = {"certificate": ["--epsilon", "--delta", "--test-epsilon", "--test-delta",
                                    "--false-positive"],
                    "classic": ["--epsilon", "--delta"], "pate-params": ["--test-epsilon", "--delta"],
                    "select-budget": ["--epsilon-total", "--delta-total", "--stop-prob", "--delta2"]}[sub]
            argv = ["ptr", sub]
            for o in opts:
                argv += [o, draw(val)]
            return argv + (["--json"] if draw(st.booleans()) else [])
        mech = draw(st.sampled_from(sorted(MECH_PARAMS)))
        argv = [kind, "-m", mech]
        for o in MECH_PARAMS[mech]:
            if draw(st.integers(0, 5)):
                argv += [o, draw(val)]
        argv += ["--times", draw(st.sampled_from(["1", "3", "0", "100", "-1", "2.5", "1e30", "x"]))]
        if kind == "rdp":
            argv += ["--alpha", *draw(st.lists(val, min_size=1, max_size=3))]
        else:
            argv += ["--delta" if kind == "epsilon" else "--epsilon", draw(val), "--method", draw(method)]
            argv += ["--compare"] if draw(st.booleans()) else []
        return argv + (["--json"] if draw(st.booleans()) else [])

    return build()


def _check_cli(argv: list[str], capsys) -> None:
    if "--times" in argv or "-k" in argv or "--steps" in argv:
        # a valid huge count is a legitimately long problem; keep the fuzz on parsing and validation
        argv = [a if a not in ("1e300", "1" + "0" * 30, "4294967297") else "1e30" for a in argv]
    with time_limit(PER_EXAMPLE_SECONDS):
        try:
            rc = main(argv)
        except SystemExit as exc:  # pragma: no cover - main() must return, never exit
            raise AssertionError(f"main({argv}) raised SystemExit({exc.code})") from None
    out, err = capsys.readouterr()
    assert rc in (0, 1, 2), (argv, rc, err)
    assert "Traceback" not in err and "Traceback" not in out, (argv, err)
    if rc == 2 and "--help" not in argv:
        lines = [x for x in err.splitlines() if x.strip()]
        assert len(lines) <= 1 or (not argv or argv[0] in ("", "nope")), (argv, err)
    if rc == 0 and "--json" in argv and out.strip().startswith("{"):
        doc = json.loads(out)
        for key in ("epsilon", "delta"):
            if key in doc:
                v = doc[key]
                assert v != "nan" and not (isinstance(v, float) and math.isnan(v)), (argv, doc)


FAST = settings(max_examples=500, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
SLOW = settings(max_examples=10_000, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@FAST
@given(argv=st.one_of(_argv(), _structured_argv()))
def test_fuzz_cli(argv, capsys):
    _check_cli(argv, capsys)


@pytest.mark.slow
@SLOW
@given(argv=st.one_of(_argv(), _structured_argv()))
def test_fuzz_cli_slow(argv, capsys):
    _check_cli(argv, capsys)


# --------------------------------------------------------------------------- public API
BAD_NUMBERS = st.one_of(
    st.sampled_from([0, -1, -1e-5, 1e300, -1e300, math.inf, -math.inf, math.nan, 10**30, True, None, "1",
                     "abc", [1], {}, 1.5, 0.5, 2, 1e-300, 5e-324, 1 - 1e-16, 10**18 + 1]),
    st.floats(allow_nan=True, allow_infinity=True), st.integers(min_value=-10**40, max_value=10**40))
PARAM_NAMES = ["sigma", "scale", "epsilon", "delta", "sample_rate", "sensitivity", "k", "beta", "base",
               "sigma_s", "sigma_2", "delta_2", "evil"]


def _api_call():
    mech = st.tuples(st.sampled_from(CHEAP[:-1] + ["nope", 7]),
                     st.dictionaries(st.sampled_from(PARAM_NAMES), BAD_NUMBERS, max_size=4))
    query = st.tuples(st.sampled_from(["delta", "epsilon"]), BAD_NUMBERS,
                      st.sampled_from(["auto", "cf", "rdp", "exact", "magic", None, 3]))
    return st.tuples(mech, BAD_NUMBERS, query, st.sampled_from(["compose", "step", "state", "opacus"]))


def _check_api(call) -> None:
    (name, params), times, (qkind, qval, method), how = call
    with time_limit(PER_EXAMPLE_SECONDS):
        try:
            if how == "compose":
                mech = registry.from_dict({"name": name, "params": params})
                acct = PrivacyAccountant().compose(mech, times)
            elif how == "step":
                acct = PrivacyAccountant().step(sigma=params.get("sigma", 1.0),
                                                sample_rate=params.get("sample_rate", 0.01), steps=times)
            elif how == "state":
                acct = PrivacyAccountant.from_state({"format": "dpcert-accountant", "version": 1, "ledger": [
                    {"mechanism": {"name": name, "params": params}, "count": times}]})
            else:
                o = DPCertAccountant()
                o.load_state_dict({"history": [[params.get("sigma", 1.0), params.get("sample_rate", 0.01),
                                                times]]})
                acct = o.accountant
            if isinstance(times, int) and not isinstance(times, bool) and times > 10**6:
                return  # a valid huge count: a legitimately long problem, not the fuzz's business
            cert = acct.certificate(**{qkind: qval}, method=method)
        except (ValueError, TypeError) as exc:
            assert str(exc), repr(exc)
            return
    assert not math.isnan(cert.epsilon) and not math.isnan(cert.delta)
    assert cert.epsilon >= 0 and 0 <= cert.delta <= 1
    if cert.lower_bound is not None:
        assert not math.isnan(cert.lower_bound)


@FAST
@given(call=_api_call())
def test_fuzz_api(call):
    _check_api(call)


@pytest.mark.slow
@SLOW
@given(call=_api_call())
def test_fuzz_api_slow(call):
    _check_api(call)
