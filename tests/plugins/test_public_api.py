"""The plugin API is the package face: ``from debias_bench import Method, hparam, ...``.

Every public name resolves (lazily: importing the package imports no torch), the type
checkers and the docs see the same names, and the module paths of the flat layout before the
stage packages (2026-11-26) still import, for one release, with a DeprecationWarning naming
the new home."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import debias_bench

FACE = Path(debias_bench.__file__)


def test_every_public_name_resolves_to_an_object_of_its_home_module() -> None:
    for name in debias_bench.__all__:
        value = getattr(debias_bench, name)
        assert value is not None, name
    assert debias_bench.Method.__module__ == "debias_bench.training.method"
    assert debias_bench.register_method.__self__ is debias_bench.METHODS  # type: ignore[attr-defined]


def test_the_type_checking_block_names_the_same_api() -> None:
    """What mypy and the docs read (``if TYPE_CHECKING:``) is what ``__getattr__`` serves."""
    tree = ast.parse(FACE.read_text())
    typed = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING"
        for stmt in node.body
        if isinstance(stmt, ast.ImportFrom)
        for alias in stmt.names
    }
    assert typed == set(debias_bench.__all__) - {"__version__"}


def test_importing_the_package_imports_no_torch() -> None:
    code = "import sys, debias_bench; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Methd'"):
        _ = debias_bench.Methd  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("old", "name", "home"),
    [
        ("debias_bench.method", "Method", "debias_bench.training.method"),
        ("debias_bench.hparams", "hparam", "debias_bench.config.hparams"),
        ("debias_bench.store", "RunStore", "debias_bench.runs.store"),
        ("debias_bench.launchers.plugins", "import_plugins", "debias_bench.plugins.loading"),
    ],
)
def test_an_old_module_path_still_imports_with_a_warning(old: str, name: str, home: str) -> None:
    code = (
        "import warnings, importlib\n"
        "warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        f"    module = importlib.import_module({old!r})\n"
        f"print(module.__name__, getattr(module, {name!r}).__module__)\n"
        "print(*[str(w.message) for w in caught if w.category is DeprecationWarning], sep='|')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    first, warned = out.stdout.splitlines()
    assert first.split()[0] == home
    assert f"{old} moved to {home}" in warned


def test_a_module_that_became_a_package_forwards_its_names_with_a_warning() -> None:
    code = (
        "import warnings\n"
        "warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    from debias_bench.config import make_config\n"
        "from debias_bench.config.run_config import make_config as home\n"
        "print(make_config is home, sum('config.make_config moved' in str(w.message) "
        "for w in caught))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "1"]  # warned once


def test_names_a_module_offered_on_2026_11_26_still_import_with_a_warning():
    """Issue 49: a plugin that imported ``ratio_dirname`` from the dataset family module (its
    re-export, lost when the split store moved out) loaded no more; every such name forwards
    to its new home, with a DeprecationWarning, for one release."""
    import importlib

    module = importlib.import_module("debias_bench.data.family")
    for name, home in debias_bench.FORMER_NAMES["debias_bench.data.family"].items():
        with pytest.warns(DeprecationWarning, match=f"moved to {home}.{name}"):
            value = getattr(module, name)
        assert value is getattr(importlib.import_module(home), name)
    with pytest.raises(AttributeError):
        module.no_such_name  # noqa: B018
    # the flat path of 2026-11-25 too, as the plugin wrote it
    code = "from debias_bench.family import ratio_dirname; print(ratio_dirname(5))"
    warned = [sys.executable, "-W", "always::DeprecationWarning", "-c", code]
    proc = subprocess.run(warned, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "5pct", proc.stderr
    assert "debias_bench.data.family.ratio_dirname moved to" in proc.stderr
