"""Class activation maps (Zhou et al., CVPR 2016).

For a backbone whose feature is the global average of a ``C x h x w`` feature map ``A`` and a
linear head ``W`` over that feature, the map of class ``c`` is ``sum_k W[c, k] A_k``. We take
the positive part, upsample it bilinearly to the image size and scale it to [0, 1] per image.
This is exact for every method whose ``features`` are the pooled backbone output read by
``classifier_weight`` (Vanilla, ETF-Debias with its null prime, ...), without gradients.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from debias_bench.errors import BenchError
from debias_bench.training.method import Method


@torch.no_grad()
def class_activation_maps(
    method: Method, x: torch.Tensor, classes: torch.Tensor | None = None
) -> torch.Tensor:
    """``N x H x W`` maps in [0, 1] for ``classes`` (default: the predicted classes)."""
    backbone, weight = method.backbone_module(), method.classifier_weight()
    feature_map = getattr(backbone, "feature_map", None)
    if weight is None or not callable(feature_map):
        raise BenchError(
            f"class activation maps need a convolutional backbone with a linear head; "
            f"{type(method).__name__} with this backbone has none"
        )
    fmap = feature_map(x)  # N x C x h x w
    if classes is None:
        classes = method.predict(x).argmax(1)
    cam = torch.einsum("nc,nchw->nhw", weight[classes], fmap).clamp_min(0)
    cam = F.interpolate(cam[:, None], size=x.shape[-2:], mode="bilinear", align_corners=False)[:, 0]
    low = cam.flatten(1).min(1).values[:, None, None]
    high = cam.flatten(1).max(1).values[:, None, None]
    return (cam - low) / (high - low).clamp_min(1e-12)
