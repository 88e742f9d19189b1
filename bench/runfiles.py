"""What each file of a run must hold to count, and the fix for one that does not.

Pure checks of file contents (no run directory is written here): a complete result
(:func:`incomplete_result`), an evaluation record of ``metrics.jsonl``
(:func:`parse_metrics_line`), the stamp a checkpoint carries (:func:`checkpoint_stamp`), the
run id a config describes (:func:`described_run`), and the command that fixes a faulty file
(:func:`fix_hint`). :class:`~debias_bench.store.RunDir` reads and writes the files with them."""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path
from typing import Any

import torch

from debias_bench.errors import CorruptDataError
from debias_bench.metrics import REQUIRED_SELECTIONS

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
            state = torch.load(path, map_location="cpu", weights_only=False, mmap=True)
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
    from debias_bench.config import RunConfig
    from debias_bench.errors import UnknownNameError

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
