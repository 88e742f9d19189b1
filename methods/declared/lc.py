"""LC: its hyperparameters and listing metadata, read without torch
(its trainer: ``debias_bench.methods.lc.LC``)."""

from __future__ import annotations

from dataclasses import dataclass

from debias_bench.config.hparams import REQUIRED, EngineParams, hparam
from debias_bench.config.method_params import declare_method
from debias_bench.config.search import LogUniform, Uniform

from .shared import gce_q, loss_ema

AVG_TYPES = ("mv", "mv_batch", "batch")


@dataclass(frozen=True)
class LCParams(EngineParams):
    q: float = gce_q(searched=True)
    ema_alpha: float = loss_ema()  # the prior matrix's EMA factor (``--ema_alpha``)
    tau: float = hparam(
        REQUIRED, "temperature of the biased softmax", low=0, low_open=True,
        search=LogUniform(0.1, 10.0),
    )  # fmt: skip
    lambda_align: float = hparam(
        REQUIRED, "weight of the biased model's GCE (lambda_dis_align)", low=0,
        search=LogUniform(0.1, 10.0),
    )  # fmt: skip
    lr_b_scale: float = hparam(REQUIRED, "biased model's lr over the run's", low=0, low_open=True)
    avg_type: str = hparam(REQUIRED, "group-prior estimator", choices=AVG_TYPES)
    column_norm: bool = hparam(REQUIRED, "divide each prior column by its sum")
    curr_step: int = hparam(
        REQUIRED, "Group MixUp strength ramp length in steps (0: full from the start)", low=0,
        run_share=True, search=None,
    )  # fmt: skip
    eta: float = hparam(REQUIRED, "exponent of the prior in the correction", low=0,
                        search=Uniform(0.5, 1.5))  # fmt: skip
    use_lr_decay: bool = hparam(REQUIRED, "StepLR every lr_decay_step by lr_gamma")
    lr_decay_step: int = hparam(REQUIRED, "StepLR period in steps (with use_lr_decay)", low=1)


declare_method(
    "lc",
    trainer="debias_bench.methods.lc:LC",
    params=LCParams,
    display_name="LC",
    citation="Liu et al., Avoiding Spurious Correlations via Logit Correction, ICLR 2023",
    needs_bias_labels=False,
    cost="2 models",
)
