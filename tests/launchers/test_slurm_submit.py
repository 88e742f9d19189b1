"""``--launcher slurm`` from the command line to submitit, without a cluster: its own flags
(parsed by the real ``bench run`` parser) become the jobs' resources, each job carries the run's
planned id, every job id is reported back, and submitit's pickles are kept in a folder of the
user's own, never in the (shared) run store (``tests/launchers/test_slurm.py`` runs a real
SLURM)."""

from __future__ import annotations

import contextlib
import os
import pickle
import stat
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from debias_bench.cli import build_parser
from debias_bench.commands.flags import launcher_values
from debias_bench.config.run_config import make_config
from debias_bench.errors import ConfigError
from debias_bench.launchers import LaunchContext, Task
from debias_bench.launchers import slurm as slurm_module
from debias_bench.launchers.factories import build_launcher
from debias_bench.paths import DataPlace
from debias_bench.runs.store import RunStore


class _FakeExecutor:
    """submitit.AutoExecutor's part the launcher uses; records what it is given."""

    made: ClassVar[list[_FakeExecutor]] = []

    def __init__(self, folder: Any, cluster: str, slurm_max_num_timeout: int) -> None:
        self.folder = Path(folder)
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
def fake_submitit(monkeypatch, tmp_path):
    monkeypatch.setenv(slurm_module.SUBMITIT_ENV, str(tmp_path / "private" / "submitit"))
    _FakeExecutor.made.clear()
    monkeypatch.setitem(sys.modules, "submitit", types.SimpleNamespace(AutoExecutor=_FakeExecutor))
    monkeypatch.setattr(slurm_module, "slurm_available", lambda: None)


def test_the_slurm_flags_become_the_jobs_resources(fake_submitit, tmp_path, toy_place):
    flags = ["--partition", "gpu", "--cpus-per-run", "2", "--mem-per-run", "4G"]
    flags += ["--time", "1:30:00", "--array-parallelism", "3"]
    args = build_parser().parse_args(["run", "--launcher", "slurm", *flags])
    reported: dict[str, str] = {}
    ctx = LaunchContext(RunStore(tmp_path / "runs"), toy_place, on_submitted=reported.update)
    launcher = build_launcher(args.launcher, launcher_values(args), ctx)
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
        build_launcher("slurm", launcher_values(args), ctx)


def _start_one(tmp_path: Path, toy_place: DataPlace) -> tuple[RunStore, _FakeExecutor]:
    args = build_parser().parse_args(["run", "--launcher", "slurm"])
    store = RunStore(tmp_path / "runs")
    launcher = build_launcher(args.launcher, launcher_values(args), LaunchContext(store, toy_place))
    config = make_config("vanilla", "toy", 20, 0)
    launcher.start([Task(config, config.run_id)])
    (executor,) = _FakeExecutor.made
    return store, executor


def test_submitit_keeps_its_pickles_in_the_users_own_folder(
    fake_submitit, tmp_path, toy_place, monkeypatch
):
    """A job's pickle runs as the submitting user on the compute node: in the store, anyone
    who can write there could replace it while the job is queued. By default it lives under
    the user's state folder, mode 0700, one subfolder per store."""
    monkeypatch.delenv(slurm_module.SUBMITIT_ENV)
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    store, executor = _start_one(tmp_path, toy_place)
    root = (tmp_path / "home" / ".local" / "state" / "debias-bench" / "submitit").resolve()
    assert executor.folder.name == "%j" and executor.folder.parent.parent == root
    assert executor.folder.parent.name.startswith("runs-")
    assert not executor.folder.is_relative_to(store.root.resolve())
    assert not (store.root / ".submitit").exists()
    mode = root.stat()
    assert mode.st_uid == os.getuid() and stat.S_IMODE(mode.st_mode) & 0o077 == 0


@pytest.mark.parametrize(
    "layout,problem",
    [
        ({"private/submitit": 0o777}, "is not yours alone"),
        ({"private": 0o777}, "can be written by others"),  # its folder could be swapped
        ({"private": 0o1777}, None),  # sticky, as /tmp: others cannot replace it
        ({"private": 0o755, "private/submitit": 0o700}, None),
    ],
)
def test_a_submitit_folder_others_could_write_is_refused_before_submitting(
    fake_submitit, tmp_path, toy_place, layout, problem
):
    for folder, mode in layout.items():
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder).chmod(mode)
    if problem is None:
        _start_one(tmp_path, toy_place)
        return
    with pytest.raises(ConfigError, match=problem) as info:
        _start_one(tmp_path, toy_place)
    assert slurm_module.SUBMITIT_ENV in (info.value.hint or "") and not _FakeExecutor.made
