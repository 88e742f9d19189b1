"""The run store: one directory per run, written only by the run's own process.

    <out>/<run_id>/config.json    resolved configuration + provenance (code and data version)
    <out>/<run_id>/status.json    state, reason, host, pid, heartbeat, attempt, exit code, error
    <out>/<run_id>/metrics.jsonl  one line per evaluation
    <out>/<run_id>/checkpoint.pt  latest checkpoint (for resume)
    <out>/<run_id>/result.json    final result; a complete, finite one marks the run as done
    <out>/<run_id>/.lock          held (flock) by the process that owns the run while it lives
    <out>/<run_id>/stderr.log     the worker's stderr, one header line per start (launchers)

Every JSON file and the checkpoint are written to a temporary file and renamed into place,
so a reader (``bench status``, ``bench report``) never sees a half-written file; a failed
write removes its temporary file and raises an ``OSError`` naming the file it was writing
(``store_write`` set on it), so a full disk fails the run with the path and the errno.

Faults stay local: a run whose ``config.json``, ``status.json`` or ``result.json`` is missing
or unreadable is ``corrupt`` (:meth:`RunDir.fault` names the file and the fix), and every
command goes on with the other runs. A torn line in ``metrics.jsonl`` is skipped, never the
records after it.

Ownership: a run's files are written only by the process that holds its lock: the worker while
it lives; before it starts, the sweep that plans it (``config.json`` and a ``pending`` status,
so ``bench status`` counts it; the SLURM job id it was submitted as); after it has exited, the
launcher that started it (to record the exit code and the tail of stderr of a worker that
could not). The lock is what tells a live run from a dead
one on the same host; across hosts (a shared file system whose locks are host-local) a run is
dead when its heartbeat, refreshed every ``HEARTBEAT_EVERY_S`` by a thread, is stale.
What a run's files mean together is decided in :mod:`debias_bench.states`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import torch

from debias_bench.errors import CorruptDataError
from debias_bench.states import (
    HEARTBEAT_EVERY_S,
    STALE_AFTER_S,
    Facts,
    FailReason,
    RunState,
    effective_state,
    parse_state,
)

#: every run state (the enum lives in ``debias_bench.states``)
STATES = tuple(RunState)
#: the files whose presence makes a directory of the store a run
RUN_FILES = ("config.json", "status.json", "result.json", "metrics.jsonl", "checkpoint.pt")
#: serialises read-modify-write of status.json between the threads of one process
_STATUS_LOCK = threading.RLock()

__all__ = [
    "HEARTBEAT_EVERY_S",
    "STALE_AFTER_S",
    "STATES",
    "Heartbeat",
    "RunDir",
    "RunStore",
    "read_json",
    "write_atomic",
    "write_json",
]


@contextlib.contextmanager
def _writing(path: Path, tmp: Path | None = None) -> Iterator[None]:
    """Name ``path`` in an OSError raised while writing it (a bare ENOSPC from ``write()``
    names no file), mark it as a store write, and remove the temporary file ``tmp``."""
    try:
        yield
    except BaseException as exc:
        if tmp is not None:
            with contextlib.suppress(OSError):
                tmp.unlink()
        cause = _os_error(exc) if isinstance(exc, Exception) else None  # not Ctrl-C
        if cause is None:
            raise
        named = OSError(cause.errno, cause.strerror or str(cause), str(path))
        named.store_write = True  # type: ignore[attr-defined]
        raise named from exc


def _os_error(exc: BaseException | None) -> OSError | None:
    """The OSError behind ``exc``: itself, or one it was raised from or during (torch.save
    turns a full disk into ``RuntimeError: unexpected pos`` raised while handling it)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, OSError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with _writing(path, tmp):
        with open(tmp, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)


def write_json(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"holds {name}")


def read_json(path: Path, strict: bool = False) -> Any:
    """The JSON in ``path``; CorruptDataError when it is torn, not UTF-8 or unreadable.
    ``strict``: NaN and Infinity are errors too (a result must be finite)."""
    try:
        text = path.read_text()
        if strict:
            return json.loads(text, parse_constant=_reject_constant)
        return json.loads(text)
    except FileNotFoundError:
        raise
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise CorruptDataError(f"{path} is not valid JSON ({exc})") from exc
    except OSError as exc:
        raise CorruptDataError(f"cannot read {path} ({exc})") from exc


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


def _incomplete(result: Any) -> str | None:
    """Why a parsed result.json is not a complete result (None when it is)."""
    if not isinstance(result, dict):
        return "is not a JSON object"
    selections = result.get("selections")
    if not isinstance(selections, dict) or not selections:
        return "has no selections"
    for name, chosen in selections.items():
        for split in ("valid", "test"):
            accuracy = (chosen or {}).get(split, {}).get("accuracy")
            if not isinstance(accuracy, int | float) or not math.isfinite(accuracy):
                return f"has no finite {split} accuracy for selection {name!r}"
    return None


