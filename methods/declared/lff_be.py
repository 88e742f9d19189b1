"""LfF+BE: its hyperparameters and listing metadata, read without torch
(its trainer: ``debias_bench.methods.lff_be.LfFBE``)."""

from __future__ import annotations

from dataclasses import dataclass

from debias_bench.config.hparams import REQUIRED, hparam
from debias_bench.config.method_params import declare_method
from debias_bench.config.search import Uniform

from .lff import LfFParams


@dataclass(frozen=True)
class LfFBEParams(LfFParams):
    # ``timing``: a timing run (``bench perf``) keeps the committee, a preparation stage outside
    # its timed window, to one member of 2 steps; a threshold of 0 marks every sample
    # pseudo-aligned (on real data most are), so the biased model trains on whole batches as it
    # mostly does in a real run
    committee_members: int = hparam(REQUIRED, "bias committee size", low=1, timing=1)
    committee_agreement: int = hparam(REQUIRED, "votes that mark a sample aligned", low=1, timing=1)
    committee_steps: int = hparam(REQUIRED, "training steps of each member", low=1, timing=2)
    committee_threshold: float = hparam(
        REQUIRED,
        "confidence p(y|x) of a vote",
        low=0,
        high=1,
        timing=0.0,
        search=Uniform(0.9, 0.999),
    )
    committee_valid_every: int = hparam(REQUIRED, "members' checkpoint cadence", low=1, timing=1)


declare_method(
    "lff_be",
    trainer="debias_bench.methods.lff_be:LfFBE",
    params=LfFBEParams,
    display_name="LfF+BE",
    citation="Lee et al., Revisiting the Importance of Amplifying Bias for Debiasing, AAAI 2023",
    needs_bias_labels=False,
    cost="5-model committee + 2 models",
)
