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
