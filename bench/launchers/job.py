"""What a worker process is told (:class:`WorkerJob`), what its exit code means, and that it
dies with its parent: the contract between a launcher (:mod:`.process`) and the worker
(:mod:`.worker`)."""

from __future__ import annotations

import ctypes
import json
import signal
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from debias_bench.config.run_config import RunConfig
from debias_bench.plugins.loading import plugins_for

if TYPE_CHECKING:
    from debias_bench.config.run_config import RunConfig
    from debias_bench.paths import DataPlace
    from debias_bench.tracking import TrackSpec

#: exit codes of the worker besides 0 (done or skipped) and 128 + signal (interrupted)
EXIT_FAILED = 1  # the run failed; run_one recorded the error
EXIT_NOT_RUN = 3  # not started: failed before and not to be retried
EXIT_BUSY = 75  # another live process owns the run (EX_TEMPFAIL)


@dataclass
class WorkerJob:
    """Everything a worker needs to run one run (JSON on its stdin)."""

    config: dict[str, Any]  # RunConfig.to_json()
    out: str
    raw_root: str
    data_root: str
    device: str = "cpu"  # as the worker sees it: "cuda" is its one visible GPU
    retry_failed: bool = False
    max_attempts: int = 3
    plugins: list[str] = field(default_factory=list)
    sys_path: list[str] = field(default_factory=list)
    status_fields: dict[str, Any] = field(default_factory=dict)
    #: experiment trackers, as ``TrackSpec.key`` (resolved by the sweep)
    track: list[str] = field(default_factory=list)
    #: the run id the sweep planned; the worker refuses a config that hashes to another one
    #: (the code or a method's defaults changed under the sweep)
    planned_id: str = ""

    @classmethod
    def for_run(
        cls,
        config: RunConfig,
        out: Path,
        place: DataPlace,
        device: str,
        max_attempts: int,
        track: Iterable[TrackSpec] = (),
        status_fields: dict[str, Any] | None = None,
    ) -> WorkerJob:
        """The job of a run the sweep's scheduler decided to start: absolute paths (a worker
        may start in another directory or on another host), the plugins that registered its
        method and dataset, and its planned id."""

        plugins, paths = plugins_for([config])
        return cls(
            config=config.to_json(),
            out=str(Path(out).resolve()),
            raw_root=str(Path(place.raw_root).resolve()),
            data_root=str(Path(place.data_root).resolve()),
            device=device,
            retry_failed=True,  # the scheduler retries only what may be retried: agree
            max_attempts=max_attempts,
            plugins=plugins,
            sys_path=paths,
            status_fields=dict(status_fields or {}),
            track=[spec.key for spec in track],
            planned_id=config.run_id,
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self), default=str)

    @property
    def run_id(self) -> str:
        if self.planned_id:
            return self.planned_id

        return RunConfig.from_json(self.config).run_id


_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Have the kernel send SIGTERM to this process when its parent dies (Linux); called in a
    cold worker between fork and exec, and first thing in a warm one."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
