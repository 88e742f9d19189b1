"""LfF, Learning from Failure (Nam et al., NeurIPS 2020; ``alinlab/LfF/train.py``).

Algorithm
    Two models of the same architecture train together from scratch on the same batch. The
    biased model ``f_b`` minimises the generalised cross-entropy (q = 0.7), which emphasises
    the samples it already finds easy, so it amplifies the shortcut. Each sample's CE loss
    under both models is tracked by a per-sample EMA (alpha 0.7; the first visit stores the raw
    loss), divided by the largest EMA of its class over the training set, and turned into the
    relative difficulty ``w(x) = l_b / (l_b + l_d)``: high where the biased model fails, i.e.
    on bias-conflicting samples. The debiased model ``f_d`` minimises ``mean(w(x) CE(f_d(x),
    y))``. One backward pass of ``mean(GCE_b) + mean(w CE_d)``, then both optimisers step
    (``w`` is detached, so neither model's gradient reaches the other). Prediction and features
    come from ``f_d``. Bias labels are not used.

Official behaviour kept
    * GCE with LfF's extra factor q (``CE * q * p_y^q``; see ``losses.generalized_ce``).
    * The EMA's first-visit rule and the class maximum over the whole training set (samples not
      yet visited hold 0, as in ``util.EMA``).
    * Adam for both models with the same lr and weight decay; no lr schedule.
    * LfF's Colored MNIST MLP 100-100-100 and CIFAR ResNet-20, whose heads are kaiming-normal
      initialised like its convolutions (``resnet20_kaiming``; ``lff.yaml``).

Departures
    * The class maximum gets ``+ 1e-8`` in the denominator (as BiasEnsemble's re-implementation
      does; LfF divides by the bare maximum). It only matters when a whole class has zero loss.
    * The per-sample labels for the class maximum are recorded as samples are visited instead of
      being read from the dataset up front; unvisited samples hold 0 so this changes nothing.
    * LfF evaluates the final model on its ``valid`` split, which is the test set; here the engine
      records ``last``, ``best_valid`` (a held-out split) and ``best_test`` side by side.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F

from debias_bench.config.hparams import EngineParams
from debias_bench.data.contract import Batch
from debias_bench.data.spec import DatasetSpec
from debias_bench.training.method import Method, TrainEnv

from .common import make_classifier
from .declared.lff import LfFParams
from .ema import SampleLossEMA, relative_difficulty
from .losses import generalized_ce


class LfF(Method):
    """LfF; subclasses change how the biased model is trained (``bias_loss``)."""

    Params = LfFParams
    hp: LfFParams

    def __init__(
        self, spec: DatasetSpec, hp: EngineParams | Mapping[str, Any], env: TrainEnv
    ) -> None:
        super().__init__(spec, hp, env)
        self.model_b = make_classifier(spec, self.hp, self.device)
        self.model_d = make_classifier(spec, self.hp, self.device)
        self.optimizer_b = self.optimizer_for(self.model_b)
        self.optimizer_d = self.optimizer_for(self.model_d)
        self.scheduler_b = self.scheduler_for(self.optimizer_b)
        self.scheduler_d = self.scheduler_for(self.optimizer_d)
        self.ema_b = SampleLossEMA(env.train_size, self.hp.ema_alpha, self.device)
        self.ema_d = SampleLossEMA(env.train_size, self.hp.ema_alpha, self.device)

    def bias_loss(self, logits_b: torch.Tensor, batch: Batch) -> torch.Tensor:
        """The biased model's loss: GCE on the whole batch."""
        return generalized_ce(logits_b, batch.y, self.hp.q).mean()

    def weights(self, ce_b: torch.Tensor, ce_d: torch.Tensor, batch: Batch) -> torch.Tensor:
        """Update both EMAs with this batch's losses; the relative difficulty of its samples."""
        self.ema_b.update(batch.index, ce_b, batch.y)
        self.ema_d.update(batch.index, ce_d, batch.y)
        return relative_difficulty(self.ema_b, self.ema_d, batch.index, self.spec.num_classes)

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        logits_b = self.model_b(batch.x)
        logits_d = self.model_d(batch.x)
        ce_b = F.cross_entropy(logits_b, batch.y, reduction="none")
        ce_d = F.cross_entropy(logits_d, batch.y, reduction="none")
        w = self.weights(ce_b, ce_d, batch)
        loss_b = self.bias_loss(logits_b, batch)
        loss_d = (ce_d * w).mean()
        pairs = (self.optimizer_b, self.scheduler_b), (self.optimizer_d, self.scheduler_d)
        self.step(loss_b + loss_d, *pairs)
        return {"loss_b": loss_b.detach(), "loss_d": loss_d.detach(), "weight": w.mean()}

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self.model_d(x)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.model_d.features(x)

    def backbone_module(self) -> torch.nn.Module:
        return self.model_d.backbone

    def classifier_weight(self) -> torch.Tensor:
        return self.model_d.head.weight
