"""Console entry point of ``dpcert``: answers ``--version`` without loading the numerical core."""

from __future__ import annotations

import sys

from ._version import __version__


def main() -> int:
    if sys.argv[1:] == ["--version"]:
        print(f"dpcert {__version__}")
        return 0
    from .cli import main as cli_main

    return cli_main()
