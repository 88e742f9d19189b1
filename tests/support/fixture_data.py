"""A dataset family built from its tiny fixture (``write_fixture``: synthetic raw sources) in
a temporary folder, for the tests of prepared data: its checks and its atomic rebuilds."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from debias_bench.cli import main
from debias_bench.data.family import DatasetFamily

F = TypeVar("F", bound=DatasetFamily)


@dataclass(frozen=True)
class FixtureData(Generic[F]):
    """The fixture of ``cls`` written under ``raw``, to be prepared under ``data`` with the data
    ``options`` that build it quickly."""

    cls: type[F]
    raw: Path
    data: Path
    options: dict[str, Any]

    @classmethod
    def written(cls, family: type[F], tmp_path: Path) -> FixtureData[F]:
        """The raw fixture only: nothing prepared yet."""
        raw, data = tmp_path / "raw", tmp_path / "data"
        return cls(family, raw, data, family(raw, data).write_fixture())

    @classmethod
    def prepared(cls, family: type[F], tmp_path: Path) -> FixtureData[F]:
        built = cls.written(family, tmp_path)
        built.family().prepare()
        return built

    def family(self, **changes: Any) -> F:
        """A new instance on these roots (nothing carried over from an earlier one), with its
        options (``changes`` win)."""
        return self.cls(self.raw, self.data, **{**self.options, **changes})

    def option_args(self) -> list[str]:
        """Its options as ``bench`` flags (``--data-option KEY=VALUE``)."""
        return [a for k, v in self.options.items() for a in ("--data-option", f"{k}={v}")]

    def prepare_argv(self, *extra: str) -> list[str]:
        """``bench data prepare NAME`` on these roots, its options given, then ``extra``."""
        name = self.cls.registered_name()
        argv = ["data", "prepare", name, "--raw-root", str(self.raw), "--data-root", str(self.data)]
        return [*argv, *self.option_args(), *extra]

    def prepare_command(self, *extra: str) -> int:
        """``bench data prepare`` in this process (:meth:`prepare_argv`): the exit code."""
        return main(self.prepare_argv(*extra))
