"""Named random streams: every random draw of a run, a build or a method, from a seed and a name.

A stream is named (``"batch_order"``, ``"pgd.biased"``, ``"cmnist.train_bias"``) and may be
indexed (an epoch, a step, a ratio in thousandths, an image id): ``stream_seed(seed, name,
*index)`` is the integer that seeds it, :func:`generator` a ``torch.Generator`` seeded with it,
:func:`rng` a NumPy ``Generator``. Two different names never share a stream, so a new method
draws from ``generator(env.seed, "my_method.stage1")`` instead of inventing an offset, and no
draw of one stream moves another.

New names derive their stream by hashing: the entropy ``[seed, crc32(name), len(index),
*index]`` seeds a NumPy ``SeedSequence`` (the length keeps ``name`` and ``name`` at index 0
apart: ``SeedSequence`` pads its entropy with zeros); :func:`stream_seed` is its first 64-bit
word, :func:`rng` a PCG64 on it.
The names in :data:`LEGACY` were derived by hand-picked offsets before this module existed, and
stored runs, prepared data and committed numbers depend on their values, so each keeps its old
derivation bit for bit (``tests/training/test_streams.py`` asserts the values):

===========================  =========================================  ======================
name (index)                 value (was)                                used by
===========================  =========================================  ======================
``batch_order`` (epoch)      ``seed * 1_000_003 + epoch``               the uniform batch order
``augmentation`` (step)      ``(seed + 7919) * 1_000_003 + step``       crops and flips
``valid_iid``                ``seed + 7919``                            in-distribution split
``nc_subset``                ``seed + 3``                               Neural Collapse subset
``subset.train/valid/test``  ``data_seed``, ``+ 1``, ``+ 2``            ``train/eval_limit``
``jtt.identification``       ``seed + 7_919_001``                       JTT's stage 1 stream
``pgd.biased``               ``seed + 15_485_863``                      PGD's biased model
``lff_be.committee``         ``seed + 104_729``                         LfF+BE's committee
``cmnist.*`` (ratio 1/1000)  NumPy ``[data_seed, code, ratio]``         the Colored MNIST build
``cifar10c.*``               NumPy ``[data_seed, code, ...]``           the Corrupted CIFAR build
``dogs_and_cats.plan``       NumPy ``[data_seed, 17]``                  the Dogs & Cats split
``bar.plan``                 NumPy ``[data_seed, 23]``                  the BAR split
===========================  =========================================  ======================

Only the standard library, NumPy and torch are imported: every layer may use it. torch is
imported by :func:`generator` when it is called, not with the module: the dataset builds draw
from :func:`rng`, and the dataset modules import this one when they register, without torch.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # annotations only: ``generator`` imports torch when it is called
    import torch

#: what seeds a stream: an int (a torch seed, or NumPy's ``default_rng(int)``) or NumPy entropy
Entropy = int | tuple[int, ...]


def _offset(offset: int) -> Callable[..., Entropy]:
    def derive(seed: int) -> Entropy:
        return seed + offset

    return derive


def _per_epoch(offset: int) -> Callable[..., Entropy]:
    def derive(seed: int, index: int) -> Entropy:
        return (seed + offset) * 1_000_003 + index

    return derive


def _numpy_code(code: int, arity: int) -> Callable[..., Entropy]:
    """NumPy entropy ``[seed, code, *index]``, the index padded with zeros to ``arity``
    (the builds wrote ``_rng(data_seed, code)`` for ``[data_seed, code, 0]``)."""

    def derive(seed: int, *index: int) -> Entropy:
        if len(index) > arity:
            raise TypeError(f"this stream takes at most {arity} index values, got {len(index)}")
        return (seed, code, *index, *(0,) * (arity - len(index)))

    return derive


#: the streams whose values committed results depend on: name -> the old derivation
LEGACY: dict[str, Callable[..., Entropy]] = {
    # the engine (bench/data/contract.py, bench/data/iid.py, bench/training/engine.py)
    "batch_order": _per_epoch(0),
    "augmentation": _per_epoch(7919),
    "valid_iid": _offset(7919),
    "nc_subset": _offset(3),
    "subset.train": _offset(0),
    "subset.valid": _offset(1),
    "subset.test": _offset(2),
    # the methods' preparation stages: each draws a TrainStream of its own from this seed
    "jtt.identification": _offset(7_919_001),
    "pgd.biased": _offset(15_485_863),
    "lff_be.committee": _offset(104_729),
    # the dataset builds (NumPy); index: the ratio in thousandths where the stream has one
    "cmnist.valid_bias": _numpy_code(1, 1),
    "cmnist.train_bias": _numpy_code(2, 1),
    "cmnist.test_bias": _numpy_code(3, 1),
    "cmnist.train_colour": _numpy_code(4, 1),
    "cmnist.valid_colour": _numpy_code(11, 1),
    "cmnist.test_colour": _numpy_code(13, 1),
    "cmnist.valid_split": _numpy_code(101, 1),
    "cifar10c.valid_bias": _numpy_code(1, 1),
    "cifar10c.train_bias": _numpy_code(2, 1),
    "cifar10c.test_bias": _numpy_code(3, 1),
    "cifar10c.split": _numpy_code(4, 1),
    # one generator per (image id, corruption): index (id, bias)
    "cifar10c.corrupt.valid": _numpy_code(1, 2),
    "cifar10c.corrupt.train": _numpy_code(2, 2),
    "cifar10c.corrupt.test": _numpy_code(3, 2),
    "dogs_and_cats.plan": _numpy_code(17, 0),
    "bar.plan": _numpy_code(23, 0),
}


def _check(seed: int, name: str, index: tuple[int, ...]) -> None:
    if not name:
        raise ValueError("a random stream needs a name")
    for value in (seed, *index):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
            raise ValueError(
                f"stream {name!r}: seed and index must be non-negative integers, got {value!r}"
            )


def entropy(seed: int, name: str, *index: int) -> Entropy:
    """What seeds stream ``name``: its legacy value, else
    ``(seed, crc32(name), len(index), *index)``."""
    _check(seed, name, index)
    legacy = LEGACY.get(name)
    if legacy is not None:
        return legacy(int(seed), *(int(i) for i in index))
    return (int(seed), zlib.crc32(name.encode()), len(index), *(int(i) for i in index))


def stream_seed(seed: int, name: str, *index: int) -> int:
    """The integer seed of stream ``name`` of ``seed`` (at ``index``): the legacy value where
    it is an int, else the first 64-bit word of ``SeedSequence(entropy)``."""
    value = entropy(seed, name, *index)
    if isinstance(value, int):
        return value
    return int(np.random.SeedSequence(list(value)).generate_state(1, np.uint64)[0])


def generator(seed: int, name: str, *index: int) -> torch.Generator:
    """A CPU ``torch.Generator`` on stream ``name``, seeded with :func:`stream_seed` modulo
    2**64, the widest seed torch takes: a legacy derivation of a 64-bit stream seed (a
    preparation stage's own ``batch_order``: ``seed * 1_000_003 + epoch``) overflows it, and
    every seed that fitted keeps its value."""
    import torch  # here, not with the module: a dataset registers and builds without torch

    return torch.Generator().manual_seed(stream_seed(seed, name, *index) % 2**64)


def rng(seed: int, name: str, *index: int) -> np.random.Generator:
    """A NumPy ``Generator`` on stream ``name``: ``default_rng`` of its entropy."""
    value = entropy(seed, name, *index)
    return np.random.default_rng(value if isinstance(value, int) else list(value))
