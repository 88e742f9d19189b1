"""SelecMix: its hyperparameters and listing metadata, read without torch
(its trainer: ``debias_bench.methods.selecmix.SelecMix``)."""

from __future__ import annotations

from dataclasses import dataclass

from debias_bench.config.hparams import REQUIRED, EngineParams, hparam
from debias_bench.config.method_params import declare_method
from debias_bench.config.search import Around, LogUniform, Uniform

from .shared import gce_q, loss_ema

PAIRINGS = ("rand", "intra", "inter")


@dataclass(frozen=True)
class SelecMixParams(EngineParams):
    q: float = gce_q()
    ema_alpha: float = loss_ema()
    base: str = hparam(
        REQUIRED, "vanilla or LfF training of the debiased model", choices=("vanilla", "lff")
    )
    mix_weight: float | None = hparam(
        REQUIRED,
        "a: weight of CE on the mixed samples (null: the base's, vanilla 1, lff 0.1)",
        low=0,
    )
    clean_weight: float | None = hparam(
        REQUIRED, "b: weight of the clean loss (null: the base's, vanilla 0, lff 1)", low=0
    )
    pairing: str = hparam(REQUIRED, "partner selection per big batch", choices=PAIRINGS)
    strict_pairs: bool = hparam(REQUIRED, "partners always admissible")
    mini_batch_size: int = hparam(REQUIRED, "samples mixed per big batch", low=1)
    aux_backbone: str = hparam(
        REQUIRED, "auxiliary embedding network", choices=("cifar_resnet18", "mlp")
    )
    aux_embed_dim: int = hparam(REQUIRED, "auxiliary embedding size", low=1)
    aux_mlp_hidden: tuple[int, ...] | None = hparam(
        REQUIRED, "hidden sizes of an mlp auxiliary", low=1
    )
    tau: float = hparam(
        REQUIRED, "GSC temperature", low=0, low_open=True, search=LogUniform(0.05, 0.5)
    )
    gsc_q: float | None = hparam(
        REQUIRED, "GSC q (null: plain SupCon)", low=0, high=1, search=Uniform(0.5, 0.9)
    )
    proj_optimizer: str = hparam(
        REQUIRED, "optimiser of the auxiliary model", choices=("adam", "adamw", "sgd")
    )
    proj_lr: float = hparam(  # a decade either side; up to 1 for the 224-px sets' SGD
        REQUIRED,
        "learning rate of the auxiliary model",
        low=0,
        low_open=True,
        search=Around(10, cap=1.0),
    )
    proj_weight_decay: float = hparam(REQUIRED, "weight decay of the auxiliary model", low=0)
    proj_momentum: float = hparam(REQUIRED, "SGD momentum of the auxiliary model", low=0, high=1)


declare_method(
    "selecmix",
    trainer="debias_bench.methods.selecmix:SelecMix",
    params=SelecMixParams,
    display_name="SelecMix",
    citation="Hwang et al., SelecMix: Debiased Learning by Contradicting-pair Sampling, "
    "NeurIPS 2022",
    needs_bias_labels=False,
    cost="1-2 models + auxiliary ResNet-18 embedding",
)
