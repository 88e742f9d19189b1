"""Accuracy regression checks: a new sweep against a baseline of several seeds.

``record`` (:mod:`debias_bench.analysis.baseline`) keeps, per cell (dataset x method x ratio x
protocol), the test accuracies of every seed of a finished sweep (usually the ``ci`` preset,
many seeds). ``compare`` sets a new sweep beside it (a few seeds): a metric whose mean
over the new runs drops below the mean of the baseline's seeds by more than its allowance, or
a cell the new sweep lacks, is a regression. Gains beyond it are reported, never failed: lock
them in by recording again. Every difference is listed (``changed``); a run that reproduces its
seed's recorded value exactly is ``ok``.

A metric's allowance is the larger of ``--tolerance`` (points) and ``z`` (``--noise-z``,
default 4) times ``sqrt(s^2 (1/M + 1/K) + w se^2)``: ``s`` the standard deviation of the
metric over the baseline's ``K`` seeds (0 for one seed), ``M`` the new runs of the cell, ``se``
the standard error of the accuracy on the ``n`` test images the new run measured it on (never
the baseline's count: a baseline edited to a tiny count cannot widen it), at the Agresti-Coull
centre ``(x + 2) / (n + 4)``, ``w`` = ``TEST_NOISE_WEIGHT``. The first term is the variance of
the difference of two means of seeds; the second a floor for what a few seeds cannot show
(LfF+BE's 105 bias-aligned Colored MNIST images, 96-100 % right on each of 15 seeds, came out
90.5 % under other kernels). Where the baseline holds its seeds as they ran under other
kernels (``bench regress kernels``) and those move a seed less than another seed would, the
new runs are compared with their own seeds' recorded values instead, with ``tau_u^2 / M`` in
place of the seeds' term (paired by seed). :mod:`debias_bench.analysis.regress_rule` computes
it, with the minimum detectable drop (the true drop caught with 80 % power) and an
explanation.

Why seeds: on another CPU (other SIMD kernels, another BLAS) a short run's float rounding
takes another path, and training amplifies a last-bit difference the way another seed does;
the test-set noise alone (the check of format 1) models neither. Measured on this project's
``ci`` sweep (docs/regression.md; AMD EPYC, AVX-512): the same code with PyTorch's kernels
forced to ``default`` (oneDNN SSE4.1, MKL SSE4.2) moved 126 of 220 metrics of seed 0, by up to
17 points (Corrupted CIFAR-10 PGD's 100 bias-aligned images), under ``avx2`` 94; float64 does
not remove it (EnD on Colored MNIST: a 4e-17 difference at step 10 grows about 1000-fold every
10 steps, 1e-3 by step 80) and costs 1.4-2.7 times the time. Against baselines of 4 or 5
seeds, no drift nor other seed went beyond 3.6 standard deviations (3,520 comparisons), and
every method trained with a learning rate 100 times too small on Colored MNIST dropped 5.7 or
more.

A baseline recorded under another preset or protocol than the new sweep's runs is refused (a
:class:`~debias_bench.errors.BenchError`, exit 2), never a check that passes.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from debias_bench.analysis.baseline import (
    CURVE,
    TRACKED,
    by_cell,
    cell_key,
    environment,
    load_baseline,
    metric_key,
    record,
    run_key,
    save_baseline,
    sweep_cells,
    sweep_runs,
)
from debias_bench.analysis.regress_rule import (
    DEFAULT_NOISE_Z,
    DEFAULT_TOLERANCE,
    TEST_NOISE_WEIGHT,
    Allowance,
    noise,
)
from debias_bench.errors import BenchError
from debias_bench.reporting.stats import difference

__all__ = [
    "DEFAULT_NOISE_Z",
    "DEFAULT_TOLERANCE",
    "TEST_NOISE_WEIGHT",
    "TRACKED",
    "Allowance",
    "Comparison",
    "Difference",
    "allowance",
    "by_cell",
    "cell_key",
    "check_same_sweep",
    "compare",
    "kernel_diffs",
    "load_baseline",
    "metric_key",
    "noise",
    "record",
    "run_key",
    "save_baseline",
    "sweep_cells",
    "sweep_runs",
]


@dataclass(frozen=True)
class Difference:
    cell: str
    metric: str
    baseline: float | None  # the reference: the baseline's seeds' mean (paired: the new runs')
    current: float | None  # the mean over the new runs of the cell
    status: str  # ok | changed | improved | regressed | missing | new
    allowed: float | None = None  # the drop (and gain) the check allows, in points
    spread: float | None = None  # standard deviation over the baseline's seeds (None: one)
    rule: Allowance | None = None  # how ``allowed`` was computed (regress_rule)

    @property
    def diff(self) -> float | None:
        return difference(self.current, self.baseline)

    @property
    def mdd(self) -> float | None:
        """The drop the check catches with 80 % power (:attr:`Allowance.mdd`)."""
        return None if self.rule is None else self.rule.mdd


@dataclass
class Comparison:
    differences: list[Difference]
    tolerance: float
    notes: list[str]
    noise_z: float = DEFAULT_NOISE_Z
    seeds: tuple[int, ...] = ()  # how many seeds the baseline's cells hold (min, max)

    @property
    def failed(self) -> list[Difference]:
        return [d for d in self.differences if d.status in ("regressed", "missing")]

    def count(self, status: str) -> int:
        return sum(d.status == status for d in self.differences)


def allowance(
    recorded: list[float], n: int | None, runs: int, tolerance: float, z: float
) -> tuple[float, float | None]:
    """The drop allowed for the mean of ``runs`` new runs against the ``recorded`` values (one
    per seed), each measured on ``n`` test images, and the seeds' standard deviation (None for
    one seed): ``max(tolerance, z sqrt(s^2 (1/runs + 1/K) + TEST_NOISE_WEIGHT se^2))``
    (:class:`~debias_bench.analysis.regress_rule.Allowance`)."""
    rule = Allowance(tuple(recorded), runs, n, tolerance, z)
    return rule.allowed, rule.spread


def _status(
    recorded: dict[int, float], now: dict[int, float], rule: Allowance
) -> tuple[str, float, float]:
    """The metric's status, the reference it was compared with (:attr:`Allowance.reference`)
    and the new runs' mean."""
    base, current, allowed = rule.reference, statistics.fmean(now.values()), rule.allowed
    if current < base - allowed:
        status = "regressed"
    elif current > base + allowed:
        status = "improved"
    else:
        same = all(seed in recorded and recorded[seed] == value for seed, value in now.items())
        status = "ok" if same else "changed"
    return status, base, current


