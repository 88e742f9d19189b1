"""Evaluation's sequential batches (``eval_batches``) read each batch as one slice
(``take_range``): the same images as a gather of those rows (``take``), from an in-memory
tensor and from a memory-mapped array, and each batch the caller's own."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from debias_bench.data.contract import Split, eval_batches, take, take_range, to_float
from debias_bench.data.spec import DatasetSpec


def _spec() -> DatasetSpec:
    return DatasetSpec(
        name="t",
        num_classes=3,
        num_biases=3,
        ratios=(5.0,),
        image_size=(4, 4),
        channels=3,
        backbone="mlp",
        test_kind="unbiased",
        mean=(0.5, 0.4, 0.3),
        std=(0.2, 0.25, 0.3),
    )


@pytest.fixture(params=["tensor", "memmap"])
def images(request, tmp_path):
    data = np.random.default_rng(0).integers(0, 256, (23, 4, 4, 3), dtype=np.uint8)
    if request.param == "tensor":
        return torch.from_numpy(data.copy())
    np.save(tmp_path / "images.npy", data)
    return np.load(tmp_path / "images.npy", mmap_mode="r")


def test_a_range_is_the_rows_take_gathers(images):
    for start, stop in [(0, 10), (10, 20), (20, 23), (5, 5)]:
        got = take_range(images, start, stop)
        assert torch.equal(got, take(images, torch.arange(start, stop)))
        got.fill_(0)  # the caller's own: the split is untouched
        assert torch.equal(take_range(images, start, stop), take(images, torch.arange(start, stop)))
    assert int(take_range(images, 0, len(images)).sum()) > 0


def test_evaluation_batches_cover_the_split_in_order(images):
    n = len(images)
    split = Split(images, torch.arange(n) % 3, torch.arange(n) % 3)
    spec = _spec()
    batches = list(eval_batches(split, spec, 10, torch.device("cpu")))
    assert [len(b.x) for b in batches] == [10, 10, 3]
    assert torch.equal(torch.cat([b.index for b in batches]), torch.arange(n))
    whole = to_float(take(images, torch.arange(n)), spec)
    assert torch.equal(torch.cat([b.x for b in batches]), whole)
