"""The dataset families register, describe themselves and build without torch.

``bench list datasets``, ``bench list presets`` and ``bench config`` read the registered
families' specs and declared facts: importing ``debias_bench.datasets`` (every module of it,
each registering a family) and ``debias_bench.data.facts`` must not import torch (seconds), and
a build writes NumPy arrays (``SplitArrays``). Only loading splits for a run needs torch. The
checks run in a fresh interpreter where ``import torch`` fails (the ``NO_TORCH`` environment of
tests/support/no_torch.py), so they fail whenever one of those modules imports it again.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

from support.no_torch import python_without_torch


def _python_without_torch(tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    return python_without_torch(tmp_path, "-c", textwrap.dedent(code), cwd=tmp_path)


def test_the_datasets_and_their_facts_import_without_torch(tmp_path: Path) -> None:
    done = _python_without_torch(
        tmp_path,
        """
        import json, sys

        import debias_bench.data.facts as facts
        import debias_bench.datasets
        from debias_bench import DatasetSpec
        from debias_bench.registry import DATASETS

        specs = {entry.name: entry.obj.spec for entry in DATASETS}
        assert all(isinstance(spec, DatasetSpec) for spec in specs.values())
        print(json.dumps({
            "specs": {name: [spec.num_classes, spec.size_text] for name, spec in specs.items()},
            "paper": facts.preset_hparams("paper", "cmnist"),
            "ci": facts.preset_hparams("ci", "cmnist"),
            "train_size": facts.train_size("cmnist", 1.0),
            "torch": "torch" in sys.modules,
        }))
        """,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["torch"] is False
    assert out["specs"]["cmnist"] == [10, "28x28"]
    assert {"cifar10c", "bffhq", "dogs_and_cats", "bar"} <= set(out["specs"])
    assert out["paper"] == []  # the paper preset sets nothing on cmnist beyond the engine's
    (label, values), *more = out["ci"]  # the ci preset's own values for cmnist
    assert label == "dataset cmnist" and values["train_limit"] == 6000 and not more
    assert out["train_size"] == 54_000


def test_a_dataset_builds_and_verifies_without_torch(tmp_path: Path) -> None:
    """Colored MNIST from its fixture: the build writes its splits from NumPy arrays."""
    done = _python_without_torch(
        tmp_path,
        """
        import sys
        from pathlib import Path

        from debias_bench.registry import DATASETS

        family = DATASETS.get("cmnist")
        raw, data = Path("raw"), Path("data")
        options = family(raw, data).write_fixture(per_class=6)
        built = family(raw, data, **options)
        built.prepare()
        assert built.is_prepared() and built.verify() == [], built.verify()
        assert built.content_problems(built.spec.ratios) == ([], [])
        assert "torch" not in sys.modules
        """,
    )
    assert done.returncode == 0, done.stderr
