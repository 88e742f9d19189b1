"""What ``bench tune`` searches (:class:`TuneRequest`) and its plan: per method x dataset x ratio
(a :class:`Cell`), the search and each trial's run configurations on the tuning seeds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from debias_bench.analysis.tuning import TUNE_SELECTIONS, CellSearch, Trial, search_space
from debias_bench.config.bounds import MAX_SEED, check_bound
from debias_bench.config.grid import Grid, expand
from debias_bench.config.run_config import RunConfig
from debias_bench.errors import ConfigError
from debias_bench.registry import DATASETS, METHODS
from debias_bench.session.run import Names, names_of

#: the most trials per cell a request may ask for (a typo beyond)
MAX_TRIALS = 10_000


@dataclass(frozen=True)
class TuneRequest:
    """A search: the cells (``methods`` x ``datasets`` x ``ratios``, None: each dataset's), the
    ``trials`` per cell, the ``tune_seeds`` of every trial, the ``seeds`` of the winners'
    reruns, the validation ``selection`` that ranks trials, the ``sampler_seed`` of the draws,
    and the grid's terms (as :class:`~debias_bench.session.run.GridRequest`); the keys of
    ``overrides`` are fixed, not searched."""

    methods: Names = ("vanilla", "etf_debias")
    datasets: Names = ("cmnist",)
    ratios: Sequence[float] | None = None
    trials: int = 10
    tune_seeds: Sequence[int] = (0,)
    seeds: Sequence[int] = (1, 2, 3)
    selection: str = "best_valid"
    sampler_seed: int = 0
    preset: str = "paper"
    protocol: str = "official"
    epochs: int | None = None
    overrides: Mapping[str, Any] = field(default_factory=dict)
    data_seed: int = 0
    data_options: Mapping[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        """The bounds ``bench tune``'s flags check, for values given from Python; seeds that
        are both tuning and rerun seeds."""
        check_bound("trials", self.trials, 1, MAX_TRIALS)
        check_bound("sampler_seed", self.sampler_seed, 0, MAX_SEED)
        if self.selection not in TUNE_SELECTIONS:
            raise ConfigError(
                f"selection={self.selection!r} is not one of {', '.join(TUNE_SELECTIONS)}",
                hint="trials are ranked on validation, never on a test metric",
            )
        if not self.tune_seeds or not self.seeds:
            raise ConfigError("--tune-seeds and --seeds need at least one seed each")
        shared = sorted(set(self.tune_seeds) & set(self.seeds))
        if shared:
            raise ConfigError(
                f"seed(s) {', '.join(map(str, shared))} are in both --tune-seeds and --seeds",
                hint="rerun the winners on seeds the search did not use, e.g. --seeds 1,2,3",
            )

    def grid(
        self, method: str, dataset: str, ratios: list[float] | None, seeds: Sequence[int],
        overrides: Mapping[str, Any],
    ) -> Grid:  # fmt: skip
        """The grid of one cell's runs on ``seeds`` with ``overrides``."""
        return Grid(
            methods=[method],
            datasets=[dataset],
            ratios=ratios,
            seeds=list(seeds),
            protocol=self.protocol,
            preset=self.preset,
            epochs=self.epochs,
            overrides=dict(overrides),
            data_options={"data_seed": self.data_seed, **self.data_options},
        )


@dataclass
class Cell:
    """One method x dataset x ratio: its search and the runs of each trial."""

    method: str
    dataset: str
    ratio: float
    search: CellSearch
    trials: list[tuple[Trial, list[RunConfig]]]

    @property
    def label(self) -> str:
        return f"{self.method} {self.dataset} r{self.ratio:g}"


def plan_cells(request: TuneRequest) -> tuple[list[Cell], list[str]]:
    """Every cell with its trials' run configurations, and notes on ratios left out."""
    fixed = dict(request.overrides)
    ratios = list(request.ratios) if request.ratios else None
    cells, notes = [], []
    for dataset in DATASETS.resolve(names_of(request.datasets)):
        for method in METHODS.resolve(names_of(request.methods)):
            space = {k: d for k, d in search_space(method, dataset).items() if k not in fixed}
            if not space:
                raise ConfigError(f"--set fixes every searched key of {method} on {dataset}")
            first = request.tune_seeds[:1]
            base, more = expand(request.grid(method, dataset, ratios, first, fixed))
            notes += [n for n in more if n not in notes]
            for ratio in [c.ratio for c in base]:
                search = CellSearch(method, dataset, ratio, space, request.sampler_seed)
                trials = []
                for trial in search.ask(request.trials):
                    overrides = fixed | trial.values
                    grid = request.grid(method, dataset, [ratio], request.tune_seeds, overrides)
                    trials.append((trial, expand(grid)[0]))
                cells.append(Cell(method, dataset, ratio, search, trials))
    return cells, notes
