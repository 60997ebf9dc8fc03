"""Persistence (versioned JSON, atomic, no code execution), input validation and the CLI."""

import json
import math
import subprocess
import sys

import pytest

from accountant import BudgetExceeded, Certificate, PrivacyAccountant, PrivacyBudget
from accountant.cli import main
from mechanisms import ApproxDP, Gaussian, Laplace, PureDP, RandomizedResponse, from_dict


def _acct():
    a = PrivacyAccountant()
    a.compose(Gaussian(sigma=1.3), 17).compose(Laplace(scale=4.0, sensitivity=0.5), 3)
    a.compose(RandomizedResponse(epsilon=0.3, k=4), 2).compose(ApproxDP(0.1, 1e-7), 5)
    return a


def test_save_load_roundtrip_bit_identical(tmp_path):
    a = _acct()
    p = tmp_path / "state.json"
    a.save(p)
    b = PrivacyAccountant.load(p)
    assert b.ledger == a.ledger
    for m in ("auto", "rdp", "cf"):
        ca, cb = a.certificate(delta=1e-6, method=m), b.certificate(delta=1e-6, method=m)
        assert ca == cb
        assert ca.to_json() == cb.to_json()
    doc = json.loads(p.read_text())
    assert doc["format"] == "dpcert-accountant" and doc["version"] == 1


def test_certificate_json_roundtrip():
    c = _acct().certificate(delta=1e-6)
    assert Certificate.from_dict(json.loads(c.to_json())) == c
    assert "add/remove" in str(c) and c.method in str(c)


