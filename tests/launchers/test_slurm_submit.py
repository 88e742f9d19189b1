"""``--launcher slurm`` from the command line to submitit, without a cluster: its own flags
(parsed by the real ``bench run`` parser) become the jobs' resources, each job carries the run's
planned id, and every job id is reported back (``tests/launchers/test_slurm.py`` runs a real
SLURM)."""

from __future__ import annotations

import contextlib
import pickle
import sys
import types
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from debias_bench.cli import build_parser
from debias_bench.config.run_config import make_config
from debias_bench.errors import ConfigError
from debias_bench.launchers import LAUNCHERS, LaunchContext, Task
from debias_bench.launchers import slurm as slurm_module
from debias_bench.paths import DataPlace
from debias_bench.runs.store import RunStore


class _FakeExecutor:
    """submitit.AutoExecutor's part the launcher uses; records what it is given."""

    made: ClassVar[list[_FakeExecutor]] = []

    def __init__(self, folder: Any, cluster: str, slurm_max_num_timeout: int) -> None:
        self.params: dict[str, Any] = {}
        self.submitted: list[Any] = []
        _FakeExecutor.made.append(self)

    def update_parameters(self, **params: Any) -> None:
        self.params.update(params)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        yield

    def submit(self, fn: Any) -> Any:
        self.submitted.append(fn)
        return types.SimpleNamespace(job_id=f"77_{len(self.submitted) - 1}")


@pytest.fixture
def fake_submitit(monkeypatch):
    _FakeExecutor.made.clear()
    monkeypatch.setitem(sys.modules, "submitit", types.SimpleNamespace(AutoExecutor=_FakeExecutor))
    monkeypatch.setattr(slurm_module, "slurm_available", lambda: None)


def test_the_slurm_flags_become_the_jobs_resources(fake_submitit, tmp_path, toy_place):
    flags = ["--partition", "gpu", "--cpus-per-run", "2", "--mem-per-run", "4G"]
    flags += ["--time", "1:30:00", "--array-parallelism", "3"]
    args = build_parser().parse_args(["run", "--launcher", "slurm", *flags])
    reported: dict[str, str] = {}
    ctx = LaunchContext(RunStore(tmp_path / "runs"), toy_place, on_submitted=reported.update)
    launcher = LAUNCHERS.get(args.launcher).from_args(args, ctx)
    configs = [make_config("vanilla", "toy", 20, seed) for seed in (0, 1)]
    launcher.start([Task(c, c.run_id) for c in configs])

    (executor,) = _FakeExecutor.made  # one resource group: one array
    assert executor.params["slurm_partition"] == "gpu" and executor.params["cpus_per_task"] == 2
    assert executor.params["slurm_mem"] == "4G" and executor.params["timeout_min"] == 90
    assert executor.params["slurm_array_parallelism"] == 3
    jobs = [pickle.loads(pickle.dumps(run)).job for run in executor.submitted]  # as submitit does
    assert [job.planned_id for job in jobs] == [c.run_id for c in configs]
    assert jobs[0].status_fields["launcher"] == "slurm" and jobs[0].device == "cpu"
    assert jobs[0].status_fields["resources"]["mem"] == "4G"
    assert reported == {configs[0].run_id: "77_0", configs[1].run_id: "77_1"}
    assert launcher.active() == dict.fromkeys(reported, "queued")


def test_without_a_controller_the_slurm_launcher_is_a_config_error(monkeypatch, tmp_path):
    monkeypatch.setattr(slurm_module, "slurm_available", lambda: "sbatch/squeue not found")
    args = build_parser().parse_args(["run", "--launcher", "slurm"])
    ctx = LaunchContext(RunStore(tmp_path / "runs"), DataPlace(tmp_path, tmp_path))
    with pytest.raises(ConfigError, match="--launcher slurm: sbatch/squeue not found"):
        LAUNCHERS.get("slurm").from_args(args, ctx)
