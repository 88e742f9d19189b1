"""`bench viz cam RUN`: class activation maps on bias-conflicting test images (paper Fig. 4).

The grid has one row per image: the original, the Vanilla run's CAM and the chosen run's CAM
(both for the true class), overlaid on the image. The Vanilla run is the run of the paper's
baseline (its reference YAML's ``baseline``) of the same dataset, ratio, seed and protocol in
the same run store, unless ``--vanilla`` names one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from debias_bench import paths
from debias_bench.data.contract import Split, to_float
from debias_bench.errors import BenchError
from debias_bench.paths import DataPlace
from debias_bench.reporting.layout import method_name, reference_layout
from debias_bench.runs.run_dir import RunDir
from debias_bench.runs.store import RunStore
from debias_bench.training.cam import class_activation_maps
from debias_bench.training.devices import resolve_device
from debias_bench.training.engine import restore_method

from .common import command_with_verbs, data_args


def find_vanilla(run: RunDir) -> RunDir:
    """The paper's baseline run (Vanilla) matching ``run`` (dataset, ratio, seed, protocol)
    beside it."""
    baseline = reference_layout().baseline
    config = run.config()
    keys = ("dataset", "ratio", "seed", "protocol")
    for other in RunStore(run.path.parent).readable_runs():
        c = other.config()
        if c.get("method") == baseline and all(c.get(k) == config.get(k) for k in keys):
            return other
    raise BenchError(
        f"no {method_name(baseline)} run with the same dataset, ratio, seed and protocol beside "
        f"{run.path}",
        hint=f"train one with `bench run --methods {baseline} ...` into the same --out, "
        "or pass --vanilla RUN",
    )


def conflicting_samples(split: Split, n: int, seed: int = 0) -> torch.Tensor:
    rows = torch.nonzero(split.labels != split.biases).squeeze(1)
    if len(rows) == 0:
        raise BenchError("the test split has no bias-conflicting samples")
    pick = torch.randperm(len(rows), generator=torch.Generator().manual_seed(seed))[:n]
    return rows[pick].sort().values


def cmd_cam(args: argparse.Namespace) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run = RunDir(Path(args.run))
    vanilla = RunDir(Path(args.vanilla)) if args.vanilla else find_vanilla(run)
    place = DataPlace(paths.raw_root(args.raw_root), paths.data_root(args.data_root))
    device = resolve_device(args.device)
    method, family, splits = restore_method(run, place, device)
    reference, _, _ = restore_method(vanilla, place, device)
    rows = conflicting_samples(splits.test, args.n, args.seed)
    test = splits.test.subset(rows)
    x = to_float(torch.as_tensor(test.images), family.spec).to(device)
    y = test.labels.to(device)
    reference_maps = class_activation_maps(reference, x, y).cpu().numpy()
    maps = {
        method_name(vanilla.config()["method"]): reference_maps,
        run.config()["method"]: class_activation_maps(method, x, y).cpu().numpy(),
    }
    images = (torch.as_tensor(test.images).float() / 255).numpy()
    if images.shape[-1] == 1:
        images = images[..., 0]
    fig, axes = plt.subplots(len(rows), 3, figsize=(6, 2 * len(rows)), squeeze=False)
    names = family.spec.class_names
    for i in range(len(rows)):
        label = names[int(test.labels[i])] if names else int(test.labels[i])
        axes[i, 0].imshow(images[i])
        axes[i, 0].set_ylabel(str(label), fontsize=8)
        for j, (title, cam) in enumerate(maps.items(), start=1):
            axes[i, j].imshow(images[i])
            axes[i, j].imshow(cam[i], cmap="jet", alpha=0.5, vmin=0, vmax=1)
            if i == 0:
                axes[i, j].set_title(title, fontsize=9)
        if i == 0:
            axes[i, 0].set_title("original", fontsize=9)
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
    fig.tight_layout()
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=150)
    plt.close(fig)
    print(f"wrote {output}", file=sys.stderr)
    return 0


def add(sub: argparse._SubParsersAction) -> None:
    what = command_with_verbs(sub, "viz", "visualisations of trained runs", dest="visual")
    cam = what.add_parser("cam", help="class activation maps on bias-conflicting test images")
    cam.add_argument("run", help="run directory of the method to show")
    cam.add_argument("--vanilla", help="run directory of the Vanilla reference")
    cam.add_argument("--n", type=int, default=6, help="number of images")
    cam.add_argument("--seed", type=int, default=0, help="which images")
    cam.add_argument("--device", default="cpu")
    cam.add_argument("-o", "--output", default="cam.png")
    data_args(cam)
    cam.set_defaults(func=cmd_cam)
