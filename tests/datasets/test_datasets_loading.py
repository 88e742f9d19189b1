"""The batch path: batch-wise crop/flip equals a per-sample crop; memmap and tensor agree;
evaluation reads each batch as one slice (``take_range``), the rows ``take`` gathers."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from debias_bench.data.contract import (
    Split,
    TrainStream,
    epoch_generator,
    eval_batches,
    random_crop_flip,
    take,
    take_range,
    to_float,
)
from debias_bench.data.spec import DatasetSpec, SplitArrays
from debias_bench.data.split_loading import load_split
from debias_bench.data.split_store import save_split, split_digest


def test_batch_crop_flip_matches_a_per_sample_crop():
    x = torch.rand(64, 3, 10, 12)
    out = random_crop_flip(x, 2, True, epoch_generator(3, 1))
    g = epoch_generator(3, 1)  # replay the same draws, then crop each sample alone
    oy = torch.randint(0, 5, (64,), generator=g)
    ox = torch.randint(0, 5, (64,), generator=g)
    mirrored = torch.rand(64, generator=g) < 0.5
    padded = F.pad(x, (2, 2, 2, 2))
    for k in range(64):
        crop = padded[k, :, oy[k] : oy[k] + 10, ox[k] : ox[k] + 12]
        if mirrored[k]:
            crop = crop.flip(2)
        assert torch.equal(out[k], crop)
    assert mirrored.any() and (~mirrored).any() and len(set(oy.tolist())) > 1


def _spec(**extra) -> DatasetSpec:
    """A small 3-channel spec with normalisation (``extra``: crop and flip)."""
    return DatasetSpec(
        name="t",
        num_classes=2,
        num_biases=2,
        ratios=(1.0,),
        image_size=(8, 8),
        channels=3,
        backbone="mlp",
        test_kind="conflicting",
        mean=(0.5, 0.5, 0.5),
        std=(0.25, 0.25, 0.25),
        **extra,
    )


def test_memmap_and_in_memory_splits_give_identical_batches(tmp_path):
    spec = _spec(crop_padding=1, hflip=True)
    rng = np.random.default_rng(0)
    images = torch.from_numpy(rng.integers(0, 255, (50, 8, 8, 3), dtype=np.uint8))
    labels = torch.arange(50) % 2
    save_split(tmp_path / "s", Split(images, labels, labels))
    mem = load_split(tmp_path / "s", "train")
    mapped = load_split(tmp_path / "s", "train", mmap=True)
    assert isinstance(mapped.images, np.memmap)
    device = torch.device("cpu")
    a = TrainStream(mem, spec, 16, seed=1, device=device).batches()
    b = TrainStream(mapped, spec, 16, seed=1, device=device).batches()
    for _ in range(5):
        x, y = next(a), next(b)
        assert torch.equal(x.x, y.x) and torch.equal(x.index, y.index)
    resumed = TrainStream(mapped, spec, 16, seed=1, device=device).batches(start_step=5)
    fresh = TrainStream(mem, spec, 16, seed=1, device=device).batches()
    for _ in range(5):
        next(fresh)
    assert torch.equal(next(resumed).x, next(fresh).x)


def test_a_build_s_arrays_and_a_split_are_stored_and_read_alike(tmp_path):
    """``save_split`` of NumPy arrays (what a build writes, without torch) and of the torch
    ``Split`` of the same data: the same files (uint8 images, int64 attrs), read back equal."""
    rng = np.random.default_rng(0)
    images = rng.integers(0, 255, (20, 4, 4, 3), dtype=np.uint8)
    labels, biases = np.arange(20) % 3, (np.arange(20) % 2).astype(np.int32)
    save_split(tmp_path / "arrays", SplitArrays(images, labels, biases))
    split = Split(torch.from_numpy(images), torch.from_numpy(labels), torch.from_numpy(biases))
    save_split(tmp_path / "split", split)
    for name in ("images.npy", "attrs.npy"):
        assert (tmp_path / "arrays" / name).read_bytes() == (tmp_path / "split" / name).read_bytes()
    assert np.load(tmp_path / "arrays" / "attrs.npy").dtype == np.int64
    back = load_split(tmp_path / "arrays", "train")
    assert torch.equal(back.images, split.images) and back.labels.dtype == torch.int64
    assert split_digest(back) == split_digest(SplitArrays(images, labels, biases.astype(np.int64)))


def test_uint8_crop_pads_black_and_leaves_the_input_alone():
    from debias_bench.data.contract import crop_flip_nhwc

    images = torch.full((32, 6, 6, 3), 255, dtype=torch.uint8)
    before = images.clone()
    out = crop_flip_nhwc(images, 2, True, epoch_generator(0, 0))
    assert out.shape == images.shape and out.dtype == torch.uint8
    assert (out == 0).any() and (out == 255).any()  # black borders, as RandomCrop on PIL
    assert torch.equal(images, before)
    flipped = crop_flip_nhwc(images, 0, True, epoch_generator(0, 0))
    assert torch.equal(images, before) and torch.equal(flipped, images)


@pytest.fixture(params=["tensor", "memmap"])
def images(request, tmp_path):
    data = np.random.default_rng(0).integers(0, 256, (23, 8, 8, 3), dtype=np.uint8)
    if request.param == "tensor":
        return torch.from_numpy(data.copy())
    np.save(tmp_path / "images.npy", data)
    return np.load(tmp_path / "images.npy", mmap_mode="r")


def test_a_range_is_the_rows_take_gathers(images):
    """From a tensor and a memmap alike; each range the caller's own (writing to it leaves
    the split untouched)."""
    for start, stop in [(0, 10), (10, 20), (20, 23), (5, 5)]:
        got = take_range(images, start, stop)
        assert torch.equal(got, take(images, torch.arange(start, stop)))
        got.fill_(0)
        assert torch.equal(take_range(images, start, stop), take(images, torch.arange(start, stop)))
    assert int(take_range(images, 0, len(images)).sum()) > 0


def test_evaluation_batches_cover_the_split_in_order(images):
    n = len(images)
    split = Split(images, torch.arange(n) % 2, torch.arange(n) % 2)
    spec = _spec()
    batches = list(eval_batches(split, spec, 10, torch.device("cpu")))
    assert [len(b.x) for b in batches] == [10, 10, 3]
    assert torch.equal(torch.cat([b.index for b in batches]), torch.arange(n))
    whole = to_float(take(images, torch.arange(n)), spec)
    assert torch.equal(torch.cat([b.x for b in batches]), whole)
