"""Losses shared by the LfF family (LfF, LfF+BE, DisEnt, SelecMix)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

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


def generalized_ce(logits: torch.Tensor, target: torch.Tensor, q: float = 0.7) -> torch.Tensor:
    """Per-sample generalised cross-entropy as LfF implements it.

    ``CE(logits, y) * q * p_y.detach() ** q``: its gradient is ``q * p_y^q * grad CE``, i.e. the
    gradient of GCE ``(1 - p_y^q) / q`` (which is ``p_y^q * grad CE``) times ``q``. The extra
    factor ``q`` is LfF's (``module/loss.py``), kept so learning rates carry over.
    """
    ce = F.cross_entropy(logits, target, reduction="none")
    p_y = torch.softmax(logits, dim=1).gather(1, target[:, None]).squeeze(1)
    return ce * q * p_y.detach() ** q
