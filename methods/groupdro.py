"""GroupDRO (Sagawa et al., ICLR 2020; ``kohpangwei/group_DRO`` ``loss.py`` ``LossComputer``).

Algorithm
    Groups are the (class, bias) pairs, ``g = y * num_biases + b``: GroupDRO needs the bias
    labels of the training set. The method keeps a distribution ``q`` over the groups (uniform
    at the start) and, at every step, on the batch:

    1. ``L_g`` = mean CE of the batch's samples of group ``g`` (0 for a group absent from the
       batch, as ``compute_group_avg`` does);
    2. ``q_g <- q_g * exp(eta * (L_g + C / sqrt(n_g)))``, then ``q <- q / sum(q)`` (the
       exponentiated-gradient ascent step on the group weights; ``n_g`` is the group's size in
       the training set, ``C`` the generalisation adjustment, 0 by default);
    3. loss ``sum_g q_g L_g`` with the *updated* ``q`` (detached), one optimiser step.

    ``q`` is part of the checkpoint. Prediction and features come from the single model.

Official behaviour kept
    * The update order (``q`` first, then the loss with the new ``q``), ``eta`` = 0.01 and
      ``C`` = 0 as in every command of the official README, and a group absent from a batch
      contributing a loss of 0 (its weight only shrinks relative to the others that step).
    * The adjustment ``C / sqrt(n_g)`` only enters the weight update (in the official code it is
      also added, in place, to the loss, where it is a constant without gradient).

Dropped (options of ``LossComputer`` that no reported GroupDRO result uses)
    * ``normalize_loss`` (group losses divided by their sum before the update) and ``btl`` (the
      greedy CVaR "top-alpha" variant with its loss EMA ``gamma``): off in every official
      command.

Departures
    * Sampling: every official GroupDRO command passes ``--reweight_groups``, i.e. batches drawn
      with replacement with probability proportional to ``1 / n_g`` (group-balanced). The
      engine draws uniform batches and has no per-sample sampler hook, so here the batches are
      uniform: a rare group is present in few batches (at 1 % conflicting Colored MNIST, each
      of the 90 conflicting groups in about 3 % of the batches of 256) and its weight grows only
      when it is. The robust loss itself is the official one. Adding the hook is an engine
      change (a ``sampling_weights()`` method read by ``TrainStream``; see the issue 25 report).
    * A group with no training sample gets no adjustment (``n_g`` clamped to 1; officially
      ``C / sqrt(0)`` would be infinite). It never appears in a batch, so only matters with C > 0.
    * Optimiser: the official runs use SGD with momentum 0.9 on ImageNet-pretrained ResNet-50
      (Waterbirds, CelebA) or BERT; none of the datasets here has an official GroupDRO setting,
      so ``groupdro.yaml`` follows each dataset's common recipe (as ``vanilla.yaml``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from debias_bench.config.hparams import REQUIRED, EngineParams, hparam
from debias_bench.config.search import LogUniform, Uniform
from debias_bench.data.contract import Batch, DatasetSpec, Splits
from debias_bench.registry import register_method
from debias_bench.training.method import TrainEnv

from .vanilla import Vanilla


def group_index(y: torch.Tensor, b: torch.Tensor, num_biases: int) -> torch.Tensor:
    """The (class, bias) group of each sample: ``y * num_biases + b``."""
    return y * num_biases + b


def group_mean_losses(
    losses: torch.Tensor, groups: torch.Tensor, num_groups: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(L, n)``: the mean of ``losses`` over each group's samples (0 for a group without any)
    and the number of samples of each group, both of length ``num_groups``."""
    onehot = F.one_hot(groups, num_groups).to(losses.dtype)  # B x G
    counts = onehot.sum(0)
    return onehot.t() @ losses / counts.clamp(min=1), counts


def updated_group_weights(
    q: torch.Tensor, group_loss: torch.Tensor, eta: float, adjustment: torch.Tensor | None = None
) -> torch.Tensor:
    """One exponentiated-gradient step: ``q * exp(eta * (L + adjustment))``, normalised."""
    adjusted = group_loss.detach()
    if adjustment is not None:
        adjusted = adjusted + adjustment
    q = q * torch.exp(eta * adjusted)
    return q / q.sum()


@dataclass(frozen=True)
class GroupDROParams(EngineParams):
    dro_step_size: float = hparam(
        REQUIRED,
        "eta: step size of the group weights",
        low=0,
        low_open=True,
        search=LogUniform(1e-3, 1e-1),
    )
    dro_adjustment: float = hparam(  # searched on 0..5 as the paper's grid [UNVERIFIED]
        REQUIRED, "C: generalisation adjustment C/sqrt(n_g)", low=0, search=Uniform(0.0, 5.0)
    )


@register_method(
    "groupdro",
    display_name="GroupDRO",
    citation="Sagawa et al., Distributionally Robust Neural Networks for Group Shifts: On the "
    "Importance of Regularization for Worst-Case Generalization, ICLR 2020",
    needs_bias_labels=True,
    cost="1 model",
)
class GroupDRO(Vanilla):
    Params = GroupDROParams
    hp: GroupDROParams

    def __init__(self, spec: DatasetSpec, hp: Mapping[str, Any], env: TrainEnv) -> None:
        super().__init__(spec, hp, env)  # Vanilla: the model, its optimiser and schedule
        self.num_groups = spec.num_classes * spec.num_biases
        uniform = torch.full((self.num_groups,), 1.0 / self.num_groups, device=self.device)
        self.group_weights = uniform  # q, checkpointed
        # training-set size of each group (for the adjustment); set by prepare(), checkpointed
        self.group_counts = torch.ones(self.num_groups, device=self.device)

    def prepare(self, data: Splits) -> None:
        counts = data.train.counts(self.spec.num_classes, self.spec.num_biases).flatten()
        self.group_counts.copy_(counts.to(self.group_counts))

    def adjustment(self) -> torch.Tensor | None:
        """``C / sqrt(n_g)`` per group (None when C = 0)."""
        if self.hp.dro_adjustment == 0:
            return None
        return float(self.hp.dro_adjustment) / self.group_counts.clamp(min=1).sqrt()

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        losses = F.cross_entropy(self.model(batch.x), batch.y, reduction="none")
        groups = group_index(batch.y, batch.b, self.spec.num_biases)
        group_loss, _ = group_mean_losses(losses, groups, self.num_groups)
        with torch.no_grad():
            q = updated_group_weights(
                self.group_weights, group_loss, float(self.hp.dro_step_size), self.adjustment()
            )
            self.group_weights.copy_(q)
        loss = group_loss @ self.group_weights.to(group_loss.dtype)
        self.step(loss, (self.optimizer, self.scheduler))
        entropy = -(q * q.clamp(min=1e-30).log()).sum()
        return {
            "loss": loss.detach(),
            "ce": losses.mean().detach(),
            "q_max": q.max(),
            "q_perplexity": entropy.exp() / self.num_groups,  # 1: uniform, 1/G: one group
        }
