"""What every dataset family declares and is made with (:class:`FamilyDeclaration`, the base of
:class:`~debias_bench.data.family.DatasetFamily`): its spec and the facts the engine reads about
its data (presets' values, :class:`PresetValues`; training-set sizes; what its validation split
is), its options (declared as ``DataOption`` class attributes, checked by the constructor), its
ratios, where its prepared data lies (``folder``, ``version``) and where its raw sources come
from (``remote``, ``find_raw``, ``write_fixture``). Building, loading and checking the data is
:class:`~debias_bench.data.family.DatasetFamily`'s."""

from __future__ import annotations

import dataclasses
import sys
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from debias_bench.data.download import Download
from debias_bench.data.options import DataOption, check_options, declared_options
from debias_bench.data.spec import DatasetSpec
from debias_bench.errors import BenchError, ConfigError
from debias_bench.registry import DATASETS


@dataclass(frozen=True)
class PresetValues:
    """What a preset (``--preset ci``) sets for one dataset beyond the engine-wide values of
    ``config.PRESETS``: hyperparameter values, and the build options of the small data it runs
    on (``--data-option`` wins over those)."""

    hparams: Mapping[str, Any] = field(default_factory=dict)
    data_options: Mapping[str, Any] = field(default_factory=dict)


class FamilyDeclaration(ABC):
    """What a dataset family declares on its class and is made with (its options); every
    registered dataset extends it through :class:`~debias_bench.data.family.DatasetFamily`."""

    #: set on each family class; an instance may carry its own (its registered name, options)
    spec: DatasetSpec
    #: bump when the build recipe changes, so old prepared data is not silently reused
    build_version: ClassVar[str] = "1"
    #: splits stay on disk as memory maps (the 224-px sets) instead of in memory
    memory_mapped: ClassVar[bool] = False

    # What the engine reads about the dataset, declared here and resolved, with the dataset's
    # recipe, by ``debias_bench.data.facts`` (the one place that reads these three).
    #: per preset name, what the preset sets on this dataset (``PresetValues``)
    presets: ClassVar[Mapping[str, PresetValues]] = {}
    #: training-set size per ratio (%): ``bench perf`` projects the paper grid's time with it
    train_sizes: ClassVar[Mapping[float, int]] = {}
    #: one line saying what the ``valid`` split is (every tuned winner is chosen on it)
    valid_split: ClassVar[str] = ""
    #: ``prepare`` looks for a fixture at ``fixture_root(data_root) / NAME`` by itself when the
    #: raw sources are absent (``bench data fixture NAME`` writes it there; no --raw-root)
    reads_fixture_root: ClassVar[bool] = False

    @property
    def auto_download(self) -> bool:
        """Whether ``prepare`` fetches missing raw sources itself (Colored MNIST's mirrors)."""
        return False

    data_seed = DataOption(
        int,
        0,
        "seed of the build's random draws (splits, bias assignment)",
        minimum=0,
        maximum=2**32 - 1,  # as --data-seed: a seed of the run's subsets too (torch, NumPy)
    )

    def __init__(self, raw_root: Path, data_root: Path, **options: Any) -> None:
        self.raw_root = Path(raw_root)
        self.data_root = Path(data_root)
        name = self.registered_name()
        declared = declared_options(type(self))
        given = check_options(type(self), options, name)
        self._option_values = {key: opt.default for key, opt in declared.items()} | given
        self._verified: dict[tuple[str, ...], dict[str, str]] = {}
        if name != self.spec.name:  # a subclass registered under its own name
            self.spec = dataclasses.replace(self.spec, name=name)

    @classmethod
    def registered_name(cls) -> str:
        """The name this class is registered under (its spec's name while unregistered)."""

        for entry in DATASETS:
            if entry.obj is cls:
                return entry.name
        return cls.spec.name

    @classmethod
    def data_options(cls) -> dict[str, DataOption[Any]]:
        """The declared options, by name."""
        return declared_options(cls)

    def option_values(self) -> dict[str, Any]:
        """Every option's value for this instance (defaults included)."""
        return dict(self._option_values)

    @abstractmethod
    def prepare(self, ratios: Iterable[float] | None = None, force: bool = False) -> Path:
        """Build the given ratios (default: all) into the data root; return the folder.

        A no-op when already prepared (every file the manifest lists is there), unless
        ``force``. Families that store npy splits do it with ``build_into``."""

    def split_dirs(self, ratio: float) -> tuple[Path, dict[str, Path]]:
        """(folder holding manifest.json, {"train"|"valid"|"test": split folder}) for ``ratio``."""
        raise NotImplementedError(f"{type(self).__name__} does not store npy splits")

    def repair_command(self) -> str:
        """The command that rebuilds this dataset's prepared data (its non-default build
        options included, so it rebuilds this very folder)."""
        return f"bench data prepare {self.spec.name} --force{self._option_flags()}"

    def _option_flags(self) -> str:
        """`` --data-option KEY=VALUE`` for each build option not at its default."""
        declared = declared_options(type(self))
        return "".join(
            f" --data-option {key}={value}"
            for key, value in self._option_values.items()
            if key in declared and value != declared[key].default
        )

    def remote(self) -> Download | None:
        """The public sources `bench data download NAME` fetches (None: nothing public)."""
        return None

    def find_raw(self) -> Any:
        """Where the raw sources are (no download); DataNotFoundError saying where it looked.
        The default knows no sources and assumes they are there."""
        return None

    def write_fixture(self, per_class: int | None = None) -> dict[str, Any]:
        """Write a tiny synthetic stand-in of the raw sources under ``raw_root`` (tests and
        plumbing checks only: results on it mean nothing); returns the data options that build
        it quickly. A family provides one by overriding this method (docs/extending/dataset.md,
        "A fixture")."""
        home = getattr(sys.modules.get(type(self).__module__), "__file__", type(self).__module__)
        raise BenchError(
            f"{self.spec.name} has no fixture generator",
            hint=f"define write_fixture(self, per_class=None) on {type(self).__qualname__} "
            f"({home}): write a tiny raw source under self.raw_root and return "
            "the data options that build it quickly; docs/extending/dataset.md shows one",
        )

    def version(self) -> str:
        """Identity of the prepared data, recorded in every run."""
        return f"{self.spec.name}-v{self.build_version}"

    @property
    def folder(self) -> Path:
        """Where the prepared data lives (families with build options add a tag)."""
        return self.data_root / self.spec.name / f"v{self.build_version}"

    def check_ratio(self, ratio: float) -> float:
        ratio = float(ratio)
        if ratio not in self.spec.ratios:
            valid = ", ".join(map(exact_ratio, self.spec.ratios))
            raise ConfigError(
                f"{self.spec.name} has no bias-conflicting ratio {exact_ratio(ratio)}%; "
                f"valid ratios: {valid}"
            )
        return ratio


def exact_ratio(ratio: float) -> str:
    """A ratio as given, exactly: ``5`` for 5.0, but ``5.00000001`` (``:g`` would print ``5``, and
    an error would say there is no ratio 5 % among 0.5, 1, 2, 5)."""
    short = f"{ratio:g}"
    return short if float(short) == ratio else repr(float(ratio))
