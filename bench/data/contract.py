"""The dataset contract's torch side: in-memory splits of uint8 images and a batch pipeline.

What a dataset is (``DatasetSpec``) and the checks of its labels are in the torch-free
``debias_bench.data.spec``; reading a prepared split into a ``Split`` is
``debias_bench.data.split_loading``.

Images are stored as uint8 arrays ``N x H x W x C`` (the LfF npy layout), either torch tensors
in memory or NumPy memory maps for the large sets. Batches are built on tensors: a per-epoch
permutation drawn from ``(seed, epoch)``, indexing, conversion to float, normalisation and
augmentation (random crop with padding, horizontal flip) applied to the whole batch at once,
with no per-sample Python. Because the order depends only on ``(seed, epoch)`` (and, for a
method that draws its batches otherwise, on its sampler's checkpointed state: see
``debias_bench.training.sampling``), a resumed run sees exactly the batches an uninterrupted one
would have seen. Every draw comes from a named stream (``debias_bench.streams``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

import numpy as np
import torch
import torch.nn.functional as F

# ``DatasetSpec`` lives in the torch-free ``debias_bench.data.spec`` (a dataset registers
# without torch); the name stays here too for the flat layout's ``debias_bench.data.DatasetSpec``
# (``debias_bench.data.__getattr__`` reads this module), which plugins may still import
from debias_bench.data.spec import DatasetSpec as DatasetSpec
from debias_bench.streams import generator

ArrayLike = torch.Tensor | np.ndarray


@dataclass
class Split:
    """One split held as uint8 images with integer labels and bias labels.

    By the convention of every dataset here, a sample is bias-aligned iff ``bias == label``.
    """

    images: ArrayLike  # uint8, N x H x W x C
    labels: torch.Tensor  # int64, N
    biases: torch.Tensor  # int64, N
    name: str = ""
    indices: torch.Tensor = field(default=None)  # type: ignore[assignment]  # int64 ids, default arange

    def __post_init__(self) -> None:
        n = len(self.labels)
        if len(self.images) != n or len(self.biases) != n:
            raise ValueError(
                f"split {self.name!r}: {len(self.images)} images, {n} labels, "
                f"{len(self.biases)} bias labels; they must match"
            )
        if self.indices is None:
            self.indices = torch.arange(n)

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def aligned(self) -> torch.Tensor:
        return self.labels == self.biases

    def subset(self, rows: torch.Tensor | np.ndarray) -> Split:
        rows_t = torch.as_tensor(rows, dtype=torch.long)
        return Split(
            images=take(self.images, rows_t),
            labels=self.labels[rows_t],
            biases=self.biases[rows_t],
            name=self.name,
            indices=self.indices[rows_t],
        )

    def counts(self, num_classes: int, num_biases: int) -> torch.Tensor:
        """Matrix of sample counts per (class, bias)."""
        flat = self.labels * num_biases + self.biases
        return torch.bincount(flat, minlength=num_classes * num_biases).view(
            num_classes, num_biases
        )


@dataclass
class Splits:
    train: Split
    valid: Split
    test: Split

    def __iter__(self) -> Iterator[Split]:
        return iter((self.train, self.valid, self.test))


class Batch(NamedTuple):
    # position of each sample in the training split (for per-sample state); the name shadows
    # tuple.index, which nothing here uses
    index: torch.Tensor  # type: ignore[assignment]
    x: torch.Tensor
    y: torch.Tensor
    b: torch.Tensor


def take(images: ArrayLike, rows: torch.Tensor) -> torch.Tensor:
    """Gather rows of an in-memory tensor or a (memory-mapped) NumPy array as a tensor."""
    if isinstance(images, torch.Tensor):
        return images[rows]
    rows_np = rows.numpy()
    order = np.argsort(rows_np, kind="stable")  # sorted reads are much faster on a memmap
    gathered = np.asarray(images[rows_np[order]])
    out = np.empty_like(gathered)
    out[order] = gathered
    return torch.from_numpy(out)


def take_range(images: ArrayLike, start: int, stop: int) -> torch.Tensor:
    """Rows ``start..stop-1`` as a tensor of their own, as :func:`take` gives them: a slice
    read in one piece (evaluation's sequential batches need no gather)."""
    if isinstance(images, torch.Tensor):
        return images[start:stop].clone()
    return torch.from_numpy(np.array(images[start:stop]))


def to_float(images: torch.Tensor, spec: DatasetSpec) -> torch.Tensor:
    """uint8 ``N x H x W x C`` -> float ``N x C x H x W`` in [0, 1], then normalised."""
    return _normalise(images.permute(0, 3, 1, 2), spec)


@functools.cache
def _moments(
    mean: tuple[float, ...], std: tuple[float, ...], device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Normalisation constants on ``device``, made once (not a host-to-device copy a batch)."""
    return (
        torch.tensor(mean, device=device).view(1, -1, 1, 1),
        torch.tensor(std, device=device).view(1, -1, 1, 1),
    )


def _normalise(planes: torch.Tensor, spec: DatasetSpec) -> torch.Tensor:
    """uint8 ``N x C x H x W`` -> float in [0, 1], normalised in place (no temporaries)."""
    x = planes.float().div_(255.0)
    if spec.mean is not None and spec.std is not None:
        mean, std = _moments(tuple(spec.mean), tuple(spec.std), x.device)
        x = x.sub_(mean).div_(std)
    return x


def random_crop_flip(
    x: torch.Tensor, padding: int, flip: bool, generator: torch.Generator
) -> torch.Tensor:
    """Batch-wise RandomCrop(size, padding) + RandomHorizontalFlip on ``N x C x H x W``, each
    sample its own draw (see ``crop_flip_nhwc``, which does the work)."""
    out = crop_flip_nhwc(x.permute(0, 2, 3, 1), padding, flip, generator)
    return out.permute(0, 3, 1, 2)


def crop_flip_nhwc(
    images: torch.Tensor, padding: int, flip: bool, generator: torch.Generator
) -> torch.Tensor:
    """RandomCrop(padding) + horizontal flip on ``N x H x W x C`` (the stored layout).

    The draws come from a CPU generator (so they do not depend on the device); the crop is
    one indexing op over row runs (no per-sample Python), on whatever device and dtype the
    images have. Applied to uint8 images, the padding is black, as torchvision's RandomCrop on
    a PIL image."""
    n, h, w, c = images.shape
    x = images
    if padding:
        padded = F.pad(images, (0, 0, padding, padding, padding, padding))
        # non_blocking: a blocking copy to a GPU waits for its stream (a host sync a batch)
        oy = torch.randint(0, 2 * padding + 1, (n,), generator=generator)
        oy = oy.to(images.device, non_blocking=True)
        ox = torch.randint(0, 2 * padding + 1, (n,), generator=generator)
        ox = ox.to(images.device, non_blocking=True)
        # every image row is a contiguous run of w*c values: view the padded rows as runs at
        # each horizontal offset, then pick (sample, row oy+i, offset ox) for all at once
        runs = padded.reshape(n, h + 2 * padding, -1).unfold(2, w * c, c)
        rows = oy[:, None] + torch.arange(h, device=images.device)
        x = runs[torch.arange(n, device=images.device)[:, None], rows, ox[:, None]]
        x = x.view(n, h, w, c)
    if flip:
        mirrored = (torch.rand(n, generator=generator) < 0.5).to(images.device, non_blocking=True)
        # a select, not a boolean-mask assignment (whose nonzero waits for the device); a new
        # tensor, never the caller's
        x = torch.where(mirrored.view(n, 1, 1, 1), x.flip(2), x)
    return x


def resize_split(split: Split, side: int, chunk: int = 256) -> Split:
    """The split with every image resized to ``side x side`` (antialiased bilinear, uint8 in
    and out), read chunk by chunk so a memory-mapped split is never decoded whole as floats."""
    parts = []
    for start in range(0, len(split), chunk):
        rows = torch.arange(start, min(start + chunk, len(split)))
        planes = take(split.images, rows).permute(0, 3, 1, 2).float()
        small = F.interpolate(planes, size=(side, side), mode="bilinear", antialias=True)
        parts.append(small.round_().clamp_(0, 255).to(torch.uint8).permute(0, 2, 3, 1))
    images = torch.cat(parts) if parts else torch.empty(0, side, side, split.images.shape[3])
    return Split(images.contiguous(), split.labels, split.biases, split.name, split.indices)


def resized_spec(spec: DatasetSpec, side: int) -> DatasetSpec:
    """``spec`` at ``side x side``, the crop padding scaled with it (at least 1 px)."""
    padding = spec.crop_padding
    if padding:
        padding = max(1, round(padding * side / spec.image_size[0]))
    return dataclasses.replace(spec, image_size=(side, side), crop_padding=padding)


def epoch_generator(seed: int, epoch: int) -> torch.Generator:
    """The RNG of one epoch's uniform order: stream ``batch_order`` at ``epoch``."""
    return generator(seed, "batch_order", epoch)


def uniform_order(size: int, seed: int, epoch: int) -> torch.Tensor:
    """One epoch's rows in the uniform order: a permutation of ``0 .. size - 1`` drawn from
    ``(seed, epoch)`` (on the CPU)."""
    return torch.randperm(size, generator=epoch_generator(seed, epoch))


class EpochOrder(Protocol):
    """How a :class:`TrainStream` orders the rows of one epoch, when not uniformly: the
    samplers of ``debias_bench.training.sampling`` (group-balanced, weighted) implement it."""

    def epoch_size(self, split: Split) -> int:
        """How many rows one epoch of ``split`` draws."""
        ...

    def epoch_rows(self, split: Split, seed: int, epoch: int) -> torch.Tensor:
        """The rows (positions in ``split``) of epoch ``epoch``, in order, on the CPU: a pure
        function of the sampler's state, ``seed`` and ``epoch``."""
        ...


class TrainStream:
    """Infinite, resumable stream of shuffled training batches.

    Rows come in the uniform order (every row once per epoch, :func:`uniform_order`) unless a
    ``sampler`` orders the epochs (its epoch may be longer than the split and repeat rows).

    On a GPU, a split held in memory (the 28/32-px sets) is copied to the device once, so a
    batch is a gather on the device with no host-to-device copy; memory-mapped splits stay on
    the host and only their batches travel."""

    def __init__(
        self,
        split: Split,
        spec: DatasetSpec,
        batch_size: int,
        seed: int,
        device: torch.device,
        sampler: EpochOrder | None = None,
    ) -> None:
        if device.type != "cpu" and isinstance(split.images, torch.Tensor):
            split = dataclasses.replace(
                split,
                images=split.images.to(device),
                labels=split.labels.to(device),
                biases=split.biases.to(device),
            )
        self.split, self.spec, self.batch_size = split, spec, batch_size
        self.seed, self.device, self.sampler = seed, device, sampler

    @property
    def steps_per_epoch(self) -> int:
        """Batches per epoch (a sampler whose epoch size is set while preparing, JTT's, gives
        its final count only from then on)."""
        size = len(self.split) if self.sampler is None else self.sampler.epoch_size(self.split)
        return math.ceil(size / self.batch_size)

    def epoch_rows(self, epoch: int) -> torch.Tensor:
        """The rows of epoch ``epoch`` in order (on the CPU)."""
        if self.sampler is None:
            return uniform_order(len(self.split), self.seed, epoch)
        return self.sampler.epoch_rows(self.split, self.seed, epoch)

    def batches(self, start_step: int = 0) -> Iterator[Batch]:
        """Yield batches from global step ``start_step`` on (0-based)."""
        steps_per_epoch = self.steps_per_epoch
        epoch, offset = divmod(start_step, steps_per_epoch)
        while True:
            # drawn on the CPU (the same order on any device), moved where the split lives
            # once per epoch, not once per batch
            order = self.epoch_rows(epoch).to(self.split.labels.device, non_blocking=True)
            for k in range(offset, steps_per_epoch):
                rows = order[k * self.batch_size : (k + 1) * self.batch_size]
                # Augmentation draws are keyed by step so that skipping batches on resume
                # does not shift them.
                aug = generator(self.seed, "augmentation", epoch * steps_per_epoch + k)
                yield self._batch(rows, aug)
            epoch, offset = epoch + 1, 0

    def _batch(self, rows: torch.Tensor, aug: torch.Generator) -> Batch:
        # uint8 goes to the device (4x fewer bytes than float); crop and flip run there on
        # uint8 (black padding, as the official PIL pipelines), then conversion + normalisation
        images = take(self.split.images, rows).to(self.device, non_blocking=True)
        if self.spec.crop_padding or self.spec.hflip:
            images = crop_flip_nhwc(images, self.spec.crop_padding, self.spec.hflip, aug)
        x = to_float(images, self.spec)
        return Batch(
            index=rows.to(self.device),
            x=x,
            y=self.split.labels[rows].to(self.device),
            b=self.split.biases[rows].to(self.device),
        )


def eval_batches(
    split: Split, spec: DatasetSpec, batch_size: int, device: torch.device
) -> Iterator[Batch]:
    """Sequential, unaugmented batches for evaluation."""
    for start in range(0, len(split), batch_size):
        stop = min(start + batch_size, len(split))
        rows = torch.arange(start, stop)
        yield Batch(
            index=rows.to(device),
            x=to_float(take_range(split.images, start, stop).to(device), spec),
            y=split.labels[rows].to(device),
            b=split.biases[rows].to(device),
        )
