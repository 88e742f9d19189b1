"""JTT, Just Train Twice (Liu et al., ICML 2021; ``anniesch/jtt``).

Algorithm
    Stage 1 (``prepare``, timed by the engine as part of the run): an identification model, a
    fresh copy of the main architecture, is trained by plain ERM (CE, the run's optimiser and
    lr schedule) for ``id_epochs`` epochs (``T``). The training samples it then misclassifies
    form the error set ``E`` (scored in eval mode, unaugmented).

    Stage 2 (the run): a fresh model is trained by CE on the training set in which every sample
    of ``E`` counts ``1 + upweight`` times (``upweight`` is the official ``--up_weight``
    ``lambda_up``). Bias labels are not used; prediction and features come from this model.

Upsampling (``sampling: resample``, the default)
    As the official code (``run_expt.py``: ``lambda_up`` copies of each error-set sample
    appended to the training set, ``ConcatDataset``, shuffled loader), every epoch is a fresh
    order of the duplicated set, ``N + lambda_up |E|`` samples without replacement
    (``debias_bench.training.sampling`` ``Weighted(replacement=False)``), and the loss is the
    plain mean CE of the batch. ``lambda_up`` must then be a whole number, as the official
    ``--up_weight`` (an int). The run's length in epochs counts epochs of the duplicated set,
    so the same ``epochs`` makes more steps than a uniform run (at 1 % Colored MNIST with
    ``lambda_up`` 100, about twice as many).

Loss weighting (``sampling: loss_weights``, a declared option labelled in every table)
    Uniform batches of the training set; a batch's loss is the weighted mean
    ``sum(w_i CE_i) / sum(w_i)`` with ``w_i = 1 + lambda_up [i in E]``
    (:class:`~.state.SampleWeights`), an epoch N samples. On the whole training set it equals
    the mean CE of the upsampled set; per batch it does not: the expected share of the
    error-set samples in a batch's loss is 0.453 instead of 0.505 (error set 1 %, lambda_up
    100, batch 256) and 0.314 instead of 0.505 at batch 64, where 53 % of the batches hold no
    error-set sample (``docs/methods-sampling.md`` computes these).

Measured (real Colored MNIST 1 %, ``--preset quick --epochs 10 --protocol clean``, seeds 0-2,
one thread; test accuracy %, selection ``last``, mean ± std; ``docs/methods-sampling.md``)
    ============================  ============  ============  ============  =================
    sampling                      average       worst-group   aligned       bias-conflicting
    ============================  ============  ============  ============  =================
    duplicated (default)          69.99 ± 2.44  12.54 ± 8.24  99.63 ± 0.06  66.70 ± 2.72
    ``loss_weights``              79.51 ± 0.20  38.76 ± 6.12  99.13 ± 0.12  77.33 ± 0.22
    ============================  ============  ============  ============  =================

    Duplication at lambda_up 100 shows each error-set sample (445, 436, 552 of them) 101 times an
    epoch: the model fits them (bias-conflicting training accuracy 99.5 %, test 66.7 %). ``T``
    and ``lambda_up`` were chosen under the loss weighting (``jtt.yaml``), not again since.

Official behaviour kept
    * Error set = misclassified training samples (``wrong_1_times``), weight ``1 + lambda_up``
      (the code appends ``lambda_up`` copies; the paper's objective writes the error-set
      weight as ``lambda_up``, a difference of one copy).
    * The final model starts from a fresh initialisation; its recipe is the run's own.

Departures
    * The official error set is read from the *training pass* of epoch ``T`` (0-based, so during
      the ``T + 1``-th epoch, in train mode, each batch scored just before its update, through
      the training augmentation). Here the model after ``T`` epochs scores every sample in eval
      mode without augmentation: one fixed model and a deterministic set.
    * The identification model trains ``min(id_epochs epochs, total steps of the run)`` steps:
      the cap only binds for runs shorter than stage 1 (the smoke preset's 20 steps).
    * Stage 1 draws its batches from a stream of its own (``jtt.identification``).
    * A schedule in epochs (``lr_step_epochs``) counts epochs of N samples (the method's
      optimiser is built before the error set exists); no ``jtt.yaml`` recipe has one.
    * Official runs use SGD with momentum 0.9 on pretrained ResNet-50 / BERT (Waterbirds,
      CelebA, MultiNLI, CivilComments), with ``T`` and ``lambda_up`` tuned per dataset on
      validation worst-group accuracy. None of the datasets here has an official setting:
      ``jtt.yaml`` follows each dataset's common recipe (as ``vanilla.yaml``), with ``T`` and
      ``lambda_up`` chosen on the Colored MNIST validation split (see the YAML).

Host synchronisations
    the identification stage (its ERM model, then the error set) runs once in ``prepare``,
    before training, and may read values on the host; the steps after it are Vanilla's
    (resampled or weighted on the device) and make none (``bench perf --host-syncs``: 0).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F

from debias_bench.config.sampling import RESAMPLE
from debias_bench.data.contract import Batch, Splits, TrainStream
from debias_bench.data.spec import DatasetSpec
from debias_bench.errors import ConfigError
from debias_bench.streams import stream_seed
from debias_bench.training.method import TrainEnv
from debias_bench.training.metrics import predict_labels
from debias_bench.training.sampling import UNIFORM, Sampler, Weighted

from .biased import stage_steps, train_model
from .common import make_classifier
from .declared.jtt import JTTParams
from .state import SampleMask, SampleWeights
from .vanilla import Vanilla


def upsampling_weights(error_set: torch.Tensor, upweight: float) -> torch.Tensor:
    """JTT's per-sample multiplicity: ``1 + upweight`` on the error set, 1 elsewhere."""
    return 1.0 + float(upweight) * error_set.float()


