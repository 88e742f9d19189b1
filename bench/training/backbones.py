"""Feature extractors. Each exposes ``feat_dim``; heads are built by the methods.

A backbone may also carry ``head_init``: ``"kaiming"`` asks every method to initialise the
linear head(s) it puts on top with ``kaiming_normal_`` (:func:`init_head`), as the official LfF
and ETF-Debias networks do (their ``_weights_init`` is applied to the whole model, classifier
included). Without it a head keeps PyTorch's default ``nn.Linear`` initialisation.

Named ResNets and where they come from (``../shared/reference/METHODS.md`` sections 1.2, 3.2):

* ``resnet20``: CIFAR ResNet-20, PyTorch's default head; the ``ci`` preset's network (its
  committed baseline was recorded with it).
* ``resnet20_kaiming``: the same network with a kaiming-normal head: LfF's and train_ETF.py's
  ``ResNet20``. The methods' YAMLs pick it where the official code uses a ResNet-20.
* ``resnet18`` / ``resnet18_pretrained``: torchvision ResNet-18 from scratch / with ImageNet
  weights (the DisEnt / BiasEnsemble baselines on the 224-px sets; BE's BAR setting).
* ``resnet18_etf``: train_ETF.py's ``Pre_train_ResNet18``: ImageNet weights are loaded, then
  ``_weights_init`` re-initialises every convolution (and the head) with kaiming_normal, so
  only BatchNorm keeps ImageNet values. Offered to reproduce the released code as written.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from debias_bench.config.hparams import EngineParams
from debias_bench.data.spec import DatasetSpec
from debias_bench.errors import DataNotFoundError
from debias_bench.registry import BACKBONES


class Backbone(nn.Module):
    """A feature extractor: ``forward(x)`` gives ``feat_dim`` features per sample."""

    feat_dim: int


class MLP(Backbone):
    """LfF's Colored MNIST backbone: ``in -> 100 -> 100 -> 100``, ReLU after each layer.

    ``input_div255`` reproduces the official MLPs (LfF, DisEnt, BiasEnsemble, SelecMix,
    ETF-Debias), which divide by 255 a second time after ``ToTensor``, so their inputs lie in
    [0, 1/255]. It changes results a lot, so it is a named protocol switch, not a silent default.
    """

    def __init__(
        self, input_dim: int, hidden: tuple[int, ...] = (100, 100, 100), input_div255: bool = False
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = input_dim
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        self.layers = nn.Sequential(*layers)
        self.scale = 1.0 / 255.0 if input_div255 else 1.0
        self.feat_dim = width

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(1)
        # x * 1.0 is x: skip that copy of every batch (a third of an evaluation's time)
        return self.layers(x * self.scale if self.scale != 1.0 else x)


def build_mlp(spec: DatasetSpec, hp: EngineParams) -> Backbone:
    return MLP(spec.input_dim, hp.mlp_hidden or (100, 100, 100), input_div255=hp.input_div255)


class _BasicBlockA(nn.Module):
    """CIFAR ResNet block with the parameter-free option-A shortcut (He et al. 2016)."""

    def __init__(self, in_planes: int, planes: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.pad = 0
        self.stride = stride
        if stride != 1 or in_planes != planes:
            self.pad = (planes - in_planes) // 2

    def shortcut(self, x: torch.Tensor) -> torch.Tensor:
        if not self.pad and self.stride == 1:
            return x
        x = x[:, :, :: self.stride, :: self.stride]
        return F.pad(x, (0, 0, 0, 0, self.pad, self.pad))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNet20(Backbone):
    """CIFAR ResNet-20 (16/32/64 channels, 3 blocks per stage, Kaiming-normal init of the
    convolutions), the backbone of LfF and ETF-Debias for Corrupted CIFAR-10; 64-d globally
    pooled features. ``head_init="kaiming"``: the methods' heads are initialised like the
    official code's (see the module docstring)."""

    def __init__(self, in_channels: int = 3, head_init: str = "default") -> None:
        super().__init__()
        self.head_init = head_init
        self.conv1 = nn.Conv2d(in_channels, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        blocks: list[nn.Module] = []
        in_planes = 16
        for planes, stride in ((16, 1), (32, 2), (64, 2)):
            for i in range(3):
                blocks.append(_BasicBlockA(in_planes, planes, stride if i == 0 else 1))
                in_planes = planes
        self.blocks = nn.Sequential(*blocks)
        self.feat_dim = 64
        for m in self.modules():
            if isinstance(m, nn.Conv2d | nn.Linear):
                nn.init.kaiming_normal_(m.weight)

    def feature_map(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(F.relu(self.bn1(self.conv1(x))))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.adaptive_avg_pool2d(self.feature_map(x), 1).flatten(1)


class ResNet18(Backbone):
    """torchvision ResNet-18 without its fc layer; 512-d features (the 224-px baselines).

    ``reinit_convs``: after loading ``weights_path``, re-initialise every convolution with
    kaiming_normal and ask for kaiming heads, as train_ETF.py's ``Pre_train_ResNet18``."""

    def __init__(self, weights_path: Path | None = None, reinit_convs: bool = False) -> None:
        super().__init__()
        from torchvision.models import resnet18

        net = resnet18(weights=None)
        if weights_path is not None:
            net.load_state_dict(torch.load(weights_path, map_location="cpu", weights_only=True))
        net.fc = nn.Identity()
        self.head_init = "default"
        if reinit_convs:
            for m in net.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight)
            self.head_init = "kaiming"
        self.net = net
        self.feat_dim = 512

    def feature_map(self, x: torch.Tensor) -> torch.Tensor:
        n = self.net
        x = n.maxpool(n.relu(n.bn1(n.conv1(x))))
        return n.layer4(n.layer3(n.layer2(n.layer1(x))))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


IMAGENET_RESNET18_FILE = "resnet18-f37072fd.pth"  # torchvision's IMAGENET1K_V1 weights


def imagenet_resnet18_weights(explicit: str | None = None) -> Path:
    """The ImageNet ResNet-18 weights: ``explicit`` path, ``$BENCH_RESNET18_WEIGHTS``, or
    torchvision's cache (``$TORCH_HOME/hub/checkpoints``). Never downloads on its own."""
    candidates = [Path(p) for p in (explicit, os.environ.get("BENCH_RESNET18_WEIGHTS")) if p]
    torch_home = Path(os.environ.get("TORCH_HOME", Path.home() / ".cache" / "torch"))
    candidates.append(torch_home / "hub" / "checkpoints" / IMAGENET_RESNET18_FILE)
    for path in candidates:
        if path.is_file():
            return path
    raise DataNotFoundError(
        "ImageNet-pretrained ResNet-18 weights not found; looked at:\n    "
        + "\n    ".join(str(p) for p in candidates),
        hint='download them once with `python -c "import torchvision; '
        "torchvision.models.resnet18(weights='IMAGENET1K_V1')\"` (fills the torchvision cache) "
        "or point --set pretrained_weights=PATH / $BENCH_RESNET18_WEIGHTS at a .pth file",
    )


def build_resnet18(spec: DatasetSpec, hp: EngineParams) -> Backbone:
    return ResNet18()


def build_resnet18_pretrained(spec: DatasetSpec, hp: EngineParams) -> Backbone:
    return ResNet18(imagenet_resnet18_weights(hp.pretrained_weights))


def build_resnet18_etf(spec: DatasetSpec, hp: EngineParams) -> Backbone:
    return ResNet18(imagenet_resnet18_weights(hp.pretrained_weights), reinit_convs=True)


def build_resnet20(spec: DatasetSpec, hp: EngineParams) -> Backbone:
    return ResNet20(spec.channels)


def build_resnet20_kaiming(spec: DatasetSpec, hp: EngineParams) -> Backbone:
    return ResNet20(spec.channels, head_init="kaiming")


def init_head(backbone: nn.Module, head: nn.Linear) -> nn.Linear:
    """``head`` initialised as ``backbone`` asks (``head_init``, module docstring); with the
    default it is returned untouched and draws no random numbers."""
    if getattr(backbone, "head_init", "default") == "kaiming":
        nn.init.kaiming_normal_(head.weight)
    return head


def build_backbone(name: str, spec: DatasetSpec, hp: EngineParams | Mapping[str, Any]) -> Backbone:
    """Build a backbone by name, with the run's typed params ``hp`` (used as they are), or with
    some of its values as a dict (the others take their declared defaults); it has a
    ``feat_dim`` attribute."""
    builder = BACKBONES.get(name)  # an unknown name: UnknownNameError listing the valid ones
    params = hp if isinstance(hp, EngineParams) else EngineParams.of({**hp, "backbone": name})
    return builder(spec, params)
