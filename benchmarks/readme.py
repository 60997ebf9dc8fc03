"""Splice the generated benchmark table into README.md (between the BENCHMARK TABLE markers).

``python -m benchmarks.readme`` copies ``benchmarks/results/README_table.md`` -- written by the
benchmark suite in the same run -- into the README, so the README table is never hand-written.
"""

from __future__ import annotations

import sys
from pathlib import Path

START = "<!-- BENCHMARK TABLE START -->"
END = "<!-- BENCHMARK TABLE END -->"
ROOT = Path(__file__).resolve().parent.parent


def splice(table: Path = ROOT / "benchmarks" / "results" / "README_table.md",
           readme: Path = ROOT / "README.md") -> bool:
    """Replace the README's table block with ``table``; returns True if the README changed."""
    text = readme.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise ValueError(f"{readme} has no {START} ... {END} block")
    body = table.read_text(encoding="utf-8").strip()
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{START}\n{body}\n{END}{tail}"
    if new != text:
        readme.write_text(new, encoding="utf-8")
        return True
    return False


if __name__ == "__main__":  # pragma: no cover
    changed = splice()
    print("README.md benchmark table updated" if changed else "README.md benchmark table already current")
    sys.exit(0)