class JTT(Vanilla):
    host_sync_note = "identification stage (ERM, error set): once, before training"
    Params = JTTParams
    hp: JTTParams

    def __init__(self, spec: DatasetSpec, hp: Mapping[str, Any], env: TrainEnv) -> None:
        super().__init__(spec, hp, env)  # Vanilla: the model, its optimiser and schedule
        if self.hp.sampling == RESAMPLE and not float(self.hp.upweight).is_integer():
            raise ConfigError(
                f"jtt: upweight={self.hp.upweight} with sampling=resample: the duplicated set "
                "needs a whole number of copies (the official --up_weight is an int)",
                hint="use a whole upweight, or --set sampling=loss_weights",
            )
        self.error_set = SampleMask(env.train_size, self.device)
        self.upsampled = Weighted(env.train_size, replacement=False)  # sampling: resample
        self.weights = SampleWeights(env.train_size, self.device)  # sampling: loss_weights

    def batch_sampler(self) -> Sampler:
        return self.upsampled if self.hp.sampling == RESAMPLE else UNIFORM

    def identification_steps(self) -> int:
        env = self.env
        return stage_steps(self.hp.id_epochs, env.steps_per_epoch, env.total_steps)

    def prepare(self, data: Splits) -> None:
        model = make_classifier(self.spec, self.hp, self.device)
        optimizer = self.optimizer_for(model)
        scheduler = self.scheduler_for(optimizer)
        stream = TrainStream(
            data.train, self.spec, self.hp.batch_size,
            stream_seed(self.env.seed, "jtt.identification"), self.device,
        )  # fmt: skip
        train_model(model, optimizer, stream.batches(), self.identification_steps(),
                    F.cross_entropy, scheduler)  # fmt: skip
        model.eval()
        with torch.no_grad():
            preds = predict_labels(
                model, data.train, self.spec, self.hp.eval_batch_size, self.device
            )
        errors = preds != data.train.labels
        self.error_set.set(errors.to(self.device))
        multiplicity = upsampling_weights(errors, self.hp.upweight)
        if self.hp.sampling == RESAMPLE:
            self.upsampled.set(multiplicity)
        else:
            self.weights.set(multiplicity.to(self.device))

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        ce = F.cross_entropy(self.model(batch.x), batch.y, reduction="none")
        if self.hp.sampling == RESAMPLE:
            loss = ce.mean()  # the batch was drawn from the duplicated set
        else:
            loss = self.weights.weighted_mean(batch.index, ce)
        self.step(loss, (self.optimizer, self.scheduler))
        return {
            "loss": loss.detach(),
            "ce": ce.mean().detach(),
            "error_set": self.error_set[batch.index].float().mean(),
        }
