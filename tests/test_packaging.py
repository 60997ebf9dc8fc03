"""What users install: build the wheel, install it non-editable into a fresh virtual environment and run
the README's main command from outside the source tree.

The editable checkout hides packaging mistakes (a subpackage missing from the wheel imports fine from the
tree), so this test never imports the package under test from the repository: every check runs in a
subprocess of the new environment, with the working directory outside the tree.  The environment reuses
the already-installed dependencies without network: a ``.pth`` line puts this interpreter's
site-packages on its path.  Directories added that way do not have their own ``.pth`` files processed,
so the editable install's import hook (``__editable__*.pth``) is not active there, and a module missing
from the wheel cannot be found in the checkout; where each module was imported from is asserted too.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import site
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("accountant", "mechanisms", "conversions")


def _source_packages() -> set[str]:
    """Every directory with an ``__init__.py`` below the three import packages, as dotted names."""
    out = set()
    for top in PACKAGES:
        for init in (ROOT / top).rglob("__init__.py"):
            if "__pycache__" in init.parts:
                continue
            out.add(".".join(init.parent.relative_to(ROOT).parts))
    return out


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv python, venv bin dir, wheel path) for a fresh non-editable install of the built wheel."""
    tmp = tmp_path_factory.mktemp("wheel")
    # build from a clean copy: a stale build/ directory in the checkout would hide a missing package
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis", "results"))
    dist = tmp / "dist"
    # as a user builds it: pip's isolated build environment (the build requirements come from the
    # package index; setup.py's kernel warm-up runs inside it), run by a bare interpreter that has none
    # of the dependencies (so the warm-up cannot borrow them from outside the build environment), or,
    # where no index is reachable, this interpreter's environment (--no-build-isolation)
    builder = tmp / "builder"
    venv.EnvBuilder(system_site_packages=False, with_pip=True, clear=True).create(builder)
    builder_py = (builder / ("Scripts" if os.name == "nt" else "bin")
                  / ("python.exe" if os.name == "nt" else "python"))

    def build_wheel(*extra, py=builder_py):
        return subprocess.run(
            [str(py), "-m", "pip", "wheel", str(src), "--no-deps", "-v", *extra, "-w", str(dist)],
            capture_output=True, text=True, cwd=tmp, timeout=900)

    build = build_wheel()
    if build.returncode != 0 and ("No matching distribution" in build.stderr
                                  or "Could not find a version" in build.stderr):
        build = build_wheel("--no-build-isolation", py=sys.executable)
    if build.returncode != 0 and "No module named" in build.stderr and "wheel" in build.stderr:
        pytest.skip(f"cannot build wheels here: {build.stderr.strip()[-200:]}")
    assert build.returncode == 0, build.stderr
    assert "numba kernels precompiled" in build.stdout + build.stderr, (build.stdout + build.stderr)[-2000:]
    (wheel,) = dist.glob("dpcert-*.whl")
    env_dir = tmp / "venv"
    venv.EnvBuilder(system_site_packages=False, with_pip=False, clear=True).create(env_dir)
    bindir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    py = bindir / ("python.exe" if os.name == "nt" else "python")
    venv_site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip()
    deps = [p for p in site.getsitepackages() + [site.getusersitepackages()] if os.path.isdir(p)]
    Path(venv_site, "_dpcert_test_deps.pth").write_text("\n".join(deps) + "\n")
    inst = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps",
                           "--no-build-isolation", str(wheel)],
                          capture_output=True, text=True, cwd=tmp, timeout=600)
    assert inst.returncode == 0, inst.stderr
    return py, bindir, wheel, tmp


def _run(cmd, cwd, timeout=600):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSTARTUP")}
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=timeout, env=env)


def test_wheel_holds_every_subpackage_and_no_benchmarks(installed):
    _, _, wheel, _ = installed
    names = zipfile.ZipFile(wheel).namelist()
    in_wheel = {os.path.dirname(n).replace("/", ".") for n in names if n.endswith("/__init__.py")}
    in_wheel |= {n[: -len("/__init__.py")].replace("/", ".") for n in names if n.endswith("/__init__.py")}
    missing = _source_packages() - in_wheel
    assert not missing, f"subpackages missing from the wheel: {sorted(missing)}"
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert tops == set(PACKAGES), f"unexpected top-level names installed: {sorted(tops - set(PACKAGES))}"
    assert "accountant/claims/published.json" in names


def test_installed_package_imports_from_the_venv(installed):
    py, _, _, tmp = installed
    code = ("import accountant, mechanisms, conversions, mechanisms.svt, sys;"
            "print(accountant.__file__); print(mechanisms.svt.__file__)")
    r = _run([str(py), "-c", code], cwd=tmp)
    assert r.returncode == 0, r.stderr
    for line in r.stdout.split():
        assert str(tmp / "venv") in line, f"imported from outside the fresh install: {line}"
    r = _run([str(py), "-c", "import benchmarks"], cwd=tmp)
    assert r.returncode != 0 or str(tmp / "venv") not in r.stdout  # never installed by dpcert


