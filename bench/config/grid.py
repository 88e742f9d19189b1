"""Expanding a sweep's grid (methods x datasets x ratios x seeds) into run configurations: one
:class:`~debias_bench.config.run_config.RunRequest` per run, resolved into its config."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from debias_bench.config.amp_policy import bf16_loss_note
from debias_bench.config.run_config import (
    Resolution,
    RunConfig,
    RunRequest,
    method_yaml,
    preset_data_options,
    recipe_dataset,
    resolve_layers,
)
from debias_bench.data.family import exact_ratio
from debias_bench.data.options import check_data_options, data_options_by_dataset
from debias_bench.errors import ConfigError
from debias_bench.registry import DATASETS

#: a sweep of more runs than this gets a warning with its size before any folder is made: the
#: paper's whole comparison (every method x dataset x ratio, 3 seeds) is 672 runs, and a slip of
#: ``--seeds`` (``0-20000``) or ``--ratios`` makes tens of thousands
LARGE_GRID = 1_000


def _count(n: int, what: str) -> str:
    return f"{n:,} {what}{'' if n == 1 else 's'}"


def grid_size(configs: list[RunConfig]) -> str:
    """``20,000 runs (1 method, 1 dataset, 1 ratio, 20,000 seeds)``."""
    axes = [
        _count(len({getattr(c, axis) for c in configs}), axis)
        for axis in ("method", "dataset", "ratio", "seed")
    ]
    return f"{_count(len(configs), 'run')} ({', '.join(axes)})"


def large_grid_warning(configs: list[RunConfig]) -> str | None:
    """A warning when the grid has more than :data:`LARGE_GRID` runs (a sweep plans a folder
    for each as it starts): its size per axis. A warning, not a refusal: large grids are real
    (a tuning study, many seeds), and a sweep prints it before it makes a single folder."""
    if len(configs) <= LARGE_GRID:
        return None
    return (
        f"a grid of {grid_size(configs)}, more than {LARGE_GRID:,}: the sweep makes a run "
        "folder for each in --out before it starts one; check --seeds and --ratios "
        "(`--dry-run` counts the runs without making any)"
    )


@dataclass
class Grid:
    """A sweep: the runs of every method x dataset x ratio x seed, each requested with the same
    protocol, preset, ``--epochs``, ``--set`` and dataset options (:meth:`request`)."""

    methods: list[str]
    datasets: list[str]
    ratios: list[float] | None  # None: every ratio each dataset supports
    seeds: list[int]
    protocol: str = "official"
    preset: str = "paper"
    epochs: int | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    data_options: dict[str, Any] = field(default_factory=dict)
    #: per-cell values (``bench run --hparams tuned.yaml``): (method, dataset, ratio) -> values
    tuned: dict[tuple[str, str, float], dict[str, Any]] = field(default_factory=dict)

    def request(
        self, method: str, dataset: str, ratio: float, seed: int, options: dict[str, Any]
    ) -> RunRequest:
        """The request of one run of the grid (``options``: the dataset's checked options)."""
        return RunRequest(
            method,
            dataset,
            ratio,
            seed,
            protocol=self.protocol,
            preset=self.preset,
            epochs=self.epochs,
            overrides=self.overrides,
            data_options=options,
            tuned=self.tuned.get((method, dataset, float(ratio))),
        )


def expand(grid: Grid) -> tuple[list[RunConfig], list[str]]:
    """Configs of the grid (each checked; duplicates collapsed), and notes: combinations left
    out (unsupported ratios) and methods that have no settings for a dataset."""
    configs: list[RunConfig] = []
    notes: list[str] = []
    # each dataset gets the grid-wide options it declares, checked (debias_bench.data.options)
    given = data_options_by_dataset(grid.datasets, grid.data_options)
    for dataset in grid.datasets:
        options = check_data_options(dataset, preset_data_options(grid.preset, dataset))
        options.update(given[dataset])
        supported = DATASETS.get(dataset).spec.ratios
        ratios = supported if grid.ratios is None else [r for r in grid.ratios if r in supported]
        dropped = [r for r in (grid.ratios or []) if r not in supported]
        if dropped:
            notes.append(
                f"{dataset}: no ratio {', '.join(map(exact_ratio, dropped))}% "
                f"(has {', '.join(map(exact_ratio, supported))}); left out"
            )
        for ratio in ratios:
            for method in grid.methods:
                for seed in grid.seeds:
                    request = grid.request(method, dataset, ratio, seed, options)
                    configs.append(request.config())
                    if configs[-1].hparams.get("image_size") and seed == grid.seeds[0]:
                        note = resize_note(dataset, resolve_layers(request))
                        notes += [note] if note and note not in notes else []
    if not configs:
        raise ConfigError("the grid is empty", hint="; ".join(notes) or None)
    notes += [n for d in grid.datasets for m in grid.methods if (n := bare_defaults_note(m, d))]
    asked = {(c.dataset, c.method) for c in configs if str(c.hparams.get("amp")) == "bf16"}
    notes += [n for d, m in sorted(asked) if (n := bf16_loss_note(d, m))]
    unique = {c.run_id: c for c in configs}  # --seeds 0,0 or --ratios 5,5.0: one run each
    return list(unique.values()), notes


def resize_note(dataset: str, resolved: Resolution) -> str | None:
    """A note when the run reads its images at another size than its dataset's own (the
    ``image_size`` hyperparameter, e.g. of the ``ci`` preset): the two sizes and where the new
    one comes from. The engine resizes every split to a square, so a 64x32 set loses its
    shape too; nothing else would say so."""
    side = resolved.values.get("image_size")
    spec = DATASETS.get(dataset).spec
    if not side or (side, side) == tuple(spec.image_size):
        return None
    return (
        f"{dataset}: images read at {side}x{side}, not the dataset's own "
        f"{spec.size_text} (height x width): image_size={side} from "
        f"{resolved.sources['image_size']}; `--set image_size=null` keeps the dataset's size"
    )


def bare_defaults_note(method: str, dataset: str) -> str | None:
    """A note when ``method`` has settings for other datasets but none for ``dataset`` (its own
    YAML entry or its recipe's): which keys then fall back to the method's bare defaults."""
    entries = method_yaml(method).get("datasets") or {}
    if not entries or recipe_dataset(method, dataset) is not None:
        return None
    keys = sorted({k for entry in entries.values() for k in (entry or {})} - {"ratios", "presets"})
    return (
        f"{method} has no settings for {dataset} (no entry in its YAML, no recipe=): "
        f"bare defaults for {', '.join(keys)}; `bench config {method} {dataset}` shows them"
    )
