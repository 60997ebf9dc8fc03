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
