"""One declared hyperparameter, :class:`HParam`, and how a value of it is parsed and checked:
its kind (``int``, ``float``, ``bool``, ``str``, ``ints``), the conversion of a value given in
YAML or on the command line, and the one range rule (:func:`in_range`, stated by
:func:`describe_range`) that the CLI's numeric flags share. Declaring the keys (params classes,
:func:`~debias_bench.config.hparams.hparam`) is :mod:`debias_bench.config.hparams`."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from debias_bench.config.search import SearchSpace
from debias_bench.errors import ConfigError

Kind = Literal["int", "float", "bool", "str", "ints"]

#: a declared timing value meaning "a timing run keeps the run's own value"
NO_TIMING: Any = type("NoTiming", (), {"__repr__": lambda self: "NO_TIMING"})()


@dataclass(frozen=True)
class HParam:
    """One hyperparameter: ``kind`` int | float | bool | str | ints (a list of ints).

    ``low``/``high`` bound numbers (``low_open``: strictly above ``low``; a declared float
    without ``high`` gets :data:`~debias_bench.config.hparams.MAX_FLOAT`); ``choices`` (or
    ``choices_of``, called at check time, for registries that grow) limit strings; ``nullable``
    lets ``null`` through. ``late``: declared engine-wide, or by a method, after its run ids were
    first published; at its default it is left out of a run's id unless the method's YAML names
    it (see ``RunConfig.identity``), so those ids stay valid. ``timing``: the value a timing run
    (``bench perf``) sets, to keep a preparation stage short or switch a late phase on from the
    first step (:data:`NO_TIMING`: the run's own value). ``search``: the key's space for
    ``bench tune`` (:mod:`debias_bench.config.search`; None: not searched unless the method's YAML
    ``search:`` block names it). ``run_share``: a step count within the run, which keeps its
    share of the run when a preset or ``--epochs`` changes the run's length
    (:mod:`debias_bench.config.run_length`).
    """

    name: str
    kind: Kind
    default: Any
    doc: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    choices: tuple[Any, ...] | None = None
    choices_of: Callable[[], Iterable[str]] | None = None
    nullable: bool = False
    late: bool = False
    timing: Any = NO_TIMING
    search: SearchSpace | None = None
    run_share: bool = False

    def allowed(self) -> tuple[Any, ...] | None:
        if self.choices_of is not None:
            return tuple(self.choices_of())
        return self.choices

    def describe(self) -> str:
        """``float > 0``, ``int >= 1 and <= 10000``, ``int >= 1 or null``, ``one of adam,
        sgd`` ..."""
        allowed = self.allowed()
        if allowed:
            text = f"one of {', '.join(map(str, allowed))}"
        else:
            text = describe_range(self.kind, self.low, self.high, self.low_open)
        return text + (" or null" if self.nullable else "")

    def parse(self, value: Any, where: str) -> Any:
        """``value`` converted to the declared kind; ConfigError naming ``where`` otherwise."""
        if value is None:
            if self.nullable:
                return None
            raise self._bad(value, where)
        try:
            parsed = _convert(self.kind, value)
        except (TypeError, ValueError):
            raise self._bad(value, where) from None
        if self.kind in ("int", "float") and not self._in_range(parsed):
            raise self._bad(value, where)
        if self.kind == "ints" and not all(self._in_range(v) for v in parsed):
            raise self._bad(value, where)
        allowed = self.allowed()
        if allowed and parsed not in allowed:
            raise self._bad(value, where)
        return parsed

    def _in_range(self, number: float) -> bool:
        return in_range(number, self.low, self.high, self.low_open)

    def _bad(self, value: Any, where: str) -> ConfigError:
        return ConfigError(
            f"{where}: {self.name}={value!r} is not valid ({self.name} is {self.describe()})",
            hint=self.doc,
        )


def in_range(number: float, low: float | None, high: float | None, low_open: bool = False) -> bool:
    """Whether ``number`` is finite and within the bounds (``low_open``: strictly above
    ``low``): the one range rule of hyperparameters and of the CLI's numeric flags
    (``debias_bench.commands.flags.number``)."""
    if not math.isfinite(number):
        return False
    if low is not None and (number <= low if low_open else number < low):
        return False
    return high is None or number <= high


def describe_range(kind: str, low: float | None, high: float | None, low_open: bool = False) -> str:
    """``int >= 1``, ``float > 0``, ``int >= 1 and <= 10000``: a range as the errors state it."""
    bounds = []
    if low is not None:
        bounds.append(f"{'>' if low_open else '>='} {_bound(low)}")
    if high is not None:
        bounds.append(f"<= {_bound(high)}")
    return " ".join([kind, " and ".join(bounds)]) if bounds else kind


def _bound(number: float) -> str:
    """``10000``, ``4294967295``, ``0.001``: whole bounds in full, others as ``:g``."""
    return str(int(number)) if float(number).is_integer() else f"{number:g}"


def _convert(kind: Kind, value: Any) -> Any:
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no"):
            return value.lower() in ("true", "yes")
        raise ValueError(value)
    if kind == "str" and isinstance(value, bool):  # YAML reads `--set x=true` as a bool
        return str(value).lower()
    if isinstance(value, bool):  # True is an int in Python, never a number here
        raise ValueError(value)
    if kind == "int":
        number = float(value)
        if not number.is_integer():
            raise ValueError(value)
        return int(number)
    if kind == "float":
        # an int stays an int: run ids hash the JSON of the values, and 1 and 1.0 differ there
        return value if isinstance(value, int | float) else float(value)
    if kind == "str":
        if not isinstance(value, str):
            raise ValueError(value)
        return value
    if not isinstance(value, list | tuple):  # ints
        raise ValueError(value)
    return [_convert("int", v) for v in value]
