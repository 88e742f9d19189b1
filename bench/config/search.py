"""Search spaces for ``bench tune``, declared on a hyperparameter (``hparam(..., search=...)``).

A declaration says how a key is searched on every dataset; the method's YAML ``search:`` block
only overrides it where a method or a dataset differs (see :mod:`debias_bench.analysis.tuning`).
Each space
writes itself as the YAML form (``{log_uniform: [low, high]}``), so the declaration and the YAML
go through the one check against the key's kind and range (``tune._distribution``).

:class:`Around` is relative: a decade either side of the value the method's recipe gives the key
on that dataset, so the learning rate's space follows each dataset's recipe (BAR's 1e-5 searches
1e-6..1e-4, Colored MNIST's 1e-3 searches 1e-4..1e-2) from one declaration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from debias_bench.errors import ConfigError


@dataclass(frozen=True)
class _Bounded:
    """A distribution on ``[low, high]``, written as ``{<name>: [low, high]}``."""

    low: float
    high: float
    name: ClassVar[str]

    def spec(self, value: Any) -> dict[str, list[Any]]:
        return {self.name: [self.low, self.high]}


class LogUniform(_Bounded):
    """Log-uniform on ``[low, high]`` (``low > 0``)."""

    name = "log_uniform"


class Uniform(_Bounded):
    """Uniform on ``[low, high]``."""

    name = "uniform"


class IntRange(_Bounded):
    """Integers ``low..high``, both included."""

    name = "int"


@dataclass(frozen=True)
class Choice:
    """One of ``values``."""

    values: tuple[Any, ...]

    def spec(self, value: Any) -> dict[str, list[Any]]:
        return {"choice": list(self.values)}


@dataclass(frozen=True)
class Around:
    """Log-uniform from ``value / factor`` to ``value * factor`` (at most ``cap``), where
    ``value`` is the key's value in the method's recipe for the dataset searched."""

    factor: float = 10.0
    cap: float | None = None

    def spec(self, value: Any) -> dict[str, list[Any]]:
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise ConfigError(
                f"a search around the recipe's value needs a positive number, not {value!r}",
                hint="give the key an absolute space (LogUniform, Uniform) or a value > 0",
            )
        high = value * self.factor
        if self.cap is not None:
            high = min(high, self.cap)
        return {"log_uniform": [_tidy(value / self.factor), _tidy(high)]}


def _tidy(number: float) -> float:
    """``1e-3 / 10`` as ``0.0001``, not ``0.00010000000000000002``: the bounds read as written."""
    return float(f"{number:.12g}")


#: what ``hparam(..., search=...)`` takes
SearchSpace = LogUniform | Uniform | IntRange | Choice | Around
