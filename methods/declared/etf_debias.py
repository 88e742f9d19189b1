"""ETF-Debias: its hyperparameters and listing metadata, read without torch
(its trainer: ``debias_bench.methods.etf_debias.ETFDebias``)."""

from __future__ import annotations

from dataclasses import dataclass

from debias_bench.config.hparams import REQUIRED, EngineParams, hparam
from debias_bench.config.method_params import declare_method
from debias_bench.config.search import Uniform


@dataclass(frozen=True)
class ETFDebiasParams(EngineParams):
    alpha: float = hparam(
        REQUIRED, "weight of the prime reinforcement loss L_RE", low=0, search=Uniform(0.2, 1.0)
    )
    prime: str = hparam(
        REQUIRED, "prime features: the simplex ETF or random (Fig. 3b)", choices=("etf", "random")
    )


declare_method(
    "etf_debias",
    trainer="debias_bench.methods.etf_debias:ETFDebias",
    params=ETFDebiasParams,
    display_name="ETF-Debias",
    citation="Wang et al., Navigate Beyond Shortcuts: Debiased Learning through the Lens of "
    "Neural Collapse, CVPR 2024",
    needs_bias_labels=True,
    cost="1 model (no auxiliary model)",
)
