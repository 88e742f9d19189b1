"""Small helpers for method tests (imported as a module from tests/)."""

from __future__ import annotations

import torch

from debias_bench.data import Batch, DatasetSpec


def toy_batch(spec: DatasetSpec, n: int = 16, seed: int = 0) -> Batch:
    g = torch.Generator().manual_seed(seed)
    h, w = spec.image_size
    return Batch(
        index=torch.arange(n),
        x=torch.rand(n, spec.channels, h, w, generator=g),
        y=torch.randint(0, spec.num_classes, (n,), generator=g),
        b=torch.randint(0, spec.num_biases, (n,), generator=g),
    )
