"""EnD: its hyperparameters and listing metadata, read without torch (its trainer:
``debias_bench.methods.end.EnD``)."""

from __future__ import annotations

from dataclasses import dataclass

from debias_bench.config.hparams import REQUIRED, EngineParams, hparam
from debias_bench.config.method_params import declare_method
from debias_bench.config.search import LogUniform


@dataclass(frozen=True)
class EnDParams(EngineParams):
    alpha: float = hparam(
        REQUIRED, "weight of R_perp (same-bias pairs)", low=0, search=LogUniform(0.1, 10.0)
    )
    beta: float = hparam(
        REQUIRED,
        "weight of R_par (same-class, other-bias pairs)",
        low=0,
        search=LogUniform(0.1, 10.0),
    )
    par_pairs: str = hparam(REQUIRED, "R_par pair convention", choices=("official", "all"))


declare_method(
    "end",
    trainer="debias_bench.methods.end:EnD",
    params=EnDParams,
    display_name="EnD",
    citation="Tartaglione et al., EnD: Entangling and Disentangling Deep Representations for "
    "Bias Correction, CVPR 2021",
    needs_bias_labels=True,
    cost="1 model + BxB Gram",
)
