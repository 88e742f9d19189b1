"""LfF + BiasEnsemble (Lee et al., AAAI 2023; ``kakaoenterprise/BiasEnsemble``, ``train_lff_be``).

Algorithm
    Stage 1 (``prepare``, timed by the engine as part of the run): a committee of
    ``committee_members`` (5) biased models, each a fresh copy of the main architecture trained
    with GCE (q 0.7) for ``committee_steps`` (1,000) steps at the main batch size and lr, and
    checkpointed by validation accuracy (see ``biased.py``), scores every training sample.
    Samples whose true class gets softmax > ``committee_threshold`` (0.99) from at least
    ``committee_agreement`` (3) members are *pseudo-aligned*.

    Stage 2: LfF (``lff.py``) with one change: the biased model is trained by plain CE on the
    pseudo-aligned samples of each batch only, instead of GCE on all of them. The per-sample
    EMAs, the relative difficulty and the debiased model are LfF's (EMAs of both models over
    all samples). The biased model of stage 2 is a fresh model (the official code re-creates it
    after the committee; here it never saw the committee's training). Bias labels are not used.

State and resume
    The pseudo-aligned mask is part of the method's ``state_dict``; the engine checkpoints right
    after an expensive ``prepare`` and does not call it again on resume.

Official behaviour kept
    * The committee's checkpoint rule (evaluations at steps 0 and 500 only with the defaults),
      its shared batch stream and its lr equal to the main lr.
    * No lr decay (the official ``--use_lr_decay`` is off in every released command).

Departures
    * A batch without pseudo-aligned samples gives the biased model a zero loss (the official
      code takes the mean of an empty tensor, gets NaN and stops with an error).
    * The committee draws its batches from a stream of its own (``lff_be.committee``, a
      different seed from the main stream); the official code shares its loader's random
      state with the main loop.
    * A member trains ``min(committee_steps, total steps of the run)`` steps: the cap only
      binds for runs shorter than the committee (the smoke preset's 20 steps), where a full
      committee would cost more than the run it prepares.
    * Validation for the committee's checkpoint uses the harness's held-out valid split (for
      Colored MNIST an unbiased split of MNIST training images; the official PNG release has
      its own valid folder).
    * Scoring transform (under both protocols): the members score every training sample
      unaugmented. The official ``pretrain_loader`` reads the training set through the
      *training* transform, so on the 224-px sets (BFFHQ, Dogs & Cats, BAR) each sample is
      scored once through a random 4-px-padded crop and a random flip. On Colored MNIST
      (no augmentation) both are the same. Kept: a deterministic vote that does not depend on
      one augmentation draw; a switch would need a new hyperparameter, and every new method
      key changes every LfF+BE run id, Colored MNIST's included, where it changes nothing.

Host synchronisations
    the bias committee is trained and votes once in ``prepare``; the step's bias loss over
    the pseudo-aligned samples is a masked mean on the device, not a boolean selection
    (``bench perf --host-syncs``: 0).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from debias_bench.data.contract import Batch, Splits
from debias_bench.data.spec import DatasetSpec
from debias_bench.streams import stream_seed
from debias_bench.training.method import TrainEnv

from .biased import CommitteeConfig, agreement_mask, committee_probs
from .common import make_classifier
from .declared.lff_be import LfFBEParams
from .lff import LfF
from .state import SampleMask


class LfFBE(LfF):
    host_sync_note = "bias committee: once, before training"
    Params = LfFBEParams
    hp: LfFBEParams

    def __init__(self, spec: DatasetSpec, hp: Mapping[str, Any], env: TrainEnv) -> None:
        super().__init__(spec, hp, env)
        self.pseudo_aligned = SampleMask(env.train_size, self.device)

    def committee_config(self) -> CommitteeConfig:
        hp = self.hp
        return CommitteeConfig(
            members=hp.committee_members,
            # never longer than the main run: only binds for plumbing runs (smoke preset)
            steps=min(hp.committee_steps, self.env.total_steps),
            valid_every=hp.committee_valid_every,
            threshold=hp.committee_threshold,
            agreement=hp.committee_agreement,
            q=hp.q,
            batch_size=hp.batch_size,
            eval_batch_size=hp.eval_batch_size,
        )

    def prepare(self, data: Splits) -> None:
        cfg = self.committee_config()

        def make_member() -> tuple[nn.Module, torch.optim.Optimizer]:
            model = make_classifier(self.spec, self.hp, self.device)
            return model, self.optimizer_for(model)

        seed = stream_seed(self.env.seed, "lff_be.committee")  # a batch stream of its own
        probs = committee_probs(make_member, data, self.spec, cfg, seed, self.device)
        self.pseudo_aligned.set(agreement_mask(probs, cfg.threshold, cfg.agreement).to(self.device))

    def bias_loss(self, logits_b: torch.Tensor, batch: Batch) -> torch.Tensor:
        """Plain CE on the batch's pseudo-aligned samples (zero when there are none): their
        mean as a masked sum over the batch (a boolean selection would sync with the host)."""
        selected = self.pseudo_aligned[batch.index]
        losses = F.cross_entropy(logits_b, batch.y, reduction="none")
        kept = torch.where(selected, losses, torch.zeros_like(losses)).sum()
        return kept / selected.sum().clamp(min=1)

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        scalars = super().update(batch)
        scalars["pseudo_aligned"] = self.pseudo_aligned[batch.index].float().mean()
        return scalars
