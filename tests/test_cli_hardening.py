"""Hardening: bad inputs give clear errors (API and CLI), state files are robust, CLI polish."""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import re
import stat
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import reference

from accountant import PrivacyAccountant, cli, cli_audit
from accountant.cli import main
from accountant.opacus_adapter import DPCertAccountant
from accountant.privacy_accountant import VacuousBoundWarning
from mechanisms import GNSS, Gaussian, registry
from mechanisms.subsampled import SubsampledGaussian

ROOT = Path(__file__).resolve().parent.parent


# --------------------------------------------------------------------------- tiny-sigma DP-SGD
def test_tiny_sigma_dpsgd_no_runtime_warning_and_sound():
    """sigma <= 0.03 used to build a NaN characteristic-function envelope (overflowing total variation):
    a RuntimeWarning and a 'lower bound' above the true epsilon (1753.01 vs 1736.35)."""
    ref = reference.tiny_sigma_epsilon_lower(0.03, 0.01, 10, 1e-5)
    acct = PrivacyAccountant().step(sigma=0.03, sample_rate=0.01, steps=10)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # (an AccuracyWarning for a loose bracket is fine)
        cert = acct.certificate(delta=1e-5, method="cf")
    assert cert.epsilon >= ref
    assert cert.lower_bound is None or cert.lower_bound <= ref * (1 + 1e-9)


# --------------------------------------------------------------------------- helpers
def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def assert_one_line_error(rc: int, err: str, *needles: str) -> None:
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], (n, lines[0])


# --------------------------------------------------------------------------- counts
@pytest.mark.parametrize("steps", [1e300, 10**30, float("inf"), float("nan"), -3, 10**18 + 1, 10**5000],
                         ids=["1e300", "10**30", "inf", "nan", "-3", "10**18+1", "10**5000"])
def test_step_counts_out_of_range_name_the_parameter(steps):
    acct = PrivacyAccountant()
    with pytest.raises(ValueError, match=r"steps must be an integer in \[0, 10\^18\]"):
        acct.step(sigma=1.0, sample_rate=0.01, steps=steps)
    with pytest.raises(ValueError, match=r"times must be an integer in \[0, 10\^18\]"):
        acct.compose(Gaussian(sigma=1.0), steps)
    assert not acct.ledger  # nothing recorded


def test_counts_accumulate_at_most_to_the_cap():
    acct = PrivacyAccountant().step(sigma=1.0, sample_rate=0.01, steps=10**18)
    before = acct.ledger
    with pytest.raises(ValueError, match="10\\^18"):
        acct.step(sigma=1.0, sample_rate=0.01, steps=1)  # the O(1) fast path is checked too
    with pytest.raises(ValueError, match="10\\^18"):
        acct.compose(SubsampledGaussian(sigma=1.0, sample_rate=0.01), 1)
    assert acct.ledger == before


@pytest.mark.parametrize("argv, needles", [
    (["--steps", "1" + "0" * 30], ["--steps", "[0, 10^18]"]),
    (["--steps", "10**30"], ["--steps", "not an integer"]),
    (["--epochs", "inf"], ["--epochs", "finite"]),
    (["--epochs", "nan"], ["--epochs", "finite"]),
    (["--epochs", "-3"], ["--epochs", "(0, inf)"]),
    (["--epochs", "0"], ["--epochs", "(0, inf)"]),
    (["--epochs", "1e300"], ["--epochs", "10^18"]),
])
def test_cli_dpsgd_bad_length_one_line(capsys, argv, needles):
    rc, out, err = run_cli(capsys, "dpsgd", "--sigma", "1", "--sample-rate", "0.01", *argv, "--delta", "1e-5")
    assert_one_line_error(rc, err, *needles)
    assert "times" not in err
    assert out == ""


def test_cli_negative_numbers_reach_the_range_check(capsys):
    rc, _, err = run_cli(capsys, "epsilon", "-m", "gaussian", "--sigma", "1", "--delta", "-1e-5")
    assert_one_line_error(rc, err, "delta must lie in (0, 1)", "-1e-05")
    rc, _, err = run_cli(capsys, "delta", "-m", "gaussian", "--sigma", "1", "--epsilon", "-.5")
    assert_one_line_error(rc, err, "epsilon must lie in [0, inf)")
    rc, _, err = run_cli(capsys, "epsilon", "-m", "gaussian", "--sigma", "-2e0", "--delta", "1e-5")
    assert_one_line_error(rc, err, "sigma must lie in (0, inf)")
    rc, _, err = run_cli(capsys, "dpsgd", "--sigma", "1", "-q", "-0.5", "--steps", "3", "--delta", "1e-5")
    assert_one_line_error(rc, err, "--sample-rate", "[0, 1]")


