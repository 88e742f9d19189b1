"""DFR: its hyperparameters and listing metadata, read without torch
(its trainer: ``debias_bench.methods.dfr.DFR``)."""

from __future__ import annotations

from dataclasses import dataclass

from debias_bench.config.hparams import REQUIRED, EngineParams, hparam
from debias_bench.config.method_params import declare_method


@dataclass(frozen=True)
class DFRParams(EngineParams):
    num_retrains: int = hparam(REQUIRED, "fits averaged into the last layer", low=1)
    penalty: str = hparam(REQUIRED, "logistic regression penalty", choices=("l1", "l2"))


declare_method(
    "dfr",
    trainer="debias_bench.methods.dfr:DFR",
    params=DFRParams,
    display_name="DFR",
    citation="Kirichenko et al., Last Layer Re-Training is Sufficient for Robustness to "
    "Spurious Correlations, ICLR 2023",
    needs_bias_labels=True,  # of the validation half it re-trains on, never of training data
    cost="the Vanilla model (reused when stored) + logistic regressions",
)
