"""A dataset plugin that lives outside the repository (its source, to write anywhere), and one
short local sweep on it in a fresh interpreter."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

from debias_bench.launchers.forkserver import START_ENV
from debias_bench.runs.run_dir import RunDir
from debias_bench.runs.store import RunStore
from support.processes import run_bench

PLUGIN = textwrap.dedent(
    '''
    """A dataset plugin that lives outside the repository and off sys.path."""
    import torch

    from debias_bench.data.contract import Split, Splits
    from debias_bench.data.spec import DatasetSpec
    from debias_bench.data.options import DataOption
    from debias_bench.data.family import DatasetFamily
    from debias_bench.registry import register_dataset


    def _split(n, seed):
        g = torch.Generator().manual_seed(seed)
        labels = torch.arange(n) % 2
        images = (torch.rand(n, 4, 4, 3, generator=g) * 255).to(torch.uint8)
        return Split(images, labels, labels.clone())


    @register_dataset("{name}", display_name="Path plugin", kind="real")
    class PathPlugin(DatasetFamily):
        spec = DatasetSpec(
            name="{name}", num_classes=2, num_biases=2, ratios=(5.0,), image_size=(4, 4),
            channels=3, backbone="mlp", test_kind="conflicting",
        )
        size = DataOption(int, 64, "training samples", minimum=8)

        def prepare(self, ratios=None, force=False):
            return self.data_root

        def load(self, ratio):
            self.check_ratio(ratio)
            return Splits(_split(self.size, 1), _split(16, 2), _split(16, 3))
    '''
)


def local_sweep(plugin: Path, dataset: str, tmp_path: Path, *, timeout: float) -> RunDir:
    """One short Vanilla run on ``dataset``, registered by the file ``plugin``: `bench run
    --launcher local` in a fresh interpreter, the plugin given by its path (no PYTHONPATH),
    workers started the default (warm) way. Returns the run, checked done."""
    out = tmp_path / "runs"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", START_ENV)}
    env.update(
        BENCH_PLUGINS=str(plugin),
        BENCH_RAW_ROOT=str(tmp_path / "raw"),
        BENCH_DATA_ROOT=str(tmp_path / "data"),
        OMP_NUM_THREADS="1",
    )
    args = ["--methods", "vanilla", "--datasets", dataset, "--seeds", "0"]
    args += ["--set", "steps=4", "--set", "eval_every=2", "--set", "batch_size=16"]
    args += ["--launcher", "local", "--workers", "1", "--device", "cpu", "--out", str(out)]
    done = run_bench("run", *args, env=env, cwd=tmp_path, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = list(RunStore(out).runs())
    assert run.status()["state"] == "done"
    return run
