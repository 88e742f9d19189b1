"""``debias_bench.regress_sweep`` (and ``bench regress sweep``): train the runs a regression
check compares with a baseline, in one sweep.

The baseline says what to run: its preset, protocol and ratios per dataset, for every method
``bench run`` counts in ``all`` (a method without a cell comes out ``new`` in the check).
Cells of the datasets in :data:`DESIGNED` get the seeds ``0..M-1``,
``M`` the fewest runs that bring the cell's headline allowance under the target
(:func:`~debias_bench.analysis.check_design.check_runs`, from the baseline alone); the other
datasets' cells seed 0, which is all the CI budget gives runs that long. ``seeds`` gives every
cell the same seeds instead. All of it is one plan in one launcher: the 2 workers of CI stay
busy across datasets and seed counts, where a ``bench run`` per seed count paid each start-up
and each tail on an idle worker (docs/regression.md, "The learning curve's mean").
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from debias_bench.analysis.check_design import check_runs
from debias_bench.analysis.regression import load_baseline
from debias_bench.errors import ConfigError
from debias_bench.registry import DATASETS, METHODS
from debias_bench.session.execute import Execution
from debias_bench.session.run import GridRequest, Plan, RunSummary, plan_grid, run_grid

#: the datasets whose cells get the seeds their baseline asks for: Colored MNIST's ``ci`` runs
#: take seconds, an image set's the CI budget gives one seed
DESIGNED = ("cmnist",)
#: the runs a designed cell gets where no number up to the most brings it under the target
DEFAULT_RUNS = 2


def _one(values: set[Any], what: str, path: str) -> Any:
    if len(values) != 1:
        raise ConfigError(
            f"the baseline {path} holds cells of {len(values)} {what}s "
            f"({', '.join(sorted(map(str, values)))}): one sweep runs one",
            hint="record one baseline per preset and protocol",
        )
    return next(iter(values))


def check_seeds(
    recorded: dict[str, Any], dataset: str, methods: Sequence[str]
) -> dict[str, tuple[int, ...]]:
    """Per method of ``methods``, the seeds the check of ``recorded`` trains on ``dataset``."""
    if dataset in DESIGNED:
        plan = check_runs(recorded, dataset, list(methods), DEFAULT_RUNS)
        return {m: tuple(range(n)) for m, n in plan.items()}
    return dict.fromkeys(methods, (0,))


def regress_requests(
    baseline: str | Path,
    datasets: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
) -> list[GridRequest]:
    """The grids of the check of ``baseline`` (the module docstring's rules) on ``datasets``
    (None: every dataset it holds), one per dataset and list of seeds."""
    recorded = load_baseline(Path(baseline))
    cells = list(recorded["cells"].values())
    preset = _one({c["preset"] for c in cells}, "preset", str(baseline))
    protocol = _one({c["protocol"] for c in cells}, "protocol", str(baseline))
    held = sorted({c["dataset"] for c in cells})
    wanted = DATASETS.resolve(list(datasets)) if datasets else held
    lacking = [d for d in wanted if d not in held]
    if lacking:
        raise ConfigError(
            f"the baseline {baseline} holds no cell of {', '.join(lacking)}: nothing to check "
            "it against",
            hint=f"its datasets: {', '.join(held)}; or record a baseline that holds it",
        )
    methods = METHODS.names()
    requests = []
    for dataset in wanted:
        ratios = sorted({float(c["ratio"]) for c in cells if c["dataset"] == dataset})
        if seeds is not None:
            runs = dict.fromkeys(methods, tuple(seeds))
        else:
            runs = check_seeds(recorded, dataset, methods)
        for group in sorted(set(runs.values())):
            requests.append(
                GridRequest(
                    methods=[m for m in methods if runs[m] == group],
                    datasets=[dataset],
                    ratios=ratios,
                    seeds=group,
                    preset=preset,
                    protocol=protocol,
                )
            )
    return requests


def regress_plan(
    baseline: str | Path,
    datasets: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
) -> tuple[GridRequest, Plan]:
    """The check's runs as one plan (each grid planned and checked as ``bench run`` plans
    one), with one of its grids (they share the preset and protocol ``execute`` reads)."""
    requests = regress_requests(baseline, datasets, seeds)
    plans = [plan_grid(r) for r in requests]
    notes = list(dict.fromkeys(n for p in plans for n in p.notes))
    warnings = list(dict.fromkeys(w for p in plans for w in p.warnings))
    return requests[0], Plan([c for p in plans for c in p.configs], notes, warnings)


def regress_sweep(
    baseline: str | Path,
    store: str | Path,
    how: Execution | None = None,
    *,
    datasets: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    dry_run: bool = False,
) -> RunSummary:
    """Train the check of ``baseline`` into the run store ``store`` (``bench regress sweep``;
    then :func:`~debias_bench.session.regress.regress_check`): finished runs are skipped,
    interrupted ones resume, as ``bench run`` does."""
    request, plan = regress_plan(baseline, datasets, seeds)
    return run_grid(request, how or Execution(), store, dry_run=dry_run, plan=plan)
