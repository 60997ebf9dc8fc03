"""Saved accountant state: plain, versioned JSON, written atomically; loading never executes code."""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

FORMAT = "dpcert-accountant"
FORMAT_VERSION = 1


# temp files are named ".<name>.<pid>.<random>.tmp" (mkstemp: 8 random characters [a-z0-9_])
_TMP_RE = r"^\.{name}\.(?:(\d+)\.)?[a-z0-9_]{{8}}\.tmp$"
# a temp file whose writer we cannot identify as dead is removed only once it is this old (seconds)
STALE_AFTER = 3600.0
# state files are small (a few hundred bytes per ledger entry); refuse to read anything larger
MAX_STATE_BYTES = 256 * 2**20


def _target(path: str | os.PathLike) -> Path:
    """The file a save to ``path`` must replace: ``path`` itself, or the final target of a symlink."""
    if isinstance(path, (bytes, bytearray)):
        raise TypeError("path must be a str or os.PathLike of str, not bytes")
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    text = os.fspath(path)
    if not isinstance(text, str):
        raise TypeError("path must be a str or os.PathLike of str, not bytes")
    if not text.strip():
        raise ValueError("state path must be a non-empty file path, got an empty string")
    if "\x00" in text:
        raise ValueError(f"state path {text!r} contains a NUL character")
    p = Path(text)
    if p.is_symlink():
        p = Path(os.path.realpath(p))  # keep the link: write to what it points at
    if p.is_dir():
        raise ValueError(f"state path {text!r} is a directory; give a file name")
    if p.exists() and not p.is_file():
        raise ValueError(f"state path {text!r} is not a regular file")
    return p


def _umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # pragma: no cover - not Linux
    os.umask(mask)  # pragma: no cover
    return mask  # pragma: no cover


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True  # maybe another thread of ours is saving
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True
    return True


def clean_stale_temp_files(path: str | os.PathLike) -> list[str]:
    """Remove temp files of our own naming left next to ``path`` by interrupted saves.

    A temp file is stale when the process that wrote it is gone (its pid is in the name) or, for names
    without a live-checkable pid, when it is older than ``STALE_AFTER`` seconds.  Returns the removed
    names.  Files of any other naming are never touched.
    """
    import re
    import time

    p = Path(path)
    folder = p.parent
    pattern = re.compile(_TMP_RE.format(name=re.escape(p.name)))
    removed = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    now = time.time()
    for name in names:
        m = pattern.match(name)
        if not m:
            continue
        full = folder / name
        try:
            st = full.lstat()
            if not stat.S_ISREG(st.st_mode):
                continue
            pid = int(m.group(1)) if m.group(1) else None
            stale = (pid is not None and not _pid_alive(pid)) or now - st.st_mtime > STALE_AFTER
            if stale:
                full.unlink()
                removed.append(name)
        except (OSError, ValueError):
            continue
    return removed


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically: temp file in the same folder, fsync, rename.

    A crash at any point leaves either the old file or the new one, never a truncated file.  A symlink
    is followed (its target is replaced, the link kept); an existing file keeps its permission bits (a
    new one gets 0666 minus the umask, like ``open``); temp files left by earlier interrupted saves of
    the same file are removed.  ``OSError`` messages name ``path``, not the temp file.
    """
    user = os.fspath(path) if isinstance(path, (str, os.PathLike)) else path
    target = _target(path)
    folder = target.parent
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    except OSError as exc:
        raise OSError(exc.errno, f"cannot save state: {exc.strerror}", user) from None
    clean_stale_temp_files(target)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot save state: {exc.strerror}", user) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise OSError(exc.errno, f"cannot save state: {exc.strerror}", user) from None
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
    if isinstance(path, (bytes, bytearray)) or not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    name = os.fspath(path)
    if not isinstance(name, str) or not name.strip():
        raise ValueError("state path must be a non-empty file path")
    if "\x00" in name:
        raise ValueError(f"state path {name!r} contains a NUL character")
    path = Path(name)
    try:
        if path.is_dir():
            raise ValueError(f"state file {name!r} is a directory")
        if not path.exists():
            raise ValueError(f"state file {name!r} does not exist")
        if not path.is_file():  # devices, FIFOs, sockets: reading could block or never end
            raise ValueError(f"state file {name!r} is not a regular file")
        with open(path, "rb") as fh:
            raw = fh.read(MAX_STATE_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"cannot read state file {name!r}: {exc.strerror or exc}") from None
    if len(raw) > MAX_STATE_BYTES:
        raise ValueError(f"state file {name!r} is larger than {MAX_STATE_BYTES >> 20} MiB; not a state file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"state file {name!r} is not UTF-8 text (corrupted?)") from None
    try:
        doc = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        raise ValueError(f"state file {name!r} is corrupted or truncated: {exc}") from None
    except RecursionError:
        raise ValueError(f"state file {name!r} is nested too deeply to be a state file") from None
    except ValueError as exc:  # a non-standard constant (NaN, Infinity) or too many digits
        why = "an integer with thousands of digits" if "digits" in str(exc) else str(exc)
        raise ValueError(f"state file {name!r} is not a valid state: {why}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"{name!r} is not a dpcert accountant state file")
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ValueError(f"state file {name!r} has no valid format version")
    if version > FORMAT_VERSION:
        raise ValueError(f"state file {name!r} has format version {version}, newer than this dpcert "
                         f"supports (<= {FORMAT_VERSION}); upgrade dpcert")
    if version < 1:
        raise ValueError(f"state file {name!r} has invalid format version {version}")
    return doc


def _finite_float(text: str) -> float:
    x = float(text)
    if x != x or x in (float("inf"), float("-inf")):
        raise ValueError(f"number {text[:40]} is out of the float range")
    return x


def _reject_constant(name: str) -> None:
    raise ValueError(f"non-standard JSON constant {name} in state file")
