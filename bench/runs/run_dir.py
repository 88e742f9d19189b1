"""One run's record and its only writer, :class:`RunDir`: every state change, file write and
verified read of a run goes through it (the folder layout: :mod:`debias_bench.runs.store`; the
folder's paths, lock, logs and metrics records: :class:`~debias_bench.runs.run_folder.RunFolder`,
which it extends)."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

from debias_bench.config.run_config import RunConfig
from debias_bench.errors import CorruptDataError, FailReason
from debias_bench.runs.files import (
    checkpoint_stamp,
    described_run,
    incomplete_result,
    inconsistent_result,
    read_checkpoint,
)
from debias_bench.runs.jsonio import read_json, write_json, writing
from debias_bench.runs.lock import pid_alive
from debias_bench.runs.nofollow import open_own
from debias_bench.runs.provenance import code_hash
from debias_bench.runs.run_folder import RunFolder
from debias_bench.runs.states import (
    Facts,
    RunState,
    check_transition,
    effective_state,
    parse_state,
)

#: serialises read-modify-write of status.json between the threads of one process
_STATUS_LOCK = threading.RLock()


class RunDir(RunFolder):
    """One run's record, and its only writer: every file of the run is written here, by the
    process that holds the run's lock, and every read is verified against the run's id."""

    # ---------------------------------------------------------------- plan / config
    def plan(self, config: dict[str, Any]) -> bool:
        """Write ``config.json`` and a ``pending`` status: the one time a run's config is
        written. Does nothing when the run already has a config (it is verified on every read
        instead); returns whether it wrote. The caller holds the run's lock."""
        if config.get("run_id") != self.run_id:
            raise ValueError(f"config of run {config.get('run_id')!r} planned as {self.run_id}")
        if self.config_path.exists():
            return False
        self.path.mkdir(parents=True, exist_ok=True)
        write_json(self.config_path, config)
        if not self.status_path.exists():
            write_json(self.status_path, {"state": RunState.PENDING.value, "planned": time.time()})
        return True

    def config(self) -> dict[str, Any]:
        """The run's verified config; CorruptDataError (with the fix) when it is missing, torn,
        or describes another run than the one its folder is named after."""
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
        self._verify_config(config)
        return config

    def _verify_config(self, config: dict[str, Any]) -> None:
        """The run id recomputed from ``config`` must be the folder's name, and so must the id
        it records: a copied folder or a hand-edited value never passes for this run."""
        described = described_run(config)
        if described == self.run_id and config.get("run_id") == self.run_id:
            return
        if described.startswith("cannot "):
            raise CorruptDataError(f"{self.config_path} {described}", hint=self._fix("foreign"))
        raise CorruptDataError(
            f"{self.config_path} does not match run id {self.run_id}: its values describe run "
            f"{described} (a copied folder or an edited config)",
            hint=self._fix("foreign"),
        )

    def config_digest(self) -> str:
        """The digest of the run's verified config (:attr:`RunConfig.digest`)."""

        return RunConfig.from_json(self.config()).digest

    def _stamp(self) -> dict[str, str]:
        """What ``result.json`` and the checkpoint carry to say whose they are, and which code
        of the method and dataset made them."""
        return {"run_id": self.run_id, "config_digest": self.config_digest(), "code": self.code()}

    # ---------------------------------------------------------------- code identity (stale runs)
    def code(self) -> str:
        """The hash of the current code of the run's method and dataset."""

        config = self.config()
        return code_hash(config["method"], config["dataset"])

    def _stale(self, stamped: dict[str, Any] | None, name: str) -> str | None:
        """What changed, when ``stamped`` (the result, or the checkpoint) was made by other
        code of the method or dataset than the current one, or records none (written before
        files recorded it, or edited); None otherwise (and when there is no such file)."""
        if stamped is None:
            return None
        made_by = stamped.get("code")
        if made_by is None:
            return f"stale: no code identity recorded in its {name} (code now {self.code()})"
        if made_by == self.code():
            return None
        return f"stale: code changed since its {name} was written (code {made_by} -> {self.code()})"

    def staleness(self) -> str | None:
        """Why the run's result (or, unfinished, its checkpoint) is stale; None if it is not."""
        try:
            result = self._result()
            if result is not None:
                return self._stale(result, "result")
            return self._stale(checkpoint_stamp(self.checkpoint_path), "checkpoint")
        except CorruptDataError:
            return None  # a fault, reported as such

    def retire(self) -> Path:
        """Move a stale run's result, checkpoint and metrics aside, into
        ``superseded/<code>/`` inside the run, so it trains afresh with the current code;
        returns that folder. The caller holds the lock."""
        try:
            made_by = read_json(self.result_path).get("code")
        except (CorruptDataError, FileNotFoundError, AttributeError):
            made_by = None
        made_by = made_by or (checkpoint_stamp(self.checkpoint_path) or {}).get("code")
        aside = self.path / "superseded" / str(made_by or "unknown")
        for folder in (aside.parent, aside):  # a link in their place would move them elsewhere
            if folder.is_symlink():
                folder.unlink()
        aside.mkdir(parents=True, exist_ok=True)
        for path in (self.result_path, self.checkpoint_path, self.metrics_path):
            if path.exists():
                os.replace(path, aside / path.name)
        return aside

    # ---------------------------------------------------------------- status
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

    def transition(
        self, state: RunState, reason: FailReason | str | None = None, **fields: Any
    ) -> dict[str, Any]:
        """Move the run to ``state`` (with ``fields``), recorded in status.json; the one way a
        run's state changes. Raises IllegalTransition for a change :data:`LEGAL` does not allow
        (a done run never changes state; ``done`` needs a verified result).

        ``reason``: for ``failed``, a :class:`FailReason` (default: the one already recorded
        for a failed run, else ``crashed``), with the details in ``error``; for ``skipped``,
        the method's explanation. Other states drop it. Example, a divergence::

            run_dir.transition(RunState.FAILED, reason=FailReason.DIVERGED,
                               error="train loss is nan at step 120", step=120)
        """
        state = RunState(state)
        with _STATUS_LOCK:
            previous = self.status()
            check_transition(self._recorded_state(previous), state, self._has_result())
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

    def _recorded_state(self, status: dict[str, Any]) -> RunState:
        """The state the status records; a ``done`` whose result was moved aside is pending."""
        stored = parse_state(status.get("state"))
        if stored is RunState.DONE and not self._has_result():
            return RunState.PENDING
        return stored

    def _has_result(self) -> bool:
        try:
            return self._result() is not None
        except CorruptDataError:
            return False

    def heartbeat(self, **fields: Any) -> None:
        with _STATUS_LOCK:
            status = self.status()
            if status.get("state") != RunState.RUNNING or status.get("pid") != os.getpid():
                return  # not (or no longer) ours to beat
            write_json(self.status_path, {**status, **fields, "heartbeat": time.time()})

    def mark_dead(self, error: str, **fields: Any) -> None:
        """Record that the run's process died during the run without recording an outcome
        (kill -9, the OOM killer, a crashed interpreter, a cancelled job): ``dead``, which a
        plain rerun resumes from its checkpoint. Called by the launcher that started it."""
        self.transition(RunState.DEAD, error=error, heartbeat=0.0, **fields)

    # ---------------------------------------------------------------- faults and state
    def fault(self) -> str | None:
        """The first missing, unreadable or foreign file of the run, and the fix; None when
        none is."""
        return self._read()[2]

    def _read(self) -> tuple[dict[str, Any], dict[str, Any] | None, str | None]:
        """(status, complete result or None, fault): each file read once."""
        status: dict[str, Any] = {}
        try:
            if self.config_path.exists() or self._has_files():
                self.config()
            status = self.status()
            result = self._result()
            if result is None:
                self._check_checkpoint()
        except CorruptDataError as exc:
            return status, None, str(exc)
        return status, result, None

    def _result(self) -> dict[str, Any] | None:
        """The complete result, None when there is none; CorruptDataError when it is torn,
        not finite, incomplete, or written for another run or configuration."""
        try:
            result = read_json(self.result_path, strict=True)
        except FileNotFoundError:
            return None
        except CorruptDataError as exc:
            raise CorruptDataError(exc.message, hint=self._fix("result.json")) from exc
        problem = (
            incomplete_result(result)
            or self._foreign(result, "result.json")
            or inconsistent_result(result, self._logged_metrics())
        )
        if problem:
            raise CorruptDataError(f"{self.result_path} {problem}", hint=self._fix("result.json"))
        return result

    def _foreign(self, stamped: dict[str, Any], name: str) -> str | None:
        """Why ``stamped`` (a result or a checkpoint) is not this run's, None when it is.

        Results written before results carried a config digest (bench < 0.2) are checked by
        their run id alone; checkpoints must carry both."""
        if stamped.get("run_id") != self.run_id:
            return f"belongs to run {stamped.get('run_id')!r}, not {self.run_id}"
        digest = stamped.get("config_digest")
        if digest is None and name == "result.json":
            return None
        if digest != self.config_digest():
            return "was written for another configuration of this run id (config digest differs)"
        return None

    def _check_checkpoint(self) -> None:
        """CorruptDataError when the checkpoint is another run's: it is never resumed from."""
        stamp = checkpoint_stamp(self.checkpoint_path)
        if stamp is None:
            return
        problem = self._foreign(stamp, "checkpoint.pt")
        if problem:
            raise CorruptDataError(
                f"{self.checkpoint_path} {problem}", hint=self._fix("checkpoint.pt")
            )

    def facts(self) -> Facts:
        """What the store says about the run, for
        :func:`debias_bench.runs.states.effective_state`."""
        status, result, fault = self._read()
        running = status.get("state") == RunState.RUNNING
        lock = self.lock_held() if running else None
        if lock is False:  # it may have ended between the two reads: read what it left
            status, result, fault = self._read()
            running = status.get("state") == RunState.RUNNING
            lock = lock if running else None
        pid = int(status.get("pid") or 0)
        return Facts(
            stored=RunState.PENDING if fault else parse_state(status.get("state")),
            result_ok=result is not None,
            fault=fault,
            stale=None if fault else self.staleness(),
            attempts=int(status.get("attempt") or 0),
            same_host=status.get("host", socket.gethostname()) == socket.gethostname(),
            heartbeat_age_s=time.time() - float(status.get("heartbeat") or 0),
            written_age_s=self._written_age() if running else None,
            lock_held=lock,
            pid_alive=pid_alive(pid) if running else False,
        )

    def effective_state(self, owned: bool = False) -> RunState:
        """The run's state, decided once in :func:`debias_bench.runs.states.effective_state`:
        corrupt, done (a complete result), dead (a 'running' run whose process is gone), or the
        recorded state. ``owned``: the caller holds the run's lock."""
        return effective_state(self.facts(), owned=owned)

    # ---------------------------------------------------------------- checkpoint / result
    def save_checkpoint(self, state: dict[str, Any]) -> None:
        """Write the checkpoint, stamped with the run id and config digest (``stamp``)."""
        import torch  # here, not at the top: listings and reports import this module without torch

        tmp = self.checkpoint_path.with_name(f".checkpoint.{os.getpid()}.tmp")
        stamped = {**state, "stamp": self._stamp()}
        with writing(self.checkpoint_path, tmp):
            fd = open_own(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)  # never through a link
            with open(fd, "wb") as handle:  # a handle: a full disk raises OSError (ENOSPC)
                torch.save(stamped, handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.checkpoint_path)

    def load_checkpoint(self) -> dict[str, Any] | None:
        """The run's checkpoint, None when there is none; CorruptDataError naming the file when
        it is torn or another run's (a foreign checkpoint is never resumed from)."""
        if not self.checkpoint_path.is_file():
            return None
        self._check_checkpoint()
        try:
            return read_checkpoint(self.checkpoint_path)
        except Exception as exc:  # a torn file: say which
            raise CorruptDataError(
                f"cannot read checkpoint {self.checkpoint_path}: {exc}",
                hint=self._fix("checkpoint.pt"),
            ) from exc

    def write_result(self, result: dict[str, Any]) -> None:
        """Write the final result, stamped with the run id and config digest; it must be
        complete (the run is done from now on)."""
        stamped = {**result, **self._stamp()}
        problem = incomplete_result(stamped)
        if problem:
            raise ValueError(f"a result that {problem} is not written")
        write_json(self.result_path, stamped)

    def result(self) -> dict[str, Any] | None:
        """The complete result; None when there is none, CorruptDataError (with the fix) when
        result.json is torn, not finite, incomplete or another run's."""
        return self._result()

    def is_done(self) -> bool:
        """Whether the run has a complete, finite result of the current code (a corrupt or
        stale one is not done)."""
        try:
            result = self._result()
            return result is not None and self._stale(result, "result") is None
        except CorruptDataError:
            return False
