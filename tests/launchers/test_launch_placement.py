"""Worker placement without a GPU: slots honour CUDA_VISIBLE_DEVICES and --jobs-per-gpu, each
worker is pinned to one device, CPU workers share the cores; and the scheduler's bookkeeping
(retries, fail-fast, the live summary) with a fake launcher."""

from __future__ import annotations

import io
from collections import Counter
from typing import ClassVar

import pytest
from support.planted import finish_running

from debias_bench.config.run_config import make_config
from debias_bench.errors import ConfigError
from debias_bench.launchers import local as local_module
from debias_bench.launchers.factories import LaunchContext
from debias_bench.launchers.local import LocalLauncher, local_slots
from debias_bench.launchers.scheduler import Ended, Launcher, LiveSummary, schedule
from debias_bench.launchers.slots import (
    SlotPool,
    oversubscription,
    plan_slots,
    user_threads,
    visible_gpus,
)
from debias_bench.runs.provenance import config_json
from debias_bench.runs.states import RunState
from debias_bench.runs.store import RunStore


def test_visible_gpus_follow_cuda_visible_devices():
    assert visible_gpus("3,5", device_count=8) == ["3", "5"]
    assert visible_gpus(None, device_count=2) == ["0", "1"]
    assert visible_gpus("", device_count=2) == []
    assert visible_gpus("2,-1,4", device_count=8) == ["2"]  # CUDA stops at -1
    assert visible_gpus("GPU-1a2b,MIG-3c4d", device_count=2) == ["GPU-1a2b", "MIG-3c4d"]
    with pytest.raises(ConfigError):
        visible_gpus("3,3", device_count=8)


def test_slots_on_two_gpus_with_two_jobs_each():
    slots = plan_slots(None, ["3", "5"], jobs_per_gpu=2, cores=16)
    assert [s.gpu for s in slots] == ["3", "5", "3", "5"]
    assert {s.threads for s in slots} == {4}  # 16 cores / 4 workers
    env = slots[1].env({"CUDA_VISIBLE_DEVICES": "3,5", "PATH": "/bin"})
    assert env["CUDA_VISIBLE_DEVICES"] == "5" and env["OMP_NUM_THREADS"] == "4"
    assert slots[1].device == "cuda"  # the worker sees its one GPU as cuda:0
    assert [s.gpu for s in plan_slots(2, ["3", "5"], jobs_per_gpu=2, cores=16)] == ["3", "5"]
    with pytest.raises(ConfigError, match="jobs-per-gpu"):
        plan_slots(5, ["3", "5"], jobs_per_gpu=2)


def test_cpu_workers_share_the_cores():
    slots = plan_slots(3, [], cores=8)
    assert [(s.gpu, s.threads, s.device) for s in slots] == [(None, 2, "cpu")] * 3
    env = slots[0].env({"CUDA_VISIBLE_DEVICES": "0"})
    assert env["CUDA_VISIBLE_DEVICES"] == "" and env["MKL_NUM_THREADS"] == "2"
    assert plan_slots(None, [], cores=1)[0].threads == 1


