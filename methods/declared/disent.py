"""DisEnt: its hyperparameters and listing metadata, read without torch
(its trainer: ``debias_bench.methods.disent.DisEnt``)."""

from __future__ import annotations

from dataclasses import dataclass

from debias_bench.config.hparams import REQUIRED, EngineParams, hparam
from debias_bench.config.method_params import declare_method
from debias_bench.config.search import LogUniform

from .shared import gce_q, loss_ema


@dataclass(frozen=True)
class DisEntParams(EngineParams):
    q: float = gce_q(searched=True)
    ema_alpha: float = loss_ema()
    # a timing run (``bench perf``) swaps from the first step: the steady state it measures
    # step counts: a shorter run (a preset, --epochs) keeps the recipe's share (20 % of 50k)
    curr_step: int = hparam(
        REQUIRED, "feature swap after this step", low=0, timing=0, run_share=True
    )
    lambda_dis_align: float = hparam(
        REQUIRED, "weight of the intrinsic CE", low=0, search=LogUniform(0.5, 20.0)
    )
    lambda_swap_align: float = hparam(
        REQUIRED, "weight of the bias CE", low=0, search=LogUniform(0.5, 20.0)
    )
    lambda_swap: float = hparam(
        REQUIRED, "weight of the swapped-feature losses", low=0, search=LogUniform(0.05, 2.0)
    )
    use_lr_decay: bool = hparam(REQUIRED, "StepLR every lr_decay_step by lr_gamma")
    lr_decay_step: int = hparam(REQUIRED, "StepLR period in steps", low=1, run_share=True)


declare_method(
    "disent",
    trainer="debias_bench.methods.disent:DisEnt",
    params=DisEntParams,
    display_name="DisEnt",
    citation="Lee et al., Learning Debiased Representation via Disentangled Feature "
    "Augmentation, NeurIPS 2021",
    needs_bias_labels=False,
    cost="2 encoders",
)