def test_installed_cli_runs_the_readme_main_command(installed):
    _, bindir, _, tmp = installed
    dpcert = str(bindir / "dpcert")
    r = _run([dpcert, "--version"], cwd=tmp)
    assert r.returncode == 0 and r.stdout.startswith("dpcert "), r.stderr
    r = _run([dpcert, "mechanisms"], cwd=tmp)
    assert r.returncode == 0, r.stderr
    assert "gaussian_svt" in r.stdout and "subsampled_gaussian" in r.stdout
    # the README's main job, from outside the source tree
    r = _run([dpcert, "dpsgd", "--sample-rate", "0.01", "--sigma", "1.1", "--steps", "10000",
              "--delta", "1e-5"], cwd=tmp)
    assert r.returncode == 0, r.stderr
    assert "-DP under add/remove" in r.stdout
    # the shipped claims are found without a source checkout
    r = _run([dpcert, "audit", "--help"], cwd=tmp)
    assert r.returncode == 0, r.stderr
    r = _run([str(bindir / "python"), "-c",
              "from accountant.audit import PUBLISHED_CLAIMS, load_claims;"
              "print(len(load_claims(PUBLISHED_CLAIMS)))"],
             cwd=tmp)
    assert r.returncode == 0 and int(r.stdout) > 0, r.stderr


def test_wheel_ships_kernels_the_first_query_loads_without_compiling(installed):
    """The wheel built here carries numba's cache of the kernels (``setup.py`` compiles them at build
    time), and the README's main query in the fresh install loads every kernel it runs from that cache:
    numba reports cache hits and no cache miss (a miss is a compilation)."""
    py, _, wheel, tmp = installed
    names = zipfile.ZipFile(wheel).namelist()
    shipped = [n for n in names if n.endswith((".nbi", ".nbc"))]
    assert any(n.startswith("mechanisms/__pycache__/_poisson_kernels.sg_log_mgf") for n in shipped), shipped
    code = (
        "from accountant import PrivacyAccountant\n"
        "from mechanisms._poisson_kernels import sg_log_mgf, sg_phase_moment\n"
        "from mechanisms._sg_line_kernels import sg_line_log_mgf\n"
        "from mechanisms._sg_envelope_kernels import sg_envelope_constants\n"
        "from conversions._kernels import grid_assemble, trapezoid_sum\n"
        "PrivacyAccountant().step(sigma=1.1, sample_rate=0.01, steps=10000).epsilon(1e-5)\n"
        "for k in (sg_log_mgf, sg_line_log_mgf, sg_phase_moment, sg_envelope_constants, grid_assemble,\n"
        "          trapezoid_sum):\n"
        "    s = k.stats\n"
        "    print(k.__name__, sum(s.cache_hits.values()), sum(s.cache_misses.values()), s.cache_path)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSTARTUP", "NUMBA_CACHE_DIR")}
    r = subprocess.run([str(py), "-c", code], capture_output=True, text=True, cwd=tmp, timeout=600, env=env)
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.strip().splitlines()]
    assert len(rows) == 6, r.stdout
    for name, hits, misses, path in rows:
        assert int(misses) == 0 and int(hits) >= 1, f"{name} was compiled, not loaded: {r.stdout}"
        assert str(tmp / "venv") in path, f"{name} cache outside the install: {path}"


def _setup_module():
    spec = importlib.util.spec_from_file_location("dpcert_setup", ROOT / "setup.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # defines the hook; setup() runs only as __main__
    return mod


def test_precompile_step_never_breaks_a_build(tmp_path, monkeypatch, capsys):
    """The build hook's warm-up is best effort: turned off by DPCERT_PRECOMPILE=0, and a tree whose
    packages cannot be imported from the build directory only prints a note (the install goes on)."""
    setup_mod = _setup_module()
    monkeypatch.setenv("DPCERT_PRECOMPILE", "0")
    # a cache left by an earlier build of the tree is removed even then: numba keys a kernel's cache on
    # its own file only, so a kernel inlining another module's helper could keep that helper's old code
    stale = tmp_path / "mechanisms" / "__pycache__"
    stale.mkdir(parents=True)
    (stale / "_sg_line_kernels.sg_line_log_mgf-1.py311.nbi").write_bytes(b"old")
    (stale / "_sg_line_kernels.sg_line_log_mgf-1.py311.1.nbc").write_bytes(b"old")
    (stale / "subsampled.cpython-311.pyc").write_bytes(b"kept")
    assert setup_mod.precompile_kernels(str(tmp_path)) is False
    assert "not precompiled" in capsys.readouterr().err
    assert sorted(p.name for p in stale.iterdir()) == ["subsampled.cpython-311.pyc"]
    (stale / "subsampled.cpython-311.pyc").unlink()
    stale.rmdir()
    (tmp_path / "mechanisms").rmdir()
    monkeypatch.setenv("DPCERT_PRECOMPILE", "1")
    # an empty tree: accountant imports from the editable checkout (or not at all), never from tmp_path
    assert setup_mod.precompile_kernels(str(tmp_path)) is False
    err = capsys.readouterr().err
    assert "not precompiled" in err and ("not from the build tree" in err or "No module named" in err), err
    assert not list(tmp_path.rglob("*.nbi"))


def test_import_and_version_do_not_load_the_numerical_core():
    """``import accountant`` and ``dpcert --version`` stay cheap: numpy, scipy and numba load on first use."""
    code = ("import sys, accountant, conversions; from accountant import _entry;"
            "heavy = [m for m in ('numpy', 'scipy', 'numba') if m in sys.modules]; print(heavy)")
    r = _run([sys.executable, "-c", code], cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", r.stdout
    r = _run([sys.executable, "-c", "import accountant; print(accountant.PrivacyAccountant.__name__,"
              " accountant.__version__)"], cwd=ROOT)
    assert r.returncode == 0 and r.stdout.split()[0] == "PrivacyAccountant", r.stderr