def kernel_diffs(cell: dict[str, Any], metric: str) -> tuple[tuple[float, ...], ...]:
    """Per kernel setting of the cell (its ``kernels``,
    :func:`~debias_bench.analysis.kernel_pairs.add_kernels`), that setting's value of
    ``metric`` minus the cell's own, per recorded seed."""
    own = dict(zip(cell["seeds"], cell["metrics"].get(metric, []), strict=False))
    return tuple(
        tuple(
            round(value - own[seed], 4)
            for seed, value in zip(
                setting["seeds"], setting["metrics"].get(metric, []), strict=False
            )
            if seed in own
        )
        for setting in cell.get("kernels", {}).values()
    )


def _one_or_many(values: set[str]) -> str:
    return ", ".join(repr(v) for v in sorted(values))


def check_same_sweep(
    baseline: dict[str, Any],
    cells: dict[str, dict[str, Any]],
    baseline_name: str = "the baseline",
    sweep_name: str = "the new sweep",
) -> None:
    """Refuse (BenchError, exit 2) a baseline recorded under another preset or protocol than
    the finished runs in ``cells``: their numbers differ by design (a ``smoke`` run is not a
    ``ci`` run), so every difference would be noise or every cell missing. Preset: a cell of
    both with another preset, or no preset in common; protocol (part of a cell's key): no
    protocol in common."""
    base = baseline["cells"]
    if not cells:
        return  # nothing finished: every baseline cell is missing (exit 1)
    fix = f"record a baseline of this sweep (bench regress record --out RUNS -o {baseline_name})"
    for what in ("preset", "protocol"):
        recorded = {c[what] for c in base.values() if isinstance(c.get(what), str)}
        ran = {c[what] for c in cells.values() if isinstance(c.get(what), str)}
        clash = [
            key
            for key, cell in cells.items()
            if key in base
            and isinstance(cell.get(what), str)
            and isinstance(base[key].get(what), str)
            and cell[what] != base[key][what]
        ]
        if clash or (ran and recorded and not recorded & ran):
            example = f" (e.g. cell {clash[0]})" if clash else ""
            raise BenchError(
                f"{baseline_name} was recorded under {what} {_one_or_many(recorded)}, the runs "
                f"in {sweep_name} under {what} {_one_or_many(ran)}{example}: a check compares "
                f"runs of the same {what}",
                hint=f"run the sweep with --{what} {sorted(recorded)[0]}, or {fix}",
            )


