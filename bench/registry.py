"""Name -> entry registries for methods, datasets, backbones and optimisers, filled by
decorators.

Modelled on torchvision's ``register_model``: registering a name twice is an error, the
metadata lives on the entry, and lookups of unknown names list the valid ones.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import pkgutil
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from debias_bench.errors import UnknownNameError

T = TypeVar("T")
#: what a registered name may be: it becomes part of run ids, file names and comma lists
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


@dataclass(frozen=True, eq=False)
class Entry(Generic[T]):
    """A registered object with the metadata shown by ``bench list``.

    Registered with :meth:`Registry.register`, the entry holds its object; declared with
    :meth:`Registry.declare`, only where it lives (``module:attribute``), imported on the first
    read of :attr:`obj`: a method's trainer imports torch, and listing or configuring it must
    not."""

    name: str
    display_name: str
    citation: str
    meta: dict[str, Any] = field(default_factory=dict)
    #: ``module:attribute`` of a declared entry's object ("" for a registered one)
    where: str = ""
    _loaded: list[T] = field(default_factory=list, repr=False)

    @property
    def module(self) -> str:
        """The name of the module that defines the object (imports nothing)."""
        if self.where:
            return self.where.partition(":")[0]
        return str(getattr(self._loaded[0], "__module__", ""))

    @property
    def loaded(self) -> bool:
        return bool(self._loaded)

    @property
    def obj(self) -> T:
        if not self._loaded:
            self._loaded.append(load_attribute(self.where))
        return self._loaded[0]


def load_attribute(where: str) -> Any:
    """The object ``module:attribute`` names (the module imported if it is not yet)."""
    module, _, attribute = where.partition(":")
    return getattr(importlib.import_module(module), attribute)


class Registry(Generic[T]):
    """A named collection of entries; ``plugins`` is imported on first lookup to fill it."""

    def __init__(self, kind: str, plugins: str | None = None) -> None:
        self.kind = kind
        self._plugins = plugins
        self._entries: dict[str, Entry[T]] = {}
        self._first: tuple[str, ...] = ()
        self._loaded = plugins is None
        self._checks: list[Callable[[str, T], None]] = []

    def add_check(self, check: Callable[[str, T], None]) -> None:
        """Run ``check(name, obj)`` before each later registration; it raises to refuse one
        (the stage that knows what a registered object must declare adds it)."""
        self._checks.append(check)

    def register(
        self, name: str, *, display_name: str, citation: str = "", **meta: Any
    ) -> Callable[[T], T]:
        """Decorator that registers ``obj`` under ``name``; duplicate names raise ValueError."""

        def decorator(obj: T) -> T:
            self._add_checked_name(name)
            for check in self._checks:
                check(name, obj)
            self._entries[name] = Entry(name, display_name, citation, dict(meta), _loaded=[obj])
            return obj

        return decorator

    def declare(
        self, name: str, where: str, *, display_name: str, citation: str = "", **meta: Any
    ) -> None:
        """Register ``name`` for the object at ``where`` (``module:attribute``), imported when
        first looked up (:attr:`Entry.obj`); the checks of :meth:`add_check` see the metadata
        only, so a declared kind's own declaration function checks what it declares."""
        if where.count(":") != 1 or not all(where.split(":")):
            raise ValueError(f"{self.kind} {name!r}: where={where!r} is not 'module:attribute'")
        self._add(Entry(name, display_name, citation, dict(meta), where=where))

    def _add_checked_name(self, name: str) -> None:
        """Refuse a name that is not plain or already taken (before a check runs)."""
        if not NAME.fullmatch(name):  # it becomes part of run ids and file names
            raise ValueError(
                f"{self.kind} name {name!r} is not a plain name: letters, digits, _ and - "
                "only (no /, .., spaces)"
            )
        if name in self._entries:
            known = self._entries[name]
            raise ValueError(
                f"{self.kind} {name!r} is already registered "
                f"(by {known.where or known.obj!r}); pick another name"
            )

    def _add(self, entry: Entry[T]) -> None:
        self._add_checked_name(entry.name)
        self._entries[entry.name] = entry

    def unregister(self, name: str) -> None:
        """Remove an entry (used by tests and by plugins that replace a built-in)."""
        self._entries.pop(name, None)

    def _load(self) -> None:
        if not self._loaded and self._plugins is not None:
            self._loaded = True
            importlib.import_module(self._plugins)  # its modules register themselves

    def entry(self, name: str) -> Entry[T]:
        self._load()
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownNameError(*self._unknown(name)) from None

    def registered_as(self, obj: object) -> str | None:
        """The first name ``obj`` is registered under so far (imports nothing), or None."""
        return next((e.name for e in self._entries.values() if e.loaded and e.obj is obj), None)

    def get(self, name: str) -> T:
        return self.entry(name).obj

    def list_first(self, names: Iterable[str]) -> None:
        """List these names first, in this order (the built-in package's listing order)."""
        self._first = tuple(names)

    def names(self) -> list[str]:
        """Names in listing order: those of :meth:`list_first`, then the others as registered
        (built-ins, then plugins); reports apply the paper's order
        (``debias_bench.reporting.layout``)."""
        self._load()
        rank = {name: i for i, name in enumerate(self._first)}
        return sorted(self._entries, key=lambda name: rank.get(name, len(rank)))

    def __iter__(self) -> Iterator[Entry[T]]:
        return iter([self._entries[name] for name in self.names()])

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._entries

    def resolve(self, spec: str | list[str]) -> list[str]:
        """Expand ``"all"`` or a comma-separated list into validated names, order kept."""
        parts = spec.split(",") if isinstance(spec, str) else list(spec)
        names = [p.strip() for p in parts if p.strip()]
        if names == ["all"]:
            return self.names()
        for name in names:
            self.entry(name)
        return list(dict.fromkeys(names))

    def _unknown(self, name: str) -> tuple[str, str]:
        valid = self.names()
        close = [v for v in valid if v.startswith(name)] if name else []
        close = close or difflib.get_close_matches(name, valid, n=1, cutoff=0.5)
        message = f"unknown {self.kind} {name!r}; valid names: {', '.join(valid)}"
        hint = f"did you mean {close[0]!r}?" if close else f"run `bench list {self.kind}s`"
        return message, hint


