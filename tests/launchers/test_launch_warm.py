"""Warm workers: runs forked from a server that imported torch once, each still a process of
its own, with the same numbers as a cold worker (a fresh interpreter per run)."""

from __future__ import annotations

import io
import multiprocessing
import os
import sys
import textwrap
import time
from multiprocessing import spawn

import pytest
import torch
from support.path_plugin import PLUGIN, local_sweep

from debias_bench.config.run_config import make_config
from debias_bench.launchers import LiveSummary, schedule
from debias_bench.launchers import forkserver as warm
from debias_bench.launchers.factories import LaunchContext
from debias_bench.launchers.job import WorkerJob
from debias_bench.launchers.local import LocalLauncher
from debias_bench.launchers.process import WorkerProcess
from debias_bench.launchers.slots import plan_slots
from debias_bench.launchers.worker import end_children
from debias_bench.plugins.loading import plugins_for
from debias_bench.runs.store import RunStore
from debias_bench.training.engine import train_run

TINY = {"steps": 12, "eval_every": 6, "batch_size": 64, "num_threads": 1}


def test_warm_workers_give_the_numbers_of_a_fresh_run_each_in_its_own_process(tmp_path, toy_place):
    """Two runs forked from the warm server: each its own process, exit status and log; the
    numbers of the same run trained here (the committed ci baseline holds them against the
    cold workers it was recorded with: tests/analysis/test_regress.py)."""
    configs = [
        make_config("vanilla", "toy", 20, seed, protocol="clean", overrides=TINY) for seed in (0, 1)
    ]
    store = RunStore(tmp_path / "warm")
    launcher = LocalLauncher(LaunchContext(store, toy_place), plan_slots(2, [], cores=2), warm=True)
    launcher.poll_interval_s = 0.05
    sweep = schedule(launcher, configs, store, live=LiveSummary(2, io.StringIO()))
    assert [o.state for o in sweep.outcomes] == ["done", "done"], sweep.outcomes
    statuses = [store.run(c.run_id).status() for c in configs]
    pids = {s["pid"] for s in statuses}
    assert len(pids) == 2 and os.getpid() not in pids  # one process per run
    assert {s["exit_code"] for s in statuses} == {0} and {s["threads"] for s in statuses} == {1}
    log = store.run(configs[0].run_id).stderr_path.read_text()
    assert "warm worker started" in log and f"{configs[0].run_id}: done" in log
    here = RunStore(tmp_path / "here").run(configs[1].run_id)
    fresh = train_run(configs[1], here, toy_place, torch.device("cpu"))
    assert sweep.outcomes[1].result["selections"] == fresh["selections"]


def test_the_cold_start_can_be_asked_for(monkeypatch):
    assert warm.available()  # Linux: the fork server is there
    monkeypatch.setenv(warm.START_ENV, "cold")
    assert not warm.available()


def test_a_warm_child_is_not_told_to_rerun_the_main_module():
    """multiprocessing would re-run the parent's ``__main__`` (a user's script) in the child."""
    main = sys.modules["__main__"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(main, "__file__", "/somewhere/user_script.py", raising=False)
        mp.setattr(main, "__spec__", None, raising=False)
        assert "init_main_from_path" in spawn.get_preparation_data("x")
        with warm._without_main():
            data = spawn.get_preparation_data("x")
    assert "init_main_from_path" not in data and "init_main_from_name" not in data
    assert data["sys_path"] == sys.path and data["dir"] == os.getcwd()


def test_a_worker_refuses_a_config_that_is_not_the_planned_run(tmp_path, toy_place):
    """A run's id is the hash of its config: if the worker's code hashes it differently (the
    code changed while the sweep ran), the run would land in another directory unseen."""
    config = make_config("vanilla", "toy", 20, 0, protocol="clean", overrides=TINY)
    plugins, paths = plugins_for([config])
    job = WorkerJob(
        config=config.to_json(),
        out=str(tmp_path / "runs"),
        raw_root=str(toy_place.raw_root),
        data_root=str(toy_place.data_root),
        plugins=plugins,
        sys_path=paths,
        planned_id=config.run_id[:-10] + "0" * 10,
    )
    worker = WorkerProcess(job, dict(os.environ), warm=True)
    assert worker.wait() == 1 and worker.finish() == "failed"
    error = RunStore(tmp_path / "runs").run(job.planned_id).status()["error"]
    assert "RunIdError" in error and "changed while the sweep ran" in error
    assert "rerun the sweep with --retry-failed" in error  # failed: a plain rerun skips it
    assert not RunStore(tmp_path / "runs").run(config.run_id).path.exists()


def _sleep_long() -> None:
    time.sleep(600)


def test_end_children_stops_what_a_run_left_behind():
    child = multiprocessing.get_context("spawn").Process(target=_sleep_long)  # non-daemon
    child.start()
    assert end_children(grace_s=5.0) >= 1
    assert not child.is_alive() and child.exitcode is not None


#: the path plugin of test_plugins_path, and a dataset on it that decodes with joblib and
#: leaves its pool (idle for 300 s) behind
LEAKY_PLUGIN = PLUGIN.replace("{name}", "leaky_base_ds") + textwrap.dedent(
    """
    import dataclasses
    import time

    from joblib import Parallel, delayed


    @register_dataset("leaky_pool_ds", display_name="Leaky pool", kind="real")
    class LeakyPool(PathPlugin):
        spec = dataclasses.replace(PathPlugin.spec, name="leaky_pool_ds")

        def load(self, ratio):
            list(Parallel(n_jobs=2)(delayed(time.sleep)(0.3) for _ in range(4)))
            return super().load(ratio)
    """
)


@pytest.mark.slow
def test_a_warm_worker_ends_with_its_run_though_a_plugin_left_a_pool(tmp_path):
    """Without end_children the worker would exit 300 s after its run (joblib's pool idle
    time), holding its slot; the timeout below is a hang guard, not a speed target."""
    plugin = tmp_path / "leaky_pool_ds.py"
    plugin.write_text(LEAKY_PLUGIN)
    run = local_sweep(plugin, "leaky_pool_ds", tmp_path, timeout=150)
    assert "warm worker started" in run.stderr_path.read_text()
