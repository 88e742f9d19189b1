"""Modules that register extra methods or datasets, imported in every process of a sweep.

A method or dataset that lives outside the package (a user's own, or a test's) is registered
when its module is imported. ``BENCH_PLUGINS`` names them, comma-separated, as module names
(found on ``sys.path``/``PYTHONPATH``) or as paths to ``.py`` files (no PYTHONPATH needed)::

    BENCH_PLUGINS=my_methods,./plugins/my_dataset.py bench run --methods mine ...

``bench`` imports them before any command. A worker process (a local subprocess or a Slurm
job) must import them again: :func:`plugins_for` lists what it needs (the ``BENCH_PLUGINS``
entries, with paths made absolute, plus the modules outside the package that registered the
runs' methods and datasets, as a file path when they were loaded from one). Any exception
while importing a plugin is a ConfigError naming the plugin and the error.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from debias_bench.errors import ConfigError
from debias_bench.registry import DATASETS, METHODS

if TYPE_CHECKING:  # a plugin list is read by every command, `bench --help` too: no torch
    from debias_bench.config.run_config import RunConfig

PLUGINS_ENV = "BENCH_PLUGINS"
#: a plugin given by name: a dotted module name (anything else with a ``/`` is a path)
MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
#: debias-bench's own modules (the frames an import error is not located in)
PACKAGE = "debias_bench"
#: module name -> the file it was loaded from, for plugins given as paths
_FROM_PATH: dict[str, str] = {}


def env_plugins() -> list[str]:
    return [m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(",") if m.strip()]


def is_path(entry: str) -> bool:
    """A ``.py`` file or anything with a path separator; otherwise a module name."""
    return entry.endswith(".py") or "/" in entry or os.sep in entry


def import_plugins(names: Iterable[str] | None = None, paths: Iterable[str] = ()) -> list[str]:
    """Import ``names`` (default: ``$BENCH_PLUGINS``; module names or ``.py`` paths) after
    putting ``paths`` on sys.path."""
    for path in paths:
        if path not in sys.path:
            sys.path.insert(0, path)
    names = env_plugins() if names is None else list(names)
    for name in names:
        import_plugin(name)
    return names


def import_plugin(entry: str) -> str:
    """Import one plugin (module name or file path); returns its module name. An entry that
    is neither (``..``, ``..mod``, ``a b``) or a plugin that fails, a name it registers
    included (``register_method("../x")``: ``Registry.register``), is a ConfigError."""
    if not is_path(entry) and not MODULE_NAME.fullmatch(entry):
        raise ConfigError(
            f"plugin {entry!r} in {PLUGINS_ENV} is neither a module name (pkg.module) nor a "
            "path to a .py file",
            hint="give a module on PYTHONPATH (my_methods) or a file (./plugins/my_methods.py)",
        )
    try:
        if is_path(entry):
            return _import_file(Path(entry).expanduser(), entry)
        importlib.import_module(entry)
        return entry
    except ConfigError:
        raise
    except ModuleNotFoundError as exc:
        if exc.name and entry.split(".")[0] == exc.name.split(".")[0]:
            raise ConfigError(
                f"cannot import plugin {entry!r}: no module named {exc.name!r}",
                hint=f"check {PLUGINS_ENV} and PYTHONPATH, or give the path to its .py file "
                "(a path needs no PYTHONPATH)",
            ) from exc
        raise _failed(entry, exc) from exc
    except (Exception, SystemExit) as exc:  # a plugin's own bug: name it, no traceback
        raise _failed(entry, exc) from exc


def _failed(entry: str, exc: BaseException) -> ConfigError:
    """The error naming ``entry``, ``exc`` and the line that raised it: the deepest frame
    outside debias-bench's own modules (the plugin's call that bench refused, such as a name
    ``register_method`` does not take), else the deepest."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    outside = [
        f for f in frames if not str(f.tb_frame.f_globals.get("__name__")).startswith(PACKAGE)
    ]
    where = ""
    if frames:
        last = (outside or frames)[-1]
        where = f" (at {last.tb_frame.f_code.co_filename}:{last.tb_lineno})"
    return ConfigError(
        f"plugin {entry!r} failed to import: {type(exc).__name__}: {exc}{where}",
        hint=f"fix the plugin or remove it from {PLUGINS_ENV}",
    )


def _module_name(path: Path) -> str:
    """The name a plugin file is imported under: the same in every process, whatever its
    working directory or sys.path (a name that depended on them imported one file twice, under
    two names, and its registrations clashed)."""
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:8]
    safe = "".join(c if c.isalnum() else "_" for c in path.stem)
    return f"bench_plugin_{safe}_{digest}"


def _loaded_from(path: Path) -> str | None:
    """The module already imported from ``path`` (under any name), if one is."""
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if file and Path(file).resolve() == path:
            return name
    return None


def _import_file(path: Path, entry: str = "") -> str:
    """Import the plugin file at ``path`` (``entry``: as its plugin list gives it)."""
    path = path.resolve()
    given = f" ({PLUGINS_ENV} entry {entry!r})" if entry and entry != str(path) else ""
    if path.is_dir():
        raise ConfigError(
            f"plugin {path}{given} is a folder, not a .py file",
            hint=f"check the paths in {PLUGINS_ENV}",
        )
    if not path.is_file():
        raise ConfigError(
            f"plugin file {path}{given} does not exist", hint=f"check the paths in {PLUGINS_ENV}"
        )
    loaded = _loaded_from(path)
    if loaded is not None:  # imported already: by $BENCH_PLUGINS, a warm worker, or by name
        _FROM_PATH.setdefault(loaded, str(path))
        return loaded
    name = _module_name(path)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"plugin {path} is not a Python module", hint="give a .py file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before running it: dataclasses and pickling look it up
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    _FROM_PATH[name] = str(path)
    return name


def origin(module: str) -> str:
    """Where a registered object's module came from: the plugin file it was loaded from, or
    its module name."""
    return _FROM_PATH.get(module, module)


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


def _worker_entry(entry: str) -> str:
    """An entry a worker can import from any working directory."""
    return str(Path(entry).expanduser().resolve()) if is_path(entry) else entry


def plugins_for(configs: Iterable[RunConfig]) -> tuple[list[str], list[str]]:
    """(plugin entries, sys.path entries) a worker needs to find every method and dataset of
    ``configs``: ``$BENCH_PLUGINS`` plus the modules outside the package that registered them."""
    entries = [_worker_entry(e) for e in env_plugins()]
    for config in configs:
        for cls in (METHODS.get(config.method), DATASETS.get(config.dataset)):
            module = cls.__module__
            if module.startswith("debias_bench") or module == "__main__":
                continue
            entry = _FROM_PATH.get(module, module)
            if entry not in entries:
                entries.append(entry)
    paths = []
    for entry in entries:
        root = None if is_path(entry) else _import_root(entry)
        if root and root not in paths:
            paths.append(root)
    return entries, paths
