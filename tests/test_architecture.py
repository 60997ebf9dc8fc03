"""The floor order of dpcert's import packages (README, "Architecture"), checked on the source text.

Floors, bottom to top; a module may import its own floor and the floors below, never one above:

0. ``mechanisms``            -- plug-ins: parameter records with curves (and the shared numerics);
1. ``conversions``           -- numerics turning curves into certified numbers;
2. ``accountant``            -- ledger, routes, certificates, calibration, filters, state, reports;
3. ``accountant.adaptive``   -- data algorithms (they take data and random generators);
4. the command line          -- ``accountant.cli*``, ``accountant._entry``, ``accountant.__main__``;
5. ``benchmarks``            -- the benchmark suite (source checkout only).

Every import counts, wherever it stands: module level, inside functions (a function-local import used to
hide a cycle is still an import), under ``TYPE_CHECKING``, and dynamic imports with a literal name
(``importlib.import_module("...")``, lazy-export tables, module names in string constants).  The
checker is an independent reading of the source with :mod:`ast`; it is itself tested on synthetic
modules below, so a silent parser cannot make the main test pass.
"""

from __future__ import annotations

import ast
import pathlib
import re
from collections import defaultdict

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("mechanisms", "conversions", "accountant", "benchmarks")
FLOOR_NAMES = ("mechanisms", "conversions", "accountant", "accountant.adaptive", "command line",
               "benchmarks")
CLI_MODULES = ("_entry", "__main__")

# Upward references that are not dependencies, each with its reason (keep this list short).
ALLOWED_UPWARD = {
    # ``dpcert bench`` hands its arguments to the benchmark suite of the source checkout it runs from
    # (found by path, in-process so that ``python -m benchmarks`` and ``dpcert bench`` are one program);
    # an installed dpcert has no ``benchmarks`` and says so.  (source module, target package)
    ("accountant.cli_audit", "benchmarks"),
}
# Import cycles inside one floor that remain (function-local import on one side), with the reason.
ALLOWED_CYCLES = {
    # PrivacyAccountant.compose accepts dp-accounting events (translated by dp_event), and translating a
    # sampling-without-replacement event certifies its inner composition with a PrivacyAccountant
    # ("auto" route selection lives in the accountant class).
    frozenset({"accountant.dp_event", "accountant.privacy_accountant"}),
    # the command line's sub-command modules register themselves with accountant.cli and use its
    # helpers; accountant.cli loads them by name (a plug-in registry inside the top floor)
    frozenset({"accountant.cli", "accountant.cli_audit", "accountant.cli_dpsgd", "accountant.cli_ptr",
               "accountant.cli_report", "accountant.cli_warmup"}),
}


def floor(module: str) -> int | None:
    """The floor of a dpcert module name, None for anything else (standard library, third party)."""
    parts = module.split(".")
    top = parts[0]
    if top == "mechanisms":
        return 0
    if top == "conversions":
        return 1
    if top == "accountant":
        if len(parts) > 1 and parts[1] == "adaptive":
            return 3
        if len(parts) > 1 and (parts[1].startswith("cli") or parts[1] in CLI_MODULES):
            return 4
        return 2
    if top == "benchmarks":
        return 5
    return None


def module_files(root: pathlib.Path) -> dict[str, tuple[pathlib.Path, bool]]:
    """{module name: (path, is package)} for every .py file of the packages under ``root``."""
    out = {}
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            is_pkg = parts[-1] == "__init__"
            if is_pkg:
                parts = parts[:-1]
            out[".".join(parts)] = (path, is_pkg)
    return out


def _base(module: str, is_pkg: bool, level: int) -> list[str]:
    parts = module.split(".") if is_pkg else module.split(".")[:-1]
    return parts[: len(parts) - (level - 1)] if level > 1 else parts


