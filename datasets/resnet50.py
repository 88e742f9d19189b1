"""The ResNet-50 that Waterbirds and CelebA default to (GroupDRO, JTT and DFR train
torchvision's ImageNet-pretrained ResNet-50 on both), declared as backbones by name:

* ``resnet50``: torchvision's ResNet-50 from scratch;
* ``resnet50_pretrained``: with torchvision's ImageNet weights (``IMAGENET1K_V1``, the
  ``pretrained=True`` weights the official codes load), found at ``--set
  pretrained_weights=PATH``, ``$BENCH_RESNET50_WEIGHTS`` or torchvision's cache
  (``$TORCH_HOME/hub/checkpoints/resnet50-0676ba61.pth``; the older file name
  ``resnet50-19c8e357.pth`` too). Never downloaded here: offline, a run that needs them fails
  naming the file and every place looked at, with the command that fetches them.

Both give the 2,048 pooled features of the network without its ImageNet head. This module is
imported with the datasets (to declare the names), so torch is imported only when one is built.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from debias_bench.errors import DataNotFoundError
from debias_bench.registry import BACKBONES

if TYPE_CHECKING:
    from debias_bench.config.hparams import EngineParams
    from debias_bench.data.spec import DatasetSpec

#: torchvision's IMAGENET1K_V1 ResNet-50 weights, as its cache names them (the second: the
#: name torchvision < 0.13 saved the same weights under)
WEIGHT_FILES = ("resnet50-0676ba61.pth", "resnet50-19c8e357.pth")
ENV = "BENCH_RESNET50_WEIGHTS"


def imagenet_resnet50_weights(explicit: str | None = None) -> Path:
    """The ImageNet ResNet-50 weights: ``explicit``, ``$BENCH_RESNET50_WEIGHTS``, or
    torchvision's cache; DataNotFoundError naming each place looked at otherwise."""
    candidates = [Path(p) for p in (explicit, os.environ.get(ENV)) if p]
    torch_home = Path(os.environ.get("TORCH_HOME", Path.home() / ".cache" / "torch"))
    candidates += [torch_home / "hub" / "checkpoints" / name for name in WEIGHT_FILES]
    for path in candidates:
        if path.is_file():
            return path
    raise DataNotFoundError(
        f"ImageNet-pretrained ResNet-50 weights ({WEIGHT_FILES[0]}) not found; looked at:\n    "
        + "\n    ".join(str(p) for p in candidates),
        hint='download them once with `python -c "import torchvision; '
        "torchvision.models.resnet50(weights='IMAGENET1K_V1')\"` (fills the torchvision cache), "
        f"or point --set pretrained_weights=PATH / ${ENV} at the .pth file; --preset smoke "
        "and ci need none (a ResNet-20 from scratch)",
    )


def resnet50(weights: Path | None = None) -> Any:
    """torchvision's ResNet-50 without its head (``feat_dim`` 2048), ImageNet weights loaded
    from ``weights`` when given."""
    import torch
    from torch import nn
    from torchvision.models import resnet50 as torchvision_resnet50

    net = torchvision_resnet50(weights=None)
    if weights is not None:
        try:
            state = torch.load(weights, map_location="cpu", weights_only=True)
            net.load_state_dict(state)
        except (RuntimeError, OSError, ValueError, KeyError) as exc:
            raise DataNotFoundError(
                f"{weights} is not torchvision's ImageNet ResNet-50 state dict ({exc})",
                hint="download them again (the file may be truncated)",
            ) from exc
    net.fc = nn.Identity()
    net.feat_dim = 2048
    return net


def build_resnet50(spec: DatasetSpec, hp: EngineParams) -> Any:
    return resnet50()


def build_resnet50_pretrained(spec: DatasetSpec, hp: EngineParams) -> Any:
    return resnet50(imagenet_resnet50_weights(hp.pretrained_weights))


if "resnet50" not in BACKBONES:
    BACKBONES.declare("resnet50", f"{__name__}:build_resnet50", display_name="resnet50")
if "resnet50_pretrained" not in BACKBONES:  # its weights are looked for before a sweep starts
    BACKBONES.declare(
        "resnet50_pretrained",
        f"{__name__}:build_resnet50_pretrained",
        display_name="resnet50_pretrained",
        weights=f"{__name__}:imagenet_resnet50_weights",
    )