def test_truncated_state_raises_clear_error_and_keeps_good_file(tmp_path):
    a = _acct()
    p = tmp_path / "state.json"
    a.save(p)
    good = p.read_text()
    bad = tmp_path / "bad.json"
    bad.write_text(good[: len(good) // 2])
    with pytest.raises(ValueError, match="corrupted or truncated"):
        PrivacyAccountant.load(bad)
    # an exception while serialising must not touch the existing good file
    a2 = PrivacyAccountant()
    a2.compose(Gaussian(sigma=1.0))
    a2.to_state = lambda: {"ledger": [float("nan")]}  # not JSON-serialisable with allow_nan=False
    with pytest.raises(ValueError):
        a2.save(p)
    assert p.read_text() == good
    assert [x.name for x in tmp_path.iterdir() if x.name.startswith(".")] == []


def test_future_version_and_foreign_files_rejected(tmp_path):
    p = tmp_path / "s.json"
    _acct().save(p)
    doc = json.loads(p.read_text())
    doc["version"] = 99
    p.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="newer"):
        PrivacyAccountant.load(p)
    p.write_text(json.dumps({"hello": 1}))
    with pytest.raises(ValueError, match="not a dpcert"):
        PrivacyAccountant.load(p)
    with pytest.raises(ValueError, match="does not exist"):
        PrivacyAccountant.load(tmp_path / "missing.json")


def test_loading_never_imports_named_modules(tmp_path):
    p = tmp_path / "s.json"
    p.write_text(json.dumps({"format": "dpcert-accountant", "version": 1, "ledger": [
        {"mechanism": {"name": "os.system", "params": {"command": "echo pwned"}}, "count": 1}]}))
    with pytest.raises(ValueError, match="unknown mechanism"):
        PrivacyAccountant.load(p)


@pytest.mark.parametrize("bad, exc", [
    (lambda: Gaussian(sigma=0.0), ValueError), (lambda: Gaussian(sigma=-1), ValueError),
    (lambda: Gaussian(sigma=float("nan")), ValueError), (lambda: Gaussian(sigma=float("inf")), ValueError),
    (lambda: Gaussian(sigma="2"), TypeError), (lambda: Laplace(scale=0), ValueError),
    (lambda: RandomizedResponse(epsilon=-1), ValueError), (lambda: RandomizedResponse(1.0, k=1), ValueError),
    (lambda: ApproxDP(1.0, 1.0), ValueError), (lambda: PureDP(float("nan")), ValueError),
    (lambda: PrivacyAccountant().compose(Gaussian(sigma=1), times=-1), ValueError),
    (lambda: PrivacyAccountant().compose(Gaussian(sigma=1), times=1.5), TypeError),
    (lambda: PrivacyAccountant().compose("gaussian"), TypeError),
    (lambda: PrivacyAccountant(relation="swap"), ValueError),
    (lambda: PrivacyAccountant().compose(Gaussian(sigma=1)).epsilon(0.0), ValueError),
    (lambda: PrivacyAccountant().compose(Gaussian(sigma=1)).epsilon(1.0), ValueError),
    (lambda: PrivacyAccountant().compose(Gaussian(sigma=1)).epsilon(float("nan")), ValueError),
    (lambda: PrivacyAccountant().compose(Gaussian(sigma=1)).delta(-0.5), ValueError),
    (lambda: PrivacyAccountant().compose(Gaussian(sigma=1)).epsilon(1e-5, method="magic"), ValueError),
    (lambda: PrivacyAccountant().compose(Laplace(scale=1), 2).epsilon(1e-5, method="exact"), ValueError),
    (lambda: Gaussian(sigma=1).rdp([0.5, 2]), ValueError),
    (lambda: from_dict({"name": "gaussian", "params": {"sigma": 1, "evil": 2}}), ValueError),
])
def test_bad_input_clear_errors(bad, exc):
    with pytest.raises(exc) as info:
        bad()
    assert str(info.value)  # every error carries a message


def test_error_messages_name_parameter_and_range():
    with pytest.raises(ValueError, match=r"sigma must lie in \(0, inf\)"):
        Gaussian(sigma=0.0)
    with pytest.raises(ValueError, match=r"delta must lie in \(0, 1\)"):
        PrivacyAccountant().epsilon(2.0)


def test_budget_filter_refuses_and_records_nothing():
    acct = PrivacyAccountant(budget=PrivacyBudget(epsilon=3.0, delta=1e-5))
    acct.compose(Gaussian(sigma=5.0), 10)
    before = acct.ledger
    with pytest.raises(BudgetExceeded):
        acct.compose(Gaussian(sigma=5.0), 10_000)
    assert acct.ledger == before
    assert acct.epsilon(1e-5) <= 3.0


def test_cli_epsilon_matches_api(capsys):
    rc = main(["epsilon", "--mechanism", "gaussian", "--sigma", "2", "--times", "100", "--delta", "1e-5",
               "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    api = PrivacyAccountant().compose(Gaussian(sigma=2.0), 100).certificate(delta=1e-5)
    assert out["epsilon"] == api.epsilon and out["method"] == api.method


def test_cli_compare_lists_every_route(capsys):
    """--compare evaluates every valid route; the answer is the smallest of them."""
    args = ["epsilon", "--mechanism", "laplace", "--scale", "2", "--times", "10", "--delta", "1e-5", "--json"]
    assert main(args) == 0
    fast = json.loads(capsys.readouterr().out)
    assert main(args + ["--compare"]) == 0
    full = json.loads(capsys.readouterr().out)
    assert set(full["candidates"]) == {"cf", "pld", "rdp"}
    assert full["epsilon"] == min(full["candidates"].values()) == fast["epsilon"]
    assert fast["details"]["skipped_routes"] == "pld,rdp"


def test_cli_bad_arguments_exit_2(capsys):
    assert main(["epsilon", "--mechanism", "gaussian", "--sigma", "-2", "--delta", "1e-5"]) == 2
    assert "sigma" in capsys.readouterr().err
    assert main(["epsilon", "--mechanism", "nope", "--delta", "1e-5"]) == 2
    assert "unknown mechanism" in capsys.readouterr().err
    assert main(["delta", "--mechanism", "laplace", "--scale", "1", "--wrong", "1", "--epsilon", "1"]) == 2


def test_cli_state_file_and_module_entry(tmp_path):
    p = tmp_path / "s.json"
    _acct().save(p)
    out = subprocess.run([sys.executable, "-m", "accountant", "delta", "--state", str(p), "--epsilon", "2",
                          "--json"], capture_output=True, text=True, check=True).stdout
    d = json.loads(out)["delta"]
    assert math.isclose(d, _acct().delta(2.0), rel_tol=0, abs_tol=0)


def test_readme_benchmark_table_is_the_generated_one(tmp_path):
    from benchmarks.readme import END, START, splice

    table = tmp_path / "t.md"
    table.write_text("| a | b |\n|---|---|\n| 1 | 2 |\n")
    readme = tmp_path / "R.md"
    readme.write_text(f"intro\n{START}\nold\n{END}\noutro\n")
    assert splice(table, readme) is True
    assert readme.read_text() == f"intro\n{START}\n| a | b |\n|---|---|\n| 1 | 2 |\n{END}\noutro\n"
    assert splice(table, readme) is False
