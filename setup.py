"""Build hook of dpcert: ship the numba kernels compiled for the machine that builds the package.

The metadata lives in ``pyproject.toml``; this file only extends ``build_py``.  After the packages are
copied to the build directory (or, for an editable install, in the source tree), it runs the warm-up
queries of ``accountant.warmup`` there in a subprocess, so that numba writes its on-disk cache
(``__pycache__/*.nbi``, ``*.nbc``) beside the sources and the wheel carries it.  numba keys that cache
on a hash of the source file's contents, the function's bytecode, the Python and numba versions and
the CPU (name and features): a wheel installed on the machine (or an identical one) that built it loads
the compiled kernels on the first query; anywhere else numba ignores the cache and compiles on first use,
as without it.  The hash covers only the kernel's own file: a kernel that inlines a helper from another
module (the line and envelope kernels take ``_poisson_kernels``' helpers) would keep the helper's old
machine code after that module changed.  So the step first removes every cache file under the tree it
builds (a reused ``build/lib``, or an editable checkout after a pull) and compiles afresh: the cache is
never trusted for anything but machine code of the same sources.

Nothing here can break an install: when numba cannot be imported in the build environment, or the
warm-up fails or takes longer than ``DPCERT_PRECOMPILE_TIMEOUT`` seconds (default 900), a one-line note
is printed and the build goes on without the cache.  ``DPCERT_PRECOMPILE=0`` turns the step off.
"""

from __future__ import annotations

import os
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

_PACKAGES = ("accountant", "mechanisms", "conversions")


def _note(msg: str) -> None:
    print(f"dpcert build: {msg}", file=sys.stderr, flush=True)


def precompile_kernels(root: str) -> bool:
    """Run the warm-up queries on the packages under ``root`` so that numba caches their kernels there.

    Returns True when the kernels were compiled from ``root`` itself.  Cache files already under the
    packages of ``root`` are removed first (also when the step is turned off): they may hold helpers of
    an older version of another module (module docstring).
    """
    for pkg in _PACKAGES:
        cache = os.path.join(root, pkg, "__pycache__")
        for name in os.listdir(cache) if os.path.isdir(cache) else ():
            if name.endswith((".nbi", ".nbc")):
                try:
                    os.remove(os.path.join(cache, name))
                except OSError:
                    pass
    if os.environ.get("DPCERT_PRECOMPILE", "1").strip() in ("0", "false", "no", "off"):
        _note("DPCERT_PRECOMPILE=0: numba kernels not precompiled (they compile on first use)")
        return False
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "NUMBA_DISABLE_JIT")}
    # root first; keep what is there (pip's isolated build environment reaches its build requirements
    # through PYTHONPATH: replacing it would hide numba and numpy from the warm-up)
    env["PYTHONPATH"] = os.pathsep.join([root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    # the packages must be imported from ``root`` (not from another install of dpcert), or the cache
    # would be written elsewhere: the subprocess checks that before compiling anything
    code = (
        "import os, sys\n"
        "import accountant, mechanisms, conversions\n"
        f"root = os.path.realpath({root!r})\n"
        "for m in (accountant, mechanisms, conversions):\n"
        "    if not os.path.realpath(m.__file__).startswith(root + os.sep):\n"
        "        sys.exit('imported ' + m.__name__ + ' from ' + m.__file__ + ', not from the build tree')\n"
        "from accountant.warmup import warm_up\n"
        "warm_up(verbose=False)\n"
    )
    try:
        timeout = float(os.environ.get("DPCERT_PRECOMPILE_TIMEOUT", "900"))
    except ValueError:
        timeout = 900.0
    try:
        r = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True,
                           timeout=timeout)
    except (OSError, subprocess.SubprocessError) as exc:
        _note(f"numba kernels not precompiled ({type(exc).__name__}: {exc}); they compile on first use")
        return False
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
        _note(f"numba kernels not precompiled ({last}); they compile on first use")
        return False
    _note("numba kernels precompiled for this machine (cached beside the sources)")
    return True


class BuildPyWithKernels(build_py):
    """``build_py`` followed by :func:`precompile_kernels` on the built (or, editable, the source) tree."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            root = os.path.dirname(os.path.abspath(__file__))
        else:
            root = os.path.abspath(self.build_lib)
        if all(os.path.isdir(os.path.join(root, p)) for p in _PACKAGES):
            precompile_kernels(root)


if __name__ == "__main__":  # setuptools runs this file as __main__; tests import it
    setup(cmdclass={"build_py": BuildPyWithKernels})
