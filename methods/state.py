"""Small pieces of method state that the engine saves and restores with the checkpoint.

``Method.state_dict`` collects every attribute that has a ``state_dict``; these wrappers give
a step counter and a per-sample mask one, so a resumed run continues exactly.
"""

from __future__ import annotations

from typing import Any

import torch


class StepCounter:
    """The number of updates a method has made (0-based index of the next update)."""

    def __init__(self) -> None:
        self.value = 0

    def increment(self) -> None:
        self.value += 1

    def state_dict(self) -> dict[str, Any]:
        return {"value": self.value}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.value = int(state["value"])


class SampleMask:
    """A boolean flag per training sample, set once (e.g. LfF+BE's pseudo-aligned set)."""

    def __init__(self, size: int, device: torch.device | str | None = None) -> None:
        self.flags = torch.zeros(size, dtype=torch.bool, device=device)
        self.ready = False

    def set(self, flags: torch.Tensor) -> None:
        if flags.shape != self.flags.shape:
            shape, expected = tuple(flags.shape), tuple(self.flags.shape)
            raise ValueError(f"mask of shape {shape}, expected {expected}")
        self.flags.copy_(flags.to(torch.bool))
        self.ready = True

    def __getitem__(self, index: torch.Tensor) -> torch.Tensor:
        if not self.ready:
            raise RuntimeError("the sample mask is used before it was set (prepare() not run?)")
        return self.flags[index]

    def state_dict(self) -> dict[str, Any]:
        return {"flags": self.flags.clone(), "ready": self.ready}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.flags.copy_(state["flags"])
        self.ready = bool(state["ready"])


class SampleWeights:
    """A positive weight per training sample, set once, kept normalised to mean 1 over the
    training set: the ``sampling: loss_weights`` variant of JTT and PGD, which draws uniform
    batches and weighs their loss instead of resampling (their default draws the batches with
    the weights: ``debias_bench.training.sampling``).

    A uniformly drawn batch's loss is :meth:`weighted_mean`, ``sum(w_i l_i) / sum(w_i)``: over
    the whole training set exactly the loss under resampling, and like a sampled batch's mean a
    convex combination of the batch's losses. Per batch it is not the resampled loss: the
    expected share of the upweighted samples in a batch's loss is 0.453 instead of 0.505 (1 % of
    the samples at weight 101, batch 256), 0.314 at batch 64 (53 % of those batches hold none of
    them) and 0.235 instead of 0.334 (0.5 % at 100 times the others' weight, batch 128): they
    are under-weighted by 10-38 % (``docs/methods-sampling.md``). The unbiased ``mean(w_i l_i)``
    is not bounded so: one sample of weight 100 in a batch of 128 weighs as much as the whole
    batch (measured with PGD on Colored MNIST, SGD lr 0.02: the network died at chance accuracy).
    """

    def __init__(self, size: int, device: torch.device | str | None = None) -> None:
        self.values = torch.ones(size, device=device)
        self.ready = False

    def set(self, weights: torch.Tensor) -> None:
        if weights.shape != self.values.shape:
            shape, expected = tuple(weights.shape), tuple(self.values.shape)
            raise ValueError(f"weights of shape {shape}, expected {expected}")
        weights = weights.detach().to(self.values.device, self.values.dtype)
        if not bool(torch.isfinite(weights).all()) or bool((weights < 0).any()):
            raise ValueError("sample weights must be finite and non-negative")
        if not bool((weights > 0).all()):
            raise ValueError("sample weights must be positive (a batch must have a weight)")
        total = weights.sum()
        self.values.copy_(weights * (len(weights) / total))
        self.ready = True

    def __getitem__(self, index: torch.Tensor) -> torch.Tensor:
        if not self.ready:
            raise RuntimeError(
                "the sample weights are used before they were set (prepare() not run?)"
            )
        return self.values[index]

    def weighted_mean(self, index: torch.Tensor, losses: torch.Tensor) -> torch.Tensor:
        """``sum(w_i l_i) / sum(w_i)`` over the batch's rows ``index`` of the training set."""
        w = self[index].to(losses.dtype)
        return (losses * w).sum() / w.sum()

    def state_dict(self) -> dict[str, Any]:
        return {"values": self.values.clone(), "ready": self.ready}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.values.copy_(state["values"])
        self.ready = bool(state["ready"])
