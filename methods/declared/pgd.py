"""PGD: its hyperparameters and listing metadata, read without torch
(its trainer: ``debias_bench.methods.pgd.PGD``)."""

from __future__ import annotations

from dataclasses import dataclass

from debias_bench.config.hparams import REQUIRED, EngineParams, hparam
from debias_bench.config.method_params import declare_method
from debias_bench.config.sampling import sampling_option
from debias_bench.config.search import Choice

from .shared import gce_q

#: ``train_augment``: none, or the release's Colored MNIST transforms on every training draw
NO_AUGMENT, RELEASE_AUGMENT = "none", "release"


@dataclass(frozen=True)
class PGDParams(EngineParams):
    q: float = gce_q(searched=True)
    bias_epochs: float | None = hparam(
        REQUIRED, "epochs of the biased model (null: as long as the main run)", low=0, low_open=True
    )
    grad_norm: float = hparam(  # searched: the release's p and the paper's L1, L2
        REQUIRED,
        "p of the entrywise p-norm of the per-sample gradient (0.7: the release's --norm_scale)",
        low=0,
        low_open=True,
        search=Choice((0.7, 1.0, 2.0)),
    )
    grad_power: float = hparam(REQUIRED, "r: sampling weight = norm^r", low=0, low_open=True)
    init_from_biased: bool = hparam(
        REQUIRED, "start the debiased model from the biased model's weights"
    )
    sampling: str = sampling_option("every sample of an epoch drawn with its probability")
    train_augment: str = hparam(
        NO_AUGMENT,
        "augmentation of both stages' training batches: none, or release (the release's "
        "Colored MNIST crop, colour jitter and rotation; methods/pgd.py)",
        choices=(NO_AUGMENT, RELEASE_AUGMENT),
        late=True,
        search=None,
    )


declare_method(
    "pgd",
    trainer="debias_bench.methods.pgd:PGD",
    params=PGDParams,
    display_name="PGD",
    citation="Ahn et al., Mitigating Dataset Bias by Using Per-sample Gradient, ICLR 2023",
    needs_bias_labels=False,
    cost="GCE biased model (as long as the run) + 1 model",
)