def test_cli_usage_errors_are_one_line(capsys):
    rc, _, err = run_cli(capsys, "epsilon", "-m", "gaussian", "--sigma", "1", "--delta", "abc")
    assert_one_line_error(rc, err, "--delta", "not a number")
    rc, _, err = run_cli(capsys, "epsilon", "-m", "gaussian", "--sigma", "1")
    assert_one_line_error(rc, err, "--delta")
    rc, _, err = run_cli(capsys, "epsilon", "-m", "gaussian", "--sigma", "1", "--delta", "1e-5",
                         "--method", "magic")
    assert_one_line_error(rc, err, "--method")


def test_epochs_round_up_exactly_and_print_the_derivation(capsys):
    """steps = ceil(epochs * n / batch) in exact integer arithmetic (the safe side)."""
    rc, out, _ = run_cli(capsys, "dpsgd", "--batch-size", "256", "--dataset-size", "60000", "--epochs", "60",
                         "--sigma", "1.1", "--delta", "1e-5")
    assert rc == 0
    expected = -(-60 * 60000 // 256)  # ceil(14062.5)
    assert expected == 14063
    first = out.splitlines()[0]
    assert "ceil(14062.5) = 14063" in first and "rounded up" in first
    assert "14063 x subsampled_gaussian" in out
    rc, out, _ = run_cli(capsys, "dpsgd", "--batch-size", "256", "--dataset-size", "60000", "--epochs", "60",
                         "--sigma", "1.1", "--delta", "1e-5", "--json")
    doc = json.loads(out)
    assert doc["steps"] == expected and doc["sample_rate"] == 256 / 60000
    api = PrivacyAccountant().step(sigma=1.1, sample_rate=256 / 60000, steps=expected)
    assert doc["epsilon"] == api.certificate(delta=1e-5).epsilon
    # decimal input is taken exactly: 0.9 / 0.009 = 100 steps (float division gives 100.00000000000001)
    assert 0.9 / 0.009 > 100
    rc, out, _ = run_cli(capsys, "dpsgd", "-q", "0.009", "--epochs", "0.9", "--sigma", "2", "--delta", "1e-5",
                         "--json")
    assert json.loads(out)["steps"] == 100
    # a fraction of an epoch is at least one step, never "Composition: nothing"
    rc, out, _ = run_cli(capsys, "dpsgd", "-q", "0.01", "--epochs", "0.001", "--sigma", "1",
                         "--delta", "1e-5", "--json")
    doc = json.loads(out)
    assert doc["steps"] == 1 and doc["epsilon"] > 0 and doc["ledger"]


# --------------------------------------------------------------------------- state files: load
def _saved(tmp_path) -> Path:
    p = tmp_path / "s.json"
    PrivacyAccountant().compose(Gaussian(sigma=2.0), 3).save(p)
    return p


@pytest.mark.parametrize("count", ['"100"', "2.5", "null", "1e400", "-1", "true", "1" + "0" * 5000,
                                   "10000000000000000000", "[3]", "{}"])
def test_state_bad_counts_are_value_errors(tmp_path, count):
    p = _saved(tmp_path)
    text = p.read_text()
    assert '"count": 3' in text
    p.write_text(text.replace('"count": 3', f'"count": {count}'))
    with pytest.raises(ValueError, match="count|state"):
        PrivacyAccountant.load(p)


@pytest.mark.parametrize("doc", [
    {"relation": 5}, {"relation": "swap"}, {"rtol": "x"}, {"rtol": None},
    {"budget": {"epsilon": "1", "delta": 0.1}},
    {"budget": [1, 2]}, {"ledger": {"a": 1}}, {"ledger": [{"mechanism": "gaussian", "count": 1}]},
    {"ledger": [{"mechanism": {"name": "gaussian", "params": {"sigma": "2"}}, "count": 1}]},
    {"ledger": [{"mechanism": {"name": "gaussian", "params": [1]}, "count": 1}]},
    {"ledger": [{"mechanism": {"name": 7, "params": {}}, "count": 1}]},
])
def test_from_state_malformed_fields_are_value_errors(doc):
    with pytest.raises(ValueError):
        PrivacyAccountant.from_state({"format": "dpcert-accountant", "version": 1, **doc})


def test_state_unreadable_paths_are_value_errors(tmp_path, capsys):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000)
    paths = [tmp_path, deep, Path("/dev/null")]
    if Path("/proc/self/mem").exists():
        paths.append(Path("/proc/self/mem"))
    for p in paths:
        with pytest.raises(ValueError, match=str(p)):
            PrivacyAccountant.load(p)
        rc, out, err = run_cli(capsys, "epsilon", "--state", str(p), "--delta", "1e-5")
        assert_one_line_error(rc, err, str(p))
    with pytest.raises(ValueError, match="non-empty"):
        PrivacyAccountant.load("")


