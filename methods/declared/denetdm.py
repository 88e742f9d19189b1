"""DeNetDM: its hyperparameters and listing metadata, read without torch
(its trainer: ``debias_bench.methods.denetdm.DeNetDM``)."""

from __future__ import annotations

from dataclasses import dataclass

from debias_bench.config.hparams import REQUIRED, EngineParams, hparam
from debias_bench.config.method_params import declare_method
from debias_bench.config.search import LogUniform

SHALLOW = ("mlp", "cnn3", "cnn4")


#: ``last``: the final stage-1 model; the other two keep the stage-1 epoch whose shallow branch
#: scores best on the validation split: ``valid_conflicting`` by its accuracy on the pooled
#: bias-conflicting images, ``valid_conflicting_groups`` by the mean of its accuracies on the
#: bias-conflicting (class, bias) groups, as the official code computes it (methods/denetdm.py)
STAGE1_SELECT = ("last", "valid_conflicting", "valid_conflicting_groups")


@dataclass(frozen=True)
class DeNetDMParams(EngineParams):
    stage1_share: float = hparam(
        REQUIRED, "stage-1 length as a share of the run's (stage 2's) length", low=0,
        low_open=True,
    )  # fmt: skip
    stage1_lr: float = hparam(REQUIRED, "stage-1 Adam lr", low=0, low_open=True)
    stage1_weight_decay: float = hparam(REQUIRED, "stage-1 Adam weight decay", low=0)
    stage1_select: str = hparam(REQUIRED, "stage-1 model kept", choices=STAGE1_SELECT)
    deep_backbone: str = hparam(REQUIRED, "the deep (biased) branch's network")
    deep_hidden: tuple[int, ...] | None = hparam(None, "hidden sizes of an mlp deep branch", low=1)
    shallow_backbone: str = hparam(REQUIRED, "the shallow (debiased) branch", choices=SHALLOW)
    shallow_hidden: tuple[int, ...] | None = hparam(
        None, "hidden sizes of an mlp shallow branch", low=1
    )
    target_proj: int | None = hparam(None, "linear layer after the target network", low=1)
    poe_weight: float = hparam(REQUIRED, "weight of the stage-2 product-of-experts CE", low=0)
    dist_weight: float = hparam(
        REQUIRED, "weight of the distillation from the shallow branch", low=0,
        search=LogUniform(0.1, 10.0),
    )  # fmt: skip
    temperature: float = hparam(REQUIRED, "distillation temperature T", low=0, low_open=True)


declare_method(
    "denetdm",
    trainer="debias_bench.methods.denetdm:DeNetDM",
    params=DeNetDMParams,
    display_name="DeNetDM",
    citation="Sreelatha et al., DeNetDM: Debiasing by Network Depth Modulation, NeurIPS 2024",
    needs_bias_labels=False,
    cost="stage 1: deep + shallow branch; stage 2: target + frozen deep branch + teacher",
)
