"""A stop during a method's preparation stage (issue 39): honoured before the stage's next
optimiser step, not after the whole stage; the rerun runs the stage again and ends where an
uninterrupted run does.

The end-to-end test sends Ctrl-C to ``bench run`` while each method with a stage is in it (its
status says ``stage: preparing``), on the scripted dataset of ``support.scripted`` whose
training images are slow to read (every stage reads them), and reruns it to ``done``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from support.asserts import assert_close_nested
from support.processes import bench_env, run_of_seed
from support.scripted import _wait_for

from debias_bench.config.run_config import make_config
from debias_bench.errors import Interrupted
from debias_bench.registry import METHODS
from debias_bench.runs.store import RunStore
from debias_bench.training.engine import train_run
from debias_bench.training.method import Method
from debias_bench.training.stages import StageStopped, stop_between_steps

#: stage length of the end-to-end runs: 48 reads of 0.5 s each, far more than the 10 s allowed
STEPS = 48
DELAY_S = "0.5"
#: every method with a preparation stage, and what makes its stage ``STEPS`` steps long on the
#: scripted dataset (256 images, batches of 32: 8 steps an epoch)
STAGES: dict[str, list[str]] = {
    "lff_be": [
        f"committee_steps={STEPS}",
        f"committee_valid_every={STEPS}",
        "committee_members=1",
        "committee_agreement=1",
    ],
    "jtt": [f"id_epochs={STEPS // 8}"],
    "pgd": [],  # bias_epochs null: as long as the run
    "denetdm": ["stage1_share=1.0"],
    "dfr": [],  # its ERM stage: as long as the run
}
#: methods whose ``prepare`` has no training steps (GroupDRO counts its groups)
NO_STAGE = {"groupdro"}


def test_every_method_with_a_preparation_stage_is_covered():
    """A new method with a ``prepare`` joins :data:`STAGES` (or :data:`NO_STAGE`)."""
    preparing = {
        name for name in METHODS.names() if METHODS.get(name).prepare is not Method.prepare
    }
    assert preparing == set(STAGES) | NO_STAGE


def test_a_stop_is_raised_before_the_next_optimiser_step_and_only_in_the_block():
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    asked = {"stop": False, "polls": 0}

    def should_stop() -> bool:
        asked["polls"] += 1
        return bool(asked["stop"])

    def step() -> None:
        optimizer.zero_grad()
        model(torch.ones(1, 2)).sum().backward()
        optimizer.step()

    with stop_between_steps(should_stop):
        step()
        before = model.weight.detach().clone()
        asked["stop"] = True
        with pytest.raises(StageStopped):
            step()
        assert torch.equal(model.weight, before)  # stopped before the update
    polls = asked["polls"]
    step()  # outside the block: no hook
    assert asked["polls"] == polls == 2


def test_a_run_stopped_in_its_stage_reruns_it_and_equals_an_uninterrupted_run(tmp_path, toy_place):
    overrides = {"steps": 24, "eval_every": 8, "batch_size": 32, "id_epochs": 2}
    config = make_config("jtt", "toy", 20, 0, protocol="clean", overrides=overrides)
    cpu = torch.device("cpu")
    whole = train_run(config, RunStore(tmp_path / "whole").run(config.run_id), toy_place, cpu)

    run_dir = RunStore(tmp_path / "split").run(config.run_id)
    polls = iter(range(100))
    with pytest.raises(Interrupted, match="preparation stage"):  # at the stage's 5th step
        train_run(config, run_dir, toy_place, cpu, should_stop=lambda _: next(polls) == 4)
    assert not run_dir.checkpoint_path.is_file() and not run_dir.metrics()
    resumed = train_run(config, run_dir, toy_place, cpu)
    assert_close_nested(resumed["selections"], whole["selections"])


def _args(out: Path, method: str) -> list[str]:
    sets = [f"steps={STEPS}", f"eval_every={STEPS}", "batch_size=32", *STAGES[method]]
    return [
        *("--methods", method, "--datasets", "scripted", "--ratios", "6", "--seeds", "0"),
        *("--protocol", "clean", "--out", str(out), "--device", "cpu", "--grace", "60"),
        *(arg for s in sets for arg in ("--set", s)),
    ]


def _preparing(out: Path) -> bool:
    try:
        status = run_of_seed(out).status()
    except (AssertionError, OSError, ValueError):
        return False
    return status.get("state") == "running" and status.get("stage") == "preparing"


@pytest.mark.slow
@pytest.mark.parametrize("method", list(STAGES))
def test_ctrl_c_in_a_preparation_stage_stops_within_seconds_and_a_rerun_ends_done(
    tmp_path, in_process, monkeypatch, method
):
    out = tmp_path / "runs"
    args = _args(out, method)
    sweep = subprocess.Popen(
        [sys.executable, "-m", "debias_bench.cli", "run", *args],
        env=bench_env(tmp_path, SCRIPTED_DELAY_S=DELAY_S),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(lambda: _preparing(out), 300, f"{method} in its preparation stage")
        time.sleep(1.0)  # a few of the stage's steps
    finally:
        sweep.send_signal(signal.SIGINT)
    sent = time.monotonic()
    try:
        _, err = sweep.communicate(timeout=60)
    finally:
        sweep.kill()
    took = time.monotonic() - sent
    assert took < 10, f"{method}: Ctrl-C took {took:.1f} s to stop the run\n{err}"
    assert sweep.returncode == 128 + signal.SIGINT, err
    assert "Traceback" not in err, err
    run_dir = run_of_seed(out)
    status = run_dir.status()
    assert status["state"] == "interrupted", status
    assert "preparation stage" in status["note"], status
    assert run_dir.load_checkpoint() is None  # a stage is never checkpointed half-way

    monkeypatch.setenv("SCRIPTED_DELAY_S", "0")
    code, _, err = in_process("run", *args)  # a plain rerun
    assert code == 0, err
    status = run_dir.status()
    assert status["state"] == "done" and status["attempt"] == 1, status
    assert [r["step"] for r in run_dir.metrics()][-1] == run_dir.result()["steps"]
