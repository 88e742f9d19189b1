"""A run's folder, :class:`RunFolder`: where the run's files lie, who holds it (its lock), the
worker's logs, and the records appended while it trains (``metrics.jsonl``, the trackers'
cursors), none of which is verified against the run's id. The run's only writer,
:class:`~debias_bench.runs.run_dir.RunDir`, extends it with the verified files and the run's
state."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any, BinaryIO

from debias_bench.errors import CorruptDataError
from debias_bench.runs.files import RUN_FILES, fix_hint, metrics_line, parse_metrics_line
from debias_bench.runs.jsonio import read_json, remove_temp_files, write_atomic, write_json, writing
from debias_bench.runs.lock import hold_lock, lock_held
from debias_bench.runs.nofollow import open_own, read_tail

#: (metrics.jsonl, mtime, size) -> its evaluation records
_LOGGED: dict[tuple[str, int, int], list[dict[str, Any]]] = {}


class RunFolder:
    """One run's folder: its files' paths, its lock and logs, and its append-only records
    (:class:`~debias_bench.runs.run_dir.RunDir` is the run's record and only writer)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    config_path = property(lambda self: self.path / "config.json")
    status_path = property(lambda self: self.path / "status.json")
    metrics_path = property(lambda self: self.path / "metrics.jsonl")
    checkpoint_path = property(lambda self: self.path / "checkpoint.pt")
    result_path = property(lambda self: self.path / "result.json")
    #: where each experiment tracker has this run and the last step it was sent (bench.tracking)
    tracking_path = property(lambda self: self.path / "tracking.json")

    @property
    def run_id(self) -> str:
        return self.path.name

    # ---------------------------------------------------------------- files and faults
    def _fix(self, name: str) -> str:
        return fix_hint(self.path, name)

    def _has_files(self) -> bool:
        """Whether any of the run's files exists (a directory that has none is no run yet)."""
        return any((self.path / name).exists() for name in RUN_FILES)

    def _written_age(self) -> float | None:
        """Seconds since ``status.json`` was last written, by this host's clock (its mtime);
        None when it cannot be read."""
        try:
            return time.time() - self.status_path.stat().st_mtime
        except OSError:
            return None

    # ---------------------------------------------------------------- ownership
    lock_path = property(lambda self: self.path / ".lock")
    stderr_path = property(lambda self: self.path / "stderr.log")
    stdout_path = property(lambda self: self.path / "stdout.log")

    def claim(self, wait_s: float = 3.0) -> contextlib.AbstractContextManager[bool]:
        """Hold the run's lock for the duration of the block; yields False if another process
        holds it (:func:`~debias_bench.runs.lock.hold_lock`)."""
        return hold_lock(self.lock_path, wait_s)

    def lock_held(self) -> bool | None:
        """Whether some process holds the run's lock; None when it cannot be told."""
        return lock_held(self.lock_path)

    def open_log(self, path: Path) -> BinaryIO:
        """``stderr.log`` or ``stdout.log`` (``path``) opened to append the worker's output,
        never through a link put in its place (:func:`~debias_bench.runs.nofollow.open_own`)."""
        return open(open_own(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "ab")

    def remove_temp_files(self) -> list[Path]:
        """Delete the temporary files that writes of a dead or failed process left behind
        (call it only while holding the run's lock); returns them."""
        return remove_temp_files(self.path)

    def log_tail(self, offset: int = 0, max_chars: int = 2000, path: Path | None = None) -> str:
        """The end of ``stderr.log`` (or ``path``) from byte ``offset`` on
        (:func:`~debias_bench.runs.nofollow.read_tail`: never through a link)."""
        return read_tail(path or self.stderr_path, offset, max_chars)

    # ---------------------------------------------------------------- metrics
    def tracking(self) -> dict[str, Any]:
        """The trackers' cursors (``{}`` when none, or when the file is unreadable: the
        trackers then start over, which repeats nothing they check)."""
        try:
            cursors = read_json(self.tracking_path)
        except (OSError, CorruptDataError):
            return {}
        return cursors if isinstance(cursors, dict) else {}

    def set_tracking(self, key: str, cursor: dict[str, Any]) -> None:
        """Record where tracker ``key`` has this run (the caller holds the run's lock)."""
        write_json(self.tracking_path, {**self.tracking(), key: cursor})

    def append_metrics(self, record: dict[str, Any]) -> None:
        """Append one record; it starts on a fresh line even after a torn one."""
        line = metrics_line(record)
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT
        with writing(self.metrics_path), open(open_own(self.metrics_path, flags), "ab+") as handle:
            if handle.seek(0, os.SEEK_END) > 0:
                handle.seek(-1, os.SEEK_END)
                if handle.read(1) != b"\n":
                    line = "\n" + line
            handle.write(line.encode())
            handle.flush()
            os.fsync(handle.fileno())

    def metrics(self) -> list[dict[str, Any]]:
        """The evaluation records; torn lines (a crash mid-append) are skipped, never the
        records after them."""
        try:
            text = self.metrics_path.read_bytes().decode("utf-8", errors="replace")
        except FileNotFoundError:
            return []
        records = (parse_metrics_line(line) for line in text.splitlines())
        return [r for r in records if r is not None]

    def truncate_metrics(self, max_step: int) -> None:
        """Keep the evaluations up to the step being resumed from (0: starting from scratch),
        one per step (the latest), and drop torn lines: no duplicate or lost records."""
        if not self.metrics_path.exists():
            return
        by_step = {int(r["step"]): r for r in self.metrics() if int(r["step"]) <= max_step}
        kept = [by_step[s] for s in sorted(by_step)]
        write_atomic(self.metrics_path, "".join(metrics_line(r) for r in kept))

    def _logged_metrics(self) -> list[dict[str, Any]]:
        """The evaluation records, read once per version of ``metrics.jsonl`` (the result is
        checked against them on every read)."""
        try:
            stat = self.metrics_path.stat()
        except FileNotFoundError:
            return []
        key = (str(self.metrics_path), stat.st_mtime_ns, stat.st_size)
        if key not in _LOGGED:
            if len(_LOGGED) > 256:
                _LOGGED.clear()
            _LOGGED[key] = self.metrics()
        return _LOGGED[key]
