"""SelecMix (Hwang et al., NeurIPS 2022): debiased learning by contradicting-pair sampling.

Algorithm (``../shared/reference/METHODS.md`` section 8; ``iwhwang/SelecMix`` ``learner.py``,
``util.py``, ``module/loss.py``)
    An auxiliary embedding model ``g`` (encoder + MLP head, L2-normalised 128-d output) is
    trained online with the generalised supervised contrastive loss (temperature ``tau`` 0.2,
    ``gsc_q`` 0.7; :func:`~.contrastive.gsc_loss`), which makes its embedding *biased*. For each
    big batch (``batch_size``, 1024 on Colored MNIST / Corrupted CIFAR-10, 256 on BFFHQ):

    1. ``S = g(x) g(x)^T`` (no gradient, ``g`` in train mode as officially);
    2. one coin for the whole big batch: intra (partner = least similar sample of the same
       label) or inter (partner = most similar sample of another label);
       see :func:`~.contrastive.contradicting_partners`;
    3. ``lam ~ Beta(1, 1) * 0.5`` per sample; ``x_mix = lam x + (1 - lam) x_partner`` with the
       partner's label (weight 0 on the anchor's label);
    4. the big batch is shuffled and split into mini-batches of ``mini_batch_size`` (256 / 64,
       incomplete ones dropped); on each, one optimiser step of the main model(s), then one
       GSC step of ``g`` on the clean mini-batch.

    Main loss per mini-batch (``base``; ``mix_weight`` a and ``clean_weight`` b left at
    ``null`` take the base's own official values, :data:`BASE_WEIGHTS`, so ``--set base=lff``
    brings LfF+SelecMix's weights instead of silently keeping Vanilla+SelecMix's):
    * ``vanilla`` (Vanilla+SelecMix, ``configs/v_ours.cfg``, default):
      ``clean_weight * CE(f(x), y) + mix_weight * CE(f(x_mix), y_mix)`` with 0 and 1, i.e. CE
      on the mixed samples only. The clean forward still runs (as officially), which matters
      only for BatchNorm running statistics.
    * ``lff`` (LfF+SelecMix, ``configs/l_ours.cfg``): ``clean_weight * mean(w CE(f_d(x), y)) +
      mean(GCE(f_b(x), y)) + mix_weight * CE(f_d(x_mix), y_mix)`` with 1 and 0.1, ``w`` LfF's
      relative difficulty from per-sample loss EMAs (shared ``ema.py``/``losses.py``).
    Bias labels are not used.

How the big batch fits the engine's interface
    The engine hands ``update`` one batch of ``batch_size``; that batch is the big batch and
    ``update`` makes ``batch_size // mini_batch_size`` optimiser steps inside (a batch smaller
    than one mini-batch, such as the last of an epoch on a tiny set, is used whole). So an
    engine *step* here is one big batch: ``epochs`` and evaluation cadence keep their meaning,
    a SelecMix epoch makes about as many optimiser steps as a Vanilla epoch at batch 256, and
    ``steps`` counts big batches (``--set steps=N`` means ``4 N`` optimiser steps at the
    defaults). The official loader drops the incomplete last big batch of each epoch; the
    engine's stream keeps it, so it yields up to ``(N mod batch) // mini`` extra steps.

Departures from the official code
    * ``strict_pairs`` (``true`` under ``--protocol clean``): partners are always admissible;
      the official masking (kept under ``official``) can pick an inadmissible partner when
      every admissible similarity is < 0 (inter) or >= 1 (intra); see ``contrastive.py``.
    * ``aux_backbone``: the official auxiliary encoder is a CIFAR-stem ResNet-18 on every
      dataset (``cifar_resnet18``, the YAML default). Any backbone name is accepted, so a
      CPU run on Colored MNIST can use ``aux_backbone=mlp`` (documented where used; not the
      official configuration). Measured: one big batch of 1024 Colored MNIST images with the
      official ResNet-18 takes about 100 s on one (shared) CPU core; with the MLP stand-in
      a 5-epoch run costs about 3x Vanilla.
    * The auxiliary optimiser follows ``proj_optimizer``/``proj_lr`` with weight decay 1e-4
      (``proj_weight_decay``) and SGD momentum 0.9, as officially.
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
from debias_bench.training.optim import OptimizerSettings

from .common import make_classifier
from .contrastive import contradicting_partners, gsc_loss, make_embedding_model, selective_mixup
from .declared.selecmix import SelecMixParams
from .ema import SampleLossEMA, relative_difficulty
from .losses import generalized_ce

#: (mix_weight a, clean_weight b) of each base: configs/v_ours.cfg and configs/l_ours.cfg
BASE_WEIGHTS = {"vanilla": (1.0, 0.0), "lff": (0.1, 1.0)}


def mini_batches(n: int, size: int) -> list[torch.Tensor]:
    """A random split of ``range(n)`` into chunks of ``size`` (the incomplete one dropped);
    the whole range as one chunk when ``n < size``."""
    order = torch.randperm(n)
    if n < size:
        return [order]
    return list(order[: n - n % size].split(size))


def base_weights(base: str, mix: float | None, clean: float | None) -> tuple[float, float]:
    """(a, b): the given values, each ``None`` replaced by the base's official one."""
    official_mix, official_clean = BASE_WEIGHTS[base]
    return (
        official_mix if mix is None else float(mix),
        official_clean if clean is None else float(clean),
    )


