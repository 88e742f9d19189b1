"""The run store: one directory per run, written only by the run's own process.

    <out>/<run_id>/config.json    resolved configuration + provenance (code and data version)
    <out>/<run_id>/status.json    state, host, pid, heartbeat, attempt, exit code, error
    <out>/<run_id>/metrics.jsonl  one line per evaluation
    <out>/<run_id>/checkpoint.pt  latest checkpoint (for resume)
    <out>/<run_id>/result.json    final result; its presence marks the run as done

Every JSON file and the checkpoint are written to a temporary file and renamed into place,
so a reader (``bench status``, ``bench report``) never sees a half-written file.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from debias_bench.errors import CorruptDataError

STATES = ("pending", "running", "done", "failed", "interrupted", "skipped")
#: a running run whose heartbeat is older than this is reported as dead
STALE_AFTER_S = 15 * 60


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
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
        status = {**self.status(), **fields, "state": state, "updated": time.time()}
        if state == "running":
            status.update(host=socket.gethostname(), pid=os.getpid(), heartbeat=time.time())
        write_json(self.status_path, status)
        return status

    def heartbeat(self, **fields: Any) -> None:
        write_json(self.status_path, {**self.status(), **fields, "heartbeat": time.time()})

    def effective_state(self) -> str:
        """The stored state, except that a 'running' run whose process is gone is 'dead'."""
        status = self.status()
        state = status.get("state", "pending")
        if state != "running":
            return state
        if status.get("host") == socket.gethostname() and not _pid_alive(int(status["pid"])):
            return "dead"
        if time.time() - float(status.get("heartbeat", 0)) > STALE_AFTER_S:
            return "dead"
        return state

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
