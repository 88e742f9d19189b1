"""Where a run's code came from (version, git commit, torch), which code is the run's own (the
hash of its method's and dataset's modules and every first-party module they import,
:func:`code_hash`) and what its ``config.json`` holds: the config, its id, that provenance and
that hash."""

from __future__ import annotations

import ast
import functools
import hashlib
import re
import site
import subprocess
import sysconfig
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from debias_bench import __version__
from debias_bench.config.run_config import RunConfig
from debias_bench.registry import DATASETS, METHODS, module_file


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


@dataclass(frozen=True)
class _Facts:
    """What a module's source says: its normalized code, the imports that its code makes
    (``(module, name)``: ``from module import name``; ``(module, None)``: ``import module``)
    and, per name its top level binds by an import (used or not), where that name comes from."""

    code: str
    imports: tuple[tuple[str, str | None], ...]
    bindings: dict[str, tuple[tuple[str, str | None], ...]]


def _facts(module: CodeModule) -> _Facts:
    if module.path is None:
        return _Facts(module.name, (), {})
    package = module.name if _is_package(module) else module.name.rpartition(".")[0]
    return _source_facts(str(module.path), package)


@functools.cache
def _source_facts(path: str, package: str) -> _Facts:
    """:class:`_Facts` of the source at ``path``, whose relative imports are from ``package``;
    read once per process."""
    try:
        tree = _AnnotationEraser().visit(ast.parse(Path(path).read_text(encoding="utf-8")))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return _Facts(f"<no readable source: {Path(path).name}>", (), {})
    bindings: dict[str, list[tuple[str, str | None]]] = {}
    for node in _top_level(tree.body):
        for bound, edge in _import_edges(node, package):
            bindings.setdefault(bound, []).append(edge)
    tree = _normalized(tree)
    imports = [edge for node in ast.walk(tree) for _, edge in _import_edges(node, package)]
    return _Facts(
        ast.dump(tree, include_attributes=False),
        tuple(dict.fromkeys(imports)),
        {name: tuple(edges) for name, edges in bindings.items()},
    )


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of a module's top level, in its ``if``/``try``/``with`` blocks too."""
    for node in body:
        yield node
        if isinstance(node, ast.If | ast.With | ast.Try | ast.For | ast.While):
            for block in ("body", "orelse", "finalbody"):
                yield from _top_level(getattr(node, block, []))
            for handler in getattr(node, "handlers", []):
                yield from _top_level(handler.body)


def _import_edges(node: ast.AST, package: str) -> list[tuple[str, tuple[str, str | None]]]:
    """``(name bound, (module, name imported or None))`` for each name an import statement
    binds; none for anything else, or a relative import that cannot be resolved."""
    if isinstance(node, ast.Import):
        return [
            (alias.asname or alias.name.partition(".")[0], (alias.name, None))
            for alias in node.names
        ]
    if not isinstance(node, ast.ImportFrom):
        return []
    module = _absolute(node, package)
    if module is None:
        return []
    return [
        (alias.asname or alias.name, (module, None if alias.name == "*" else alias.name))
        for alias in node.names
    ]


def _absolute(node: ast.ImportFrom, package: str) -> str | None:
    """The module a ``from ... import`` names, its relative form resolved against
    ``package``."""
    if node.level == 0:
        return node.module
    bits = package.rsplit(".", node.level - 1)
    if not package or len(bits) < node.level:
        return None  # beyond the top-level package: the import fails when run
    return f"{bits[0]}.{node.module}" if node.module else bits[0]


def normalized_code(source: str) -> str:
    """What of ``source`` runs: its syntax tree without comments, docstrings, layout or type
    annotations (of functions and variables; ``if TYPE_CHECKING:`` blocks, ``from __future__
    import annotations`` and imported names no code uses left out). Annotations in the body of
    a dataclass (or a NamedTuple or TypedDict) are kept: they declare its fields, and a params
    class's annotations declare each hyperparameter's kind."""
    tree = _normalized(_AnnotationEraser().visit(ast.parse(source)))
    return ast.dump(tree, include_attributes=False)


def _normalized(tree: ast.Module) -> ast.Module:
    """``tree`` (annotations erased) without unused imported names and docstrings."""
    _drop_unused_imported_names(tree)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        if (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            del body[0]
        if not body:
            body.append(ast.Pass())
    return tree


class _AnnotationEraser(ast.NodeTransformer):
    """Type annotations out of a syntax tree (see :func:`normalized_code`)."""

    def __init__(self) -> None:
        self.field_bodies: set[int] = set()  # ids of class bodies whose annotations are fields

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.AST | None:
        if node.module == "__future__":
            node.names = [alias for alias in node.names if alias.name != "annotations"]
            return node if node.names else None
        return node

    def visit_If(self, node: ast.If) -> Any:
        test = node.test
        name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
        if name != "TYPE_CHECKING":
            return self.generic_visit(node)
        kept: list[ast.AST] = []  # the else branch, if any, runs
        for child in node.orelse:
            visited = self.visit(child)
            kept.extend(visited if isinstance(visited, list) else [visited] if visited else [])
        return kept or None

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        return self._erase_signature(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST:
        return self._erase_signature(node)

    def _erase_signature(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
        node.returns = None
        args = node.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if arg is not None:
                arg.annotation = None
        return self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        if _declares_fields(node):
            self.field_bodies.update(id(child) for child in node.body)
        return self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST | None:
        if id(node) in self.field_bodies:
            return self.generic_visit(node)
        if node.value is None:
            return None  # a bare annotation declares nothing that runs
        return ast.Assign(targets=[node.target], value=self.visit(node.value))


def _declares_fields(node: ast.ClassDef) -> bool:
    """A class whose body annotations are read at run time: a dataclass, NamedTuple or
    TypedDict."""
    decorators = [d.func if isinstance(d, ast.Call) else d for d in node.decorator_list]
    names = [ast.unparse(d) for d in decorators] + [ast.unparse(b) for b in node.bases]
    return any("dataclass" in n or n.endswith(("NamedTuple", "TypedDict")) for n in names)


def _drop_unused_imported_names(tree: ast.Module) -> None:
    """``from X import a, b``: names that no code reads are dropped, and the statement with
    them when none is left (an annotation-only edit often adds such an import)."""
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for statement in list(body):
            if isinstance(statement, ast.ImportFrom) and statement.module != "__future__":
                statement.names = [
                    a for a in statement.names if a.name == "*" or (a.asname or a.name) in used
                ]
                if not statement.names:
                    body.remove(statement)
