"""The README's quick start runs as written and its numbers are consistent with the API."""

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_quick_start_runs(tmp_path, monkeypatch, capsys):
    code = re.search(r"## Quick start\n\n```python\n(.*?)```", README.read_text(), re.S).group(1)
    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    exec(compile(code, "README quick start", "exec"), ns)
    acct, cert, sigma = ns["acct"], ns["cert"], ns["sigma"]
    assert (tmp_path / "run.json").exists()
    assert cert.lower_bound <= cert.epsilon == acct.epsilon(delta=1e-5)
    assert 1.0 < sigma < 3.0
    assert "DP under add/remove" in capsys.readouterr().out


def test_sample_output_is_what_the_command_prints(capsys):
    """The README's sample certificate is the real output of the command it shows (no drift)."""
    from accountant.cli import main

    block = re.search(r"```\n\$ dpcert dpsgd (.*?)\n(.*?)```", README.read_text(), re.S)
    args, shown = block.group(1).split(), " ".join(block.group(2).split())
    assert main(["dpsgd", *args]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert printed == shown