def test_threads_per_worker_the_flag_then_omp_num_threads_then_the_cores(monkeypatch):
    assert [s.threads for s in plan_slots(2, [], cores=8, threads=3)] == [3, 3]
    assert [s.threads for s in plan_slots(None, ["0"], cores=8, threads=2)] == [2]
    assert user_threads({"OMP_NUM_THREADS": "1"}) == 1
    for ignored in ("", "0", "-2", "two", "1.5"):  # OpenMP ignores these too
        assert user_threads({"OMP_NUM_THREADS": ignored}) is None
    assert user_threads({}) is None
    monkeypatch.setattr(local_module, "cpu_cores", lambda: 8, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert [s.threads for s in local_slots("cpu", 2)] == [1, 1]  # the user's cap holds
    assert [s.threads for s in local_slots("cpu", 2, threads=3)] == [3, 3]  # the flag wins
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert local_slots("cpu", 1)[0].threads == plan_slots(1, [])[0].threads  # all the cores


def test_oversubscription_is_named_only_when_the_cores_are_busy():
    one_worker = plan_slots(1, [], cores=2)  # 2 threads
    said = oversubscription(one_worker, cores=2, load=2.0)  # another sweep holds both cores
    assert said is not None
    assert "load of 2.0" in said and "1 CPU worker(s) x 2 thread(s)" in said
    assert "OMP_NUM_THREADS=1" in said and "--threads 1" in said and "taskset" in said
    assert oversubscription(one_worker, cores=2, load=0.4) is None  # an idle machine
    one_thread = plan_slots(1, [], cores=2, threads=1)  # nothing of this sweep's to lower
    assert oversubscription(one_thread, cores=2, load=1.0) is None
    assert oversubscription(one_thread, cores=2, load=6.0) is None
    assert oversubscription(plan_slots(2, ["0", "1"], cores=2), cores=2, load=4.0) is None  # GPU


def test_pool_takes_the_least_busy_device():
    pool = SlotPool(plan_slots(None, ["3", "5"], jobs_per_gpu=2, cores=4))
    a, b = pool.acquire(), pool.acquire()
    assert {a.gpu, b.gpu} == {"3", "5"}
    pool.release(a)
    c = pool.acquire()
    assert c.gpu == a.gpu  # back to the device that had room
    pool.acquire(), pool.acquire()
    assert pool.acquire() is None and pool.per_device() == Counter({"3": 2, "5": 2})


class _FakeWorker:
    """Stands in for WorkerProcess: records its environment; ends after a few polls."""

    server_died: str | None = None  # a cold worker: no warm server to lose
    exit_handle: int | None = None  # nothing to wait on: the sweep polls it
    live: ClassVar[Counter] = Counter()
    peak: ClassVar[Counter] = Counter()
    seen: ClassVar[list] = []

    def __init__(self, job, env, timeout_s=None, grace_s=30.0, warm=False):
        self.job, self.env, self.polls = job, env, 0
        gpu = env["CUDA_VISIBLE_DEVICES"]
        _FakeWorker.seen.append((gpu, job.device, env["OMP_NUM_THREADS"]))
        _FakeWorker.live[gpu] += 1
        _FakeWorker.peak[gpu] = max(_FakeWorker.peak[gpu], _FakeWorker.live[gpu])
        self.run_dir = RunStore(job.out).run(job.run_id)

    def poll(self):
        self.polls += 1
        if self.polls < 3 + len(_FakeWorker.seen) % 3:  # uneven run lengths
            return None
        return 0

    def finish(self):
        _FakeWorker.live[self.env["CUDA_VISIBLE_DEVICES"]] -= 1
        return "done"

    def ended(self, task):
        return Ended(task, self.finish())

    def terminate(self): ...

    def kill(self): ...


def test_sweep_on_fake_gpus_3_and_5_never_exceeds_two_per_device(tmp_path, monkeypatch, toy_place):
    monkeypatch.setattr(local_module, "WorkerProcess", _FakeWorker)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    monkeypatch.setattr("torch.cuda.device_count", lambda: 2)
    slots = local_slots("auto", workers=None, jobs_per_gpu=2)
    assert sorted(s.gpu for s in slots) == ["3", "3", "5", "5"]

    store = RunStore(tmp_path / "runs")
    configs = [make_config("vanilla", "toy", 20, seed) for seed in range(11)]
    launcher = LocalLauncher(LaunchContext(store, toy_place), slots)
    launcher.poll_interval_s = 0
    sweep = schedule(launcher, configs, store, live=LiveSummary(11, io.StringIO()))
    assert [o.state for o in sweep.outcomes] == ["done"] * 11
    assert {gpu for gpu, _, _ in _FakeWorker.seen} == {"3", "5"}  # those devices only
    assert {device for _, device, _ in _FakeWorker.seen} == {"cuda"}
    assert max(_FakeWorker.peak.values()) == 2  # never more than two per device
    assert len(_FakeWorker.seen) == 11


class _ScriptedLauncher(Launcher):
    """Ends each run with a scripted sequence of states, one per start."""

    def __init__(self, store, script):
        self.store, self.script, self.started, self.now = store, script, [], []
        self.stopped = False

    def free(self):
        return 2 - len(self.now)

    def start(self, tasks):
        self.started += [t.config.seed for t in tasks]
        self.now += tasks

    def poll(self):
        ended = []
        for task in self.now:
            state = self.script[task.config.seed].pop(0)
            run_dir = self.store.run(task.run_id)
            run_dir.plan(config_json(task.config))
            attempt = run_dir.status().get("attempt", 0) + 1
            run_dir.transition(RunState.RUNNING, attempt=attempt)
            if state == RunState.DONE:
                finish_running(run_dir)
            else:
                run_dir.transition(state, error=f"{state} {attempt}")
            ended.append(Ended(task, state, f"{state} {attempt}"))
        self.now = []
        return ended

    def active(self):
        return dict.fromkeys((t.run_id for t in self.now), "running")

    def stop(self):
        self.stopped = True


def _configs(n):
    return [make_config("vanilla", "toy", 20, seed) for seed in range(n)]


def test_retries_stop_at_max_attempts(tmp_path):
    store = RunStore(tmp_path)
    script = {0: ["done"], 1: ["failed", "done"], 2: ["failed"] * 5}
    launcher = _ScriptedLauncher(store, script)
    live = LiveSummary(3, io.StringIO())
    sweep = schedule(launcher, _configs(3), store, retry_failed=True, max_attempts=3, live=live)
    assert [o.state for o in sweep.outcomes] == ["done", "done", "failed"]
    assert sorted(launcher.started) == [0, 1, 1, 2, 2, 2]  # seed 2: three attempts, no more
    assert store.run(_configs(3)[2].run_id).status()["attempt"] == 3
    assert "ETA" in live.stream.getvalue()


def test_no_retry_without_the_flag_and_fail_fast_stops(tmp_path):
    store = RunStore(tmp_path)
    launcher = _ScriptedLauncher(store, {0: ["failed"], 1: ["done"], 2: ["done"], 3: ["done"]})
    sweep = schedule(
        launcher, _configs(4), store, fail_fast=True, live=LiveSummary(4, io.StringIO())
    )
    assert sweep.stopped == "fail-fast" and launcher.stopped
    assert sorted(launcher.started) == [0, 1]  # two slots: the first two started, no more
    assert [o.state for o in sweep.outcomes] == ["failed", "done", "pending", "pending"]


def test_slurm_resources_per_dataset(tmp_path):
    from debias_bench.launchers.slurm_resources import (
        executor_parameters,
        load_resources,
        time_minutes,
    )

    assert [time_minutes(t) for t in ("90", "1:30:00", "2-00:00:00", "30:00")] == [90, 90, 2880, 30]
    with pytest.raises(ConfigError):
        time_minutes("soon")
    path = tmp_path / "resources.yaml"
    path.write_text(
        "default: {partition: gpu, time: '4:00:00', gpus: 1, cpus: 4, mem: 16G}\n"
        "datasets:\n  cmnist: {gpus: 0, cpus: 2, mem: 4G, time: 30}\n"
    )
    table = load_resources(str(path), {"cpus": 8})  # the command line beats the file default
    cmnist, bffhq = table.for_dataset("cmnist"), table.for_dataset("bffhq")
    assert (cmnist.gpus, cmnist.cpus, cmnist.mem, cmnist.minutes()) == (0, 2, "4G", 30)
    assert (bffhq.gpus, bffhq.cpus, bffhq.partition, bffhq.minutes()) == (1, 8, "gpu", 240)
    params = executor_parameters(bffhq, array_parallelism=8, name="bench")
    assert params["gpus_per_node"] == 1 and params["slurm_mem"] == "16G"
    assert params["slurm_array_parallelism"] == 8 and params["timeout_min"] == 240
    assert params["slurm_additional_parameters"] == {"requeue": True}
    path.write_text("default: {gpu: 1}\n")
    with pytest.raises(ConfigError, match="unknown resource keys"):
        load_resources(str(path), {})
