"""DisEnt, Learning Debiased Representation via Disentangled Feature Augmentation (Lee et al.,
NeurIPS 2021; ``kakaoenterprise/Learning-Debiased-Disentangled``, ``learner.py::train_ours``).

Algorithm
    Two encoders, intrinsic ``E_i`` and bias ``E_b``, each with a linear classifier over the
    concatenation ``z = [z_i, z_b]`` (``C_i`` and ``C_b``, ``2 d -> K``). Stop-gradients keep
    the two halves apart: ``C_i`` reads ``[z_i, sg(z_b)]`` and ``C_b`` reads ``[sg(z_i), z_b]``,
    so the intrinsic loss never reaches ``E_b`` and the bias loss never reaches ``E_i``.
    With the relative difficulty ``W`` from class-max-normalised per-sample EMAs (alpha 0.7) of
    ``CE(C_i)`` and ``CE(C_b)`` (as LfF, ``ema.py``)::

        L_dis  = mean(W CE(C_i[z_i, sg z_b], y)) + l_dis_align mean(GCE(C_b[sg z_i, z_b], y))
        L_swap = mean(W CE(C_i[z_i, sg z_b~], y)) + l_swap_align mean(GCE(C_b[sg z_i, z_b~], y~))
        L      = L_dis + l_swap L_swap      (L_swap only for 0-based step > curr_step)

    (``l_*`` are the hyperparameters ``lambda_dis_align``, ``lambda_swap_align``, ``lambda_swap``)

    where ``z_b~ = z_b[perm]``, ``y~ = y[perm]`` for a random permutation of the batch (the
    feature swap). Both optimisers (Adam, lr, wd) step after one backward. With ``use_lr_decay``
    a ``StepLR(lr_decay_step, lr_gamma)`` per optimiser is stepped after every update from
    0-based step ``curr_step`` on, so with ``curr_step`` 10k the lr decays at 20k, 30k, 40k
    (kept in ``state_dict``). Prediction: ``C_i([z_i, z_b])``. Bias labels are not used.

Backbones
    Colored MNIST: MLP 3*28*28-100-100-16 per encoder (``mlp_hidden: [100, 100, 16]``), heads
    ``Linear(32, K)``. Other sets: ResNet-18 per encoder (512-d pooled feature), heads
    ``Linear(1024, K)``; ImageNet weights for BAR (``resnet18_pretrained``).

Official behaviour kept
    * GCE with LfF's extra factor q; W reused (not recomputed) for the swapped samples.
    * The swap starts after ``curr_step`` (strictly greater, 0-based) and the lr decay at it.
    * Per-dataset lambdas, lr and decay from the released scripts (``disent.yaml``).

Departures
    * The permutation is drawn with torch's generator (the official code uses NumPy's), so the
      engine's checkpointed RNG state makes resumed runs identical.
    * The official ResNet path gets ``z`` from a forward hook on ``avgpool`` while running the
      whole torchvision model; here the encoder returns the pooled feature directly (same values).
    * The class maximum gets ``+ 1e-8`` (``ema.py``); DisEnt divides by the bare maximum.
    * ``features()`` returns ``[z_i, z_b]``, the input of the classifier that predicts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.optim.lr_scheduler import StepLR

from debias_bench.config.hparams import EngineParams
from debias_bench.data.contract import Batch
from debias_bench.data.spec import DatasetSpec
from debias_bench.training.backbones import Backbone, build_backbone, init_head
from debias_bench.training.method import Method, TrainEnv

from .declared.disent import DisEntParams
from .ema import SampleLossEMA, relative_difficulty
from .losses import generalized_ce
from .state import StepCounter


class Branch(nn.Module):
    """An encoder and a classifier over ``[z_intrinsic, z_bias]`` (twice its feature size)."""

    def __init__(self, encoder: Backbone, num_classes: int) -> None:
        super().__init__()
        self.encoder = encoder
        self.head = init_head(encoder, nn.Linear(2 * encoder.feat_dim, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder(x)


def disentangled_logits(
    intrinsic: Branch, bias: Branch, z_i: torch.Tensor, z_b: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(C_i([z_i, sg z_b]), C_b([sg z_i, z_b]))``: each head trains only its own encoder."""
    logits_i = intrinsic.head(torch.cat([z_i, z_b.detach()], dim=1))
    logits_b = bias.head(torch.cat([z_i.detach(), z_b], dim=1))
    return logits_i, logits_b