def import_modules(package: str, path: Iterable[str]) -> None:
    """Import every module of ``package`` (whose ``__path__`` is ``path``), by name; each
    registers its entries when imported."""
    for module in sorted(m.name for m in pkgutil.iter_modules(list(path))):
        importlib.import_module(f"{package}.{module}")


def module_file(name: str) -> Path | None:
    """The source file of module ``name`` (the loaded one, else the one an import would
    load), resolved; None when it has none (built into the interpreter, compiled, missing)."""
    module = sys.modules.get(name)
    if module is not None:
        file = getattr(module, "__file__", None)
    else:
        try:
            spec = importlib.util.find_spec(name)  # imports its parent packages
        except Exception:  # not a module (an attribute of a module), or its parent is broken
            return None
        file = spec.origin if spec is not None and spec.has_location else None
    if not file or not str(file).endswith(".py"):
        return None
    return Path(file).resolve()


METHODS: Registry[Any] = Registry("method", "debias_bench.methods")
DATASETS: Registry[Any] = Registry("dataset", "debias_bench.datasets")

#: backbone and optimiser names, so that configuration can validate them without importing
#: the training modules that build them (declared by name in ``training.catalog``)
BACKBONES: Registry[Any] = Registry("backbone", "debias_bench.training.catalog")
OPTIMIZERS: Registry[Any] = Registry("optimizer", "debias_bench.training.catalog")

register_method = METHODS.register
register_dataset = DATASETS.register
register_backbone = BACKBONES.register
register_optimizer = OPTIMIZERS.register
