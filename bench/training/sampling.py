"""How a method's training batches are drawn: the one sampler module of every method and dataset.

A method says how the engine draws its batches by returning a sampler from
:meth:`~debias_bench.training.method.Method.batch_sampler`; the engine's
:class:`~debias_bench.data.contract.TrainStream` cuts each epoch the sampler orders into batches.

* :data:`UNIFORM` (the default): every training sample once per epoch, in a fresh order (the
  ``batch_order`` stream: the order every method had before samplers existed, bit for bit).
* :class:`GroupBalanced`: an epoch of N samples drawn with replacement, sample i with
  probability proportional to ``1 / n_g(i)``, the size of its (class, bias) group; every group
  present is drawn equally often in expectation (``1 / G`` of a batch). GroupDRO's official
  ``--reweight_groups`` loader (``kohpangwei/group_DRO`` ``data/dro_dataset.py``
  ``get_loader``: ``WeightedRandomSampler(len(data) / group_counts[g], len(data),
  replacement=True)``).
* :class:`Weighted`: per-sample weights set while the method prepares. With replacement, an
  epoch of N samples, sample i drawn with probability ``w_i / sum(w)`` (PGD's resampling,
  ``sumyeongahn/PGD`` ``trainer/module/data.py``: every item of an epoch drawn independently
  by the inverse CDF of the probabilities). Without replacement, the weights are whole
  multiplicities and an epoch is a fresh order of the multiset, ``sum(w)`` samples (JTT's
  duplication, ``anniesch/jtt`` ``run_expt.py``: ``lambda_up`` extra copies of each error-set
  sample appended to the training set, shuffled: an epoch of ``N + lambda_up |E|``).

Every draw comes from a named stream of the run's seed (``sampler.group_balanced``,
``sampler.weighted``, ``sampler.duplicated``, indexed by the epoch: :mod:`debias_bench.streams`),
so an epoch's order is a pure function of the seed, the epoch and the sampler's state. That state
(a weighted sampler's weights) is an attribute of the method, saved and restored with its
checkpoint, so a resumed run draws exactly the batches an uninterrupted one would.

Which sampler a run uses is part of its identity: fixed by the method's code (hashed with it) or
chosen by a declared option, ``sampling`` (GroupDRO, JTT, PGD: ``resample``, the official
sampling, or ``loss_weights``, uniform batches whose loss weighs the samples instead). A run whose
``sampling`` differs from its method's default is a variant: every table shows it as a method of
its own, ``GroupDRO [sampling=loss_weights]`` (:mod:`debias_bench.config.sampling`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

import torch

from debias_bench.data.contract import Split, uniform_order
from debias_bench.streams import generator


class Sampler(ABC):
    """Orders the rows of one epoch of the training split (a
    :class:`~debias_bench.data.contract.EpochOrder`)."""

    #: a short name for messages and results
    kind: ClassVar[str] = ""

    @abstractmethod
    def epoch_size(self, split: Split) -> int:
        """How many rows one epoch draws."""

    @abstractmethod
    def epoch_rows(self, split: Split, seed: int, epoch: int) -> torch.Tensor:
        """The rows of epoch ``epoch`` in order, int64 on the CPU."""

    def describe(self) -> str:
        return self.kind


class Uniform(Sampler):
    """Every row once per epoch, in the order of stream ``batch_order`` at the epoch."""

    kind = "uniform"

    def epoch_size(self, split: Split) -> int:
        return len(split)

    def epoch_rows(self, split: Split, seed: int, epoch: int) -> torch.Tensor:
        return uniform_order(len(split), seed, epoch)


#: the default sampler (stateless: one instance serves every method)
UNIFORM = Uniform()


def draw_with_replacement(
    weights: torch.Tensor, count: int, draws: torch.Generator
) -> torch.Tensor:
    """``count`` rows drawn independently, row i with probability ``weights_i / sum(weights)``
    (inverse CDF in float64, as PGD's loader; a row of weight 0 is never drawn)."""
    cdf = torch.cumsum(weights.to(torch.float64).cpu(), 0)
    uniform = torch.rand(count, generator=draws, dtype=torch.float64) * cdf[-1]
    return torch.searchsorted(cdf, uniform, right=True).clamp_(max=len(weights) - 1)


def group_of(labels: torch.Tensor, biases: torch.Tensor, num_biases: int) -> torch.Tensor:
    """The (class, bias) group of each sample: ``y * num_biases + b``."""
    return labels * num_biases + biases


class GroupBalanced(Sampler):
    """An epoch of N rows drawn with replacement, row i with probability proportional to
    ``1 / n_g(i)``: each (class, bias) group present is ``1 / G`` of the draws in expectation.
    Stateless: the weights are a function of the split's labels and bias labels."""

    kind = "group_balanced"

    def __init__(self, num_classes: int, num_biases: int) -> None:
        self.num_groups = num_classes * num_biases
        self.num_biases = num_biases
        self._cache: tuple[torch.Tensor, torch.Tensor] | None = None  # (labels, weights)

    def weights(self, split: Split) -> torch.Tensor:
        """``1 / n_g(i)`` of every row (float64, CPU)."""
        if self._cache is None or self._cache[0] is not split.labels:
            groups = group_of(split.labels.cpu(), split.biases.cpu(), self.num_biases)
            counts = torch.bincount(groups, minlength=self.num_groups).to(torch.float64)
            self._cache = (split.labels, 1.0 / counts[groups])
        return self._cache[1]

    def epoch_size(self, split: Split) -> int:
        return len(split)

    def epoch_rows(self, split: Split, seed: int, epoch: int) -> torch.Tensor:
        draws = generator(seed, "sampler.group_balanced", epoch)
        return draw_with_replacement(self.weights(split), len(split), draws)

    def describe(self) -> str:
        return f"{self.kind} (1/n_g over {self.num_groups} class x bias groups, with replacement)"

    # stateless, but a method may keep it as an attribute: nothing to checkpoint
    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        pass


class Weighted(Sampler):
    """Per-sample weights, set once while the method prepares (:meth:`set`), saved with the
    method's checkpoint.

    ``replacement=True``: an epoch of N rows drawn independently with probabilities
    ``w / sum(w)``. ``replacement=False``: the weights are whole multiplicities; an epoch is a
    fresh order of every row repeated ``w_i`` times (``sum(w)`` rows)."""

    kind = "weighted"

    def __init__(self, size: int, replacement: bool = True) -> None:
        self.values = torch.ones(size, dtype=torch.float64)
        self.replacement = replacement
        self.ready = False

    def set(self, weights: torch.Tensor) -> None:
        weights = weights.detach().to("cpu", torch.float64)
        if weights.shape != self.values.shape:
            shape, expected = tuple(weights.shape), tuple(self.values.shape)
            raise ValueError(f"sampling weights of shape {shape}, expected {expected}")
        if not bool(torch.isfinite(weights).all()) or bool((weights < 0).any()):
            raise ValueError("sampling weights must be finite and non-negative")
        if not float(weights.sum()) > 0:
            raise ValueError("sampling weights must not all be 0")
        if not self.replacement and not bool((weights == weights.round()).all()):
            raise ValueError("without replacement, sampling weights are whole multiplicities")
        self.values.copy_(weights)
        self.ready = True

    def _checked(self) -> torch.Tensor:
        if not self.ready:
            raise RuntimeError(
                "the sampling weights are used before they were set (prepare() not run?)"
            )
        return self.values

    def epoch_size(self, split: Split) -> int:
        if len(split) != len(self.values):
            raise ValueError(f"{len(self.values)} sampling weights for {len(split)} rows")
        return len(split) if self.replacement else int(self._checked().sum())

    def epoch_rows(self, split: Split, seed: int, epoch: int) -> torch.Tensor:
        weights = self._checked()
        if self.replacement:
            draws = generator(seed, "sampler.weighted", epoch)
            return draw_with_replacement(weights, len(weights), draws)
        rows = torch.repeat_interleave(torch.arange(len(weights)), weights.long())
        order = torch.randperm(len(rows), generator=generator(seed, "sampler.duplicated", epoch))
        return rows[order]

    def probabilities(self) -> torch.Tensor:
        """The chance of each row per draw, ``w / sum(w)`` (float64)."""
        weights = self._checked()
        return weights / weights.sum()

    def describe(self) -> str:
        how = "with replacement" if self.replacement else "duplicated, without replacement"
        return f"{self.kind} ({how})"

    def state_dict(self) -> dict[str, Any]:
        return {"values": self.values.clone(), "ready": self.ready}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.values.copy_(state["values"])
        self.ready = bool(state["ready"])


def expected_share(weights: torch.Tensor, rows: torch.Tensor) -> float:
    """The expected share of ``rows`` (a boolean mask) among a weighted sampler's draws:
    ``sum(w[rows]) / sum(w)``."""
    weights = weights.to(torch.float64)
    return float(weights[rows].sum() / weights.sum())
