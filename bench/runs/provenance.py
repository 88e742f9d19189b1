"""Where a run's code came from (version, git commit, torch), which code is the run's own (the
hash of its method's and dataset's modules and every first-party module they import,
:func:`code_hash`, their sources parsed by :mod:`debias_bench.runs.source_facts`) and what its
``config.json`` holds: the config, its id, that provenance and that hash."""

from __future__ import annotations

import functools
import hashlib
import re
import site
import subprocess
import sysconfig
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from debias_bench import __version__
from debias_bench.config.run_config import RunConfig
from debias_bench.registry import DATASETS, METHODS, module_file
from debias_bench.runs.source_facts import SourceFacts, source_facts
from debias_bench.runs.source_facts import normalized_code as normalized_code  # re-export


def git_commit(here: Path = Path(__file__).parents[1]) -> str | None:
    """The commit of the code: ``git rev-parse`` in a checkout, else the ``COMMIT`` file that
    ``git archive`` fills in (``export-subst``, .gitattributes) for a copy of the code without
    ``.git``, such as a frozen copy running a long reproduction; None when neither tells."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        stamped = (here / "COMMIT").read_text().strip()
    except OSError:
        return None
    return stamped if re.fullmatch(r"[0-9a-f]{40}", stamped) else None


@functools.cache
def provenance() -> dict[str, Any]:
    import torch  # here, not at the top: bench status and reports import this module

    return {"code_version": __version__, "git_commit": git_commit(), "torch": torch.__version__}


def config_json(config: RunConfig) -> dict[str, Any]:
    """What a run's ``config.json`` holds: the config, its id, the code's provenance and the
    hash of the method's and dataset's code (:func:`code_hash`)."""
    return {
        **config.to_json(),
        "run_id": config.run_id,
        "provenance": provenance(),
        "code": code_hash(config.method, config.dataset),
    }


def code_hash(method: str, dataset: str) -> str:
    """A hash of the code a run of ``method`` on ``dataset`` executes as theirs
    (:func:`code_identity`)."""

    return code_identity(METHODS.get(method), DATASETS.get(dataset))


#: bumped when what the hash covers changes, so that no older hash matches a new one by chance
#: (2: every first-party module imported, transitively; a plugin's modules by their code alone)
_SCHEME = "code identity 2"
#: the built-in packages whose modules are a run's code (the rest of ``debias_bench`` is the
#: engine: its changes are versioned with the package, in :func:`provenance`)
_BUILTIN = ("debias_bench.methods", "debias_bench.datasets")


@functools.cache
def code_identity(*classes: type) -> str:
    """A hash of the code that the classes of a run's method and dataset execute as theirs:
    the modules that define them and their base classes, and every first-party module those
    import, transitively (found by parsing the sources, :func:`code_modules`). A built-in
    module counts by its name and code, a plugin's module by its code alone: where the plugin
    lies and the name it is imported under do not count. Parsed, so comments, docstrings,
    layout, annotations and unused imports do not count (:func:`normalized_code`)."""
    entries = sorted(
        f"{module.name if module.home is None else ''}\0{_facts(module).code}"
        for module in code_modules(*classes)
    )
    digest = hashlib.sha256(f"{_SCHEME}\0".encode())
    for entry in entries:
        digest.update(f"{len(entry)}:{entry}".encode())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class CodeModule:
    """A module of a run's code: its name, its source file (None when it has no readable
    source) and, for a plugin's module, the plugin's folder (None for a built-in one)."""

    name: str
    path: Path | None
    home: Path | None


def code_modules(*classes: type) -> list[CodeModule]:
    """The first-party modules that ``classes`` execute, in a fixed order (the roots as their
    classes' MROs list them, then as imports reach them): the modules defining them and their
    base classes (except the engine's, ``builtins`` and library ones), and every module those
    import that is first-party, followed through ``import x``, ``from x import y`` (``y`` a
    submodule, or a name that ``x`` imports from elsewhere) and relative imports.

    First-party: a module of ``debias_bench.methods`` or ``debias_bench.datasets``, or one whose
    file lies in a plugin's folder (the ``sys.path`` entry the plugin's module was imported
    from, or the folder of a plugin file loaded by path; its package's folder when that is a
    library folder). Library (standard library, site-packages) and engine modules are not."""
    found: dict[str, CodeModule] = {}  # path (or name) -> module
    for cls in classes:
        for base in cls.__mro__:
            root = _root_module(base, registered=base is cls)
            if root is not None:
                found.setdefault(str(root.path or root.name), root)
    homes = tuple(dict.fromkeys(m.home for m in found.values() if m.home is not None))
    queue = deque(edge for module in list(found.values()) for edge in _facts(module).imports)
    followed: set[tuple[str, str | None]] = set()
    while queue:
        edge = queue.popleft()
        if edge in followed:
            continue
        followed.add(edge)
        target, name = edge
        module = _locate(target, homes)
        if name is not None and (_is_package(module) or target == "debias_bench"):
            submodule = _locate(f"{target}.{name}", homes)  # ``from package import submodule``
            if submodule is not None:
                queue.append((submodule.name, None))
                continue
        if module is None:
            continue
        facts = _facts(module)
        if name is not None:  # a name ``target`` defines or imports from elsewhere (re-export)
            queue.extend(facts.bindings.get(name, ()))
        key = str(module.path)
        if key not in found:
            found[key] = module
            queue.extend(facts.imports)
    return list(found.values())


def _root_module(cls: type, registered: bool) -> CodeModule | None:
    """The module defining ``cls`` (a registered class or one of its bases), if it is part of
    the run's code: not ``builtins``, the engine or (for a base class) a library."""
    name = cls.__module__
    if name == "builtins":
        return None
    if _is_builtin(name):
        return CodeModule(name, module_file(name), None)
    if name == "debias_bench" or name.startswith("debias_bench."):
        return None  # the engine's (versioned with the package)
    path = module_file(name)
    if path is None:
        return CodeModule(name, None, None) if registered else None
    if not registered and _is_library(path):
        return None  # abc, typing, torch, ...
    return CodeModule(name, path, _home(name, path))


def _home(name: str, path: Path) -> Path:
    """The folder of a plugin whose module ``name`` was loaded from ``path``: the ``sys.path``
    entry it was imported from (a plugin file's own folder); when that is a library folder,
    its top-level package's folder (or the file alone)."""
    depth = name.count(".") + (path.name == "__init__.py")
    root = path.parent
    for _ in range(depth):
        root = root.parent
    if not _is_library(root):
        return root
    return root / name.partition(".")[0] if depth else path


def _is_builtin(name: str) -> bool:
    return any(name == package or name.startswith(f"{package}.") for package in _BUILTIN)


def _locate(name: str, homes: tuple[Path, ...]) -> CodeModule | None:
    """The module ``name`` if it is first-party (see :func:`code_modules`), else None."""
    if _is_builtin(name):
        path = module_file(name)
        return CodeModule(name, path, None) if path is not None else None
    if name == "debias_bench" or name.startswith("debias_bench.") or not homes:
        return None
    top = name.partition(".")[0]
    top_path = module_file(top)  # a top-level spec imports nothing: look before importing
    if top_path is None or not any(_within(top_path, home) for home in homes):
        return None
    path = module_file(name) if name != top else top_path
    home = next((home for home in homes if path is not None and _within(path, home)), None)
    return CodeModule(name, path, home) if path is not None and home is not None else None


def _is_package(module: CodeModule | None) -> bool:
    return module is not None and module.path is not None and module.path.name == "__init__.py"


def _within(path: Path, home: Path) -> bool:
    """Whether ``path`` is a module of the plugin whose folder (or file) is ``home``: under
    it, and not in a library folder under it (a virtual environment in a project folder)."""
    if home.suffix == ".py":
        return path == home
    return path.is_relative_to(home) and (_is_library(home) or not _is_library(path))


@functools.cache
def _library_dirs() -> tuple[Path, ...]:
    """The standard library's and the installed packages' folders."""
    paths = {
        sysconfig.get_paths().get(key) for key in ("stdlib", "platstdlib", "purelib", "platlib")
    }
    paths.update(getattr(site, "getsitepackages", list)())
    paths.add(site.getusersitepackages())
    return tuple(Path(path).resolve() for path in paths if path)


def _is_library(path: Path) -> bool:
    if {"site-packages", "dist-packages"} & set(path.parts):
        return True
    return any(path.is_relative_to(library) for library in _library_dirs())


def _facts(module: CodeModule) -> SourceFacts:
    if module.path is None:
        return SourceFacts(module.name, (), {})
    package = module.name if _is_package(module) else module.name.rpartition(".")[0]
    return source_facts(str(module.path), package)
