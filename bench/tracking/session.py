"""One run of the store sent to every tracker of the sweep, from whichever process trains it
(live) or from the store afterwards (``bench track export``); both take the same path.

The run's ``tracking.json`` (written through :class:`~debias_bench.runs.run_dir.RunDir`) keeps, per
target, the tracker's id for the run, the last step sent, the final state sent and the seconds
spent in the tracker's calls (``spent_s``: what tracking cost the run). So a
resumed run continues the same tracked run without repeating a step, and an export sends only
what the tracker does not have yet. A tracker that fails is a warning, then left out for the
rest of the run: tracking never fails a run.
"""

from __future__ import annotations

import json
import math
import sys
import time
from typing import Any

from debias_bench.runs.run_dir import RunDir
from debias_bench.runs.states import RunState, parse_state

from .base import TrackedRun
from .spec import TrackSpec

#: the splits of an evaluation record whose scalar metrics are sent (``valid/accuracy``, ...)
SPLITS = ("valid", "test", "valid_iid")
#: the states after which a run's tracked run is closed
FINAL = (RunState.DONE, RunState.SKIPPED, RunState.FAILED, RunState.INTERRUPTED, RunState.DEAD)


def scalars(record: dict[str, Any]) -> dict[str, float]:
    """The finite scalars of one ``metrics.jsonl`` record as tracker keys: ``train/<loss>``
    (the mean over the steps since the last evaluation), ``<split>/<metric>``, ``epoch``."""
    flat: dict[str, Any] = {"epoch": record.get("epoch")}
    flat.update({f"train/{k}": v for k, v in (record.get("train") or {}).items()})
    for split in SPLITS:
        flat.update({f"{split}/{k}": v for k, v in (record.get(split) or {}).items()})
    return {
        key: float(value)
        for key, value in flat.items()
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    }


def params_and_tags(config: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """The resolved hyperparameters (and data options) as parameters; what identifies the
    run as tags."""
    params = {
        k: json.dumps(v) if not isinstance(v, str) else v for k, v in config["hparams"].items()
    }
    params.update({f"data.{k}": str(v) for k, v in (config.get("data_options") or {}).items()})
    tags = {k: str(config[k]) for k in ("method", "dataset", "ratio", "seed", "preset", "protocol")}
    tags["run_id"] = str(config["run_id"])
    return params, tags


class RunTracking:
    """The tracked runs of one run of the store; ``experiment``: the sweep's name."""

    def __init__(self, specs: list[TrackSpec], run_dir: RunDir, experiment: str) -> None:
        self.specs, self.run_dir, self.experiment = specs, run_dir, experiment
        self.open: dict[str, tuple[TrackedRun, dict[str, Any]]] = {}
        #: seconds spent in each tracker's calls (kept in tracking.json as ``spent_s``)
        self.spent: dict[str, float] = {}

    def start(self) -> None:
        if not self.specs:
            return
        config = self.run_dir.config()
        params, tags = params_and_tags(config)
        cursors = self.run_dir.tracking()
        for spec in self.specs:
            cursor = dict(cursors.get(spec.key) or {})
            self.spent[spec.key] = float(cursor.get("spent_s") or 0.0)
            start, resume = spec.tracker(self.experiment).start, cursor.get("id")
            tracked = self._guard(
                spec.key,
                lambda start=start, resume=resume: start(self.run_dir.run_id, resume, params, tags),
            )
            if tracked is None:
                continue
            if cursor.get("id") != tracked.id:  # a new tracked run: it has no step yet
                cursor = {"id": tracked.id}
                self.spent[spec.key] = 0.0
            cursor["state"] = None
            self.open[spec.key] = (tracked, cursor)
            self._save(spec.key, cursor)

    def record(self, record: dict[str, Any]) -> int:
        """Send one evaluation to each tracker that does not have its step yet; returns how
        many took it."""
        step, sent = int(record["step"]), 0
        values = scalars(record)
        for key, (tracked, cursor) in list(self.open.items()):
            if step <= int(cursor.get("step", -1)):
                continue
            if self._guard(key, lambda t=tracked: t.log(step, values)) is not None:
                cursor["step"] = step
                self._save(key, cursor)
                sent += 1
        return sent

    def finish(self, state: RunState | None = None) -> None:
        """Send the run's final state (default: the recorded one) and why, its config and
        result, and close."""
        status = self.run_dir.status()
        state = state or parse_state(status.get("state"))
        reason = " ".join(
            str(status[k]) for k in ("reason", "error", "note") if status.get(k)
        ).strip()
        files = [p for p in (self.run_dir.config_path, self.run_dir.result_path) if p.is_file()]
        for key, (tracked, cursor) in list(self.open.items()):
            if self._guard(key, lambda t=tracked: t.finish(state, reason, files)) is not None:
                cursor["state"] = state.value
                self._save(key, cursor)
        self.open.clear()

    def _save(self, key: str, cursor: dict[str, Any]) -> None:
        cursor["spent_s"] = round(self.spent.get(key, 0.0), 4)
        try:
            self.run_dir.set_tracking(key, cursor)
        except OSError as exc:
            self._warn(key, exc)

    def _guard(self, key: str, call: Any) -> Any:
        """``call()``, or None after a warning; a failed tracker is left out from then on."""
        started = time.perf_counter()
        try:
            result = call()
        except Exception as exc:  # a tracker's failure must never reach the run
            self._warn(key, exc)
            self.open.pop(key, None)
            return None
        finally:
            self.spent[key] = self.spent.get(key, 0.0) + time.perf_counter() - started
        return True if result is None else result

    def _warn(self, key: str, exc: BaseException) -> None:
        text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        print(
            f"warning: tracking {self.run_dir.run_id} to {key} failed "
            f"({type(exc).__name__}: {text}); the run goes on without it",
            file=sys.stderr,
            flush=True,
        )
