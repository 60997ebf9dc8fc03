"""Saved accountant state: plain, versioned JSON, written atomically; loading never executes code."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

FORMAT = "dpcert-accountant"
FORMAT_VERSION = 1


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically: temp file in the same folder, fsync, rename.

    A crash at any point leaves either the old file or the new one, never a truncated file.
    """
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:  # make the rename durable
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:  # pragma: no cover - platforms without directory fsync
        pass


def dump_state(state: dict[str, Any]) -> str:
    doc = {"format": FORMAT, "version": FORMAT_VERSION, **state}
    return json.dumps(doc, indent=1, allow_nan=False, sort_keys=False) + "\n"


def load_state(path: str | os.PathLike) -> dict[str, Any]:
    """Read and validate a state file; ``ValueError`` with the reason if it is not usable."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"state file {str(path)!r} does not exist") from None
    except UnicodeDecodeError:
        raise ValueError(f"state file {str(path)!r} is not UTF-8 text (corrupted?)") from None
    try:
        doc = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ValueError(f"state file {str(path)!r} is corrupted or truncated: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"{str(path)!r} is not a dpcert accountant state file")
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ValueError(f"state file {str(path)!r} has no valid format version")
    if version > FORMAT_VERSION:
        raise ValueError(f"state file {str(path)!r} has format version {version}, newer than this dpcert "
                         f"supports (<= {FORMAT_VERSION}); upgrade dpcert")
    if version < 1:
        raise ValueError(f"state file {str(path)!r} has invalid format version {version}")
    return doc


def _reject_constant(name: str) -> None:
    raise ValueError(f"non-standard JSON constant {name} in state file")
