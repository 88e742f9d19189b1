"""What each file of a run must hold to count, and the fix for one that does not.

Pure checks of file contents (no run directory is written here): a complete result
(:func:`incomplete_result`) that agrees with itself and the run's evaluations
(:func:`inconsistent_result`), an evaluation record of ``metrics.jsonl``
(:func:`parse_metrics_line`), the stamp a checkpoint carries (:func:`checkpoint_stamp`), the
run id a config describes (:func:`described_run`), and the command that fixes a faulty file
(:func:`fix_hint`). :class:`~debias_bench.runs.run_dir.RunDir` reads and writes the files with
them."""

from __future__ import annotations

import contextlib
import json
import math
import pickle
from pathlib import Path
from typing import Any

import numpy as np

from debias_bench.config.run_config import RunConfig
from debias_bench.config.selection import REQUIRED_SELECTIONS
from debias_bench.errors import CorruptDataError, UnknownNameError

#: the suffix of a file or run folder moved aside (the fixes of faults say ``mv X X.bad``)
MOVED_ASIDE = ".bad"
#: the files whose presence makes a directory of the store a run
RUN_FILES = ("config.json", "status.json", "result.json", "metrics.jsonl", "checkpoint.pt")


def incomplete_result(result: Any) -> str | None:
    """Why a parsed result.json is not a complete result (None when it is)."""
    if not isinstance(result, dict):
        return "is not a JSON object"
    selections = result.get("selections")
    if not isinstance(selections, dict) or not selections:
        return "has no selections"
    missing = [name for name in REQUIRED_SELECTIONS if name not in selections]
    if missing:
        return f"has no {', '.join(missing)} selection"
    for name, chosen in selections.items():
        for split in ("valid", "test"):
            metrics = (chosen or {}).get(split) if isinstance(chosen, dict) else None
            accuracy = metrics.get("accuracy") if isinstance(metrics, dict) else None
            if not isinstance(accuracy, int | float) or not math.isfinite(accuracy):
                return f"has no finite {split} accuracy for selection {name!r}"
    return None


#: how far a percentage may sit from its recomputation (float32 means, rounding of counts)
_PCT_TOLERANCE = 0.01
#: the scalars of a split's metrics that must equal those of the evaluation they were taken from
_LOGGED = ("accuracy", "aligned_accuracy", "conflicting_accuracy", "worst_group_accuracy")


def _weighted_mean(parts: list[tuple[Any, Any]]) -> float | None:
    """The mean of percentages weighted by their counts; None when no count is positive."""
    total = sum(n for acc, n in parts if isinstance(n, int) and n > 0 and acc is not None)
    if not total:
        return None
    return sum(acc * n for acc, n in parts if isinstance(n, int) and n > 0 and acc is not None) / (
        total
    )


def _recomputations(metrics: dict[str, Any]) -> list[tuple[str, float | None]]:
    """The overall accuracy recomputed from the split's parts that carry their counts."""
    out = [
        (
            "aligned and conflicting accuracies",
            _weighted_mean(
                [
                    (metrics.get("aligned_accuracy"), metrics.get("n_aligned")),
                    (metrics.get("conflicting_accuracy"), metrics.get("n_conflicting")),
                ]
            ),
        )
    ]
    groups, counts = metrics.get("group_accuracy"), metrics.get("group_counts")
    if isinstance(groups, list) and isinstance(counts, list):
        pairs = [
            (acc, n)
            for accs, ns in zip(groups, counts, strict=False)
            if isinstance(accs, list) and isinstance(ns, list)
            for acc, n in zip(accs, ns, strict=False)
        ]
        out.append(("group accuracies", _weighted_mean(pairs)))
    return out


def inconsistent_result(result: dict[str, Any], records: list[dict[str, Any]]) -> str | None:
    """Why a complete result contradicts itself or the run's evaluations, None when it does
    not: per selection and split, the accuracy must be the count-weighted mean of the aligned
    and conflicting accuracies and of the group accuracies, and the reported accuracies must
    equal those of the evaluation at the selection's step in ``metrics.jsonl`` (``records``;
    a step without a record is not checked). A hand-edited number fails one of these."""
    by_step = {record["step"]: record for record in records}
    for name, chosen in result["selections"].items():
        logged = by_step.get(chosen.get("step"))
        for split in ("valid", "test"):
            metrics = chosen[split]
            accuracy = metrics["accuracy"]
            for parts, value in _recomputations(metrics):
                if value is not None and abs(value - accuracy) > _PCT_TOLERANCE:
                    return (
                        f"says {split} accuracy {accuracy:.2f} for selection {name!r}, but its "
                        f"{parts} give {value:.2f} (an edited number)"
                    )
            evaluated = (logged or {}).get(split) or {}
            for key in _LOGGED:
                mine, theirs = metrics.get(key), evaluated.get(key)
                if isinstance(theirs, int | float) and (
                    not isinstance(mine, int | float) or abs(mine - theirs) > _PCT_TOLERANCE
                ):
                    return (
                        f"says {split} {key} {mine} for selection {name!r}, but metrics.jsonl "
                        f"recorded {theirs:.2f} at step {chosen.get('step')} (an edited number)"
                    )
    return None


