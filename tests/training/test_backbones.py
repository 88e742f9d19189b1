"""Named backbones and head initialisation (bench/backbones.py; issue 16's recipe items).

* ``resnet20`` keeps PyTorch's default head (the ``ci`` preset's network: its committed
  baseline must not move), ``resnet20_kaiming`` gets the official kaiming-normal head.
* ``init_head`` on a backbone without ``head_init`` (the MLP) draws no random numbers, so the
  Colored MNIST runs of every method are bit-identical to before.
* ``resnet18_etf`` is train_ETF.py's ``Pre_train_ResNet18``: ImageNet weights loaded, every
  convolution re-initialised, BatchNorm kept.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from torch import nn

from debias_bench.config.run_config import resolve_hparams
from debias_bench.methods.common import make_classifier
from debias_bench.registry import BACKBONES, DATASETS, METHODS
from debias_bench.training.backbones import build_backbone, init_head
from debias_bench.training.method import TrainEnv

CIFAR = DATASETS.get("cifar10c").spec
CMNIST = DATASETS.get("cmnist").spec


def _std(weight: torch.Tensor) -> float:
    return float(weight.detach().std())


def test_named_backbones() -> None:
    assert {"resnet20", "resnet20_kaiming", "resnet18_etf"} <= set(BACKBONES.names())


def test_resnet20_head_is_pytorchs_default_and_resnet20_kaiming_is_kaiming() -> None:
    torch.manual_seed(0)
    default = make_classifier(CIFAR, {"backbone": "resnet20"}, torch.device("cpu"))
    torch.manual_seed(0)
    kaiming = make_classifier(CIFAR, {"backbone": "resnet20_kaiming"}, torch.device("cpu"))
    fan_in = 64
    # PyTorch's default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), std 1/sqrt(3 fan_in) = 0.072;
    # kaiming_normal (fan_in, ReLU gain): std sqrt(2 / fan_in) = 0.177
    assert _std(default.head.weight) == pytest.approx(1 / math.sqrt(3 * fan_in), rel=0.25)
    assert _std(kaiming.head.weight) == pytest.approx(math.sqrt(2 / fan_in), rel=0.25)
    assert float(default.head.weight.detach().abs().max()) <= 1 / math.sqrt(fan_in)
    # the convolutions are the same draws: only the head differs
    for (name, a), (_, b) in zip(
        default.backbone.named_parameters(), kaiming.backbone.named_parameters(), strict=True
    ):
        assert torch.equal(a, b), name


def test_init_head_leaves_the_mlp_head_and_the_rng_alone() -> None:
    backbone = build_backbone("mlp", CMNIST, {})
    head = nn.Linear(backbone.feat_dim, 10)
    before = head.weight.detach().clone()
    state = torch.get_rng_state()
    assert init_head(backbone, head) is head
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(head.weight, before)


@pytest.mark.parametrize("method", ["vanilla", "lff", "etf_debias", "sd", "end", "disent"])
def test_heads_on_resnet20_kaiming_are_kaiming(method: str) -> None:
    hp = {**resolve_hparams(method, "cifar10c", "official"), "backbone": "resnet20_kaiming"}
    torch.manual_seed(0)
    model = METHODS.get(method)(CIFAR, hp, TrainEnv(torch.device("cpu"), 64, 2, 10, 0))
    modules = [m for v in vars(model).values() if isinstance(v, nn.Module) for m in v.modules()]
    heads = [m for m in modules if isinstance(m, nn.Linear) and m.out_features == CIFAR.num_classes]
    assert heads, method
    for head in heads:  # kaiming std sqrt(2 / fan_in) is > 2x the default's 1/sqrt(3 fan_in)
        assert _std(head.weight) > 1.6 / math.sqrt(3 * head.in_features), method


def test_cifar10c_official_recipes_use_the_kaiming_resnet20_and_ci_keeps_resnet20() -> None:
    for method in ("vanilla", "lff", "lff_be", "end", "etf_debias", "sd"):
        assert resolve_hparams(method, "cifar10c", "official")["backbone"] == "resnet20_kaiming"
        ci = resolve_hparams(method, "cifar10c", "clean", preset="ci")
        assert ci["backbone"] == "resnet20", method


@pytest.mark.parametrize("method", ["etf_debias", "sd"])
def test_etf_and_sd_backbones_on_the_224px_sets(method: str) -> None:
    chosen = {
        d: resolve_hparams(method, d, "official")["backbone"]
        for d in ("cmnist", "bffhq", "dogs_and_cats", "bar")
    }
    assert chosen == {
        "cmnist": "mlp",
        "bffhq": "resnet20_kaiming",
        "dogs_and_cats": "resnet20_kaiming",
        "bar": "resnet18_pretrained",
    }


def test_resnet18_etf_reinitialises_the_convolutions_and_keeps_batchnorm(tmp_path: Path) -> None:
    from torchvision.models import resnet18

    torch.manual_seed(1)
    reference = resnet18(weights=None)
    with torch.no_grad():  # recognisable "ImageNet" BatchNorm values
        for m in reference.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.fill_(0.5)
                m.running_mean.fill_(0.25)
    path = tmp_path / "weights.pth"
    torch.save(reference.state_dict(), path)
    torch.manual_seed(2)
    net = build_backbone("resnet18_etf", CIFAR, {"pretrained_weights": str(path)})
    assert net.head_init == "kaiming" and net.feat_dim == 512
    loaded = dict(net.net.named_parameters())
    for name, param in reference.named_parameters():
        if name.startswith("fc."):
            continue
        if "bn" in name or "downsample.1" in name:
            assert torch.equal(loaded[name], param), name
        elif param.dim() == 4:  # every convolution re-initialised (kaiming_normal)
            assert not torch.equal(loaded[name], param), name
    assert torch.equal(net.net.bn1.running_mean, reference.bn1.running_mean)
    pretrained = build_backbone("resnet18_pretrained", CIFAR, {"pretrained_weights": str(path)})
    assert getattr(pretrained, "head_init", "default") == "default"
    assert torch.equal(pretrained.net.conv1.weight, reference.conv1.weight)
