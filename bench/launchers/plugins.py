"""Modules that register extra methods or datasets, imported in every process of a sweep.

A method or dataset that lives outside the package (a user's own, or a test's) is registered
when its module is imported. The sweep's own process has imported it; a worker process (a
local subprocess or a SLURM job) must import it again. :func:`plugins_for` lists those modules
(and the ``sys.path`` entries that find them); ``BENCH_PLUGINS=mod1,mod2`` names more, for
``bench`` itself to import (``BENCH_PLUGINS=my_methods bench run --methods mine ...``).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable
from pathlib import Path

from debias_bench.config import RunConfig
from debias_bench.errors import ConfigError
from debias_bench.registry import DATASETS, METHODS

PLUGINS_ENV = "BENCH_PLUGINS"


def env_plugins() -> list[str]:
    return [m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(",") if m.strip()]


def import_plugins(names: Iterable[str] | None = None, paths: Iterable[str] = ()) -> list[str]:
    """Import ``names`` (default: ``$BENCH_PLUGINS``) after putting ``paths`` on sys.path."""
    for path in paths:
        if path not in sys.path:
            sys.path.insert(0, path)
    names = env_plugins() if names is None else list(names)
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise ConfigError(
                f"cannot import plugin module {name!r}: {exc}",
                hint=f"check {PLUGINS_ENV} and PYTHONPATH",
            ) from exc
    return names


def _import_root(module: str) -> str | None:
    """The sys.path entry from which ``module`` was imported."""
    file = getattr(sys.modules.get(module), "__file__", None)
    if not file:
        return None
    root = Path(file).resolve().parent
    depth = module.count(".") + (Path(file).name == "__init__.py")
    for _ in range(depth):
        root = root.parent
    return str(root)


def plugins_for(configs: Iterable[RunConfig]) -> tuple[list[str], list[str]]:
    """(modules, sys.path entries) a worker needs to find every method and dataset of
    ``configs``: ``$BENCH_PLUGINS`` plus the modules outside the package that registered them."""
    modules = env_plugins()
    for config in configs:
        for cls in (METHODS.get(config.method), DATASETS.get(config.dataset)):
            module = cls.__module__
            if not module.startswith("debias_bench") and module not in (*modules, "__main__"):
                modules.append(module)
    paths = []
    for module in modules:
        root = _import_root(module)
        if root and root not in paths:
            paths.append(root)
    return modules, paths
