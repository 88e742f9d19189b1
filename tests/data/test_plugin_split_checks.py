"""A plugin dataset's splits are checked against the dataset contract once, when its ``load``
returns, before the run trains (issue 48, rough data items). Each fault ends the run
``failed (bad data)`` with one line naming the dataset, the split and the fix; before, NaN
pixels were called ``bad predictions`` or ``diverged``, a one-class training split gave a done
run, an empty test split and a NaN label crashed (TypeError, IndexError), and float labels
trained or failed in torch."""

from __future__ import annotations

import textwrap

import pytest

from debias_bench.cli import main
from debias_bench.runs.store import RunStore

PLUGIN = textwrap.dedent(
    '''
    """Four classes of noise; the split named by $FAULT_SPLIT carries the fault $FAULT."""
    import os

    import torch

    from debias_bench.data.contract import Split, Splits
    from debias_bench.data.family import DatasetFamily
    from debias_bench.data.spec import DatasetSpec
    from debias_bench.registry import register_dataset

    FAULT, FAULT_SPLIT = os.environ["FAULT"], os.environ["FAULT_SPLIT"]


    def _split(name, n, seed):
        g = torch.Generator().manual_seed(seed)
        labels = torch.arange(n) % 4
        biases = labels.clone()
        images = (torch.rand(n, 4, 4, 3, generator=g) * 255).to(torch.uint8)
        if name == FAULT_SPLIT:
            if FAULT == "nan_pixels":
                images = images.float()
                images[[3, 9]] = float("nan")
            elif FAULT == "one_class":
                labels = torch.zeros(n, dtype=torch.long)
            elif FAULT == "empty":
                images, labels, biases = images[:0], labels[:0], biases[:0]
            elif FAULT == "float_labels":
                labels = labels.float()
            elif FAULT == "nan_label":
                labels = labels.float()
                labels[5] = float("nan")
        return Split(images, labels, biases, name=name)


    @register_dataset("contract_ds", display_name="Contract", kind="real")
    class ContractDataset(DatasetFamily):
        spec = DatasetSpec(
            name="contract_ds", num_classes=4, num_biases=4, ratios=(5.0,),
            image_size=(4, 4), channels=3, backbone="mlp", test_kind="conflicting",
        )

        def prepare(self, ratios=None, force=False):
            return self.data_root

        def load(self, ratio):
            self.check_ratio(ratio)
            return Splits(_split("train", 80, 1), _split("valid", 40, 2), _split("test", 40, 3))
    '''
)

TINY_RUN = ["--methods", "vanilla", "--seeds", "0", "--device", "cpu"]
TINY_RUN += ["--set", "steps=4", "--set", "eval_every=2", "--set", "batch_size=16"]


@pytest.mark.parametrize(
    "fault, split, what",
    [
        ("nan_pixels", "test", "2 test images hold NaN or infinite pixels (first: item 3)"),
        ("one_class", "train", "the train split holds one class (0) of 4"),  # was: done
        ("empty", "test", "the test split is empty"),  # was: TypeError
        ("empty", "valid", "the valid split is empty"),
        ("float_labels", "train", "the train labels are float32, not integers"),
        ("nan_label", "test", "the test labels are float32, not integers"),  # was: IndexError
    ],
)
def test_a_plugin_split_that_breaks_the_contract_fails_bad_data_naming_it(
    tmp_path, monkeypatch, capsys, registries_restored, fault, split, what
):
    plugin = tmp_path / "contract_ds.py"
    plugin.write_text(PLUGIN)
    monkeypatch.setenv("BENCH_PLUGINS", str(plugin))
    monkeypatch.setenv("FAULT", fault)
    monkeypatch.setenv("FAULT_SPLIT", split)
    monkeypatch.setenv("BENCH_DATA_ROOT", str(tmp_path / "data"))
    out = tmp_path / "runs"
    code = main(["run", *TINY_RUN, "--datasets", "contract_ds", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "Traceback" not in err, err
    (run,) = RunStore(out).runs()
    status = run.status()
    assert status["state"] == "failed" and status["reason"] == "bad data", status
    assert status["error"].startswith(f"contract_ds at 5%: {what}"), status["error"]
    assert "fix its load() or its spec" in status["error"] and "\n" not in status["error"]
    assert run.result() is None
