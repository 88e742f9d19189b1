"""Fingerprints of splits, so that a run scores only on the data it loaded.

A method receives the run's splits (``prepare(data)``, ``evaluation_splits(data)``) and could
write to them in place: zeroed test labels would score 100 %. The engine fingerprints the
splits it evaluates on before the method sees them and checks them at every evaluation
(:meth:`SplitGuard.check`); a change fails the run ``failed (bad data)`` naming the method and
what changed. The engine's in-process data cache checks the splits it hands out the same way,
so a run that changed them cannot pass its change on to the next run of a sweep.

A fingerprint is a CRC-32 of each array's bytes (with its dtype and shape): it catches
writes, not forgeries, at about 2 GB/s (half SHA-256's time here). On Colored MNIST a check of
the valid and test splits (16,000 images) takes 21-28 ms, once per evaluation (every 211 steps
at batch 256: a quarter of one step's time, about 0.1 % of the run); the cache's check of all
three splits, once per run, about 0.1 s. A read-only memory map (the 224-px sets) cannot be
written through, so it is checked by identity (the split must still hold that very array), as
is an image container of a plugin's own, which is never read here.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from debias_bench.data.contract import Split
from debias_bench.data.integrity import BadDataError

FIELDS = ("images", "labels", "biases")


def _bytes_of(value: Any) -> np.ndarray:
    """``value`` (a tensor on any device, or an array) as a C-contiguous NumPy array."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    return np.ascontiguousarray(value)


class _Identity:
    """The mark of a value that is not checksummed: the split must still hold that object."""

    def __init__(self, value: Any) -> None:
        self.value = value


def _mark(value: Any) -> Any:
    """What is compared later: a checksum of a tensor or a writeable array; the object itself
    for a read-only array or anything else (a plugin's own image reader is never read here)."""
    writeable = isinstance(value, np.ndarray) and value.flags.writeable
    if not (writeable or isinstance(value, torch.Tensor)):
        return _Identity(value)
    array = _bytes_of(value)
    return (str(array.dtype), array.shape, zlib.crc32(array.data))  # C-contiguous bytes


def _same(mark: Any, value: Any) -> bool:
    if isinstance(mark, _Identity):
        return value is mark.value
    return _mark(value) == mark


class SplitGuard:
    """The fingerprints of named splits' images, labels and bias labels, taken now."""

    def __init__(self, splits: Mapping[str, Split]) -> None:
        self.splits = dict(splits)
        self.marks = {
            (name, what): _mark(getattr(split, what))
            for name, split in self.splits.items()
            for what in FIELDS
        }

    def changes(self) -> list[str]:
        """What changed since the fingerprints were taken (``test labels``); empty if nothing."""
        return [
            f"{name} {what}"
            for (name, what), mark in self.marks.items()
            if not _same(mark, getattr(self.splits[name], what))
        ]

    def check(self, who: str, when: str) -> None:
        """Raise :class:`BadDataError` naming ``who`` (the method) and what it changed."""
        changed = self.changes()
        if changed:
            raise BadDataError(
                f"{who} changed the {', '.join(changed)} it is scored on ({when}): the run "
                "cannot be scored",
                hint="a method must not write to the splits it is given: copy what it changes "
                "(tensor.clone(), split.subset(rows))",
            )
