"""Every registered method (present and future) trains a few steps on the toy dataset through
the engine, and a run interrupted and resumed from its checkpoint ends exactly where an
uninterrupted one does."""

from __future__ import annotations

import json

import pytest
import torch
from support.asserts import assert_close_nested

from debias_bench.config.run_config import make_config, resolve_hparams
from debias_bench.config.selection import SELECTIONS
from debias_bench.errors import Interrupted
from debias_bench.registry import DATASETS, METHODS
from debias_bench.runs.store import RunStore
from debias_bench.training.engine import train_run

TINY = {"steps": 12, "eval_every": 4, "batch_size": 32}

#: Shorter versions of a method's own expensive knobs, applied only when the method has them
#: (so a new method needs no entry here).
#: SelecMix's official auxiliary CIFAR ResNet-18 is exercised in test_end_sd_selecmix.py; here
#: the MLP stand-in keeps the run short.
SHORTEN = {
    "committee_steps": 10,
    "committee_valid_every": 5,
    "curr_step": 4,
    "aux_backbone": "mlp",
}
#: methods that do all their training in prepare(): the engine's loop is one step, with no
#: step to stop at (DFR; its resume and reuse: tests/methods/test_lc_denetdm_dfr.py)
PREPARE_ONLY = {"dfr"}


def _config(method: str):
    known = resolve_hparams(method, "toy", "clean")
    overrides = {**TINY, **{k: v for k, v in SHORTEN.items() if k in known}}
    return make_config(method, "toy", 20, 0, protocol="clean", overrides=overrides)


@pytest.mark.parametrize("method", METHODS.names())
def test_method_trains_checkpoints_and_resumes(method, tmp_path, toy_place):
    config = _config(method)
    reason = METHODS.get(method).skip(DATASETS.get("toy").spec, config.hparams)
    if reason:
        pytest.skip(reason)
    cpu = torch.device("cpu")
    whole_dir = RunStore(tmp_path / "whole").run(config.run_id)
    whole = train_run(config, whole_dir, toy_place, cpu)
    if method in PREPARE_ONLY:
        assert whole["steps"] == 1 and [r["step"] for r in whole_dir.metrics()] == [1]
        assert {"last", "best_valid", "best_test"} <= set(whole["selections"])
        return

    run_dir = RunStore(tmp_path / "split").run(config.run_id)
    with pytest.raises(Interrupted):
        train_run(config, run_dir, toy_place, cpu, should_stop=lambda step: step == 6)
    assert run_dir.checkpoint_path.is_file() and not run_dir.is_done()
    resumed = train_run(config, run_dir, toy_place, cpu)

    assert_close_nested(resumed["selections"], whole["selections"])
    assert [r["step"] for r in run_dir.metrics()] == [4, 8, 12]
    for a, b in zip(run_dir.metrics(), whole_dir.metrics(), strict=True):
        assert_close_nested(
            {k: a[k] for k in ("valid", "test", "train")},
            {k: b[k] for k in ("valid", "test", "train")},
        )

    on_disk = json.loads(run_dir.result_path.read_text())
    assert on_disk["method"] == method and on_disk["steps"] == 12
    assert set(on_disk["selections"]) == set(SELECTIONS)
    for chosen in on_disk["selections"].values():
        for split in ("valid", "test"):
            for key in ("accuracy", "aligned_accuracy", "conflicting_accuracy"):
                assert 0 <= chosen[split][key] <= 100
    train_scalars = run_dir.metrics()[-1]["train"].values()
    assert all(v == v for v in train_scalars), "a logged training scalar is NaN"
