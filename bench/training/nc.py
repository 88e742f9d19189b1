"""Neural Collapse metrics, as defined in the ETF-Debias paper's metric table (Tab. 1).

With ``z_ki`` the feature of sample ``i`` of class ``k``, ``z̄_k`` the class means and ``z_G`` the
global mean:

* NC1 = Tr(Σ_W Σ_B^†) / K, with Σ_W = 1/K Σ_k 1/n_k Σ_i (z_ki - z̄_k)(z_ki - z̄_k)^T and
  Σ_B = 1/K Σ_k (z̄_k - z_G)(z̄_k - z_G)^T (Σ_B^† the pseudo-inverse);
* NC2 = || W W^T / ||W W^T||_F  -  (I_K - 11^T/K) / sqrt(K-1) ||_F on the classifier
  weights W (K x d);
* NC3 = || W Z̄ / ||W Z̄||_F  -  (I_K - 11^T/K) / sqrt(K-1) ||_F with
  Z̄ = [z̄_1 - z_G, ..., z̄_K - z_G].

All three are 0 at perfect collapse (no within-class spread, centred class means on a simplex
ETF, weights aligned with them). When a subset (e.g. the bias-conflicting samples) lacks some
classes, the metrics are computed over the classes present (K is their number, W restricted to
their rows). The official ETF-Debias code row-centres W before NC2; we follow the paper's formula.
"""

from __future__ import annotations

import math

import torch


def _etf_target(k: int) -> torch.Tensor:
    return (torch.eye(k, dtype=torch.float64) - 1.0 / k) / math.sqrt(k - 1)


def _normalised_gap(gram: torch.Tensor) -> float:
    k = gram.shape[0]
    return float(torch.linalg.norm(gram / torch.linalg.norm(gram) - _etf_target(k)))


def class_means(features: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(classes present, their means as rows)."""
    classes = torch.unique(labels)
    means = torch.stack([features[labels == k].mean(0) for k in classes])
    return classes, means


def nc1(features: torch.Tensor, labels: torch.Tensor) -> float:
    feats = features.double()
    classes, means = class_means(feats, labels)
    k = len(classes)
    global_mean = feats.mean(0)
    sigma_w = torch.zeros(feats.shape[1], feats.shape[1], dtype=torch.float64)
    for c, mean in zip(classes, means, strict=True):
        centred = feats[labels == c] - mean
        sigma_w += centred.T @ centred / len(centred)
    sigma_w /= k
    between = means - global_mean
    sigma_b = between.T @ between / k
    return float(torch.trace(sigma_w @ torch.linalg.pinv(sigma_b, hermitian=True)) / k)


def nc2(weight: torch.Tensor) -> float:
    w = weight.double()
    return _normalised_gap(w @ w.T)


def nc3(features: torch.Tensor, labels: torch.Tensor, weight: torch.Tensor) -> float:
    feats = features.double()
    classes, means = class_means(feats, labels)
    centred_means = (means - feats.mean(0)).T  # d x K
    return _normalised_gap(weight.double()[classes] @ centred_means)


def neural_collapse(
    features: torch.Tensor, labels: torch.Tensor, weight: torch.Tensor | None = None
) -> dict[str, float | None]:
    """NC1-NC3 of ``features`` (N x d) with ``labels`` (N) and classifier ``weight`` (K x d).

    NC2 and NC3 are None without a weight matrix; all are None with fewer than two classes."""
    if len(torch.unique(labels)) < 2:
        return {"nc1": None, "nc2": None, "nc3": None}
    out: dict[str, float | None] = {"nc1": nc1(features, labels), "nc2": None, "nc3": None}
    if weight is not None:
        classes = torch.unique(labels)
        out["nc2"] = nc2(weight.detach().cpu()[classes])
        out["nc3"] = nc3(features, labels, weight.detach().cpu())
    return out


def neural_collapse_by_alignment(
    features: torch.Tensor,
    labels: torch.Tensor,
    biases: torch.Tensor,
    weight: torch.Tensor | None = None,
) -> dict[str, dict[str, float | None]]:
    """NC metrics on all samples, on bias-aligned ones and on bias-conflicting ones."""
    aligned = labels == biases
    return {
        "all": neural_collapse(features, labels, weight),
        "aligned": neural_collapse(features[aligned], labels[aligned], weight),
        "conflicting": neural_collapse(features[~aligned], labels[~aligned], weight),
    }