def _parse_metrics_line(line: str) -> dict[str, Any] | None:
    """One evaluation record, or None for a torn line. A torn record that a later append
    continued on the same line (stores written before appends began on a fresh line) gives
    back the record appended after it."""
    line = line.strip()
    if not line:
        return None
    try:
        record = json.loads(line)
        return record if isinstance(record, dict) and "step" in record else None
    except ValueError:
        pass
    decoder = json.JSONDecoder()
    start = line.find('{"', 1)
    while start != -1:
        with contextlib.suppress(ValueError):
            record, end = decoder.raw_decode(line, start)
            if end == len(line) and isinstance(record, dict) and "step" in record:
                return record
        start = line.find('{"', start + 1)
    return None


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
        """The run's config; CorruptDataError (with the fix) when it is missing or torn."""
        try:
            config = read_json(self.config_path)
        except FileNotFoundError as exc:
            raise CorruptDataError(
                f"{self.config_path} is missing", hint=self._fix("config.json")
            ) from exc
        except CorruptDataError as exc:
            raise CorruptDataError(exc.message, hint=self._fix("config.json")) from exc
        if not isinstance(config, dict):
            raise CorruptDataError(
                f"{self.config_path} is not a JSON object", hint=self._fix("config.json")
            )
        return config

    def status(self) -> dict[str, Any]:
        """The recorded status (``{"state": "pending"}`` when none was recorded);
        CorruptDataError when status.json is torn or holds no known state."""
        try:
            status = read_json(self.status_path)
        except FileNotFoundError:
            return {"state": RunState.PENDING.value}
        except CorruptDataError as exc:
            raise CorruptDataError(exc.message, hint=self._fix("status.json")) from exc
        if not isinstance(status, dict):
            raise CorruptDataError(
                f"{self.status_path} is not a JSON object", hint=self._fix("status.json")
            )
        try:
            parse_state(status.get("state"))
        except ValueError as exc:
            raise CorruptDataError(
                f"{self.status_path} holds an unknown state {status.get('state')!r}",
                hint=self._fix("status.json"),
            ) from exc
        return status

    def set_status(
        self, state: RunState | str, reason: FailReason | str | None = None, **fields: Any
    ) -> dict[str, Any]:
        """Record ``state`` (with ``fields``) in status.json.

        ``reason``: for ``failed``, a :class:`FailReason` (default: the one already recorded
        for a failed run, else ``crashed``), with the details in ``error``; for ``skipped``,
        the method's explanation. Other states drop it. Example, a divergence::

            run_dir.set_status(RunState.FAILED, reason=FailReason.DIVERGED,
                               error="train loss is nan at step 120", step=120)
        """
        state = RunState(state)
        with _STATUS_LOCK:
            previous = self.status()
            status = {**previous, **fields, "state": state.value, "updated": time.time()}
            if state is RunState.FAILED:
                kept = previous.get("reason") if previous.get("state") == state else None
                kept = kept if kept in FailReason._value2member_map_ else None
                status["reason"] = FailReason(reason or kept or FailReason.CRASHED).value
            elif state is RunState.SKIPPED and reason:
                status["reason"] = str(reason)
            else:
                status.pop("reason", None)
            if state is RunState.RUNNING:
                status.update(host=socket.gethostname(), pid=os.getpid(), heartbeat=time.time())
            write_json(self.status_path, status)
        return status

    def heartbeat(self, **fields: Any) -> None:
        with _STATUS_LOCK:
            status = self.status()
            if status.get("state") != RunState.RUNNING or status.get("pid") != os.getpid():
                return  # not (or no longer) ours to beat
            write_json(self.status_path, {**status, **fields, "heartbeat": time.time()})

    # ---------------------------------------------------------------- faults and state
    def _fix(self, name: str) -> str:
        path = self.path / name
        if name == "config.json" and not path.exists():
            return (
                "`bench run` with the grid that made this run writes it again; or move the "
                f"run aside: mv {self.path} {self.path}.bad"
            )
        redo = {
            "config.json": "then writes it again",
            "status.json": "then resumes the run (from its checkpoint when it has one)",
            "result.json": "then redoes the run's end from its checkpoint (all of it without)",
        }[name]
        return f"move it aside (mv {path} {path}.bad); `bench run` with the same grid {redo}"

    def fault(self) -> str | None:
        """The first missing or unreadable file of the run, and the fix; None when none is."""
        return self._read()[2]

    def _read(self) -> tuple[dict[str, Any], dict[str, Any] | None, str | None]:
        """(status, complete result or None, fault): each file read once."""
        status: dict[str, Any] = {}
        try:
            if self.config_path.exists() or self._has_files():
                self.config()
            status = self.status()
            result = self._result()
        except CorruptDataError as exc:
            return status, None, str(exc)
        return status, result, None

    def _has_files(self) -> bool:
        """Whether any of the run's files exists (a directory that has none is no run yet)."""
        return any((self.path / name).exists() for name in RUN_FILES)

    def _result(self) -> dict[str, Any] | None:
        """The complete result, None when there is none; CorruptDataError when it is torn,
        not finite or incomplete."""
        try:
            result = read_json(self.result_path, strict=True)
        except FileNotFoundError:
            return None
        except CorruptDataError as exc:
            raise CorruptDataError(exc.message, hint=self._fix("result.json")) from exc
        problem = _incomplete(result)
        if problem:
            raise CorruptDataError(f"{self.result_path} {problem}", hint=self._fix("result.json"))
        return result

    def facts(self) -> Facts:
        """What the store says about the run, for :func:`debias_bench.states.effective_state`."""
        status, result, fault = self._read()
        pid = int(status.get("pid") or 0)
        running = status.get("state") == RunState.RUNNING
        return Facts(
            stored=RunState.PENDING if fault else parse_state(status.get("state")),
            result_ok=result is not None,
            fault=fault,
            attempts=int(status.get("attempt") or 0),
            same_host=status.get("host", socket.gethostname()) == socket.gethostname(),
            heartbeat_age_s=time.time() - float(status.get("heartbeat") or 0),
            lock_held=self.lock_held() if running else None,
            pid_alive=_pid_alive(pid) if running else False,
        )

    def effective_state(self, owned: bool = False) -> RunState:
        """The run's state, decided once in :func:`debias_bench.states.effective_state`:
        corrupt, done (a complete result), dead (a 'running' run whose process is gone), or the
        recorded state. ``owned``: the caller holds the run's lock."""
        return effective_state(self.facts(), owned=owned)

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
        with _writing(self.lock_path):
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

    def remove_temp_files(self) -> list[Path]:
        """Delete the temporary files that writes of a dead or failed process left behind
        (call it only while holding the run's lock); returns them."""
        removed = []
        for tmp in self.path.glob(".*.tmp"):
            with contextlib.suppress(OSError):
                tmp.unlink()
                removed.append(tmp)
        return removed

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
        """Append one record; it starts on a fresh line even after a torn one."""
        line = json.dumps(record, sort_keys=True) + "\n"
        with _writing(self.metrics_path), open(self.metrics_path, "ab+") as handle:
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
        records = (_parse_metrics_line(line) for line in text.splitlines())
        return [r for r in records if r is not None]

    def truncate_metrics(self, max_step: int) -> None:
        """Keep the evaluations up to the step being resumed from (0: starting from scratch),
        one per step (the latest), and drop torn lines: no duplicate or lost records."""
        if not self.metrics_path.exists():
            return
        by_step = {int(r["step"]): r for r in self.metrics() if int(r["step"]) <= max_step}
        kept = [by_step[s] for s in sorted(by_step)]
        write_atomic(self.metrics_path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in kept))

    # ---------------------------------------------------------------- checkpoint / result
    def save_checkpoint(self, state: dict[str, Any]) -> None:
        tmp = self.checkpoint_path.with_name(f".checkpoint.{os.getpid()}.tmp")
        with _writing(self.checkpoint_path, tmp):
            with open(tmp, "wb") as handle:  # a handle: a full disk raises OSError (ENOSPC)
                torch.save(state, handle)
                handle.flush()
                os.fsync(handle.fileno())
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
        """The complete result; None when there is none, CorruptDataError (with the fix) when
        result.json is torn, not finite or incomplete."""
        return self._result()

    def is_done(self) -> bool:
        """Whether the run has a complete, finite result (a corrupt one is not done)."""
        try:
            return self._result() is not None
        except CorruptDataError:
            return False


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


class RunStore:
    """All runs under one output directory."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def run(self, run_id: str) -> RunDir:
        return RunDir(self.root / run_id)

    def runs(self) -> Iterator[RunDir]:
        """Every run directory, including those whose config.json is missing or unreadable
        (they are corrupt: ``RunDir.fault`` says why); hidden folders are not runs."""
        if not self.root.is_dir():
            return iter(())
        return (
            RunDir(p)
            for p in sorted(self.root.iterdir())
            if p.is_dir() and not p.name.startswith(".") and RunDir(p)._has_files()
        )

    def readable_runs(self) -> Iterator[RunDir]:
        """The runs whose files can all be read (analyses skip corrupt ones; `bench status`
        and `bench report` list those with their fault)."""
        return (run for run in self.runs() if run.fault() is None)
