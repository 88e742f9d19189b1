"""A built-in method is a torch-free declaration and a trainer imported on first use
(docs/architecture.md, What imports torch)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from debias_bench.config.method_params import method_params
from debias_bench.config.run_config import method_yaml
from debias_bench.registry import METHODS, Registry

#: the built-in methods, one declaration module each (a test may have registered a plugin's)
BUILT_IN = sorted(
    path.stem
    for path in (Path(__file__).resolve().parents[2] / "methods" / "declared").glob("*.py")
    if path.stem not in ("__init__", "shared")
)


@pytest.mark.parametrize("method", BUILT_IN)
def test_a_trainer_trains_with_the_params_its_declaration_declares(method: str) -> None:
    entry = METHODS.entry(method)
    assert entry.where == f"debias_bench.methods.{method}:{METHODS.get(method).__name__}"
    assert METHODS.get(method).Params is method_params(method)
    assert method_params(method).__module__ in (
        f"debias_bench.methods.declared.{method}",
        "debias_bench.config.hparams",  # Vanilla: the engine's keys only
    )
    assert method_yaml(method)["defaults"]  # found beside the trainer, not imported for it


def test_declaring_every_method_imports_no_trainer() -> None:
    """The names, metadata, params and YAML of every method, read in a fresh interpreter,
    import no trainer module; looking one up imports that one alone."""
    code = """
import json, sys
from debias_bench.registry import METHODS
from debias_bench.config.method_params import method_params
from debias_bench.config.run_config import method_hparams, method_yaml

read = {m: (METHODS.entry(m).display_name, len(method_hparams(m)), bool(method_yaml(m)))
        for m in METHODS.names()}
def trainers():
    return sorted(
        name for name in sys.modules
        if name.startswith("debias_bench.methods.") and ".declared" not in name
    )
before = trainers()
METHODS.get("vanilla")
print(json.dumps({"read": len(read), "before": before, "after": trainers()}))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["read"] == len(BUILT_IN) == 14
    assert out["before"] == []
    assert "debias_bench.methods.vanilla" in out["after"]


def test_a_declared_entry_is_imported_once_and_named_where_it_lives() -> None:
    registry: Registry[object] = Registry("thing")
    registry.declare("json_loads", "json:loads", display_name="loads")
    entry = registry.entry("json_loads")
    assert not entry.loaded and entry.module == "json"
    assert registry.registered_as(json.loads) is None  # looking does not import
    assert registry.get("json_loads") is json.loads and entry.loaded
    assert registry.registered_as(json.loads) == "json_loads"
    with pytest.raises(ValueError, match="is already registered"):
        registry.declare("json_loads", "json:dumps", display_name="dumps")
    with pytest.raises(ValueError, match="not 'module:attribute'"):
        registry.declare("bad", "json.loads", display_name="bad")
