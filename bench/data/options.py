"""Declared build/read options of a dataset family (``--data-option NAME=VALUE``).

A family declares each option once, as a class attribute::

    class ColoredMNIST(DatasetFamily):
        severity = DataOption(int, 4, "colour noise level (LfF)", choices=(1, 2, 3, 4, 5))

Reading ``family.severity`` on an instance gives the checked value of that instance. The same
declarations check ``--data-option`` and the presets' data options when a grid is expanded
(:func:`check_data_options`), list the valid ones in errors, and document them
(``bench data options NAME``). A value is only ever checked and converted, never filled in:
the options a run records are the ones it was given, so run ids stay what they were.

A number's range is its declared ``minimum`` and ``maximum``; an int option that declares no
maximum still fits a signed 64-bit integer (what NumPy and torch take), so a value such as
``data_seed=1e23`` is refused when the grid is expanded (exit 2, the option and its range
named), never an overflow inside a run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar, overload

from debias_bench.errors import ConfigError
from debias_bench.registry import DATASETS

T = TypeVar("T")


#: the range of an int option that declares no bound of its own (a signed 64-bit integer)
INT_RANGE = (-(2**63), 2**63 - 1)


class DataOption(Generic[T]):
    """One typed option: its type, default, allowed values or range, and a one-line doc."""

    def __init__(
        self,
        kind: type,
        default: T,
        doc: str,
        *,
        choices: Sequence[Any] = (),
        minimum: float | None = None,
        maximum: float | None = None,
        affects_data: bool = True,
    ) -> None:
        if kind not in (int, float, str, bool):
            raise TypeError(f"a data option is an int, float, str or bool, not {kind!r}")
        self.kind, self.default, self.doc = kind, default, doc
        self.choices, self.minimum, self.maximum = tuple(choices), minimum, maximum
        #: False for an option that only changes how the data is built (parallel workers):
        #: a run given another value still trains on its recipe's data
        self.affects_data = affects_data
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> DataOption[T]: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...
    def __get__(self, obj: object | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        return obj.__dict__["_option_values"][self.name]

    def __set__(self, obj: object, value: Any) -> None:
        raise AttributeError(f"data option {self.name!r} is read-only (pass it to the family)")

    @property
    def optional(self) -> bool:
        return self.default is None

    def describe(self) -> str:
        """``severity (int, default 4; one of 1, 2, 3, 4, 5): colour noise level``."""
        facts = [self.kind.__name__ + (" or none" if self.optional else "")]
        facts.append(f"default {self.default!r}" if self.default is not None else "default none")
        if self.choices:
            facts.append("one of " + ", ".join(str(c) for c in self.choices))
        elif self.minimum is not None or self.maximum is not None:
            facts.append(self.range_text(declared=True))
        return f"{self.name} ({'; '.join([', '.join(facts[:2]), *facts[2:]])}): {self.doc}"

    def parse(self, value: Any, dataset: str) -> T:
        """``value`` converted to the option's type and checked; ConfigError naming it if not."""
        if value is None or (self.optional and value in ("none", "null", "")):
            if self.optional:
                return None  # type: ignore[return-value]
            raise self._error(value, dataset, f"a value is required ({self.kind.__name__})")
        try:
            parsed = _convert(self.kind, value)
        except (TypeError, ValueError):
            raise self._error(value, dataset, f"expected {self.kind.__name__}") from None
        if self.choices and parsed not in self.choices:
            valid = ", ".join(str(c) for c in self.choices)
            raise self._error(value, dataset, f"valid values: {valid}")
        low, high = self.minimum, self.maximum
        if (low is not None and parsed < low) or (high is not None and parsed > high):
            raise self._error(value, dataset, f"must be {self.range_text(declared=True)}")
        low, high = self.bounds()  # an int's 64 bits, where it declares no bound
        if (low is not None and parsed < low) or (high is not None and parsed > high):
            raise self._error(value, dataset, f"must be {self.range_text()} (a 64-bit integer)")
        return parsed

    def bounds(self) -> tuple[float | None, float | None]:
        """(lowest, highest) value it takes; an int's default to a signed 64-bit integer's."""
        if self.kind is not int:
            return self.minimum, self.maximum
        low = INT_RANGE[0] if self.minimum is None else self.minimum
        high = INT_RANGE[1] if self.maximum is None else self.maximum
        return low, high

    def range_text(self, declared: bool = False) -> str:
        """``>= 1``, ``0 <= data_seed <= 4294967295``: its bounds (``declared``: only those
        it declares, without an int's 64-bit ones)."""
        low, high = (self.minimum, self.maximum) if declared else self.bounds()
        if low is not None and high is not None:
            return f"{_number(low)} <= {self.name} <= {_number(high)}"
        return f">= {_number(low)}" if low is not None else f"<= {_number(high)}"

    def _error(self, value: Any, dataset: str, why: str) -> ConfigError:
        return ConfigError(f"data option {self.name}={value!r} for {dataset}: {why}", hint=self.doc)


