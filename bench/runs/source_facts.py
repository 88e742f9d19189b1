"""What a module's source says once parsed (:func:`source_facts`): its code normalized, so that
comments, docstrings, layout, type annotations and unused imports do not count
(:func:`normalized_code`), the imports its code makes and, per name its top level imports, where
that name comes from. :func:`debias_bench.runs.provenance.code_identity` hashes a run's code
from these facts."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class SourceFacts:
    """What a module's source says: its normalized code, the imports that its code makes
    (``(module, name)``: ``from module import name``; ``(module, None)``: ``import module``)
    and, per name its top level binds by an import (used or not), where that name comes from."""

    code: str
    imports: tuple[tuple[str, str | None], ...]
    bindings: dict[str, tuple[tuple[str, str | None], ...]]


@functools.cache
def source_facts(path: str, package: str) -> SourceFacts:
    """:class:`SourceFacts` of the source at ``path``, whose relative imports are from ``package``;
    read once per process."""
    try:
        tree = _AnnotationEraser().visit(ast.parse(Path(path).read_text(encoding="utf-8")))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return SourceFacts(f"<no readable source: {Path(path).name}>", (), {})
    bindings: dict[str, list[tuple[str, str | None]]] = {}
    for node in _top_level(tree.body):
        for bound, edge in _import_edges(node, package):
            bindings.setdefault(bound, []).append(edge)
    tree = _normalized(tree)
    imports = [edge for node in ast.walk(tree) for _, edge in _import_edges(node, package)]
    return SourceFacts(
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
