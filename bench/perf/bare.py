"""The bare PyTorch loop a perf cell times the harness against: Vanilla's training written by
hand, with its own few lines of data path (the "Bare cells" section of
:mod:`debias_bench.perf.speed`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from debias_bench.data.contract import Split
from debias_bench.data.spec import DatasetSpec
from debias_bench.perf.timer import StepTimer


def crop_flip(x: torch.Tensor, padding: int, flip: bool) -> torch.Tensor:
    """RandomCrop(padding) + horizontal flip of ``N x H x W x C``, one draw per sample."""
    n, h, w, _ = x.shape
    dev = x.device
    if padding:
        padded = F.pad(x, (0, 0, padding, padding, padding, padding))
        oy = torch.randint(0, 2 * padding + 1, (n, 1, 1), device=dev)
        ox = torch.randint(0, 2 * padding + 1, (n, 1, 1), device=dev)
        rows = oy + torch.arange(h, device=dev).view(1, h, 1)
        cols = ox + torch.arange(w, device=dev).view(1, 1, w)
        x = padded[torch.arange(n, device=dev).view(n, 1, 1), rows, cols]
    if flip:
        x = torch.where(torch.rand(n, 1, 1, 1, device=dev) < 0.5, x.flip(2), x)
    return x


def bare_loop(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    train: Split,
    spec: DatasetSpec,
    batch_size: int,
    timer: StepTimer,
) -> torch.Tensor:
    """Train until ``timer`` is done, reshuffling each epoch; returns the last loss."""
    device = next(model.parameters()).device
    mean = std = None
    if spec.mean is not None and spec.std is not None:
        mean = torch.tensor(spec.mean, device=device).view(1, -1, 1, 1)
        std = torch.tensor(spec.std, device=device).view(1, -1, 1, 1)
    model.train()
    timer.start()
    step, loss = 0, torch.tensor(math.nan)
    while not timer.done:
        for rows in torch.randperm(len(train)).split(batch_size):
            x = train.images[rows].to(device, non_blocking=True)
            if spec.crop_padding or spec.hflip:
                x = crop_flip(x, spec.crop_padding, spec.hflip)
            x = x.permute(0, 3, 1, 2).float().div_(255.0)  # NCHW view of NHWC memory
            if mean is not None and std is not None:
                x = x.sub_(mean).div_(std)
            y = train.labels[rows].to(device, non_blocking=True)
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
            timer.advance(step)
            if timer.done:
                break
    return loss.detach()
