"""Named random streams (``debias_bench.streams``): the legacy values that stored runs, prepared
data and committed numbers depend on stay bit for bit what the hand-picked offsets gave; new
names hash; no hand-picked offset is left outside the module."""

from __future__ import annotations

import ast
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch

from debias_bench.data.contract import Split, TrainStream, crop_flip_nhwc, to_float
from debias_bench.data.spec import DatasetSpec
from debias_bench.streams import LEGACY, entropy, generator, rng, stream_seed

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------ legacy values
#: name -> (seed, index, the value the code computed before the module existed)
TORCH_LEGACY = {
    "batch_order": (5, (3,), 5 * 1_000_003 + 3),  # contract.epoch_generator(seed, epoch)
    "augmentation": (5, (700,), (5 + 7919) * 1_000_003 + 700),  # epoch_generator(seed + 7919)
    "valid_iid": (5, (), 5 + 7919),  # iid.py
    "nc_subset": (5, (), 5 + 3),  # engine.py, the Neural Collapse subset
    "subset.train": (9, (), 9),  # engine.load_data: data_seed, + 1, + 2
    "subset.valid": (9, (), 10),
    "subset.test": (9, (), 11),
    "jtt.identification": (5, (), 5 + 7_919_001),
    "pgd.biased": (5, (), 5 + 15_485_863),
    "lff_be.committee": (5, (), 5 + 104_729),
}

#: name -> (data_seed, index, the NumPy entropy the builds used)
NUMPY_LEGACY = {
    "cmnist.valid_bias": (3, (), [3, 1, 0]),  # _rng(data_seed, _STREAM_VALID)
    "cmnist.test_bias": (3, (), [3, 3, 0]),
    "cmnist.valid_colour": (3, (), [3, 11, 0]),  # _rng(data_seed, 10 + stream)
    "cmnist.test_colour": (3, (), [3, 13, 0]),
    "cmnist.train_bias": (3, (500,), [3, 2, 500]),  # ratio 0.5 %: round(0.5 * 1000)
    "cmnist.train_colour": (3, (5000,), [3, 4, 5000]),
    "cmnist.valid_split": (3, (), [3, 101, 0]),  # _STREAM_VALID + 100
    "cifar10c.split": (3, (), [3, 4, 0]),
    "cifar10c.valid_bias": (3, (), [3, 1, 0]),
    "cifar10c.test_bias": (3, (), [3, 3, 0]),
    "cifar10c.train_bias": (3, (2000,), [3, 2, 2000]),
    "cifar10c.corrupt.valid": (3, (17, 4), [3, 1, 17, 4]),  # [seed, stream, id, bias]
    "cifar10c.corrupt.train": (3, (17, 4), [3, 2, 17, 4]),
    "cifar10c.corrupt.test": (3, (17, 4), [3, 3, 17, 4]),
    "dogs_and_cats.plan": (3, (), [3, 17]),
    "bar.plan": (3, (), [3, 23]),
}


def test_every_legacy_name_is_covered_here():
    assert set(TORCH_LEGACY) | set(NUMPY_LEGACY) == set(LEGACY)


@pytest.mark.parametrize("name", sorted(TORCH_LEGACY))
def test_legacy_torch_streams_keep_their_values(name):
    seed, index, value = TORCH_LEGACY[name]
    assert stream_seed(seed, name, *index) == value
    old = torch.Generator().manual_seed(value)
    assert torch.equal(torch.randperm(50, generator=generator(seed, name, *index)),
                       torch.randperm(50, generator=old))  # fmt: skip


@pytest.mark.parametrize("name", sorted(NUMPY_LEGACY))
def test_legacy_numpy_streams_keep_their_values(name):
    seed, index, old_entropy = NUMPY_LEGACY[name]
    assert list(entropy(seed, name, *index)) == old_entropy
    np.testing.assert_array_equal(
        rng(seed, name, *index).random(8), np.random.default_rng(old_entropy).random(8)
    )


