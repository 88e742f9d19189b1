"""LfF: its hyperparameters and listing metadata, read without torch
(its trainer: ``debias_bench.methods.lff.LfF``)."""

from __future__ import annotations

from dataclasses import dataclass

from debias_bench.config.hparams import EngineParams
from debias_bench.config.method_params import declare_method

from .shared import gce_q, loss_ema


@dataclass(frozen=True)
class LfFParams(EngineParams):
    q: float = gce_q(searched=True)
    ema_alpha: float = loss_ema(searched=True)


declare_method(
    "lff",
    trainer="debias_bench.methods.lff:LfF",
    params=LfFParams,
    display_name="LfF",
    citation="Nam et al., Learning from Failure: Training Debiased Classifier from Biased "
    "Classifier, NeurIPS 2020",
    needs_bias_labels=False,
    cost="2 models",
)
