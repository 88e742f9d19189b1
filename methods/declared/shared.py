"""Declarations several methods share: one hyperparameter, declared once."""

from __future__ import annotations

from typing import Any

from debias_bench.config.hparams import REQUIRED, hparam
from debias_bench.config.search import Uniform


def gce_q(searched: bool = False) -> Any:
    """The GCE exponent ``q``, declared once for every method with a GCE-trained biased model
    (a field of its params class: ``q: float = gce_q()``); ``searched``: ``bench tune`` draws it
    from 0.5..0.9 around LfF's 0.7."""
    return hparam(
        REQUIRED,
        "GCE exponent of the biased model",
        low=0,
        low_open=True,
        high=1,
        search=Uniform(0.5, 0.9) if searched else None,
    )


def loss_ema(searched: bool = False) -> Any:
    """The per-sample loss EMA factor, declared once for every method that keeps one (a field
    of its params class: ``ema_alpha: float = loss_ema()``); ``searched``: ``bench tune`` draws
    it from 0.5..0.9 around LfF's 0.7."""
    return hparam(
        REQUIRED,
        "per-sample loss EMA factor",
        low=0,
        high=1,
        search=Uniform(0.5, 0.9) if searched else None,
    )
