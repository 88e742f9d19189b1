"""Per-sample loss EMA with class-wise max normalisation (LfF's ``util.EMA``)."""

from __future__ import annotations

from typing import Any

import torch


class SampleLossEMA:
    """Exponential moving average of each training sample's loss.

    The first visit stores the raw loss; later visits ``ema = alpha * ema + (1 - alpha) * loss``.
    ``normalized(index, labels)`` divides by the largest EMA of the sample's class over the whole
    training set, as LfF does before forming the relative difficulty.
    """

    def __init__(self, labels: torch.Tensor, alpha: float = 0.7) -> None:
        self.labels = labels.clone()
        self.alpha = alpha
        self.values = torch.zeros(len(labels), device=labels.device)
        self.visited = torch.zeros(len(labels), dtype=torch.bool, device=labels.device)

    def update(self, index: torch.Tensor, loss: torch.Tensor) -> None:
        loss = loss.detach().to(self.values.dtype)
        old = self.values[index]
        seen = self.visited[index]
        self.values[index] = torch.where(seen, self.alpha * old + (1 - self.alpha) * loss, loss)
        self.visited[index] = True

    def class_max(self, num_classes: int) -> torch.Tensor:
        out = torch.zeros(num_classes, device=self.values.device)
        return out.scatter_reduce(0, self.labels, self.values, reduce="amax", include_self=True)

    def normalized(self, index: torch.Tensor, num_classes: int, eps: float = 1e-8) -> torch.Tensor:
        return self.values[index] / (self.class_max(num_classes)[self.labels[index]] + eps)

    def state_dict(self) -> dict[str, Any]:
        return {"values": self.values.clone(), "visited": self.visited.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.values.copy_(state["values"])
        self.visited.copy_(state["visited"])


def relative_difficulty(
    ema_biased: SampleLossEMA, ema_debiased: SampleLossEMA, index: torch.Tensor, num_classes: int
) -> torch.Tensor:
    """LfF's weight ``l_b / (l_b + l_d)`` from class-max-normalised loss EMAs (detached)."""
    l_b = ema_biased.normalized(index, num_classes)
    l_d = ema_debiased.normalized(index, num_classes)
    return l_b / (l_b + l_d + 1e-8)
