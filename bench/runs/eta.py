"""The time left of a set of runs: one computation for the sweep's summary line (``[sweep] ...
ETA``) and ``bench status``, from the same facts of the run store, so the two agree for one
store at one moment (when the store holds that sweep's runs).

The facts: how long a done run took (:func:`done_timing`: its last start's wall time, scaled to
all its steps, from ``status.json``), what makes runs take alike long (:func:`run_kind`: the
dataset, method, preset and the settings that set a run's length), each running run's
heartbeat (:class:`~debias_bench.runs.progress.Live`), the runs still to start, and how many
run at once (those running now: :func:`time_left`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from debias_bench.runs.progress import Live
from debias_bench.runs.run_dir import RunDir
from debias_bench.runs.states import RunState, effective_state
from debias_bench.runs.store import RunStore

#: the settings that change how many steps a run makes (or how long each takes)
LENGTH_KEYS = ("epochs", "steps", "bias_epochs", "train_limit", "batch_size", "image_size")


def run_kind(
    dataset: str, method: str, preset: str | None = None, hparams: Mapping[str, Any] | None = None
) -> str:
    """What the ETA tells runs apart by: runs of one dataset, method, preset and length take
    alike long (an ETF-Debias run can take five times a Vanilla one, a ``paper`` run a hundred
    times a ``quick`` one)."""
    # as JSON: a tuple here is a list once read back from config.json
    length = [
        f"{k}={json.dumps(hparams[k], default=str)}"
        for k in LENGTH_KEYS
        if hparams and hparams.get(k) is not None
    ]
    return "/".join([dataset, method, *([preset] if preset else []), *length])


def config_kind(config: Mapping[str, Any]) -> str:
    """:func:`run_kind` of a run's ``config.json``."""
    return run_kind(
        config["dataset"], config["method"], config.get("preset"), config.get("hparams")
    )


def run_duration(status: Mapping[str, Any]) -> float | None:
    """How long the whole run took, from a done run's ``status.json``: the wall time of its
    last start (set-up and evaluations included, like a running run's ETA), scaled to all its
    steps when that start resumed; None when the status does not tell."""
    started, ended = status.get("started"), status.get("ended")
    if status.get("state") != RunState.DONE or started is None or ended is None:
        return None
    total = int(status.get("total_steps") or 0)
    resumed = int(status.get("resumed_from") or 0)
    share = (total - resumed) / total if total and 0 <= resumed < total else 1.0
    return max(0.0, float(ended) - float(started)) / share


def done_timing(run_dir: RunDir) -> tuple[str, float] | None:
    """(kind, duration) of a done run; None for a run that is not done or does not tell."""
    try:
        if effective_state(run_dir.facts()) is not RunState.DONE:
            return None
        duration = run_duration(run_dir.status())
        return None if duration is None else (config_kind(run_dir.config()), duration)
    except Exception:  # a torn or foreign file: it tells nothing (status lists it as corrupt)
        return None


def finished_timings(store: RunStore) -> list[tuple[str, float]]:
    """:func:`done_timing` of every done run of the store."""
    return [t for run_dir in store.runs() if (t := done_timing(run_dir)) is not None]


def sweep_eta(
    finished: Sequence[tuple[str, float]],
    waiting: Sequence[str | None],
    running: Sequence[tuple[str, Live | None]],
    parallel: int,
) -> float | None:
    """Time left of a sweep, spread over ``parallel`` runs at once and never less than the
    longest running run's ETA; None while nothing tells.

    A running run counts its own ETA. A run still to start counts the mean duration of the
    finished runs of its kind, else of the running ones of its kind (elapsed time plus ETA),
    else of all finished (else running) runs; ``None`` as its kind means unknown.
    ``finished`` holds (kind, seconds); ``running`` (kind, its progress)."""
    projected = [
        (kind, r.elapsed_s + r.eta_s)
        for kind, r in running
        if r is not None and r.eta_s is not None and r.elapsed_s is not None
    ]

    def mean(durations: list[float]) -> float | None:
        return sum(durations) / len(durations) if durations else None

    overall = mean([d for _, d in finished]) or mean([d for _, d in projected])

    def per_run(kind: str | None) -> float | None:
        for pool in (finished, projected):
            same = mean([d for k, d in pool if k == kind])
            if kind is not None and same is not None:
                return same
        return overall

    left = [r.eta_s if r is not None and r.eta_s is not None else per_run(k) for k, r in running]
    ahead = [per_run(kind) for kind in waiting]
    spans = [x for x in left if x is not None]
    if any(x is None for x in left + ahead):
        return None
    work = sum(spans) + sum(x for x in ahead if x is not None)
    return max(max(spans, default=0.0), work / max(1, parallel))


def time_left(
    finished: Sequence[tuple[str, float]],
    waiting: Sequence[str | None],
    running: Sequence[tuple[str, Live | None]],
) -> float | None:
    """The ETA both the sweep and ``bench status`` show: :func:`sweep_eta` at the pace of now,
    the runs running now at once (a launcher's slot count is not in the store, and a SLURM
    array runs as many as the cluster lets it)."""
    return sweep_eta(finished, waiting, running, max(1, len(running)))