# --------------------------------------------------------------------------- state files: save
def test_save_keeps_mode_follows_symlink_and_cleans_stale_temp_files(tmp_path):
    acct = PrivacyAccountant().compose(Gaussian(sigma=2.0), 3)
    real = tmp_path / "real.json"
    real.write_text("old")
    os.chmod(real, 0o644)
    link = tmp_path / "link.json"
    link.symlink_to(real.name)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    stale_dead = tmp_path / f".real.json.{dead}.abcd_123.tmp"       # writer process is gone
    stale_old = tmp_path / ".real.json.zz9_abcd.tmp"                  # pre-pid naming, 2 hours old
    young = tmp_path / ".real.json.yy9_abcd.tmp"                      # pre-pid naming, fresh: kept
    live = tmp_path / f".real.json.{os.getpid()}.qq9_abcd.tmp"        # our own pid: maybe in use, kept
    foreign = [tmp_path / f".other.json.{dead}.abcd_123.tmp", tmp_path / ".real.json.notours.tmp",
               tmp_path / "real.json.bak"]
    for f in [stale_dead, stale_old, young, live, *foreign]:
        f.write_text("x")
    old = time.time() - 7200
    os.utime(stale_old, (old, old))
    acct.save(link)
    assert link.is_symlink() and os.readlink(link) == real.name
    assert PrivacyAccountant.load(real).ledger == acct.ledger
    assert stat.S_IMODE(real.stat().st_mode) == 0o644
    assert not stale_dead.exists() and not stale_old.exists()
    assert young.exists() and live.exists() and all(f.exists() for f in foreign)
    os.chmod(real, 0o600)
    acct.save(real)
    assert stat.S_IMODE(real.stat().st_mode) == 0o600
    new = tmp_path / "new.json"
    acct.save(new)
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(new.stat().st_mode) == 0o666 & ~umask
    leftovers = {x.name for x in tmp_path.iterdir() if x.name.endswith(".tmp")}
    assert leftovers == {young.name, live.name, foreign[0].name, foreign[1].name}


def test_save_errors_name_the_users_path(tmp_path):
    acct = PrivacyAccountant().compose(Gaussian(sigma=2.0))
    with pytest.raises(ValueError, match="non-empty"):
        acct.save("")
    with pytest.raises(ValueError, match="directory"):
        acct.save(tmp_path)
    target = tmp_path / "missing" / "s.json"
    with pytest.raises(OSError) as info:
        acct.save(target)
    assert str(target) in str(info.value) and ".tmp" not in str(info.value)
    with pytest.raises(TypeError):
        acct.save(b"s.json")


# --------------------------------------------------------------------------- multi-entry operations
def test_opacus_load_state_dict_is_all_or_nothing():
    acct = DPCertAccountant()
    for _ in range(100):
        acct.step(noise_multiplier=1.0, sample_rate=0.01)
    eps0, hist0 = acct.get_epsilon(1e-5), list(acct.history)
    independent = PrivacyAccountant().step(sigma=1.0, sample_rate=0.01, steps=100).epsilon(1e-5)
    assert eps0 == independent
    bad_rows = [[[1.0, 0.01, 50], [1.0, 0.01, -3]], [[1.0, 0.01, 50], [0.0, 0.01, 5]],
                [[1.0, 0.01, 50], [1.0, 0.01, 2.5]], [[1.0, 0.01, 50], [1.0, 2.0, 1]],
                [[1.0, 0.01, 50], "row"], [[1.0, 0.01, 50], [1.0, 0.01, 10**19]]]
    for rows in bad_rows:
        with pytest.raises((ValueError, TypeError), match="entry 1"):
            acct.load_state_dict({"history": rows})
        assert acct.history == hist0 and acct.get_epsilon(1e-5) == eps0
    with pytest.raises((ValueError, TypeError)):
        acct.load_state_dict({"history": 5})
    acct.load_state_dict({"history": [[1.0, 0.01, 40], [1.0, 0.01, 60]]})
    assert acct.get_epsilon(1e-5) == eps0 and len(acct) == 100


