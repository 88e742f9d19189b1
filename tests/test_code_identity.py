"""Code is part of a run's identity: a run whose method's or dataset's code changed since it
was trained is ``stale`` (never reported), and rerunning the grid retrains it with the current
code, its old files kept under ``superseded/``. Comments, docstrings and type annotations do
not count.

The plugin is a real file in a temporary folder, loaded by path in fresh ``bench`` processes
(as a user edits it between two sweeps)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import run_bench

from debias_bench.provenance import normalized_code
from debias_bench.store import RunStore

PLUGIN = """
from pathlib import Path

import torch

from debias_bench.data import DatasetSpec, Split, Splits
from debias_bench.family import DatasetFamily
from debias_bench.methods.vanilla import Vanilla
from debias_bench.registry import DATASETS, register_method


def split(n, seed, name):
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % 2
    images = (torch.rand(n, 8, 8, 3, generator=g) * 255).to(torch.uint8)
    return Split(images, labels, labels.clone(), name=name)


@register_method("mine", display_name="Mine", citation="test", needs_bias_labels=False)
class Mine(Vanilla):
    def update(self, batch):
        return super().update(batch)  # CHANGE


@DATASETS.register("tiny", display_name="Tiny", citation="test")
class Tiny(DatasetFamily):
    spec = DatasetSpec(name="tiny", num_classes=2, num_biases=2, ratios=(5.0,),
                       image_size=(8, 8), channels=3, backbone="mlp", test_kind="unbiased")

    def prepare(self, ratios=None) -> Path:
        return self.data_root

    def load(self, ratio):
        return Splits(train=split(64, 1, "train"), valid=split(32, 2, "valid"),
                      test=split(32, 3, "test"))
"""


def _bench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "BENCH_PLUGINS": str(tmp_path / "plugin" / "mine.py"),
        "BENCH_DATA_ROOT": str(tmp_path / "data"),
        "OMP_NUM_THREADS": "1",
    }
    return run_bench(*args, env=env, cwd=tmp_path / "plugin", timeout=300)


def test_a_run_of_changed_code_is_stale_and_retrained(tmp_path):
    plugin = tmp_path / "plugin" / "mine.py"
    plugin.parent.mkdir()
    plugin.write_text(PLUGIN)
    out = tmp_path / "runs"
    grid = ["--methods", "mine", "--datasets", "tiny", "--ratios", "5", "--set", "steps=6",
            "--set", "eval_every=3", "--set", "batch_size=16", "--out", str(out)]  # fmt: skip
    done = _bench(tmp_path, "run", *grid)
    assert done.returncode == 0, done.stderr
    (run,) = RunStore(out).runs()
    first = run.result_path.read_bytes()

    # a comment, a docstring and type annotations: the same code
    documented = PLUGIN.replace("# CHANGE", "# reworded")
    documented = documented.replace("(Vanilla):\n", '(Vanilla):\n    """Doc."""\n\n')
    plugin.write_text(_annotated(documented))
    again = _bench(tmp_path, "run", *grid)
    assert again.returncode == 0 and "already done" in again.stderr + again.stdout
    assert run.result_path.read_bytes() == first

    # a change of the code: stale for every reader, then retrained by the same grid
    changed = "out = super().update(batch)\n        return out"
    plugin.write_text(PLUGIN.replace("return super().update(batch)", changed))
    status = _bench(tmp_path, "status", "--out", str(out))
    assert "stale" in status.stdout and "code changed" in status.stdout, status.stdout
    report = _bench(tmp_path, "report", "--out", str(out), "--table", "other")
    assert "stale" in report.stdout + report.stderr
    rerun = _bench(tmp_path, "run", *grid)
    assert rerun.returncode == 0, rerun.stderr
    assert "code changed" in rerun.stderr and "retraining" in rerun.stderr
    (aside,) = (run.path / "superseded").iterdir()
    assert (aside / "result.json").read_bytes() == first
    status = _bench(tmp_path, "status", "--out", str(out))
    assert "| done" in status.stdout and "stale" not in status.stdout


def _annotated(source: str) -> str:
    """``source`` with annotations added: the future import, a TYPE_CHECKING import, argument,
    return and variable annotations."""
    source = source.replace(
        "\nfrom pathlib import Path\n",
        "\nfrom __future__ import annotations\n\nfrom pathlib import Path\n"
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
        "    from debias_bench.data import Batch\n",
    )
    source = source.replace("def update(self, batch):", "def update(self, batch: Batch) -> dict:")
    source = source.replace("def split(n, seed, name):", "def split(n: int, seed: int, name: str):")
    return source.replace("    g = torch.Generator()", "    g: torch.Generator = torch.Generator()")


@pytest.mark.parametrize(
    ("edit", "same"),
    [
        (_annotated, True),
        (lambda s: s.replace("return self.data_root", "return self.raw_root"), False),
        (lambda s: s.replace("labels = torch.arange(n) % 2", "labels: Any = torch.arange(n) % 3"),
         False),
        (lambda s: s.replace("labels.clone()", "labels"), False),
    ],
)  # fmt: skip
def test_annotation_only_edits_keep_the_normalized_code(edit, same):
    assert edit(PLUGIN) != PLUGIN
    assert (normalized_code(edit(PLUGIN)) == normalized_code(PLUGIN)) is same


def test_dataclass_field_annotations_count():
    """A params class's annotations declare each hyperparameter's kind (and a dataclass's
    fields): they are code."""
    params = "@dataclass(frozen=True)\nclass P(EngineParams):\n    q: float = gce_q()\n"
    assert normalized_code(params) != normalized_code(params.replace("q: float", "q: int"))
    plain = "class C:\n    q: float = 0.5\n"
    assert normalized_code(plain) == normalized_code(plain.replace("q: float", "q: int"))
