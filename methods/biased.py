"""BiasEnsemble's committee of biased models (Lee et al., AAAI 2023, ``pretrain_b_ensemble_best``).

Each member is a fresh copy of the main architecture trained for a few steps with GCE, so it
learns the shortcut and little else. A sample is *pseudo-aligned* when at least ``agreement``
members give its true class a softmax probability above ``threshold``.

Official behaviour kept
    * Members draw consecutive batches from one shared training stream (batch = main batch).
    * Checkpoint by validation accuracy evaluated after the update of every step with
      ``step % valid_every == 0`` (0-based), strictly better only: with the defaults (1,000 steps,
      ``valid_every`` 500) that compares the model after 1 update with the one after 501
      updates, never the final one. Kept because it is what the published numbers used.
    * Scoring of all training samples in eval mode with the selected copy. Departure: the
      official code scores through the training transform (random crop and flip on the 224-px
      sets); here samples are scored unaugmented (``lff_be.py`` says why).

:func:`train_model` is the plain loop (a fixed number of steps, no checkpoint selection) that
trains the identification / biased model of JTT and PGD in their preparation stage.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch import nn

from debias_bench.data.contract import Batch, Split, Splits, TrainStream, eval_batches
from debias_bench.data.spec import DatasetSpec
from debias_bench.training.metrics import predict_labels

from .losses import generalized_ce


@dataclass(frozen=True)
class CommitteeConfig:
    members: int = 5
    steps: int = 1000
    valid_every: int = 500
    threshold: float = 0.99
    agreement: int = 3
    q: float = 0.7
    batch_size: int = 256
    eval_batch_size: int = 1024


def agreement_mask(
    true_class_probs: torch.Tensor, threshold: float, agreement: int
) -> torch.Tensor:
    """``members x N`` probabilities of the true class -> pseudo-aligned flags of the N samples:
    ``sum_i [p_i > threshold] >= agreement``."""
    return (true_class_probs > threshold).sum(dim=0) >= agreement


@torch.no_grad()
def true_class_probs(
    model: nn.Module, split: Split, spec: DatasetSpec, batch_size: int, device: torch.device
) -> torch.Tensor:
    """``softmax(model(x))[y]`` of every sample of ``split``, in split order (on the CPU)."""
    model.eval()
    out = []
    for batch in eval_batches(split, spec, batch_size, device):
        probs = torch.softmax(model(batch.x), dim=1)
        out.append(probs.gather(1, batch.y[:, None]).squeeze(1).cpu())
    return torch.cat(out)


def _accuracy(
    model: nn.Module, split: Split, spec: DatasetSpec, bs: int, dev: torch.device
) -> float:
    model.eval()
    preds = predict_labels(model, split, spec, bs, dev)
    model.train()
    return float((preds == split.labels).float().mean())


def train_member(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    batches: Iterator[Batch],
    cfg: CommitteeConfig,
    valid_accuracy: Callable[[nn.Module], float],
) -> nn.Module:
    """Train one member with GCE; return the copy with the best validation accuracy."""
    best_acc, best = -1.0, None
    model.train()
    for step in range(cfg.steps):
        batch = next(batches)
        loss = generalized_ce(model(batch.x), batch.y, cfg.q).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % cfg.valid_every == 0:
            acc = valid_accuracy(model)
            if acc > best_acc:  # the official code starts from 0 and needs a strict gain
                best_acc, best = acc, copy.deepcopy(model)
    return best if best is not None else model


def stage_steps(epochs: float, steps_per_epoch: int, cap: int | None = None) -> int:
    """Steps of a preparation stage of ``epochs`` epochs: at least 1, at most ``cap``."""
    steps = max(1, round(epochs * steps_per_epoch))
    return steps if cap is None else min(steps, cap)


def train_model(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    batches: Iterator[Batch],
    steps: int,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
) -> nn.Module:
    """Train ``model`` in train mode for ``steps`` updates of ``loss_fn(logits, y)`` (a scalar)
    on consecutive ``batches``, the scheduler (if any) stepped after every update; returns the
    final model (no checkpoint selection)."""
    model.train()
    for _ in range(steps):
        batch = next(batches)
        loss = loss_fn(model(batch.x), batch.y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
    return model


def committee_probs(
    make_member: Callable[[], tuple[nn.Module, torch.optim.Optimizer]],
    data: Splits,
    spec: DatasetSpec,
    cfg: CommitteeConfig,
    seed: int,
    device: torch.device,
) -> torch.Tensor:
    """Train ``cfg.members`` biased models; ``members x N_train`` true-class probabilities."""
    stream = TrainStream(data.train, spec, cfg.batch_size, seed, device)
    batches = stream.batches()

    def valid_accuracy(model: nn.Module) -> float:
        return _accuracy(model, data.valid, spec, cfg.eval_batch_size, device)

    rows = []
    for _ in range(cfg.members):
        model, optimizer = make_member()
        best = train_member(model, optimizer, batches, cfg, valid_accuracy)
        rows.append(true_class_probs(best, data.train, spec, cfg.eval_batch_size, device))
        del model, optimizer, best
    return torch.stack(rows)
