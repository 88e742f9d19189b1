"""PGD, Per-sample Gradient-based Debiasing (Ahn et al., ICLR 2023; ``sumyeongahn/PGD``,
``trainer/learner.py`` ``train_ours``, read at f23b75c: its child 0265520 has the same math but
a ``SyntaxError`` at ``learner.py:342``).

Algorithm
    Stage 1 (``prepare``, timed by the engine as part of the run): a biased model, a fresh
    copy of the main architecture, is trained with GCE (q 0.7, LfF's form with the extra factor
    q: ``losses.generalized_ce``) on uniform batches for ``bias_epochs`` epochs (null: as long
    as the main run, as officially), with the run's optimiser and lr schedule.

    Stage 2 (scores): for every training sample, the gradient of the plain CE loss of the
    biased model (eval mode) with respect to the weight matrix of its final linear layer,
    ``G_i = (softmax(z_i) - onehot(y_i)) h_i^T`` (``h_i`` its penultimate features), and its
    entrywise p-norm ``||G_i||_p = (sum_jk |G_i,jk|^p)^(1/p)`` (``grad_norm`` p, any p > 0;
    for p < 1 not a norm, as the release's ``torch.norm(p=0.7)``). It factorises for every
    p, ``||a h^T||_p = ||a||_p ||h||_p`` (the double sum of ``|a_j|^p |h_k|^p`` is the product
    of the two sums), so the per-sample gradients are never materialised (tests check it
    against autograd and ``torch.norm`` of the flattened gradient, one sample at a time). The
    sampling probability of sample i is ``max(||G_i||_p^r, 1e-8) / sum_j max(||G_j||_p^r,
    1e-8)`` (``grad_power`` r, 1).

    Stage 3 (the run): the debiased model, initialised with the biased model's weights as the
    official code does (``init_from_biased``), is trained with plain CE on batches drawn with
    those probabilities (``sampling: resample``, the default): every sample of an epoch of N
    drawn independently, with replacement, as the release's loader does
    (``trainer/module/data.py``: ``idx_sample`` inverts the cumulative probabilities;
    ``debias_bench.training.sampling`` ``Weighted``). Bias labels are not used; prediction and
    features come from it.

Loss weighting (``sampling: loss_weights``, a declared option labelled in every table)
    Uniform batches; a batch's loss is the weighted mean ``sum(p_i CE_i) / sum(p_i)``
    (:class:`~.state.SampleWeights`). Over the whole set it is the loss under resampling; per
    batch it under-weights the rare high-probability samples: their expected share of a
    batch's loss is 0.235 instead of 0.334 for 0.5 % of the samples at 100 times the weight of
    the others, batch 128 (``docs/methods-sampling.md``). The unbiased ``mean(N p_i CE_i)``,
    where one bias-conflicting sample can weigh ~100 times a plain one, killed the network on
    Colored MNIST with the release's SGD lr 0.02 (chance accuracy).

Training augmentation (``train_augment: release``, an option; ``none`` under both protocols)
    The release's ``trainer/module/data.py`` (lines 7-21) defines transforms for Colored MNIST
    only, its one dataset: the training split goes through ``ToPILImage``,
    ``RandomResizedCrop(28, scale=(0.9, 1.1))``, ``ColorJitter(hue=0.05, saturation=0.05)``,
    ``RandomRotation((-10, 10), NEAREST)``, ``ToTensor`` (``__getitem__``, line 54), so every
    draw of both stages, and the scoring pass, is augmented (``learner.py`` reads
    ``train_loader`` in all three); valid and test are not. ``release`` applies the same
    transforms to every training batch of both stages, one draw per image from stream
    ``pgd.augment`` at (stage, step), re-implemented on tensors (``release_augment``; crop,
    hue, saturation and rotation checked against torchvision's functions); it keeps the
    scoring pass unaugmented (below) and is skipped on the other datasets, for which the
    release defines nothing. The default trains without it, under ``official`` too: that is
    what every stored PGD run trained, and their ids stay valid. Measured below: the
    augmentation raises the average and bias-conflicting accuracy by 5-7 points and lowers the
    aligned one by 10 and the worst group by 24 (its hue jitter moves the colours the shortcut
    reads); training took 5 times longer on one CPU thread (220-288 s against 43-48 s a run).

Measured (real Colored MNIST 1 %, ``--preset quick --epochs 10``, seeds 0-2, one thread; test
accuracy %, selection ``last``, mean ± std; ``docs/methods-sampling.md``; the augmentation rows
``--protocol official``, which trains PGD as ``clean`` does: the ``none`` runs there score the
first row to the digit)
    ============================  =============  =============  ============  ================
    sampling                      average        worst-group    aligned       bias-conflicting
    ============================  =============  =============  ============  ================
    resampled (default, p 0.7)    79.47 ± 0.79   34.00 ± 17.36  78.50 ± 3.40  79.58 ± 0.62
    ``loss_weights`` (p 0.7)      77.19 ± 1.59   27.92 ± 12.48  76.47 ± 5.70  77.27 ± 1.20
    resampled, ``release`` aug.   84.42 ± 0.96   10.28 ± 5.47   68.40 ± 4.94  86.20 ± 0.53
    ============================  =============  =============  ============  ================

Official behaviour kept
    * GCE q 0.7 for the biased model; gradient of plain CE for the scores; only the final layer's
      weight (``fc.weight`` hook; not its bias); the biased model in eval mode while scoring;
      scores clamped at 1e-8; probabilities proportional to the norms (the official
      ``1 / (1 / mag / sum)`` double inversion is the identity).
    * The debiased model starts from the biased model's final weights, with a fresh optimiser.
    * Both stages use the same optimiser settings and schedule.

Departures
    * Norm: the release's ``--norm_scale`` default, p = 0.7, is the default here; the paper's
      method and its ablation use L1 / L2 / L-inf norms (``--set grad_norm=2`` runs the
      paper's L2; L-inf, a limit, is not a value of p here). On the same model the scores of
      p = 0.7 and p = 2 differ by 31 % per sample (relative, in the audit of issue 38).
    * Training augmentation: none by default, where the release augments every training draw
      on Colored MNIST (above: ``train_augment: release`` runs it; measured effect there).
    * Scoring transform: here samples are scored unaugmented, also under ``train_augment:
      release`` (the official loop scores through the training loader, one augmented draw per
      sample); a deterministic score, as for LfF+BE's committee.
    * The biased model trains for exactly the main run's length by default (officially
      ``--epochs`` for both stages) and draws its batches from a stream of its own
      (``pgd.biased``).
    * The official code keeps the debiased model with the lowest validation loss; the engine
      records ``last``, ``best_valid`` and ``best_test`` side by side.
    * Architecture: the release trains a 3-layer CNN on its own Colored MNIST; here every
      method uses the dataset's backbone (MLP 100-100-100 on Colored MNIST).
    * Recipe: the release's Colored MNIST optimisation (``pre_conf.reproduce``: SGD lr 0.02,
      momentum 0.9, wd 1e-3, batch 128, lr x0.1 every 40 epochs) did not train under the loss
      weighting (validation accuracy 33.7 against 79.6 for the common Adam recipe, quick
      preset, 10 epochs, ``clean``, L2 norm): ``pgd.yaml`` uses the common recipe and keeps the
      release's values in a comment. That choice was made before resampling existed.

Host synchronisations
    the biased model and the per-sample gradient-norm scoring run once in ``prepare``,
    before training, and may read values on the host; the step's loss weights are indexed on
    the device, and resampled epochs are drawn on the host from scores kept there: no step
    waits for the device (``bench perf --host-syncs``: 0).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import torch
import torch.nn.functional as F

from debias_bench.config.sampling import RESAMPLE
from debias_bench.data.contract import Batch, Split, Splits, TrainStream, eval_batches
from debias_bench.data.spec import DatasetSpec
from debias_bench.streams import generator, stream_seed
from debias_bench.training.method import TrainEnv
from debias_bench.training.sampling import UNIFORM, Sampler, Weighted

from .biased import stage_steps, train_model
from .common import Classifier, make_classifier
from .declared.pgd import NO_AUGMENT, RELEASE_AUGMENT, PGDParams
from .losses import generalized_ce
from .state import SampleWeights, StepCounter
from .vanilla import Vanilla

#: the release's ``--norm_scale`` default (``trainer/train.py``)
RELEASE_NORM = 0.7


def last_layer_grad_norms(
    logits: torch.Tensor, features: torch.Tensor, y: torch.Tensor, p: float = RELEASE_NORM
) -> torch.Tensor:
    """Per-sample entrywise p-norm ``||d CE(logits_i, y_i) / d W||_p`` (any p > 0) for a
    linear layer ``logits = W h + c``: the gradient is the outer product
    ``(softmax(logits_i) - onehot(y_i)) h_i^T``, whose p-norm is ``||p_i - e_i||_p ||h_i||_p``."""
    if not p > 0:
        raise ValueError(f"the norm's p must be > 0, got {p}")
    residual = torch.softmax(logits.float(), dim=1) - F.one_hot(y, logits.shape[1])
    return _p_norm(residual, p) * _p_norm(features.float(), p)


def _p_norm(rows: torch.Tensor, p: float) -> torch.Tensor:
    """``(sum_k |x_k|^p)^(1/p)`` of every row, for any p > 0 (float64 inside: p < 1 raises
    small entries to large powers of their inverse)."""
    return torch.linalg.vector_norm(rows.double(), ord=float(p), dim=1).to(rows.dtype)


def sampling_scores(norms: torch.Tensor, power: float = 1.0) -> torch.Tensor:
    """Unnormalised sampling weights ``max(norm^r, 1e-8)`` (probabilities: divide by the sum)."""
    return norms.pow(power).clamp(min=1e-8)


@torch.no_grad()
def gradient_norms(
    model: Classifier,
    split: Split,
    spec: DatasetSpec,
    batch_size: int,
    device: torch.device,
    p: float = RELEASE_NORM,
) -> torch.Tensor:
    """Final-layer gradient norm of every sample of ``split`` (in split order, on the CPU),
    ``model`` in eval mode, samples unaugmented."""
    model.eval()
    out = []
    for batch in eval_batches(split, spec, batch_size, device):
        h = model.features(batch.x)
        out.append(last_layer_grad_norms(model.head(h), h, batch.y, p).cpu())
    return torch.cat(out) if out else torch.empty(0)


# ---------------------------------------------------------------- the release's augmentation
#: where the release defines its training transforms (``trainer/module/data.py``: Colored MNIST)
AUGMENTED_DATASETS = ("cmnist",)
#: ``RandomResizedCrop(28, scale=(0.9, 1.1))`` with torchvision's default aspect-ratio range
CROP_SCALE, CROP_RATIO, CROP_TRIES = (0.9, 1.1), (3 / 4, 4 / 3), 10
#: ``ColorJitter(hue=0.05, saturation=0.05)``, ``RandomRotation((-10, 10))``
JITTER_HUE, JITTER_SATURATION, ROTATION_DEGREES = 0.05, 0.05, 10.0


def _uniform(n: int, low: float, high: float, draws: torch.Generator) -> torch.Tensor:
    return torch.empty(n).uniform_(low, high, generator=draws)


def crop_boxes(n: int, h: int, w: int, draws: torch.Generator) -> torch.Tensor:
    """``n`` random resized-crop boxes ``(top, left, height, width)``, float, as torchvision's
    ``RandomResizedCrop.get_params`` draws them: up to 10 tries of an area ``scale x h w`` and a
    log-uniform aspect ratio, the first box that fits in the image kept (a scale above 1 fits
    only as a box no larger than the image), the whole image when none fits (its fallback for a
    square image, whose aspect 1 lies in the ratio range); then a uniform integer offset."""
    scale = torch.empty(n, CROP_TRIES).uniform_(*CROP_SCALE, generator=draws)
    log_ratio = torch.empty(n, CROP_TRIES).uniform_(
        math.log(CROP_RATIO[0]), math.log(CROP_RATIO[1]), generator=draws
    )
    area, aspect = h * w * scale, log_ratio.exp()
    widths = torch.sqrt(area * aspect).round()
    heights = torch.sqrt(area / aspect).round()
    fits = (widths > 0) & (widths <= w) & (heights > 0) & (heights <= h)
    first = fits.to(torch.uint8).argmax(dim=1, keepdim=True)  # the first try that fits
    found = fits.any(dim=1)
    width = torch.where(found, widths.gather(1, first).squeeze(1), torch.tensor(float(w)))
    height = torch.where(found, heights.gather(1, first).squeeze(1), torch.tensor(float(h)))
    top = (torch.rand(n, generator=draws) * (h - height + 1)).floor()
    left = (torch.rand(n, generator=draws) * (w - width + 1)).floor()
    return torch.stack([top, left, height, width], dim=1)


def resized_crop(x: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
    """Each image's box resized back to the image's size, bilinearly (``grid_sample`` at the
    output's pixel centres, read inside the box only, its edge pixels repeated: what resizing
    the cropped image does; no antialiasing, which an enlarging crop does not need)."""
    n, _, h, w = x.shape
    top, left, height, width = boxes.to(x.device, x.dtype).unbind(1)
    theta = torch.zeros(n, 2, 3, device=x.device, dtype=x.dtype)
    theta[:, 0, 0], theta[:, 0, 2] = width / w, (2 * left + width) / w - 1
    theta[:, 1, 1], theta[:, 1, 2] = height / h, (2 * top + height) / h - 1
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    # the centres of the box's first and last pixels, in grid coordinates
    low = torch.stack([(2 * left + 1) / w - 1, (2 * top + 1) / h - 1], dim=1)
    high = torch.stack([(2 * (left + width) - 1) / w - 1, (2 * (top + height) - 1) / h - 1], 1)
    grid = torch.maximum(torch.minimum(grid, high.view(n, 1, 1, 2)), low.view(n, 1, 1, 2))
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)


def rgb_to_hsv(x: torch.Tensor) -> torch.Tensor:
    """``N x 3 x H x W`` RGB in [0, 1] to HSV, each in [0, 1] (hue 0 where the pixel is grey)."""
    r, g, b = x.unbind(1)
    high, low = x.amax(dim=1), x.amin(dim=1)
    delta = high - low
    safe = torch.where(delta > 0, delta, torch.ones_like(delta))
    hue = torch.where(
        high == r,
        ((g - b) / safe) % 6,
        torch.where(high == g, (b - r) / safe + 2, (r - g) / safe + 4),
    )
    hue = torch.where(delta > 0, hue / 6, torch.zeros_like(hue))
    sat = torch.where(high > 0, delta / torch.where(high > 0, high, torch.ones_like(high)), high)
    return torch.stack([hue, sat, high], dim=1)


def hsv_to_rgb(x: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`rgb_to_hsv`: channel ``c`` is ``v - v s clamp(min(k, 4 - k), 0, 1)``
    with ``k = (n_c + 6 h) mod 6``, ``n = 5, 3, 1`` for R, G, B."""
    hue, sat, value = x[:, 0:1], x[:, 1:2], x[:, 2:3]
    n = torch.tensor([5.0, 3.0, 1.0], device=x.device, dtype=x.dtype).view(1, 3, 1, 1)
    k = (n + 6 * hue) % 6
    return value - value * sat * torch.minimum(k, 4 - k).clamp(0, 1)


