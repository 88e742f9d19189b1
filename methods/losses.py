"""Losses shared by the LfF family (LfF, LfF+BE, DisEnt, SelecMix)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def generalized_ce(logits: torch.Tensor, target: torch.Tensor, q: float = 0.7) -> torch.Tensor:
    """Per-sample generalised cross-entropy as LfF implements it.

    ``CE(logits, y) * q * p_y.detach() ** q``: its gradient is ``q * p_y^q * grad CE``, i.e. the
    gradient of GCE ``(1 - p_y^q) / q`` (which is ``p_y^q * grad CE``) times ``q``. The extra
    factor ``q`` is LfF's (``module/loss.py``), kept so learning rates carry over.
    """
    ce = F.cross_entropy(logits, target, reduction="none")
    p_y = torch.softmax(logits, dim=1).gather(1, target[:, None]).squeeze(1)
    return ce * q * p_y.detach() ** q
