"""SelecMix's pieces: the generalised supervised contrastive (GSC) loss, the auxiliary
embedding model, contradicting-pair selection and the selective mixup.

Specification: ``../shared/reference/METHODS.md`` section 8 (``iwhwang/SelecMix``:
``module/loss.py::SupConLoss``, ``module/resnet_big.py::SupConResNet``, ``util.py``).
"""

from __future__ import annotations

import dataclasses
from typing import Protocol, cast

import torch
import torch.nn.functional as F
from torch import nn

from debias_bench.config.hparams import EngineParams
from debias_bench.data.spec import DatasetSpec
from debias_bench.training.backbones import Backbone, build_backbone


def gsc_loss(z: torch.Tensor, labels: torch.Tensor, temp: float, q: float | None) -> torch.Tensor:
    """Generalised supervised contrastive loss of L2-normalised embeddings ``z`` (``N x D``).

    For anchor ``i`` and candidate ``j != i``: ``log p_ij = s_ij - log sum_{k != i} exp(s_ik)``
    with ``s = z z^T / temp``. Positives are the other samples of ``i``'s label. The loss is
    ``-mean_i mean_{j in P(i)} w_ij log p_ij``, anchors without positives contributing 0 to the
    mean over anchors (as in SupCon). With ``q`` set (GSC), ``w_ij = q * p_ij.detach() ** q``:
    the GCE-style emphasis on pairs that are already close (bias-aligned ones), which makes the
    auxiliary embedding biased. ``q=None`` gives plain SupCon (``w = 1``).
    """
    n = len(z)
    sim = z @ z.t() / temp
    logits = sim - sim.max(dim=1, keepdim=True).values.detach()  # numerical stability
    not_self = ~torch.eye(n, dtype=torch.bool, device=z.device)
    denom = (logits.exp() * not_self).sum(dim=1, keepdim=True)
    log_prob = logits - torch.log(denom + 1e-9)
    if q is not None:
        log_prob = q * log_prob.detach().exp() ** q * log_prob
    positives = (labels[:, None] == labels[None, :]) & not_self
    per_anchor = (log_prob * positives).sum(dim=1) / positives.sum(dim=1).clamp(min=1)
    return -per_anchor.mean()


def cifar_resnet18(in_channels: int = 3) -> Backbone:
    """SupCon's CIFAR-style ResNet-18: 3x3 stride-1 stem, no max-pool, 512-d pooled output.

    Built from torchvision's ResNet-18 (same blocks, projection shortcuts and Kaiming-normal
    ``fan_out`` conv init as ``resnet_big.py``) with the stem replaced.
    """
    from torchvision.models import resnet18

    net = resnet18(weights=None)
    net.conv1 = nn.Conv2d(in_channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
    nn.init.kaiming_normal_(net.conv1.weight, mode="fan_out", nonlinearity="relu")
    net.maxpool = nn.Identity()
    net.fc = nn.Identity()
    net.feat_dim = 512
    return cast(Backbone, net)  # a torchvision ResNet with feat_dim: a Backbone by its interface


class EmbeddingModel(nn.Module):
    """Encoder + MLP projection head (``d -> d -> out_dim``), L2-normalised output."""

    def __init__(self, encoder: Backbone, out_dim: int = 128) -> None:
        super().__init__()
        self.encoder = encoder
        d = encoder.feat_dim
        self.head = nn.Sequential(nn.Linear(d, d), nn.ReLU(inplace=True), nn.Linear(d, out_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.head(self.encoder(x)), dim=1)


class AuxiliaryKeys(Protocol):
    """The keys of a method's params that describe its auxiliary embedding model (SelecMix's:
    a structural type, so this module does not import the method that uses it)."""

    @property
    def aux_backbone(self) -> str: ...
    @property
    def aux_mlp_hidden(self) -> tuple[int, ...] | None: ...
    @property
    def aux_embed_dim(self) -> int: ...
    @property
    def mlp_hidden(self) -> tuple[int, ...] | None: ...


def make_embedding_model(spec: DatasetSpec, hp: AuxiliaryKeys) -> EmbeddingModel:
    """The auxiliary model named by ``hp.aux_backbone``.

    ``cifar_resnet18`` is the official choice for every dataset; any backbone name of
    ``debias_bench.training.backbones`` also works (e.g. ``mlp`` with ``aux_mlp_hidden``, a
    CPU-sized
    stand-in). The auxiliary model always sees the plain input: the official MLPs' second
    division by 255 is a quirk of the main model, not of SupConResNet.
    """
    name = hp.aux_backbone
    if name == "cifar_resnet18":
        encoder = cifar_resnet18(spec.channels)
    else:
        hidden = hp.mlp_hidden if hp.aux_mlp_hidden is None else hp.aux_mlp_hidden
        assert isinstance(hp, EngineParams)  # what a backbone reads
        engine_keys: EngineParams = hp
        aux_hp = dataclasses.replace(engine_keys, input_div255=False, mlp_hidden=hidden)
        encoder = build_backbone(name, spec, aux_hp)
    return EmbeddingModel(encoder, hp.aux_embed_dim)


def contradicting_partners(
    sim: torch.Tensor, labels: torch.Tensor, mode: str, strict: bool = True
) -> torch.Tensor:
    """Index of each sample's mixing partner, from a similarity matrix of a biased embedding.

    ``intra`` (contradicting positive): the least similar sample of the same label (the anchor
    itself is admissible but, with similarity 1, only wins when it is alone in its class).
    ``inter`` (contradicting negative): the most similar sample of a different label (the anchor
    itself when the batch holds no other label).

    ``strict=False`` reproduces the official masking (``util.py``): inadmissible entries are
    set to 1 (intra, then arg-min) or 0 (inter, then arg-max), so an inadmissible partner wins
    when all admissible similarities are >= 1 (intra) or < 0 (inter). ``strict=True`` masks
    with +-inf, so the partner is always admissible.
    """
    same = labels[:, None] == labels[None, :]
    if mode == "intra":
        if strict:
            return torch.where(same, sim, torch.full_like(sim, float("inf"))).argmin(dim=1)
        return (sim * same + (~same).to(sim.dtype)).argmin(dim=1)
    if mode == "inter":
        if not strict:
            return (sim * ~same).argmax(dim=1)
        masked = torch.where(same, torch.full_like(sim, float("-inf")), sim)
        partner = masked.argmax(dim=1)
        alone = same.all(dim=1)
        return torch.where(alone, torch.arange(len(sim), device=sim.device), partner)
    raise ValueError(f"unknown pairing mode {mode!r}; valid: intra, inter")


def selective_mixup(
    x: torch.Tensor, y: torch.Tensor, partner: torch.Tensor, lam: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``x_mix = lam * x + (1 - lam) * x[partner]`` with the partner's label ``y[partner]``.

    SelecMix draws ``lam ~ Beta(1, 1) * 0.5``, so the partner always dominates the mix and its
    label is the only target (weight 0 on ``y``).
    """
    shape = (-1,) + (1,) * (x.dim() - 1)
    lam = lam.to(x.dtype).view(shape)
    return lam * x + (1 - lam) * x[partner], y[partner]