class DisEnt(Method):
    Params = DisEntParams
    hp: DisEntParams

    def __init__(
        self, spec: DatasetSpec, hp: EngineParams | Mapping[str, Any], env: TrainEnv
    ) -> None:
        super().__init__(spec, hp, env)
        self.intrinsic = self._branch()
        self.bias = self._branch()
        self.optimizer_i = self.optimizer_for(self.intrinsic)
        self.optimizer_b = self.optimizer_for(self.bias)
        self.scheduler_i = self._decay(self.optimizer_i)
        self.scheduler_b = self._decay(self.optimizer_b)
        self.ema_i = SampleLossEMA(env.train_size, self.hp.ema_alpha, self.device)
        self.ema_b = SampleLossEMA(env.train_size, self.hp.ema_alpha, self.device)
        self.steps_done = StepCounter()

    def _branch(self) -> Branch:
        encoder = build_backbone(self.hp.backbone, self.spec, self.hp)
        return Branch(encoder, self.spec.num_classes).to(self.device)

    def _decay(self, optimizer: torch.optim.Optimizer) -> StepLR | None:
        if not self.hp.use_lr_decay:
            return None
        return StepLR(optimizer, self.hp.lr_decay_step, self.hp.lr_gamma)

    def swap_loss(
        self, z_i: torch.Tensor, z_b: torch.Tensor, w: torch.Tensor, y: torch.Tensor
    ) -> torch.Tensor:
        """L_swap for a random permutation of the bias features (and their labels)."""
        perm = torch.randperm(len(y), device=y.device)
        logits_i, logits_b = disentangled_logits(self.intrinsic, self.bias, z_i, z_b[perm])
        ce_i = (F.cross_entropy(logits_i, y, reduction="none") * w).mean()
        gce_b = generalized_ce(logits_b, y[perm], self.hp.q).mean()
        return ce_i + self.hp.lambda_swap_align * gce_b

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        step = self.steps_done.value
        z_i, z_b = self.intrinsic(batch.x), self.bias(batch.x)
        logits_i, logits_b = disentangled_logits(self.intrinsic, self.bias, z_i, z_b)
        ce_i = F.cross_entropy(logits_i, batch.y, reduction="none")
        ce_b = F.cross_entropy(logits_b, batch.y, reduction="none")
        self.ema_i.update(batch.index, ce_i, batch.y)
        self.ema_b.update(batch.index, ce_b, batch.y)
        w = relative_difficulty(self.ema_b, self.ema_i, batch.index, self.spec.num_classes)
        gce_b = generalized_ce(logits_b, batch.y, self.hp.q).mean()
        loss_dis = (ce_i * w).mean() + self.hp.lambda_dis_align * gce_b
        loss, loss_swap = loss_dis, torch.zeros((), device=self.device)
        if step > self.hp.curr_step:
            loss_swap = self.swap_loss(z_i, z_b, w, batch.y)
            loss = loss + self.hp.lambda_swap * loss_swap
        self.step(loss, (self.optimizer_i, None), (self.optimizer_b, None))
        if step >= self.hp.curr_step:
            for scheduler in (self.scheduler_i, self.scheduler_b):
                if scheduler is not None:
                    scheduler.step()
        self.steps_done.increment()
        return {
            "loss": loss.detach(),
            "loss_dis": loss_dis.detach(),
            "loss_swap": loss_swap.detach(),
            "weight": w.mean(),
        }

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.intrinsic(x), self.bias(x)], dim=1)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self.intrinsic.head(self.features(x))

    def classifier_weight(self) -> torch.Tensor:
        """``C_i``'s ``K x 2d`` weight, which reads ``features() = [z_i, z_b]``."""
        return self.intrinsic.head.weight
