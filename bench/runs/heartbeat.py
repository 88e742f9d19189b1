"""A live run's heartbeat: a thread that refreshes ``status.json`` (through the run's
:class:`~debias_bench.runs.run_dir.RunDir`, its only writer) with the run's live progress."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from debias_bench.runs.run_dir import RunDir


class Heartbeat:
    """Refreshes a running run's heartbeat from a thread, so a long stretch of training
    between two evaluations does not look like a dead run to another host, and reports the
    run's live progress with it (``step``, ``steps_per_s``, ``eta_s``; see :meth:`report`)
    at least every ``every_s``, also when a single step takes longer than that."""

    #: run directory -> the function giving its live progress fields (set by the run's
    #: progress callbacks, which the engine calls; read by the run's heartbeat thread)
    _sources: ClassVar[dict[Path, Callable[[], dict[str, Any]]]] = {}

    def __init__(self, run_dir: RunDir, every_s: float = 10.0) -> None:
        self.run_dir, self.every_s = run_dir, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="heartbeat", daemon=True)

    @classmethod
    def report(cls, run_dir: RunDir, source: Callable[[], dict[str, Any]] | None) -> None:
        """Beat with ``source()``'s fields from now on (None: stop reporting), and once now."""
        if source is None:
            cls._sources.pop(run_dir.path, None)
            return
        cls._sources[run_dir.path] = source
        with contextlib.suppress(Exception):
            run_dir.heartbeat(**source())

    def _beat(self) -> None:
        while not self._stop.wait(self.every_s):
            with contextlib.suppress(Exception):  # a missed beat is not worth a crash
                source = self._sources.get(self.run_dir.path)
                self.run_dir.heartbeat(**(source() if source else {}))

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sources.pop(self.run_dir.path, None)