def _number(value: float | None) -> str:
    """A bound as written: whole numbers in full (4294967295, not 4.29497e+09)."""
    if value is not None and float(value).is_integer():
        return str(int(value))
    return f"{value:g}" if value is not None else ""


def _convert(kind: type, value: Any) -> Any:
    """Strict conversions: no bool as a number, no 2.5 as an int, no list as a string."""
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "yes", "on", "1", "false", "no"):
            return value.lower() in ("true", "yes", "on", "1")
        raise ValueError(value)
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise TypeError(value)
    if kind is int:
        if isinstance(value, float) and not value.is_integer():
            raise ValueError(value)
        return int(value) if not isinstance(value, str) else int(value.strip())
    if kind is float:
        return value if isinstance(value, float) else float(value)
    return value if isinstance(value, str) else str(value)


def declared_options(family: type) -> dict[str, DataOption[Any]]:
    """The options ``family`` declares (its own and inherited; a subclass may redeclare one)."""
    found: dict[str, DataOption[Any]] = {}
    for klass in reversed(family.__mro__):
        for name, value in vars(klass).items():
            if isinstance(value, DataOption):
                found[name] = value
    return found


def _registered(dataset: str) -> type:

    return DATASETS.get(dataset)


def check_options(family: type, options: Mapping[str, Any], dataset: str = "") -> dict[str, Any]:
    """``options`` checked against ``family``'s declarations and converted to their types.

    Only the options given come back (no defaults are added). An unknown name is a
    ConfigError naming the option, the dataset and every valid option."""
    declared = declared_options(family)
    dataset = dataset or getattr(getattr(family, "spec", None), "name", family.__name__)
    out: dict[str, Any] = {}
    for key, value in options.items():
        if key not in declared:
            raise ConfigError(
                f"unknown data option {key!r} for {dataset}; valid: {', '.join(declared)}",
                hint="; ".join(o.describe() for o in declared.values()),
            )
        out[key] = declared[key].parse(value, dataset)
    return out


def check_data_options(dataset: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``--data-option`` / preset options for the registered ``dataset``, checked and typed."""
    return check_options(_registered(dataset), options, dataset)


def data_options_by_dataset(
    datasets: Iterable[str], options: Mapping[str, Any]
) -> dict[str, dict[str, Any]]:
    """Grid-wide options split over ``datasets``: each gets (checked) the ones it declares, and
    an option that none of them declares is a ConfigError listing the valid ones."""
    datasets = list(datasets)
    declared = {d: declared_options(_registered(d)) for d in datasets}
    known = {name for names in declared.values() for name in names}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ConfigError(
            f"unknown data option(s) {', '.join(unknown)} for {', '.join(datasets)}",
            hint=f"valid: {', '.join(sorted(known))} (see `bench data options NAME`)",
        )
    return {
        d: check_data_options(d, {k: v for k, v in options.items() if k in declared[d]})
        for d in datasets
    }
