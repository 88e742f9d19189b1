"""The run store: one directory per run, written only by the run's own process.

    <out>/<run_id>/config.json    resolved configuration + provenance (code and data version)
    <out>/<run_id>/status.json    state, host, pid, heartbeat, attempt, exit code, error
    <out>/<run_id>/metrics.jsonl  one line per evaluation
    <out>/<run_id>/checkpoint.pt  latest checkpoint (for resume)
    <out>/<run_id>/result.json    final result; its presence marks the run as done
    <out>/<run_id>/.lock          held (flock) by the process that owns the run while it lives
    <out>/<run_id>/stderr.log     the worker's stderr, one header line per start (launchers)

Every JSON file and the checkpoint are written to a temporary file and renamed into place,
so a reader (``bench status``, ``bench report``) never sees a half-written file.

Ownership: a run's files are written only by the process that holds its lock: the worker while
it lives; before it starts, the sweep that plans it (``config.json`` and a ``pending`` status,
so ``bench status`` counts it; the SLURM job id it was submitted as); after it has exited, the
launcher that started it (to record the exit code and the tail of stderr of a worker that
could not). The lock is what tells a live run from a dead
one on the same host; across hosts (a shared file system whose locks are host-local) a run is
dead when its heartbeat, refreshed every ``HEARTBEAT_EVERY_S`` by a thread, is stale.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from debias_bench.errors import CorruptDataError

STATES = ("pending", "running", "done", "failed", "interrupted", "skipped")
#: how often a live run refreshes its heartbeat (a thread, see :class:`Heartbeat`)
HEARTBEAT_EVERY_S = 30.0
#: a running run whose heartbeat is older than this is reported as dead
STALE_AFTER_S = 10 * HEARTBEAT_EVERY_S
#: serialises read-modify-write of status.json between the threads of one process
_STATUS_LOCK = threading.RLock()


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def write_json(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise CorruptDataError(f"{path} is not valid JSON ({exc})") from exc


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RunDir:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    config_path = property(lambda self: self.path / "config.json")
    status_path = property(lambda self: self.path / "status.json")
    metrics_path = property(lambda self: self.path / "metrics.jsonl")
    checkpoint_path = property(lambda self: self.path / "checkpoint.pt")
    result_path = property(lambda self: self.path / "result.json")

    @property
    def run_id(self) -> str:
        return self.path.name

    # ---------------------------------------------------------------- config / status
    def write_config(self, config: dict[str, Any]) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        write_json(self.config_path, config)

    def config(self) -> dict[str, Any]:
        return read_json(self.config_path)

    def status(self) -> dict[str, Any]:
        if not self.status_path.is_file():
            return {"state": "pending"}
        return read_json(self.status_path)

    def set_status(self, state: str, **fields: Any) -> dict[str, Any]:
        assert state in STATES, state
        with _STATUS_LOCK:
            status = {**self.status(), **fields, "state": state, "updated": time.time()}
            if state == "running":
                status.update(host=socket.gethostname(), pid=os.getpid(), heartbeat=time.time())
            write_json(self.status_path, status)
        return status

    def heartbeat(self, **fields: Any) -> None:
        with _STATUS_LOCK:
            status = self.status()
            if status.get("state") != "running" or status.get("pid") != os.getpid():
                return  # not (or no longer) ours to beat
            write_json(self.status_path, {**status, **fields, "heartbeat": time.time()})

    # ---------------------------------------------------------------- ownership
    lock_path = property(lambda self: self.path / ".lock")
    stderr_path = property(lambda self: self.path / "stderr.log")
    stdout_path = property(lambda self: self.path / "stdout.log")

    @contextlib.contextmanager
    def claim(self, wait_s: float = 3.0) -> Iterator[bool]:
        """Hold the run's lock for the duration of the block; yields False if another process
        holds it. Waits up to ``wait_s`` (a reader's momentary shared lock is not an owner).
        Where the file system has no locks, yields True (the heartbeat then decides)."""
        self.path.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            deadline = time.monotonic() + wait_s
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        yield False
                        return
                    time.sleep(0.05)
                except OSError:  # no lock support (some network file systems)
                    break
            yield True
        finally:
            os.close(fd)  # releases the lock

    def lock_held(self) -> bool | None:
        """Whether some process holds the run's lock; None when it cannot be told."""
        try:
            fd = os.open(self.lock_path, os.O_RDONLY)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            return True
        except OSError:
            return None
        finally:
            os.close(fd)

    def effective_state(self, owned: bool = False) -> str:
        """The stored state, except that a 'running' run whose process is gone is 'dead'.

        Same host: the run's lock decides (the pid when there is no lock file). Another host:
        a stale heartbeat. ``owned``: the caller holds the lock itself, so a 'running' status
        on this host is a leftover of a dead process."""
        status = self.status()
        state = status.get("state", "pending")
        if state != "running":
            return state
        stale = time.time() - float(status.get("heartbeat", 0)) > STALE_AFTER_S
        if status.get("host") != socket.gethostname():
            return "dead" if stale else "running"
        if owned:
            return "dead"
        held = self.lock_held()
        if held is None:
            return "dead" if stale or not _pid_alive(int(status.get("pid", 0))) else "running"
        return "running" if held else "dead"

    def log_tail(self, offset: int = 0, max_chars: int = 2000, path: Path | None = None) -> str:
        """The end of ``stderr.log`` (or ``path``) from byte ``offset`` on."""
        path = path or self.stderr_path
        try:
            with open(path, "rb") as handle:
                size = handle.seek(0, os.SEEK_END)
                handle.seek(max(offset, size - max_chars * 4))
                text = handle.read().decode("utf-8", errors="replace")
        except OSError:
            return ""
        return text[-max_chars:]

    # ---------------------------------------------------------------- metrics
    def append_metrics(self, record: dict[str, Any]) -> None:
        with open(self.metrics_path, "a") as handle:
            handle.write(json.dumps(record, sort_keys=True) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def metrics(self) -> list[dict[str, Any]]:
        if not self.metrics_path.is_file():
            return []
        lines = self.metrics_path.read_text().splitlines()
        # A crash can leave a torn last line; everything before it is intact.
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                break
        return out

    def truncate_metrics(self, max_step: int) -> None:
        """Drop evaluations after the checkpoint being resumed from (no duplicate records)."""
        kept = [r for r in self.metrics() if r["step"] <= max_step]
        write_atomic(self.metrics_path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in kept))

    # ---------------------------------------------------------------- checkpoint / result
    def save_checkpoint(self, state: dict[str, Any]) -> None:
        tmp = self.checkpoint_path.with_name(f".checkpoint.{os.getpid()}.tmp")
        torch.save(state, tmp)
        os.replace(tmp, self.checkpoint_path)

    def load_checkpoint(self) -> dict[str, Any] | None:
        if not self.checkpoint_path.is_file():
            return None
        try:
            return torch.load(self.checkpoint_path, map_location="cpu", weights_only=False)
        except Exception as exc:  # a torn or foreign file: say which
            raise CorruptDataError(
                f"cannot read checkpoint {self.checkpoint_path}: {exc}",
                hint="delete it to restart the run from scratch",
            ) from exc

    def write_result(self, result: dict[str, Any]) -> None:
        write_json(self.result_path, result)

    def result(self) -> dict[str, Any] | None:
        return read_json(self.result_path) if self.result_path.is_file() else None

    def is_done(self) -> bool:
        return self.result_path.is_file()


class Heartbeat:
    """Refreshes a running run's heartbeat from a thread, so a long stretch of training
    between two evaluations does not look like a dead run to another host."""

    def __init__(self, run_dir: RunDir, every_s: float = HEARTBEAT_EVERY_S) -> None:
        self.run_dir, self.every_s = run_dir, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="heartbeat", daemon=True)

    def _beat(self) -> None:
        while not self._stop.wait(self.every_s):
            with contextlib.suppress(Exception):  # a missed beat is not worth a crash
                self.run_dir.heartbeat()

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


class RunStore:
    """All runs under one output directory."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def run(self, run_id: str) -> RunDir:
        return RunDir(self.root / run_id)

    def runs(self) -> Iterator[RunDir]:
        if not self.root.is_dir():
            return iter(())
        return (RunDir(p) for p in sorted(self.root.iterdir()) if (p / "config.json").is_file())