def _known(name: str, modules) -> str | None:
    """The longest prefix of ``name`` that is one of ``modules`` (None outside dpcert)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _in_type_checking(node: ast.AST, parents: dict) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def imports(module: str, source: str, is_pkg: bool, modules) -> list[tuple[str, int, str]]:
    """(target module, line, kind) of every reference of ``module`` to another dpcert module.

    kind: "static" (an import statement anywhere), "typing" (under ``if TYPE_CHECKING``), "dynamic"
    (``import_module`` / ``__import__`` with a literal name, a lazy-export table entry, or a string
    constant that is exactly a dpcert module's name).
    """
    tree = ast.parse(source)
    parents = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and n.body and isinstance(n.body[0], ast.Expr)
                  and isinstance(n.body[0].value, ast.Constant)}
    out: list[tuple[str, int, str]] = []

    def add(name: str | None, line: int, kind: str) -> None:
        target = _known(name, modules) if name else None
        if target is not None and target != module:
            out.append((target, line, kind))

    def absolute(name: str, package: str | None) -> str:
        if not name.startswith("."):
            return name
        level = len(name) - len(name.lstrip("."))
        base = (package or (module if is_pkg else module.rpartition(".")[0])).split(".")
        base = base[: len(base) - (level - 1)] if level > 1 else base
        rest = name.lstrip(".")
        return ".".join(base + ([rest] if rest else []))

    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            kind = "typing" if _in_type_checking(node, parents) else "static"
            if isinstance(node, ast.Import):
                for alias in node.names:
                    add(alias.name, node.lineno, kind)
                continue
            if node.level:
                base = ".".join(_base(module, is_pkg, node.level) + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                add(sub if sub in modules else base, node.lineno, kind)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            fn = ast.unparse(node.func)
            if fn.endswith("import_module") or fn == "__import__":
                pkg = None
                if len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
                    pkg = node.args[1].value
                add(absolute(node.args[0].value, pkg), node.lineno, "dynamic")
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_EXPORTS"
                                                  for t in node.targets) and isinstance(node.value, ast.Dict):
            for v in node.value.values:
                if isinstance(v, ast.Constant) and isinstance(v.value, str):
                    add(absolute(v.value, module), node.lineno, "dynamic")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            if node.value in modules:
                add(node.value, node.lineno, "dynamic")
    return sorted(set(out))


def import_graph(root: pathlib.Path = ROOT) -> tuple[dict, list[tuple[str, str, int, str]]]:
    modules = module_files(root)
    edges = []
    for mod, (path, is_pkg) in modules.items():
        for target, line, kind in imports(mod, path.read_text(encoding="utf-8"), is_pkg, modules):
            edges.append((mod, target, line, kind))
    return modules, edges


def upward(edges) -> list[tuple[str, str, int, str]]:
    return [e for e in edges if floor(e[1]) > floor(e[0])]


def _allowed(src: str, dst: str) -> bool:
    return any(src == a and (dst == b or dst.startswith(b + ".")) for a, b in ALLOWED_UPWARD)


def cycles(edges) -> list[frozenset]:
    """Strongly connected components (> 1 module) of the import graph, typing-only imports excluded."""
    graph: dict[str, set] = defaultdict(set)
    for src, dst, _, kind in edges:
        if kind != "typing":
            graph[src].add(dst)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[frozenset] = []

    def visit(v: str) -> None:  # Tarjan
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(frozenset(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    return found


def _describe(edges) -> str:
    return "\n".join(f"  {src} ({FLOOR_NAMES[floor(src)]}) line {line} imports {dst} "
                     f"({FLOOR_NAMES[floor(dst)]}) [{kind}]" for src, dst, line, kind in edges)


# ---------------------------------------------------------------------------------------------- the tree
@pytest.fixture(scope="module")
def graph():
    return import_graph()


def test_every_floor_is_read(graph):
    modules, edges = graph
    for top in PACKAGES:
        assert sum(m.split(".")[0] == top for m in modules) >= 2, top
    assert any(floor(m) == 3 for m in modules) and any(floor(m) == 4 for m in modules)
    assert len(edges) > 200  # the parser sees the imports (a broken walk would find none)


def test_no_import_runs_back_up_the_floors(graph):
    _, edges = graph
    bad = [e for e in upward(edges) if not _allowed(e[0], e[1])]
    assert not bad, "imports that run back up the floor order:\n" + _describe(bad)


@pytest.mark.parametrize("low, high", [("mechanisms", "conversions"), ("mechanisms", "accountant"),
                                       ("conversions", "accountant"), ("accountant", "accountant.adaptive")])
def test_lower_floor_never_names_a_higher_one(graph, low, high):
    """The rules the architecture states, one by one (subsets of the test above, with plain messages)."""
    _, edges = graph
    bad = [e for e in edges if floor(e[0]) == floor(low) and floor(e[1]) == floor(high)]
    assert not bad, f"{low} must not import {high}:\n" + _describe(bad)


def test_allowed_exceptions_are_still_needed(graph):
    """Every allowance names an edge that exists (a fixed one must leave the list)."""
    _, edges = graph
    for a, b in ALLOWED_UPWARD:
        assert any(src == a and _allowed(src, dst) for src, dst, _, _ in edges), (a, b)
    assert set(ALLOWED_CYCLES) <= set(cycles(edges))


def test_no_import_cycles(graph):
    _, edges = graph
    bad = [c for c in cycles(edges) if c not in ALLOWED_CYCLES]
    assert not bad, f"import cycles (hidden by function-local imports): {[sorted(c) for c in bad]}"


# ---------------------------------------------------------------------------------------------- the checker
def _fake_tree(tmp_path: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir(parents=True, exist_ok=True)
        (tmp_path / pkg / "__init__.py").write_text("")
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.parent.name == "adaptive":
            (path.parent / "__init__.py").touch()
        path.write_text(text)
    return tmp_path


@pytest.mark.parametrize("source, expected", [
    ("from conversions import rdp\n", ("conversions.rdp", "static")),
    ("def f():\n    from accountant import core\n    return core\n", ("accountant.core", "static")),
    ("class C:\n    def m(self):\n        import accountant.core\n", ("accountant.core", "static")),
    ("import importlib\ndef f():\n    return importlib.import_module('accountant.core')\n",
     ("accountant.core", "dynamic")),
    ("MODS = ('accountant.core',)\n", ("accountant.core", "dynamic")),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from conversions.rdp import X\n",
     ("conversions.rdp", "typing")),
])
def test_checker_sees_every_kind_of_upward_import(tmp_path, source, expected):
    root = _fake_tree(tmp_path, {"mechanisms/plug.py": source, "conversions/rdp.py": "",
                                 "accountant/core.py": ""})
    _, edges = import_graph(root)
    found = [(dst, kind) for src, dst, _, kind in upward(edges) if src == "mechanisms.plug"]
    assert found == [expected]


def test_checker_resolves_relative_imports_and_floors(tmp_path):
    root = _fake_tree(tmp_path, {
        "accountant/core.py": "from . import cli\nfrom ..mechanisms import plug\n",
        "accountant/cli_x.py": "from .adaptive import algo\nfrom . import core\n",
        "accountant/adaptive/algo.py": "from .. import core\nfrom ..cli_x import main\n",
        "accountant/cli.py": "", "mechanisms/plug.py": "",
    })
    _, edges = import_graph(root)
    up = {(src, dst) for src, dst, _, _ in upward(edges)}
    assert up == {("accountant.core", "accountant.cli"), ("accountant.adaptive.algo", "accountant.cli_x")}
    assert ("accountant.cli_x", "accountant.adaptive.algo") in {(s, d) for s, d, _, _ in edges}


def test_checker_finds_cycles_behind_function_local_imports(tmp_path):
    root = _fake_tree(tmp_path, {
        "accountant/a.py": "from . import b\n",
        "accountant/b.py": "def f():\n    from . import a\n    return a\n",
        "accountant/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n",
    })
    _, edges = import_graph(root)
    assert cycles(edges) == [frozenset({"accountant.a", "accountant.b"})]


# ---------------------------------------------------------------------------------------------- sources
# Modules that still cite the project's internal spec / seed files (none left).
SPEC_CITATIONS_LEFT: set[str] = set()
_SPEC = re.compile(r"\b(spec|seed) \d{2,3}\b|shared/(spec|seeds)|\[THESIS", re.I)


def _library_files():
    for pkg in ("mechanisms", "conversions", "accountant"):
        yield from sorted((ROOT / pkg).rglob("*.py"))


def test_docstrings_cite_sources_users_can_follow():
    """Papers (docs/references.md) and shipped derivations, not the project's internal spec/seed files."""
    offenders = {}
    for path in _library_files():
        rel = path.relative_to(ROOT).as_posix()
        hits = [i + 1 for i, line in enumerate(path.read_text(encoding="utf-8").splitlines())
                if _SPEC.search(line) and "--seed" not in line]
        if hits:
            offenders[rel] = hits
    assert set(offenders) <= SPEC_CITATIONS_LEFT, {k: v for k, v in offenders.items()
                                                  if k not in SPEC_CITATIONS_LEFT}


def test_cited_derivations_exist():
    cited = set()
    for path in _library_files():
        cited |= set(re.findall(r"docs/derivations/([a-z0-9-]+\.md)", path.read_text(encoding="utf-8")))
    assert cited, "no docstring cites a derivation (the pattern is broken?)"
    missing = sorted(c for c in cited if not (ROOT / "docs" / "derivations" / c).is_file())
    assert not missing
    assert (ROOT / "docs" / "references.md").is_file()


# ---------------------------------------------------------------------------------------------- sizes
#: "no library module above ~500 lines": the bound, with a margin for the last few
MAX_MODULE_LINES = 550
# modules not yet split by concern (each to leave this list when it is)
LONG_MODULES_LEFT: set[str] = set()


def test_library_modules_are_small():
    """Small modules with one job: every library module has at most MAX_MODULE_LINES lines."""
    sizes = {p.relative_to(ROOT).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
             for p in _library_files()}
    long = {k: v for k, v in sizes.items() if v > MAX_MODULE_LINES}
    assert set(long) <= LONG_MODULES_LEFT, {k: v for k, v in long.items() if k not in LONG_MODULES_LEFT}
    assert LONG_MODULES_LEFT <= set(long), LONG_MODULES_LEFT - set(long)  # a split module leaves the list
