"""A plugin method that misbehaves on cue (``--set fault=...``), for the fault-injection
tests: Vanilla whose ``predict`` returns a wrong shape or non-finite logits, or whose
``update`` calls ``sys.exit`` or raises ``KeyboardInterrupt`` at its 5th step."""

from __future__ import annotations

import sys

import torch

from debias_bench.hparams import HParam
from debias_bench.methods.vanilla import Vanilla
from debias_bench.registry import METHODS, register_method

FAULTS = ("none", "shape", "nonfinite", "exit", "interrupt")


class Faulty(Vanilla):
    HPARAMS = (HParam("fault", "str", "none", "what goes wrong", choices=FAULTS),)

    def __init__(self, spec, hp, env) -> None:
        super().__init__(spec, hp, env)
        self.steps = 0

    def update(self, batch):
        self.steps += 1
        if self.steps == 5 and self.hp["fault"] == "exit":
            sys.exit(3)
        if self.steps == 5 and self.hp["fault"] == "interrupt":
            raise KeyboardInterrupt
        return super().update(batch)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        logits = super().predict(x)
        if self.hp["fault"] == "shape":
            return logits[:, :-1]
        if self.hp["fault"] == "nonfinite":
            return logits * float("nan")
        return logits


if "faulty" not in METHODS:
    register_method(
        "faulty", display_name="Faulty", citation="test fixture", needs_bias_labels=False
    )(Faulty)
