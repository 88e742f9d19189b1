"""Name -> entry registries for methods, datasets, backbones and optimisers, filled by
decorators.

Modelled on torchvision's ``register_model``: registering a name twice is an error, the
metadata lives on the entry, and lookups of unknown names list the valid ones.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from debias_bench.errors import UnknownNameError

T = TypeVar("T")
#: what a registered name may be: it becomes part of run ids, file names and comma lists
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


@dataclass(frozen=True)
class Entry(Generic[T]):
    """A registered object with the metadata shown by ``bench list``."""

    name: str
    obj: T
    display_name: str
    citation: str
    meta: dict[str, Any] = field(default_factory=dict)


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
            if not NAME.fullmatch(name):  # it becomes part of run ids and file names
                raise ValueError(
                    f"{self.kind} name {name!r} is not a plain name: letters, digits, _ and - "
                    "only (no /, .., spaces)"
                )
            if name in self._entries:
                raise ValueError(
                    f"{self.kind} {name!r} is already registered "
                    f"(by {self._entries[name].obj!r}); pick another name"
                )
            for check in self._checks:
                check(name, obj)
            self._entries[name] = Entry(name, obj, display_name, citation, dict(meta))
            return obj

        return decorator

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
        return next((e.name for e in self._entries.values() if e.obj is obj), None)

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


METHODS: Registry[Any] = Registry("method", "debias_bench.methods")
DATASETS: Registry[Any] = Registry("dataset", "debias_bench.datasets")

#: backbone and optimiser names, so that configuration can validate them without importing
#: the training modules that build them (each registers itself when first looked up)
BACKBONES: Registry[Any] = Registry("backbone", "debias_bench.training.backbones")
OPTIMIZERS: Registry[Any] = Registry("optimizer", "debias_bench.training.optim")

register_method = METHODS.register
register_dataset = DATASETS.register
register_backbone = BACKBONES.register
register_optimizer = OPTIMIZERS.register
