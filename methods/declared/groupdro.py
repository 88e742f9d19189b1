"""GroupDRO: its hyperparameters and listing metadata, read without torch (its trainer:
``debias_bench.methods.groupdro.GroupDRO``)."""

from __future__ import annotations

from dataclasses import dataclass

from debias_bench.config.hparams import REQUIRED, EngineParams, hparam
from debias_bench.config.method_params import declare_method
from debias_bench.config.sampling import sampling_option
from debias_bench.config.search import LogUniform, Uniform


@dataclass(frozen=True)
class GroupDROParams(EngineParams):
    dro_step_size: float = hparam(
        REQUIRED,
        "eta: step size of the group weights",
        low=0,
        low_open=True,
        search=LogUniform(1e-3, 1e-1),
    )
    dro_adjustment: float = hparam(  # searched on 0..5 as the paper's grid [UNVERIFIED]
        REQUIRED, "C: generalisation adjustment C/sqrt(n_g)", low=0, search=Uniform(0.0, 5.0)
    )
    sampling: str = sampling_option("group-balanced, 1/n_g with replacement: --reweight_groups")


declare_method(
    "groupdro",
    trainer="debias_bench.methods.groupdro:GroupDRO",
    params=GroupDROParams,
    display_name="GroupDRO",
    citation="Sagawa et al., Distributionally Robust Neural Networks for Group Shifts: On the "
    "Importance of Regularization for Worst-Case Generalization, ICLR 2020",
    needs_bias_labels=True,
    cost="1 model",
)
