"""``bench data bench``: samples/s of our batch path against the official repos' per-file path.

Ours: ``TrainStream`` over the prepared uint8 split (in memory, or memory-mapped for the
224-px sets): gather rows, convert, normalise, random crop + flip on the whole batch.
Theirs (LfF / DisEnt / BiasEnsemble): one image file per sample, opened with PIL in a
``Dataset.__getitem__``, torchvision transforms per sample (Resize for the 224-px sets,
RandomCrop with padding, flip, ToTensor, Normalize), batched by a ``DataLoader`` with workers.

The per-file baseline reads files written from the same prepared images (PNG for <= 64 px,
as the DisEnt/BE releases; JPEG quality 95 above), so it decodes images already at the final
size: real releases store larger JPEGs (BAR up to several megapixels), so the true gap is
larger than the one measured. Both paths run in the same process, one after the other.

It lives with the other speed measurements, not in ``debias_bench.datasets`` (whose every
module is imported to register the dataset families, without torch).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from debias_bench.data.contract import Split, TrainStream, take
from debias_bench.data.family import DatasetFamily
from debias_bench.data.spec import DatasetSpec


class PerFileDataset(Dataset):
    """The official loaders' way: a file per sample, PIL + per-sample transforms."""

    def __init__(self, files: list[Path], labels: list[int], spec: DatasetSpec) -> None:
        from torchvision import transforms as T

        self.files, self.labels = files, labels
        steps = []
        if spec.image_size[0] > 64:
            steps.append(T.Resize(spec.image_size))
        if spec.crop_padding:
            steps.append(T.RandomCrop(spec.image_size, padding=spec.crop_padding))
        if spec.hflip:
            steps.append(T.RandomHorizontalFlip())
        steps.append(T.ToTensor())
        if spec.mean is not None:
            steps.append(T.Normalize(spec.mean, spec.std))
        self.transform = T.Compose(steps)

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        image = Image.open(self.files[i]).convert("RGB")
        return self.transform(image), self.labels[i]


def write_files(images: np.ndarray, labels: np.ndarray, folder: Path) -> list[Path]:
    suffix = ".png" if images.shape[1] <= 64 else ".jpg"
    files = []
    for k, (image, label) in enumerate(zip(images, labels, strict=True)):
        path = folder / f"{k}_{int(label)}_0{suffix}"
        Image.fromarray(image).save(path, quality=95) if suffix == ".jpg" else Image.fromarray(
            image
        ).save(path)
        files.append(path)
    return files


def time_ours(family: DatasetFamily, split: Split, batch_size: int, batches: int) -> float:
    stream = TrainStream(split, family.spec, batch_size, seed=0, device=torch.device("cpu"))
    it = stream.batches()
    next(it)  # warm-up (first touch of the memory map)
    start = time.perf_counter()
    seen = 0
    for _ in range(batches):
        seen += len(next(it).y)
    return seen / (time.perf_counter() - start)


def time_per_file(loader: DataLoader, batches: int) -> float:
    it = iter(loader)
    next(it)  # warm-up: worker start
    start = time.perf_counter()
    seen = 0
    for _ in range(batches):
        x, _y = next(it)
        seen += len(x)
    return seen / (time.perf_counter() - start)


def run(
    family: DatasetFamily, ratio: float, batch_size: int, batches: int, workers: int
) -> dict[str, float]:
    """Samples per second of our loading path against per-file PIL images read by a
    DataLoader with ``workers`` worker processes (and none), over ``batches`` batches; and
    the seconds a fresh family takes to check the files a run reads against the manifest."""
    splits = family.load(ratio)
    fresh = type(family)(family.raw_root, family.data_root, **family.option_values())
    start = time.perf_counter()
    digests = fresh.checked_files(ratio)  # a new instance has hashed nothing yet
    checked = time.perf_counter() - start
    size = sum((family.folder / rel).stat().st_size for rel in digests) / 2**20
    train = splits.train
    n = min(len(train), batch_size * (batches + 1))
    rows = torch.randperm(len(train), generator=torch.Generator().manual_seed(0))[:n]
    memmapped = not isinstance(train.images, torch.Tensor)
    print(
        f"{family.spec.name} {ratio:g}%: {len(train)} training images "
        f"{tuple(train.images.shape[1:])} ({'memory-mapped' if memmapped else 'in memory'}); "
        f"batch {batch_size}, {batches} batches per path"
    )
    print(f"  integrity check of the {size:.0f} MiB a run reads: {checked:.3f} s")
    ours = time_ours(family, train, batch_size, batches)
    results = {"ours": ours, "integrity_s": checked, "integrity_mib": size}
    with tempfile.TemporaryDirectory(prefix="bench-files-") as tmp:
        images = take(train.images, rows.sort().values).numpy()
        files = write_files(images, train.labels[rows.sort().values].numpy(), Path(tmp))
        dataset = PerFileDataset(files, [0] * len(files), family.spec)
        for n in sorted({workers, 0}, reverse=True):
            loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=n)
            results[f"per_file_{n}"] = time_per_file(loader, batches)
    kind = "memmap" if memmapped else "tensor"
    print(f"  ours (uint8 {kind} + batch augmentation, 1 process): {ours:10.0f} samples/s")
    for n in sorted({workers, 0}, reverse=True):
        speed = results[f"per_file_{n}"]
        label = f"per-file PIL + DataLoader ({n} workers)"
        print(f"  {label:<48} {speed:10.0f} samples/s   ours: {ours / speed:.1f}x")
    return results
