"""Per-sample loss EMA with class-wise max normalisation (LfF's ``util.EMA``), and the
relative difficulty that LfF, LfF+BE and DisEnt weight their debiased loss with. LC keeps its
group-prior matrix in the same EMA, one entry per (class, pseudo-bias) cell, updated once per
sample in batch order (:meth:`SampleLossEMA.update_in_order`)."""

from __future__ import annotations

from typing import Any

import torch


class SampleLossEMA:
    """Exponential moving average of each training sample's loss.

    The first visit stores the raw loss; later visits ``ema = alpha * ema + (1 - alpha) * loss``
    (LfF: ``p = alpha * p + (1 - alpha * updated) * loss``).

    ``normalized(index, num_classes)`` divides by the largest EMA of the sample's class over the
    whole training set, as LfF does before forming the relative difficulty. The labels are either
    given up front (a tensor) or, when only the training-set size is known (an int), recorded as
    samples are visited (``update(..., labels=y)``). Unvisited samples hold 0 and losses are
    non-negative, so they never change a class maximum: both ways give the same numbers.
    """

    def __init__(
        self,
        labels: torch.Tensor | int,
        alpha: float = 0.7,
        device: torch.device | str | None = None,
    ) -> None:
        self.labels_on_visit = isinstance(labels, int)
        if isinstance(labels, int):
            labels = torch.zeros(labels, dtype=torch.long, device=device)
        self.labels = labels.clone().to(device or labels.device)
        self.alpha = alpha
        self.values = torch.zeros(len(self.labels), device=self.labels.device)
        self.visited = torch.zeros(len(self.labels), dtype=torch.bool, device=self.labels.device)

    def update(
        self, index: torch.Tensor, loss: torch.Tensor, labels: torch.Tensor | None = None
    ) -> None:
        loss = loss.detach().to(self.values.dtype)
        if labels is None and self.labels_on_visit:
            raise ValueError("this EMA learns labels on visit: pass update(index, loss, labels)")
        if labels is not None:
            self.labels[index] = labels
        old = self.values[index]
        seen = self.visited[index]
        self.values[index] = torch.where(seen, self.alpha * old + (1 - self.alpha) * loss, loss)
        self.visited[index] = True

    def update_in_order(self, index: torch.Tensor, value: torch.Tensor) -> None:
        """One :meth:`update` per element, in order, where ``index`` may repeat (LC's
        ``EMA_squre``, ``avg_type='mv'``: many samples of a batch fall in one cell).

        An entry visited ``n`` times with values ``d_1..d_n`` ends at ``a^n old + sum_k (1 - a)
        a^(n-k) d_k``; one not visited before at ``a^(n-1) d_1 + sum_(k>1) (1 - a) a^(n-k)
        d_k`` (the first visit stores the raw value). Computed at once: the entries' ranks come
        from a stable sort. Labels are left as they are."""
        value = value.detach().to(self.values.dtype)
        order = torch.sort(index, stable=True).indices
        idx, val = index[order], value[order]
        size = len(self.values)
        count = torch.zeros(size, dtype=torch.long, device=idx.device)
        count.index_add_(0, idx, torch.ones_like(idx))  # bincount reads the maximum: a sync
        first = torch.cumsum(count, 0) - count  # position of each entry's first visit
        rank = torch.arange(len(idx), device=idx.device) - first[idx]
        power = (count[idx] - 1 - rank).to(self.values.dtype)
        alpha = torch.full_like(power, self.alpha)
        fresh = (rank == 0) & ~self.visited[idx]  # a first visit keeps the whole value
        weight = alpha**power * torch.where(fresh, torch.ones_like(power), 1 - alpha)
        kept = torch.where(self.visited, self.alpha ** count.to(self.values.dtype), 0.0)
        self.values.mul_(kept).index_add_(0, idx, weight * val)
        self.visited[idx] = True

    def class_max(self, num_classes: int) -> torch.Tensor:
        out = torch.zeros(num_classes, device=self.values.device)
        return out.scatter_reduce(0, self.labels, self.values, reduce="amax", include_self=True)

    def normalized(self, index: torch.Tensor, num_classes: int, eps: float = 1e-8) -> torch.Tensor:
        return self.values[index] / (self.class_max(num_classes)[self.labels[index]] + eps)

    def state_dict(self) -> dict[str, Any]:
        return {
            "values": self.values.clone(),
            "visited": self.visited.clone(),
            "labels": self.labels.clone(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.values.copy_(state["values"])
        self.visited.copy_(state["visited"])
        if "labels" in state:
            self.labels.copy_(state["labels"])


def relative_difficulty(
    ema_biased: SampleLossEMA, ema_debiased: SampleLossEMA, index: torch.Tensor, num_classes: int
) -> torch.Tensor:
    """LfF's weight ``l_b / (l_b + l_d)`` from class-max-normalised loss EMAs (detached)."""
    l_b = ema_biased.normalized(index, num_classes)
    l_d = ema_debiased.normalized(index, num_classes)
    return l_b / (l_b + l_d + 1e-8)