class SelecMix(Method):
    Params = SelecMixParams
    hp: SelecMixParams

    def __init__(
        self, spec: DatasetSpec, hp: EngineParams | Mapping[str, Any], env: TrainEnv
    ) -> None:
        super().__init__(spec, hp, env)
        hp = self.hp
        self.mix_weight, self.clean_weight = base_weights(hp.base, hp.mix_weight, hp.clean_weight)
        self.model = make_classifier(spec, hp, self.device)
        self.optimizer = self.optimizer_for(self.model)
        self.scheduler = self.scheduler_for(self.optimizer)
        if hp.base == "lff":
            self.model_b = make_classifier(spec, hp, self.device)
            self.optimizer_b = self.optimizer_for(self.model_b)
            self.scheduler_b = self.scheduler_for(self.optimizer_b)
            self.ema_b = SampleLossEMA(env.train_size, hp.ema_alpha, self.device)
            self.ema_d = SampleLossEMA(env.train_size, hp.ema_alpha, self.device)
        self.aux = make_embedding_model(spec, hp).to(self.device)
        aux_settings = OptimizerSettings(
            hp.proj_optimizer, hp.proj_lr, hp.proj_weight_decay, hp.proj_momentum
        )
        self.aux_optimizer = self.optimizer_for(self.aux, settings=aux_settings)

    # ------------------------------------------------------------------ pieces
    def intra_draw(self) -> torch.Tensor:
        """Whether this big batch pairs within its classes (``intra``), as a host bool tensor;
        ``rand`` flips a fair coin (official ``a > 0.5``), never read back as a Python bool."""
        if self.hp.pairing != "rand":
            return torch.tensor(self.hp.pairing == "intra")
        return torch.rand(1)[0] > 0.5

    @torch.no_grad()
    def mix(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Mixed inputs and labels of the whole big batch (step 1-3 above), and whether it
        paired within classes. Under ``rand`` both modes' partners are computed and the coin
        selects on the device (branching on it in Python would wait for the device)."""
        z = self.aux(batch.x)
        intra = self.intra_draw()
        sim, strict = z @ z.t(), self.hp.strict_pairs
        if self.hp.pairing == "rand":
            partner = torch.where(
                intra.to(sim.device, non_blocking=True),
                contradicting_partners(sim, batch.y, "intra", strict),
                contradicting_partners(sim, batch.y, "inter", strict),
            )
        else:
            partner = contradicting_partners(sim, batch.y, self.hp.pairing, strict)
        lam = torch.rand(len(batch.y), device=batch.x.device) * 0.5  # Beta(1, 1) * 0.5
        x_mix, y_mix = selective_mixup(batch.x, batch.y, partner, lam)
        return x_mix, y_mix, intra

    def main_loss(self, part: Batch, x_mix: torch.Tensor, y_mix: torch.Tensor) -> torch.Tensor:
        """The main model(s)' loss on one mini-batch (forward order as officially: clean, then
        mixed; it matters only for BatchNorm running statistics)."""
        logits_d = self.model(part.x)
        if self.hp.base == "vanilla":
            clean = F.cross_entropy(logits_d, part.y)
            mix_ce = F.cross_entropy(self.model(x_mix), y_mix)
            return self.clean_weight * clean + self.mix_weight * mix_ce
        logits_b = self.model_b(part.x)
        mix_ce = F.cross_entropy(self.model(x_mix), y_mix)
        ce_b = F.cross_entropy(logits_b, part.y, reduction="none")
        ce_d = F.cross_entropy(logits_d, part.y, reduction="none")
        self.ema_b.update(part.index, ce_b, part.y)
        self.ema_d.update(part.index, ce_d, part.y)
        w = relative_difficulty(self.ema_b, self.ema_d, part.index, self.spec.num_classes)
        loss_b = generalized_ce(logits_b, part.y, self.hp.q).mean()
        return self.clean_weight * (ce_d * w).mean() + loss_b + self.mix_weight * mix_ce

    def aux_step(self, part: Batch) -> torch.Tensor:
        q = None if self.hp.gsc_q is None else float(self.hp.gsc_q)
        loss = gsc_loss(self.aux(part.x), part.y, float(self.hp.tau), q)
        self.step(loss, (self.aux_optimizer, None))
        return loss.detach()

    # ------------------------------------------------------------------ interface
    def update(self, batch: Batch) -> dict[str, torch.Tensor | float]:
        x_mix, y_mix, intra = self.mix(batch)
        pairs = [(self.optimizer, self.scheduler)]
        if self.hp.base == "lff":
            pairs.append((self.optimizer_b, self.scheduler_b))
        main, aux = [], []
        for rows in mini_batches(len(batch.y), self.hp.mini_batch_size):
            rows = rows.to(batch.x.device)
            part = Batch(batch.index[rows], batch.x[rows], batch.y[rows], batch.b[rows])
            loss = self.main_loss(part, x_mix[rows], y_mix[rows])
            self.step(loss, *pairs)
            main.append(loss.detach())
            aux.append(self.aux_step(part))
        return {
            "loss": torch.stack(main).mean(),
            "gsc": torch.stack(aux).mean(),
            "intra": intra.float(),
        }

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.model.features(x)