def _notes(
    baseline: dict[str, Any], recounted: list[str], uncounted: list[str], name: str
) -> list[str]:
    notes = []
    if recounted:
        notes.append(
            f"{len(recounted)} metric(s) were measured on another number of test images than "
            f"{name} records (e.g. {recounted[0]}): the noise term uses the run's count; if "
            "the test set changed, record the baseline again"
        )
    if uncounted:
        notes.append(
            f"{len(uncounted)} metric(s) have no image count in their run (e.g. "
            f"{uncounted[0]}): checked against the seeds' spread and --tolerance only"
        )
    single = [key for key, cell in baseline["cells"].items() if len(cell["seeds"]) == 1]
    if single:
        notes.append(
            f"{len(single)} baseline cell(s) hold one seed (e.g. {single[0]}): their allowance "
            "is the test-set noise alone, which another CPU's drift can exceed; record several "
            "seeds (bench run ... --seeds 0,1,2,3,4, then bench regress record)"
        )
    env, here = baseline.get("environment", {}), environment()
    for key in ("torch", "device", "machine", "cpu_capability"):
        if key in env and env.get(key) != here.get(key):
            notes.append(
                f"environment differs: {key} {env.get(key)} in {name}, {here.get(key)} here; "
                "numbers move for that reason alone, as with another seed"
            )
    return notes


def _data_notes(baseline: dict[str, Any], cells: dict[str, dict[str, Any]], name: str) -> list[str]:
    """One note per dataset whose new runs trained on other prepared data than the baseline's
    runs (their data fingerprints differ; a baseline recorded without them says nothing)."""
    other: dict[str, tuple[set[str], set[str]]] = {}
    for key, base in baseline["cells"].items():
        now = cells.get(key, {}).get("data")
        if base.get("data") and now and not set(now) <= set(base["data"]):
            recorded, here = other.setdefault(base["dataset"], (set(), set()))
            recorded.update(base["data"])
            here.update(now)
    return [
        f"{dataset}: the new runs trained on other prepared data than {name}'s runs (data "
        f"fingerprint {', '.join(sorted(here))} here, {', '.join(sorted(recorded))} there): "
        "another raw release, or another image decoder (Pillow) that decodes other pixels; "
        "their numbers move as another seed's would. Prepare the data as the baseline did, "
        "or record the baseline on this data"
        for dataset, (recorded, here) in sorted(other.items())
    ]


def _without_curve(
    baseline: dict[str, Any], cells: dict[str, dict[str, Any]]
) -> tuple[dict[str, dict[str, Any]], bool]:
    """The new cells without their ``curve`` metrics when no cell of ``baseline`` holds one
    (recorded before they were: the check says so in a note), and whether it did that."""
    if any(m.startswith(f"{CURVE}.") for c in baseline["cells"].values() for m in c["metrics"]):
        return cells, False

    def drop(named: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in named.items() if not k.startswith(f"{CURVE}.")}

    return {
        key: {**cell, "metrics": drop(cell["metrics"]), "counts": drop(cell["counts"])}
        for key, cell in cells.items()
    }, True