# --------------------------------------------------------------------------- vacuous certificates
def test_gnss_beta_at_least_half_explains_infinite_epsilon():
    acct = PrivacyAccountant().compose(GNSS(sigma=1.0, beta=0.6), 2).compose(Gaussian(sigma=1.0))
    with pytest.warns(VacuousBoundWarning, match=r"beta = 0.6 >= 1/2"):
        cert = acct.certificate(delta=1e-5)
    assert cert.epsilon == math.inf
    assert "alpha * beta < 1/2" in cert.details["trivial_bound_reason"]
    assert "No finite bound" in str(cert)
    with pytest.warns(VacuousBoundWarning):
        assert acct.certificate(epsilon=1.0).delta == 1.0
    ok = PrivacyAccountant().compose(GNSS(sigma=1.0, beta=0.3), 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cert = ok.certificate(delta=1e-5)
    assert math.isfinite(cert.epsilon) and "trivial_bound_reason" not in cert.details


def test_cli_gnss_warning_is_one_line(capsys):
    rc, out, err = run_cli(capsys, "epsilon", "-m", "gnss", "--sigma", "1", "--beta", "0.6",
                           "--delta", "1e-5")
    assert rc == 0 and "(inf, 1e-05)-DP" in out and "No finite bound" in out
    assert len(err.strip().splitlines()) == 1 and "warning" in err and "beta" in err


# --------------------------------------------------------------------------- CLI polish
def test_broken_pipe_exits_quietly(capsys, monkeypatch):
    class Closed(io.StringIO):
        def write(self, s):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", Closed())
    assert main(["mechanisms"]) == 0
    monkeypatch.undo()
    assert capsys.readouterr().err == ""
    res = subprocess.run(f"{sys.executable} -m accountant mechanisms | head -1", shell=True,
                         capture_output=True, text=True, cwd=ROOT)
    assert res.stderr == "" and res.stdout.startswith("approx_dp")


def test_mechanisms_json(capsys):
    rc, out, _ = run_cli(capsys, "mechanisms", "--json")
    table = {m["name"]: m for m in json.loads(out)}
    assert set(table) == set(registry.available())
    g = {p["name"]: p for p in table["gaussian"]["parameters"]}
    assert g["sigma"]["required"] and not g["sensitivity"]["required"] and g["sensitivity"]["default"] == 1.0


def test_compare_text_shows_every_route_and_fixed_method_compare(capsys):
    base = ["epsilon", "-m", "laplace", "--scale", "2", "--times", "10", "--delta", "1e-5", "--compare"]
    rc, out, _ = run_cli(capsys, *base, "--json")
    cands = json.loads(out)["candidates"]
    assert set(cands) == {"cf", "pld", "rdp"}
    rc, text, _ = run_cli(capsys, *base)
    for name, val in cands.items():
        assert re.search(rf"^\s+{name}\s+{re.escape(f'{val:.6g}')}", text, re.M), text
    rc, out, _ = run_cli(capsys, *base, "--method", "rdp", "--json")
    doc = json.loads(out)
    assert doc["method"] == "rdp" and set(doc["candidates"]) == {"cf", "pld", "rdp"}
    assert doc["epsilon"] == doc["candidates"]["rdp"] == cands["rdp"]  # the certificate stays rdp's
    assert doc["candidates"]["cf"] == cands["cf"]
    rc, out, _ = run_cli(capsys, *base, "--method", "cf", "--json")
    assert json.loads(out)["candidates"] == cands


def test_help_explains_mechanism_parameters_and_every_option_has_help(capsys):
    assert main(["epsilon", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--<param> VALUE" in out and "dpcert mechanisms" in out and "--epsilon-mech" in out
    cli._load_extensions()
    missing = []

    def walk(p, path):
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sp in a.choices.items():
                    walk(sp, f"{path} {name}")
            elif not a.help and not isinstance(a, argparse._HelpAction):
                missing.append(f"{path} {a.option_strings or a.dest}")

    walk(cli.build_parser(), "dpcert")
    assert missing == []


def test_bench_accepts_out_and_only(tmp_path, monkeypatch, capsys):
    bench = pytest.importorskip("benchmarks.suite")
    seen = {}

    def fake_run(**kw):
        seen.update(kw)
        return {"meta": {"missing": []}}

    monkeypatch.setattr(bench, "run", fake_run)
    assert main(["bench", "--out", str(tmp_path), "--only", "dpsgd", "gaussian", "--quick"]) == 0
    assert seen["out_dir"] == str(tmp_path) and seen["only"] == ["dpsgd", "gaussian"] and seen["quick"]
    monkeypatch.setattr(cli_audit, "_source_benchmarks", lambda: None)
    rc, _, err = run_cli(capsys, "bench", "--quick")
    assert_one_line_error(rc, err, "source checkout", "python -m benchmarks")


def test_progress_on_tty_only_and_quiet_flag(capsys, monkeypatch):
    args = ["calibrate", "--target-epsilon", "8", "--delta", "1e-5", "--sample-rate", "0.01",
            "--steps", "100", "--method", "rdp"]
    rc, out, err = run_cli(capsys, *args)
    assert rc == 0 and err == "" and out.startswith("sigma = ")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    rc, out2, err = run_cli(capsys, *args)
    assert rc == 0 and out2 == out and "[1] sigma=" in err
    rc, _, err = run_cli(capsys, *args, "--quiet")
    assert err == ""
    rc, _, err = run_cli(capsys, "-q", *args)
    assert err == ""


# --------------------------------------------------------------------------- kill -9 soak
_SAVER = """
import sys
from accountant import PrivacyAccountant
from mechanisms import Gaussian
path = sys.argv[1]
while True:
    try:
        acct = PrivacyAccountant.load(path)
    except ValueError:
        acct = PrivacyAccountant()
    acct.compose(Gaussian(sigma=1.0), 1)
    acct.save(path)
    print(acct.ledger.total_count, flush=True)
"""


def _soak(tmp_path, kills: int, seed: int = 0) -> None:
    """Kill a process that keeps re-saving the state at random moments: the file always loads, no
    confirmed save is lost, and each next save removes the temp files the killed ones left."""
    import random

    rng = random.Random(seed)
    path = tmp_path / "state.json"
    confirmed = 0
    for _ in range(kills):
        proc = subprocess.Popen([sys.executable, "-c", _SAVER, str(path)], cwd=ROOT, stdout=subprocess.PIPE,
                                text=True)
        try:
            for _ in range(rng.randint(1, 20)):
                line = proc.stdout.readline()
                assert line, "the saver died on its own"
                confirmed = int(line)
            time.sleep(rng.random() * 0.003)
        finally:
            proc.kill()  # SIGKILL: no cleanup handler runs
            proc.wait()
            # saves confirmed after our last read (the saver runs on while we sleep and kill it)
            last = confirmed
            for line in proc.stdout.read().split():
                last = int(line)
            proc.stdout.close()
        count = PrivacyAccountant.load(path).ledger.total_count
        # no confirmed save is lost; at most the one in flight at the kill went through unconfirmed
        assert last <= count <= last + 1
        confirmed = count
    acct = PrivacyAccountant.load(path)
    acct.save(path)
    assert [x.name for x in tmp_path.iterdir()] == ["state.json"]


def test_kill_9_during_saves_loses_nothing(tmp_path):
    _soak(tmp_path, kills=2)


@pytest.mark.slow
def test_kill_9_soak(tmp_path):
    _soak(tmp_path, kills=200, seed=1)


def test_rdp_delta_at_huge_epsilon_is_fast_and_never_rounds_to_zero():
    """Found by the API fuzz: delta(eps = 1e6) grew the order grid to ~3e5 (20 s per query).  Below
    the smallest subnormal the bound is that subnormal: positive, an upper bound of anything smaller."""
    acct = PrivacyAccountant().step(sigma=1.0, sample_rate=0.01, steps=3)
    t0 = time.perf_counter()
    for eps in (1e3, 1e6, 7e280):
        assert 0.0 < acct.certificate(epsilon=eps, method="rdp").delta <= 1e-323  # a subnormal, never 0
    assert time.perf_counter() - t0 < 5.0
    # closed-form check: the Gaussian's RDP bound exp((a-1)(a mu^2/2 - eps)) at a = 256 underflows at eps=1e3
    assert PrivacyAccountant().compose(Gaussian(sigma=1.0)).certificate(epsilon=1e3, method="rdp").delta > 0


def test_warmup_compiles_every_route_family_and_names_the_cache(capsys):
    """``dpcert warmup`` runs one certified query per route family (so later processes only load cached
    kernels) and says where numba keeps the cache; extra arguments are a one-line usage error."""
    from accountant import warmup

    assert main(["warmup"]) == 0
    out = capsys.readouterr().out.splitlines()
    labels = [label for label, _ in warmup._queries()]
    assert [line.split(":")[0] for line in out[:-1]] == labels
    assert "numba cache:" in out[-1]
    assert main(["warmup", "-q"]) == 0 and capsys.readouterr().out == ""
    assert main(["warmup", "--nope"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert warmup.main(["-q"]) == 0 and capsys.readouterr().out == ""  # (python -m accountant.warmup)