def test_the_uniform_batch_order_and_augmentation_are_the_former_ones():
    """A TrainStream's batches (order and crop/flip draws) are what the code before named
    streams drew: every method's stored numbers stand."""
    n, batch_size, seed = 40, 16, 7
    spec = DatasetSpec("t", 2, 2, (1.0,), (4, 4), 3, "mlp", "unbiased", crop_padding=1, hflip=True)
    images = torch.arange(n * 48, dtype=torch.int64).remainder(256).to(torch.uint8)
    split = Split(images.view(n, 4, 4, 3), torch.arange(n) % 2, torch.arange(n) % 2)
    batches = TrainStream(split, spec, batch_size, seed, torch.device("cpu")).batches()
    steps_per_epoch = 3
    for step in range(7):
        epoch, k = divmod(step, steps_per_epoch)
        order = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 1_000_003 + epoch))
        rows = order[k * batch_size : (k + 1) * batch_size]
        got = next(batches)
        assert torch.equal(got.index, rows)
        aug = torch.Generator().manual_seed((seed + 7919) * 1_000_003 + step)
        expected = to_float(crop_flip_nhwc(split.images[rows], 1, True, aug), spec)
        assert torch.equal(got.x, expected)


# ------------------------------------------------------------------------------ new names
def test_a_new_name_hashes_seed_name_and_index():
    entropy_ = [4, zlib.crc32(b"my_method.stage1"), 1, 2]  # seed, name, len(index), index
    expected = np.random.SeedSequence(entropy_)
    assert stream_seed(4, "my_method.stage1", 2) == int(expected.generate_state(1, np.uint64)[0])
    np.testing.assert_array_equal(
        rng(4, "my_method.stage1", 2).random(4), np.random.default_rng(entropy_).random(4)
    )


def test_streams_differ_by_name_seed_and_index_and_repeat_exactly():
    seeds = {
        stream_seed(seed, name, *index)
        for seed in (0, 1)
        for name in ("a", "b", "sampler.weighted")
        for index in ((), (0,), (1,))
    }
    assert len(seeds) == 18
    assert stream_seed(0, "a", 1) == stream_seed(0, "a", 1)
    a, b = generator(0, "a"), generator(0, "a")
    assert torch.equal(torch.rand(5, generator=a), torch.rand(5, generator=b))


def test_a_stage_streams_batch_order_takes_a_64_bit_seed():
    """A preparation stage draws its batches from a stream of its own, whose seed is a 64-bit
    word; the legacy batch order multiplies it by 1,000,003, which torch refused (overflow):
    DeNetDM cut its stage seed to 32 bits around it. Seeds that fitted keep their value."""
    stage = stream_seed(0, "my_method.stage1")
    assert stage >= 2**32 and stage * 1_000_003 >= 2**64  # what torch refused
    drawn = torch.rand(3, generator=generator(stage, "batch_order", 5))
    again = torch.Generator().manual_seed((stage * 1_000_003 + 5) % 2**64)
    assert torch.equal(drawn, torch.rand(3, generator=again))
    small = torch.Generator().manual_seed(7 * 1_000_003 + 5)  # a run seed's: unchanged
    assert torch.equal(
        torch.rand(3, generator=generator(7, "batch_order", 5)), torch.rand(3, generator=small)
    )


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_bad_seed_or_index_is_refused(bad):
    with pytest.raises(ValueError, match="non-negative integers"):
        stream_seed(bad, "a")
    with pytest.raises(ValueError, match="non-negative integers"):
        stream_seed(0, "a", bad)
    with pytest.raises(ValueError, match="needs a name"):
        stream_seed(0, "")


# ------------------------------------------------------------------------------ no offsets left
_SEEDING = {"manual_seed", "default_rng", "SeedSequence", "seed", "RandomState", "Generator"}
#: the offsets the issue listed (and the stream codes): none may appear outside streams.py
_OFFSETS = {1_000_003, 7919, 7_919_001, 104_729, 15_485_863}


def _sources() -> list[Path]:
    files = [*(ROOT / "bench").rglob("*.py"), *(ROOT / "methods").rglob("*.py")]
    files += (ROOT / "datasets").rglob("*.py")
    return [f for f in files if f.name != "streams.py"]


def test_no_hand_picked_offset_seeds_a_generator_anywhere_else():
    """Outside ``bench/streams.py`` a generator is seeded with a plain value (a seed, a stream
    seed, a constant for fixtures), never with arithmetic or a list of stream codes, and none of
    the former offsets is left."""
    found = []
    for path in _sources():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in _OFFSETS:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value}")
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name not in _SEEDING:
                continue
            for arg in node.args:
                combined = isinstance(arg, ast.List | ast.Tuple) or (
                    isinstance(arg, ast.BinOp) and not isinstance(arg.op, ast.Mod)
                )
                if combined:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert not found, found
