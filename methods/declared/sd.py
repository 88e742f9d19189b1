"""SD: its hyperparameters and listing metadata, read without torch
(its trainer: ``debias_bench.methods.sd.ShortcutDebias``)."""

from __future__ import annotations

from dataclasses import dataclass

from debias_bench.config.hparams import REQUIRED, EngineParams, hparam
from debias_bench.config.method_params import declare_method
from debias_bench.config.search import Choice, LogUniform


@dataclass(frozen=True)
class SDParams(EngineParams):
    shortcut: str = hparam(
        REQUIRED,
        "fixed vector per bias class",
        choices=("etf", "onehot", "random"),
        search=Choice(("etf", "onehot", "random")),
    )
    shortcut_scale: float = hparam(
        REQUIRED,
        "norm of each shortcut vector",
        low=0,
        low_open=True,
        search=LogUniform(1.0, 100.0),
    )


declare_method(
    "sd",
    trainer="debias_bench.methods.sd:ShortcutDebias",
    params=SDParams,
    display_name="SD",
    citation="Zhang et al., Benign Shortcut for Debiasing: Fair Visual Recognition via "
    "Intervention with Shortcut Features, ACM MM 2023 (re-implemented: no official code)",
    needs_bias_labels=True,
    cost="1 model",
)
