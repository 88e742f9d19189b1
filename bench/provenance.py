"""Where a run's code came from (version, git commit, torch) and what its ``config.json``
holds: the config, its id and that provenance."""

from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from debias_bench import __version__
from debias_bench.config import RunConfig


def git_commit(here: Path = Path(__file__).parent) -> str | None:
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


@functools.cache
def code_hash(method: str, dataset: str) -> str:
    """A hash of the code a run of ``method`` on ``dataset`` executes as theirs: the modules
    that define the method's and the dataset family's classes and their base classes (built-in
    or plugin; the engine's own base classes are the engine's version, in ``provenance``).
    Parsed, so comments, docstrings and formatting do not count."""
    from debias_bench.registry import DATASETS, METHODS

    modules = {
        cls.__module__
        for root in (METHODS.get(method), DATASETS.get(dataset))
        for cls in root.__mro__
        if cls.__module__ not in _ENGINE_MODULES
    }
    digest = hashlib.sha256()
    for name in sorted(modules):
        digest.update(f"{name}\0{_normalized_source(sys.modules[name])}\0".encode())
    return digest.hexdigest()[:16]


#: modules whose classes are the engine's (their changes are versioned with the package)
_ENGINE_MODULES = frozenset({"builtins", "abc", "debias_bench.method", "debias_bench.family"})


def _normalized_source(module: ModuleType) -> str:
    """:func:`normalized_code` of the module's source; its name when it has no readable source
    (a compiled module)."""
    try:
        return normalized_code(inspect.getsource(module))
    except (OSError, TypeError, SyntaxError):
        return module.__name__


def normalized_code(source: str) -> str:
    """What of ``source`` runs: its syntax tree without comments, docstrings, layout or type
    annotations (of functions and variables; ``if TYPE_CHECKING:`` blocks, ``from __future__
    import annotations`` and imported names no code uses left out). Annotations in the body of
    a dataclass (or a NamedTuple or TypedDict) are kept: they declare its fields, and a params
    class's annotations declare each hyperparameter's kind."""
    tree = _AnnotationEraser().visit(ast.parse(source))
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
    return ast.dump(tree, include_attributes=False)


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