def compare(
    baseline: dict[str, Any],
    cells: dict[str, dict[str, Any]],
    tolerance: float = DEFAULT_TOLERANCE,
    unfinished: list[str] | None = None,
    noise_z: float = DEFAULT_NOISE_Z,
    baseline_name: str = "the baseline",
    sweep_name: str = "the new sweep",
) -> Comparison:
    """Every tracked metric of every baseline cell (format 2, as :func:`load_baseline` returns
    it) against the new sweep's ``cells`` (:func:`sweep_cells`). The noise term of a metric
    uses the number of test images the new run measured it on (its own count), never the
    baseline's. Refused (BenchError): a baseline of another preset or protocol
    (:func:`check_same_sweep`), or a baseline cell without a metric its runs measured (that
    metric would go unchecked)."""
    if tolerance < 0:
        raise BenchError(f"tolerance must be >= 0, not {tolerance}")
    check_same_sweep(baseline, cells, baseline_name, sweep_name)
    rerecord = f"record it again: bench regress record --out RUNS -o {baseline_name}"
    cells, predates = _without_curve(baseline, cells)
    unchecked = [
        f"cell {key!r} has no {', '.join(sorted(lacks))}, which run "
        f"{cells[key]['run_ids'][0]} measured"
        for key, base in baseline["cells"].items()
        if key in cells and (lacks := set(cells[key]["metrics"]) - set(base["metrics"]))
    ]
    if unchecked:
        more = f" (and {len(unchecked) - 3} more cells)" if len(unchecked) > 3 else ""
        raise BenchError(
            f"{baseline_name}: " + "; ".join(unchecked[:3]) + more + ": it would go unchecked",
            hint=rerecord,
        )
    out: list[Difference] = []
    recounted: list[str] = []
    uncounted: list[str] = []
    for key, base in baseline["cells"].items():
        now = cells.get(key)
        if now is None:
            out.append(Difference(key, "(cell)", None, None, "missing"))
            continue
        for metric, values in base["metrics"].items():
            if metric not in now["metrics"]:
                out.append(Difference(key, metric, statistics.fmean(values), None, "missing"))
                continue
            n = now["counts"].get(metric)  # the images the new runs measured it on
            recorded = base["counts"].get(metric)
            if n is None:
                uncounted.append(f"{key} {metric}")
            elif recorded != n:
                recounted.append(f"{key} {metric}: {recorded} in the baseline, {n} now")
            runs = dict(zip(now["seeds"], now["metrics"][metric], strict=True))
            by_seed = dict(zip(base["seeds"], values, strict=True))
            own = tuple(by_seed[s] for s in runs) if set(runs) <= set(by_seed) else None
            rule = Allowance(
                tuple(values),
                len(runs),
                n,
                tolerance,
                noise_z,
                kernels=kernel_diffs(base, metric),
                own=own,
            )
            status, mean, current = _status(by_seed, runs, rule)
            out.append(
                Difference(key, metric, mean, current, status, rule.allowed, rule.spread, rule)
            )
    out += [
        Difference(key, "(cell)", None, None, "new")
        for key in cells
        if key not in baseline["cells"]
    ]
    notes = [f"not finished in the new sweep: {line}" for line in unfinished or []]
    if predates:
        notes.append(
            f"{baseline_name} predates the learning curve's mean ({CURVE}.*): those metrics "
            f"are not checked; {rerecord} to check them"
        )
    notes += _data_notes(baseline, cells, baseline_name)
    notes += _notes(baseline, recounted, uncounted, baseline_name)
    sizes = [len(cell["seeds"]) for cell in baseline["cells"].values()]
    return Comparison(out, tolerance, notes, noise_z, (min(sizes), max(sizes)))