def _is_record(record: Any) -> bool:
    """An evaluation record as the engine writes it: a JSON object with an integer ``step``, a
    numeric ``epoch`` and ``valid`` and ``test`` objects (anything else on a line of
    ``metrics.jsonl`` is skipped, like a torn line)."""
    if not isinstance(record, dict):
        return False
    step, epoch = record.get("step"), record.get("epoch")
    return (
        isinstance(step, int)
        and not isinstance(step, bool)
        and step >= 0
        and isinstance(epoch, int | float)
        and not isinstance(epoch, bool)
        and all(isinstance(record.get(split), dict) for split in ("valid", "test"))
    )


def parse_metrics_line(line: str) -> dict[str, Any] | None:
    """One evaluation record, or None for a torn line. A torn record that a later append
    continued on the same line (stores written before appends began on a fresh line) gives
    back the record appended after it."""
    line = line.strip()
    if not line:
        return None
    try:
        record = json.loads(line)
        return record if _is_record(record) else None
    except ValueError:
        pass
    decoder = json.JSONDecoder()
    start = line.find('{"', 1)
    while start != -1:
        with contextlib.suppress(ValueError):
            record, end = decoder.raw_decode(line, start)
            if end == len(line) and _is_record(record):
                return record
        start = line.find('{"', start + 1)
    return None


def metrics_line(record: dict[str, Any]) -> str:
    """A record as one line of ``metrics.jsonl``."""
    return json.dumps(record, sort_keys=True) + "\n"


#: the only globals a checkpoint may name besides torch's own tensor types: NumPy's random
#: state (``np.random.get_state()``) is an array. Everything else is refused unread.
_CHECKPOINT_GLOBALS: list[Any] = [
    np.ndarray,
    np.dtype,
    type(np.dtype(np.uint32)),
    getattr(np, "_core", np).multiarray._reconstruct,
]


def read_checkpoint(path: Path, *, mmap: bool = False) -> Any:
    """A checkpoint's contents, read with ``weights_only=True``: run stores are shared
    (copied from a cluster, sent with a paper), so a pickle that names any other global is
    refused without running it (``UnpicklingError``), never executed."""
    import torch  # here, not at the top: listings and reports import this module without torch

    try:
        with torch.serialization.safe_globals(_CHECKPOINT_GLOBALS):
            return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as exc:
        try:  # names the globals by reading the pickle's opcodes, running nothing
            named = torch.serialization.get_unsafe_globals_in_checkpoint(path)
        except Exception:
            raise exc from None
        allowed = {f"{g.__module__}.{g.__qualname__}" for g in _CHECKPOINT_GLOBALS}
        foreign = [name for name in named if name not in allowed] or named
        raise pickle.UnpicklingError(
            f"it names {', '.join(foreign)}, which no checkpoint of bench holds (refused "
            "unread: a checkpoint from elsewhere may carry code)"
        ) from None


#: (path, mtime, size) -> the stamp read from that checkpoint (reading it again is not free)
_STAMPS: dict[tuple[str, int, int], dict[str, Any]] = {}


def checkpoint_stamp(path: Path) -> dict[str, Any] | None:
    """The stamp a checkpoint carries (``{}`` for one without); None when there is no
    checkpoint. Read with ``mmap``, so the tensors are not loaded; CorruptDataError when the
    file cannot be read."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    if key not in _STAMPS:
        try:
            state = read_checkpoint(path, mmap=True)
        except Exception as exc:
            raise CorruptDataError(
                f"cannot read checkpoint {path}: {exc}", hint=fix_hint(path.parent, path.name)
            ) from exc
        stamp = state.get("stamp") if isinstance(state, dict) else None
        if len(_STAMPS) > 4096:
            _STAMPS.clear()
        _STAMPS[key] = dict(stamp) if isinstance(stamp, dict) else {}
    return _STAMPS[key]


def described_run(config: dict[str, Any]) -> str:
    """The run id that ``config``'s values hash to, or why it cannot be computed."""

    try:
        return RunConfig.from_json(config).run_id
    except UnknownNameError as exc:  # a plugin method whose plugin is not loaded
        return f"cannot be verified: {exc.message} (load its plugin with BENCH_PLUGINS)"
    except (KeyError, TypeError, ValueError) as exc:
        return f"cannot be read as a run config ({type(exc).__name__}: {exc})"


#: what ``bench run`` with the same grid does once a faulty file of a run is moved aside
_REDO = {
    "config.json": "then writes it again",
    "status.json": "then resumes the run (from its checkpoint when it has one)",
    "result.json": "then redoes the run's end from its checkpoint (all of it without)",
    "checkpoint.pt": "then trains the run from scratch",
}


def fix_hint(run_path: Path, name: str) -> str:
    """The fix for the faulty file ``name`` of the run in ``run_path`` (``foreign``: the
    folder holds another run's files)."""
    path = run_path / name
    if name == "foreign":
        return (
            f"the folder holds another run's files; move it aside (mv {run_path} "
            f"{run_path}{MOVED_ASIDE}) and `bench run` with the same grid trains this run afresh"
        )
    if name == "config.json" and not path.exists():
        return (
            "`bench run` with the grid that made this run writes it again; or move the "
            f"run aside: mv {run_path} {run_path}{MOVED_ASIDE}"
        )
    return (
        f"move it aside (mv {path} {path}{MOVED_ASIDE}); `bench run` with the same grid "
        f"{_REDO[name]}"
    )
