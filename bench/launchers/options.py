"""A launcher's own options, declared as typed data: the command line makes them flags
(``--workers``), Python passes them as keywords (``debias_bench.run(..., workers=2)``).

A :class:`LauncherOption` says its name, kind, default, range or choices and one help line;
:func:`launcher_options` checks the values given for a launcher against its declarations
(an unknown name or a value out of range is a :class:`~debias_bench.errors.ConfigError` naming
the option and what it takes) and fills in the defaults. Values are checked by the rule of
the hyperparameters (:class:`~debias_bench.config.hparams.HParam`), so a flag and a keyword
accept the same things. No argparse here: ``debias_bench.commands`` turns declarations into
flags.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Literal

from debias_bench.config.hparams import HParam
from debias_bench.errors import ConfigError

Kind = Literal["int", "float", "str", "bool"]

#: a launcher's option values, by name (``options.workers``): what its ``from_options`` gets
LauncherOptions = SimpleNamespace


@dataclass(frozen=True)
class LauncherOption:
    """One option of a launcher: ``name`` is its keyword and, with ``-`` for ``_``, its flag
    (``jobs_per_gpu``: ``--jobs-per-gpu``); ``default`` None means "not given" (the launcher
    then decides)."""

    name: str
    kind: Kind
    help: str = ""
    default: Any = None
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    words: tuple[str, ...] = ()  # taken as they are beside the kind's values (``auto``)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def parse(self, value: Any, launcher: str) -> Any:
        """``value`` (a string from a flag, or a Python value) checked and typed; None stays
        None (not given)."""
        if value is None:
            return None
        if isinstance(value, str) and value.strip() in self.words:
            return value.strip()
        param = HParam(
            self.name,
            self.kind,
            None,
            self.help,
            low=self.low,
            high=self.high,
            choices=self.choices,
            nullable=True,
        )
        where = f"--launcher {launcher} option {self.name}"
        try:
            parsed = param.parse(value.strip() if isinstance(value, str) else value, where)
        except ConfigError:
            if not self.words:
                raise
            raise ConfigError(
                f"{where}: {self.name}={value!r} is not valid ({self.name} is {self.describe()})",
                hint=self.help,
            ) from None
        return float(parsed) if self.kind == "float" else parsed

    def describe(self) -> str:
        """What the option takes (``int >= 1 and <= 1024 or auto``), for errors."""
        described = HParam(
            self.name, self.kind, None, "", low=self.low, high=self.high, choices=self.choices
        ).describe()
        return " or ".join([described, *self.words])


def launcher_options(
    launcher: str, declared: Iterable[LauncherOption], given: Mapping[str, Any]
) -> LauncherOptions:
    """Every declared option of ``launcher`` with its value: ``given`` (keywords, or the parsed
    flags) checked, the rest at their defaults. A name the launcher does not declare is an
    error naming the ones it does."""
    table = {option.name: option for option in declared}
    unknown = sorted(set(given) - set(table))
    if unknown:
        close = difflib.get_close_matches(unknown[0], list(table), n=1)
        raise ConfigError(
            f"--launcher {launcher} has no option {', '.join(unknown)}; it takes: "
            + (", ".join(table) or "none"),
            hint=f"did you mean {close[0]!r}?" if close else None,
        )
    values = {
        name: option.parse(given[name], launcher) if name in given else option.default
        for name, option in table.items()
    }
    return SimpleNamespace(**values)
