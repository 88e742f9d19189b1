"""Issue 48: a run that runs out of memory is ``failed (out of memory)``, not ``crashed``:
Python's MemoryError, torch's out-of-memory errors (GPU and CPU allocators) and, under a
launcher with worker processes, a SIGKILL while the OOM killer's count of the worker's cgroup
rose."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import torch
from support.planted import plant

from debias_bench.cli import main
from debias_bench.launchers.process import oom_kills, record_exit
from debias_bench.methods.vanilla import Vanilla
from debias_bench.runs.states import RunState
from debias_bench.runs.store import RunStore

TOY = ["--methods", "vanilla", "--datasets", "toy", "--ratios", "5", "--device", "cpu"]
TOY += ["--set", "steps=4"]

OUT_OF_MEMORY = [
    MemoryError(),
    torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
    RuntimeError("CUDA error: out of memory"),
    RuntimeError("[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory"),
]


@pytest.mark.parametrize(
    ("exc", "reason"),
    [*((e, "out of memory") for e in OUT_OF_MEMORY), (RuntimeError("boom"), "crashed")],
    ids=["MemoryError", "torch.OutOfMemoryError", "cuda-kernel", "cpu-allocator", "other"],
)
def test_a_run_out_of_memory_fails_by_that_reason(tmp_path, monkeypatch, capsys, exc, reason):
    monkeypatch.setenv("BENCH_RAW_ROOT", str(tmp_path / "raw"))
    monkeypatch.setenv("BENCH_DATA_ROOT", str(tmp_path / "data"))

    def update(self, batch):
        raise exc

    monkeypatch.setattr(Vanilla, "update", update)
    out = tmp_path / "runs"
    assert main(["run", *TOY, "--out", str(out)]) == 1
    (run,) = RunStore(out).runs()
    status = run.status()
    assert status["state"] == "failed" and status["reason"] == reason, status
    if reason == "out of memory":
        assert status["error"].startswith(f"out of memory: {type(exc).__name__}")
    assert main(["status", "--out", str(out), "--failed"]) == 0
    assert f"failed ({reason})" in capsys.readouterr().out


def _running(tmp_path: Path):
    run = plant(RunStore(tmp_path / "runs"))
    run.transition(RunState.RUNNING, attempt=1, pid=os.getpid())
    return run


def test_a_worker_sigkilled_by_the_oom_killer_fails_out_of_memory(tmp_path):
    run = _running(tmp_path)
    config = run.config()
    state = record_exit(run, config, -signal.SIGKILL, "", pid=os.getpid(), oom_killed=True)
    assert state is RunState.FAILED
    assert run.status()["reason"] == "out of memory"
    assert "OOM killer" in run.status()["error"]


def test_a_sigkill_without_memory_evidence_stays_dead_and_resumable(tmp_path):
    run = _running(tmp_path)
    state = record_exit(run, run.config(), -signal.SIGKILL, "", pid=os.getpid())
    assert state is RunState.DEAD


@pytest.mark.parametrize(
    ("cgroup", "files", "expected"),
    [
        ("0::/user.slice/a\n", {"user.slice/a/memory.events": "low 0\noom 2\noom_kill 3\n"}, 3),
        ("0::/\n", {"memory.events": "oom 0\noom_kill 1\n"}, 1),
        ("4:memory:/docker/x\n0::/\n", {"memory/memory.oom_control": "oom_kill 5\n"}, 5),
        ("1:cpu:/\n", {}, None),
    ],
    ids=["v2", "v2-container", "v1-container", "no-memory-cgroup"],
)
def test_oom_kills_reads_the_cgroups_count(tmp_path, cgroup, files, expected):
    (tmp_path / "cgroup").write_text(cgroup)
    for name, text in files.items():
        (tmp_path / "fs" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "fs" / name).write_text(text)
    assert oom_kills(tmp_path / "cgroup", tmp_path / "fs") == expected