def shift_hue(x: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    hsv = rgb_to_hsv(x)
    hue = (hsv[:, :1] + shift.view(-1, 1, 1, 1)) % 1.0
    return hsv_to_rgb(torch.cat([hue, hsv[:, 1:]], dim=1))


def scale_saturation(x: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """Blend with the image's grey (ITU-R 601 luma), ``factor`` 1 the image itself."""
    luma = torch.tensor([0.299, 0.587, 0.114], device=x.device, dtype=x.dtype).view(1, 3, 1, 1)
    grey = (x * luma).sum(dim=1, keepdim=True)
    f = factor.view(-1, 1, 1, 1)
    return (f * x + (1 - f) * grey).clamp(0, 1)


def rotate_nearest(x: torch.Tensor, degrees: torch.Tensor) -> torch.Tensor:
    """Each image rotated by its angle about its centre, nearest neighbour, black outside."""
    n, _, h, w = x.shape
    angle = torch.deg2rad(degrees.to(x.device, x.dtype))
    cos, sin = angle.cos(), angle.sin()
    theta = torch.zeros(n, 2, 3, device=x.device, dtype=x.dtype)
    theta[:, 0, 0], theta[:, 0, 1] = cos, -sin * h / w
    theta[:, 1, 0], theta[:, 1, 1] = sin * w / h, cos
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    return F.grid_sample(x, grid, mode="nearest", padding_mode="zeros", align_corners=False)


def release_augment(x: torch.Tensor, draws: torch.Generator) -> torch.Tensor:
    """The PGD release's Colored MNIST training transforms on a batch ``N x 3 x H x W`` in
    [0, 1], one draw per image from ``draws`` (on the CPU): a random resized crop (scale 0.9-1.1,
    bilinear), a colour jitter (saturation x U(0.95, 1.05) and hue + U(-0.05, 0.05), in a random
    order per image, as torchvision's ``ColorJitter``) and a rotation by U(-10, 10) degrees
    (nearest, black corners). Re-implemented on tensors from torchvision's documented behaviour,
    not PIL's: no rounding to uint8 between the steps, bilinear sampling without PIL's filter."""
    n, _, h, w = x.shape
    boxes = crop_boxes(n, h, w, draws)
    saturation = _uniform(n, 1 - JITTER_SATURATION, 1 + JITTER_SATURATION, draws)
    hue = _uniform(n, -JITTER_HUE, JITTER_HUE, draws)
    hue_first = torch.rand(n, generator=draws) < 0.5
    degrees = _uniform(n, -ROTATION_DEGREES, ROTATION_DEGREES, draws)
    saturation, hue = saturation.to(x.device, x.dtype), hue.to(x.device, x.dtype)
    out = resized_crop(x, boxes)
    one = shift_hue(scale_saturation(out, saturation), hue)  # saturation first
    other = scale_saturation(shift_hue(out, hue), saturation)  # hue first
    out = torch.where(hue_first.to(x.device).view(-1, 1, 1, 1), other, one)
    return rotate_nearest(out, degrees)


class PGD(Vanilla):
    host_sync_note = "biased model and gradient-norm scoring: once, before training"
    Params = PGDParams
    hp: PGDParams

    @classmethod
    def skip(cls, spec: DatasetSpec, hp: Mapping[str, Any]) -> str | None:
        if hp.get("train_augment", NO_AUGMENT) == RELEASE_AUGMENT and (
            spec.name not in AUGMENTED_DATASETS
        ):
            return (
                "train_augment=release is the PGD release's Colored MNIST augmentation; the "
                f"release defines none for {spec.name}"
            )
        return None

    def __init__(self, spec: DatasetSpec, hp: Mapping[str, Any], env: TrainEnv) -> None:
        super().__init__(spec, hp, env)  # Vanilla: the model, its optimiser and schedule
        self.resampling = Weighted(env.train_size, replacement=True)  # sampling: resample
        self.weights = SampleWeights(env.train_size, self.device)  # sampling: loss_weights
        if self.augmenting:  # only then: a default run's checkpoint keeps its keys
            self.augmented_steps = StepCounter()

    @property
    def augmenting(self) -> bool:
        return self.hp.train_augment == RELEASE_AUGMENT

    def augmented(self, batch: Batch, stage: int, step: int) -> Batch:
        """``batch`` through the release's transforms (stage 0: the biased model, 1: the
        debiased one), drawn from stream ``pgd.augment`` at ``(stage, step)``: a resumed run
        draws what an uninterrupted one would."""
        draws = generator(self.env.seed, "pgd.augment", stage, step)
        return batch._replace(x=release_augment(batch.x, draws))

    def batch_sampler(self) -> Sampler:
        return self.resampling if self.hp.sampling == RESAMPLE else UNIFORM

    def biased_steps(self) -> int:
        epochs = self.hp.bias_epochs
        if epochs is None:
            return self.env.total_steps
        return stage_steps(epochs, self.env.steps_per_epoch)

    def prepare(self, data: Splits) -> None:
        biased = make_classifier(self.spec, self.hp, self.device)
        optimizer = self.optimizer_for(biased)
        scheduler = self.scheduler_for(optimizer)
        stream = TrainStream(
            data.train, self.spec, self.hp.batch_size,
            stream_seed(self.env.seed, "pgd.biased"), self.device,
        )  # fmt: skip
        batches: Iterator[Batch] = stream.batches()
        if self.augmenting:
            batches = (self.augmented(b, 0, k) for k, b in enumerate(batches))
        q = self.hp.q
        train_model(biased, optimizer, batches, self.biased_steps(),
                    lambda logits, y: generalized_ce(logits, y, q).mean(), scheduler)  # fmt: skip
        norms = gradient_norms(
            biased, data.train, self.spec, self.hp.eval_batch_size, self.device, self.hp.grad_norm
        )
        scores = sampling_scores(norms, float(self.hp.grad_power))
        if self.hp.sampling == RESAMPLE:
            self.resampling.set(scores)
        else:
            self.weights.set(scores.to(self.device))
        if self.hp.init_from_biased:
            self.model.load_state_dict(biased.state_dict())

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        if self.augmenting:
            batch = self.augmented(batch, 1, self.augmented_steps.value)
            self.augmented_steps.increment()
        ce = F.cross_entropy(self.model(batch.x), batch.y, reduction="none")
        if self.hp.sampling == RESAMPLE:
            loss = ce.mean()  # the batch was drawn with the probabilities
            return self._stepped(loss, ce)
        loss = self.weights.weighted_mean(batch.index, ce)
        scalars = self._stepped(loss, ce)
        scalars["weight_max"] = self.weights[batch.index].max()
        return scalars

    def _stepped(self, loss: torch.Tensor, ce: torch.Tensor) -> dict[str, torch.Tensor]:
        self.step(loss, (self.optimizer, self.scheduler))
        return {"loss": loss.detach(), "ce": ce.mean().detach()}
