"""Vanilla: its hyperparameters and listing metadata, read without torch
(its trainer: ``debias_bench.methods.vanilla.Vanilla``)."""

from __future__ import annotations

from debias_bench.config.method_params import declare_method

declare_method(
    "vanilla",
    trainer="debias_bench.methods.vanilla:Vanilla",
    display_name="Vanilla",
    citation="ERM with cross-entropy (LfF's train_vanilla.py configuration)",
    needs_bias_labels=False,
    cost="1 model",
)
