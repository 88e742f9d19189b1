"""JTT: its hyperparameters and listing metadata, read without torch (its trainer:
``debias_bench.methods.jtt.JTT``)."""

from __future__ import annotations

from dataclasses import dataclass

from debias_bench.config.hparams import REQUIRED, EngineParams, hparam
from debias_bench.config.method_params import declare_method
from debias_bench.config.sampling import sampling_option
from debias_bench.config.search import Choice


@dataclass(frozen=True)
class JTTParams(EngineParams):
    id_epochs: float = hparam(
        REQUIRED,
        "T: epochs of the ERM identification model",
        low=0,
        low_open=True,
        search=Choice((1, 2, 5)),
    )
    upweight: float = hparam(  # searched on the official grid (generate_downstream.py)
        REQUIRED,
        "lambda_up: extra copies of each error-set sample",
        low=0,
        search=Choice((20, 50, 100)),
    )
    sampling: str = sampling_option("each error-set sample lambda_up more times in every epoch")


declare_method(
    "jtt",
    trainer="debias_bench.methods.jtt:JTT",
    params=JTTParams,
    display_name="JTT",
    citation="Liu et al., Just Train Twice: Improving Group Robustness without Training Group "
    "Information, ICML 2021",
    needs_bias_labels=False,
    cost="ERM identification model (T epochs) + 1 model",
)
