"""The house rules of the code base (issue 37), each a check that fails on a planted breach.

- The stages of ``debias_bench`` import downward only: import-linter's layers contract in
  pyproject.toml (``scripts/lint_imports.py``), and it fails when an upward import is planted;
  argparse is imported by ``cli`` and ``commands`` only, and no command imports another.
- No import cycle anywhere in the package (type-checking imports included).
- First-party imports inside function bodies: at most 12, each for an optional or heavy
  dependency and saying so in a comment on its line.
- At most 6 modules directly in ``bench/``; no module over 500 lines.
- Every package folder is one the wheel installs (pyproject.toml lists them one by one).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "lint_imports.py"
FOLDERS = ("bench", "methods", "datasets")

pytest.importorskip("importlinter", reason="import-linter is in the test extra")


def lint(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300
    )


def test_the_stages_import_downward_only() -> None:
    proc = lint()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Contracts: 3 kept, 0 broken." in proc.stdout


def test_a_planted_upward_import_breaks_the_contract() -> None:
    proc = lint("--plant", "debias_bench.data.contract=debias_bench.launchers.scheduler")
    assert proc.returncode != 0
    assert "debias_bench.data is not allowed to import debias_bench.launchers" in proc.stdout


@pytest.mark.parametrize("stage", ["debias_bench.launchers.local", "debias_bench.session.run"])
def test_a_planted_argparse_import_below_the_command_layer_breaks_it(stage: str) -> None:
    """Issue 49: only cli.py and commands/ parse a command line; a launcher declares typed
    options, the session layer takes typed requests."""
    proc = lint("--plant", f"{stage}=argparse")
    assert proc.returncode != 0
    assert "argparse in the command layer only BROKEN" in proc.stdout


def test_a_planted_import_of_one_command_by_another_breaks_it() -> None:
    proc = lint("--plant", "debias_bench.commands.reproduce=debias_bench.commands.run")
    assert proc.returncode != 0
    assert "no command imports another BROKEN" in proc.stdout


CYCLES = """
import sys, grimp
graph = grimp.build_graph("debias_bench", include_external_packages=False)
edges = {m: graph.find_modules_directly_imported_by(m) - {"debias_bench"} for m in graph.modules}
state, stack, cycles = {}, [], []
def visit(m):
    state[m] = 1; stack.append(m)
    for n in sorted(edges.get(m, ())):
        if state.get(n) == 1:
            cycles.append(stack[stack.index(n):] + [n])
        elif n not in state:
            visit(n)
    stack.pop(); state[m] = 2
sys.setrecursionlimit(10000)
for m in sorted(graph.modules):
    if m not in state:
        visit(m)
print(len(graph.modules))
for c in cycles: print(" -> ".join(c))
"""


def test_no_import_cycle() -> None:
    """Every module of the three folders, laid out as the one package they install as."""
    code = f"import sys; sys.path.insert(0, {str(REPO / 'scripts')!r})\n" + (
        "import tempfile, pathlib, lint_imports\n"
        "tmp = tempfile.mkdtemp(); lint_imports.layout(pathlib.Path(tmp))\n"
        "sys.path.insert(0, tmp)\n" + CYCLES
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd="/"
    )
    assert proc.returncode == 0, proc.stderr
    modules, *cycles = proc.stdout.splitlines()
    assert int(modules) > 150  # bench/, methods/ and datasets/ were all read
    assert cycles == []


def _function_imports() -> list[tuple[str, int, str]]:
    """(file, line, text) of each first-party import made inside a function."""
    found = []
    for folder in FOLDERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            source = path.read_text()
            lines = source.splitlines()
            for fn in ast.walk(ast.parse(source)):
                if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                for node in ast.walk(fn):
                    if not isinstance(node, ast.Import | ast.ImportFrom):
                        continue
                    module = getattr(node, "module", None) or ""
                    names = [a.name for a in node.names]
                    first_party = (
                        isinstance(node, ast.ImportFrom)
                        and (node.level > 0 or module.startswith("debias_bench"))
                    ) or (
                        isinstance(node, ast.Import)
                        and any(n.startswith("debias_bench") for n in names)
                    )
                    if first_party:
                        rel = str(path.relative_to(REPO))
                        found.append((rel, node.lineno, lines[node.lineno - 1]))
    return sorted(set(found))


def test_imports_inside_functions_are_few_and_say_why() -> None:
    found = _function_imports()
    assert len(found) <= 12, "\n".join(f"{f}:{n}: {t.strip()}" for f, n, t in found)
    unexplained = [f"{f}:{n}" for f, n, text in found if "#" not in text]
    assert not unexplained, f"say why each import waits for its function: {unexplained}"


def test_the_package_root_is_small_and_no_module_is_long() -> None:
    root = sorted(p.name for p in (REPO / "bench").glob("*.py"))
    assert len(root) <= 6, root
    long = {
        str(p.relative_to(REPO)): n
        for folder in FOLDERS
        for p in (REPO / folder).rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 500
    }
    assert long == {}, long


def test_every_package_folder_is_installed() -> None:
    """A sub-package left out of ``[tool.setuptools] packages`` is missing from the wheel and
    the sdist (tox installs the sdist): its imports fail there, not in a checkout."""
    setup = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = set()
    for package, folder in setup["package-dir"].items():
        for init in (REPO / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(REPO / folder).parts
            if "__pycache__" not in parts:
                found.add(".".join((package, *parts)))
    assert found == set(setup["packages"])
