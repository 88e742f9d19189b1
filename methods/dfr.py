"""DFR, deep feature reweighting (Kirichenko, Izmailov and Wilson, Last Layer Re-Training is
Sufficient for Robustness to Spurious Correlations, ICLR 2023; ``PolinaKirichenko/
deep_feature_reweighting`` @ 9d8d5de, ``dfr_evaluate_spurious.py``: ``DFR^Val_Tr``).

Algorithm
    Stage 1, ERM: the run's network trained with cross-entropy, the recipe of Vanilla on the
    same dataset (``dfr.yaml`` mirrors ``vanilla.yaml``; ``tests/methods/test_lc_denetdm_dfr.py``
    checks they agree). It *is* the Vanilla model of the same cell: when the store holds a done
    Vanilla run whose identity equals this ERM stage's (the same dataset, ratio, seed, protocol,
    data options and every engine hyperparameter; :func:`erm_config`), its final checkpoint is
    loaded instead of training again. Trained here, the model is the same one, update for update
    (same initialisation draws, batch order and schedule as a Vanilla run).

    Stage 2, last-layer re-training: the held-out validation split is cut, per (class, bias)
    group, into two halves (``dfr.valid_halves``, seeded by the run). The engine evaluates
    and selects on the first half only (:meth:`DFR.evaluation_splits`: ``valid``, and the
    in-distribution split built from it); DFR re-trains on the second half, which no selection
    rule reads. On that half's penultimate features (the ERM model's, frozen, unaugmented):
    ``C`` is tuned as the official ``dfr_on_validation_tune`` does (the half cut again in two:
    fit on a group-balanced subsample of one part, keep the ``C`` of the best worst-group
    accuracy on the other; features standardised by the fitting part), then
    ``dfr_on_validation_eval``: ``num_retrains`` fits, each on a fresh group-balanced subsample
    (every group cut to the smallest's size) of the whole half, features standardised with the
    *training set's* mean and std, coefficients and intercepts averaged. L1-penalised logistic
    regression (liblinear; one-vs-rest for more than two classes) over ``C`` in
    ``1, 0.7, 0.3, 0.1, 0.07, 0.03, 0.01``. The averaged model is folded into a linear head on
    the raw features; prediction: ``head(features(x))``. Bias labels: the validation half only.

    The run's engine loop is one step (nothing is left to train after :meth:`prepare`):
    ``result.json``'s ``steps`` is 1, and ``method_record`` says where the ERM model came from
    (``erm: reused`` with the Vanilla run's id and step, or ``erm: trained`` with its steps),
    the ``C`` chosen, the tuning worst-group accuracy and the sizes of the halves.

Official behaviour kept
    * The two scalers (tuning standardises by the fitting part, the final fits by the training
      set's features) and the averaging of ``num_retrains`` = 20 fits (``--balance_dfr_val``,
      ``--notrain_dfr_val`` defaults: no training data added, class weights 1).

Departures
    * Official DFR re-trains on the whole validation split and selects nothing else with it;
      here on half of it, since the harness's selection rules read the other half (about half
      the images per group: Colored MNIST 6,000 validation images, 3,000 a half, ~30 per
      group of 100).
    * Groups absent from a half are left out of the balancing (the code's ``min`` would be 0).
    * The official ERM models are ImageNet-pretrained ResNet-50s (Waterbirds, CelebA); here the
      ERM model is each dataset's Vanilla recipe (no paper reports DFR on these datasets).
    * liblinear one-vs-rest for more than two classes is wrapped in ``OneVsRestClassifier``
      (scikit-learn >= 1.8 no longer does it inside ``LogisticRegression``): the same fits.

Host synchronisations
    all of DFR's training is its preparation stage, run once: the ERM model, then features
    copied to the host for scikit-learn's logistic regressions (inherent: the official
    last-layer fit is scikit-learn's). The one engine step after it does nothing
    (``bench perf --host-syncs``: 0).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from debias_bench.config.hparams import EngineParams
from debias_bench.config.run_config import RunConfig
from debias_bench.data.contract import Batch, Split, Splits, TrainStream
from debias_bench.data.spec import DatasetSpec
from debias_bench.runs.store import RunStore
from debias_bench.streams import generator, rng
from debias_bench.training.method import Method, TrainEnv
from debias_bench.training.metrics import collect_features
from debias_bench.training.sampling import group_of

from .biased import train_model
from .common import make_classifier
from .declared.dfr import DFRParams

if TYPE_CHECKING:
    from sklearn.preprocessing import StandardScaler

#: ``C_OPTIONS`` of dfr_evaluate_spurious.py
C_OPTIONS = (1.0, 0.7, 0.3, 0.1, 0.07, 0.03, 0.01)


def erm_config(config: RunConfig) -> RunConfig:
    """The Vanilla run that DFR's ERM stage is: DFR's engine hyperparameters, as Vanilla."""
    engine = {f.name for f in fields(EngineParams)}
    return RunConfig(
        method="vanilla",
        dataset=config.dataset,
        ratio=config.ratio,
        seed=config.seed,
        protocol=config.protocol,
        hparams={k: v for k, v in config.hparams.items() if k in engine},
        data_options=dict(config.data_options),
        preset=config.preset,
    )


def valid_halves(valid: Split, num_biases: int, seed: int) -> tuple[Split, Split]:
    """(the half the selection rules read, the half DFR re-trains on): each (class, bias) group
    shuffled (stream ``dfr.valid_halves``) and cut in two, the first ``n_g // 2`` to the
    selection half."""
    groups = group_of(valid.labels, valid.biases, num_biases)
    draws = generator(seed, "dfr.valid_halves")
    first, second = [], []
    for g in torch.unique(groups).tolist():
        rows = torch.nonzero(groups == g).flatten()
        rows = rows[torch.randperm(len(rows), generator=draws)]
        first.append(rows[: len(rows) // 2])
        second.append(rows[len(rows) // 2 :])
    keep, reweight = (torch.sort(torch.cat(part)).values for part in (first, second))
    return valid.subset(keep), valid.subset(reweight)


def balanced_rows(groups: np.ndarray, draws: np.random.Generator) -> np.ndarray:
    """Every group present cut to the smallest one's size (a fresh random subset of each)."""
    present = np.unique(groups)
    smallest = min(int((groups == g).sum()) for g in present)
    return np.concatenate(
        [draws.permutation(np.flatnonzero(groups == g))[:smallest] for g in present]
    )


def _scaler(x: np.ndarray) -> StandardScaler:
    """A ``StandardScaler`` fitted on ``x``."""
    from sklearn.preprocessing import StandardScaler

    return StandardScaler().fit(x)


def _fit(x: np.ndarray, y: np.ndarray, c: float, penalty: str, classes: int) -> tuple[Any, Any]:
    """L1/L2 logistic regression (liblinear, one-vs-rest for > 2 classes): ``(coef, intercept)``
    of shapes ``(K', d), (K',)`` with ``K'`` = 1 for two classes. scikit-learn is imported
    here and in :func:`_scaler`, not with the module: reading a run store imports every
    method's module (its code hash), and scikit-learn takes seconds to import."""
    import sklearn
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier

    if tuple(int(p) for p in sklearn.__version__.split(".")[:2]) >= (1, 8):
        model = LogisticRegression(
            C=c, l1_ratio=1.0 if penalty == "l1" else 0.0, solver="liblinear", random_state=0
        )
    else:
        model = LogisticRegression(C=c, penalty=penalty, solver="liblinear", random_state=0)
    if classes <= 2:
        model.fit(x, y)
        return model.coef_, model.intercept_
    ovr = OneVsRestClassifier(model).fit(x, y)
    coef = np.zeros((classes, x.shape[1]))
    intercept = np.full(classes, -np.inf)  # a class absent from the fit is never predicted
    for k, est in zip(ovr.classes_, ovr.estimators_, strict=True):
        coef[k], intercept[k] = est.coef_[0], est.intercept_[0]
    return coef, intercept


def linear_logits(x: np.ndarray, coef: np.ndarray, intercept: np.ndarray) -> np.ndarray:
    """``K`` logits of the fitted model (two classes: ``[0, w x + b]``, the same arg-max)."""
    scores = x @ coef.T + intercept
    return np.hstack([np.zeros_like(scores), scores]) if coef.shape[0] == 1 else scores


def worst_group_accuracy(pred: np.ndarray, y: np.ndarray, groups: np.ndarray) -> float:
    return float(min((pred[groups == g] == y[groups == g]).mean() for g in np.unique(groups)))


class _Kept:
    """Data a method keeps beside its state and rebuilds on every setup: nothing to save."""

    def __init__(self) -> None:
        self.split: Split | None = None

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        pass


class _Record:
    """What :meth:`DFR.record` reports, saved with the checkpoint (a resumed run keeps it)."""

    def __init__(self) -> None:
        self.facts: dict[str, Any] = {}

    def state_dict(self) -> dict[str, Any]:
        return dict(self.facts)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.facts = dict(state)


class DFR(Method):
    host_sync_note = "ERM and scikit-learn's last layer: once, before training; no-op step"
    Params = DFRParams
    hp: DFRParams

    def __init__(
        self, spec: DatasetSpec, hp: EngineParams | Mapping[str, Any], env: TrainEnv
    ) -> None:
        super().__init__(spec, hp, env)
        self.model = make_classifier(spec, self.hp, self.device)  # drawn first, as Vanilla's
        self.optimizer = self.optimizer_for(self.model)
        self.scheduler = self.scheduler_for(self.optimizer)
        self.head = nn.Linear(self.model.backbone.feat_dim, spec.num_classes).to(self.device)
        self.reweight_half = _Kept()
        self.notes = _Record()

    def evaluation_splits(self, data: Splits) -> Splits:
        keep, reweight = valid_halves(data.valid, self.spec.num_biases, self.env.seed)
        self.reweight_half.split = reweight
        return Splits(train=data.train, valid=keep, test=data.test)

    def run_length(self, steps: int) -> int:
        return 1

    def record(self) -> dict[str, Any]:
        return dict(self.notes.facts)

    # ------------------------------------------------------------------ stage 1: ERM
    def reuse_erm(self) -> dict[str, Any] | None:
        """Load the stored Vanilla run's final model when it is this ERM stage; what to record
        (None: no such run, not done, stale, or its checkpoint is not at its last step)."""
        if self.env.store is None or self.env.config is None:
            return None
        erm = erm_config(self.env.config)
        run = RunStore(self.env.store).run(erm.run_id)
        if not run.is_done():
            return None
        checkpoint, result = run.load_checkpoint(), run.result()
        if checkpoint is None or result is None or checkpoint["step"] != result["steps"]:
            return None
        self.model.load_state_dict(checkpoint["method"]["model"])
        return {"erm": "reused", "erm_run": erm.run_id, "erm_step": int(checkpoint["step"])}

    def train_erm(self, data: Splits) -> dict[str, Any]:
        """Train the ERM model as a Vanilla run would (its batch stream, schedule, length)."""
        steps = self.env.total_steps
        stream = TrainStream(data.train, self.spec, self.hp.batch_size, self.env.seed, self.device)
        train_model(self.model, self.optimizer, stream.batches(), steps, F.cross_entropy,
                    self.scheduler)  # fmt: skip
        return {"erm": "trained", "erm_steps": steps}

    # ------------------------------------------------------------------ stage 2: last layer
    def prepare(self, data: Splits) -> None:
        facts = self.reuse_erm() or self.train_erm(data)
        half = self.reweight_half.split
        assert half is not None, "evaluation_splits() runs before prepare()"
        self.model.eval()
        bs, dev = self.hp.eval_batch_size, self.device
        x_train = collect_features(self.model.features, data.train, self.spec, bs, dev).numpy()
        x = collect_features(self.model.features, half, self.spec, bs, dev).numpy()
        y = half.labels.numpy()
        groups = group_of(half.labels, half.biases, self.spec.num_biases).numpy()
        draws = rng(self.env.seed, "dfr.balance")
        c, tuned = self.tune(x, y, groups, draws)
        coef, intercept = self.retrain(x, y, groups, c, _scaler(x_train), draws)
        self.set_head(coef, intercept)
        smallest = min(int((groups == g).sum()) for g in np.unique(groups))
        self.notes.facts = {
            **facts,
            "C": c,
            "tune_worst_group_accuracy": 100.0 * tuned,
            "reweight_half": len(half),
            "per_group": smallest,
            "groups": len(np.unique(groups)),
        }

    def tune(
        self, x: np.ndarray, y: np.ndarray, groups: np.ndarray, draws: np.random.Generator
    ) -> tuple[float, float]:
        """``dfr_on_validation_tune``: the half cut in two (a random half fits on its balanced
        subsample, the other scores); the ``C`` of the best worst-group accuracy (ties: the
        first in ``C_OPTIONS``) and that accuracy."""
        order = draws.permutation(len(y))
        score, fit = order[: len(y) // 2], order[len(y) // 2 :]
        fit = fit[balanced_rows(groups[fit], draws)]
        scaler = _scaler(x[fit])
        x_fit, x_score = scaler.transform(x[fit]), scaler.transform(x[score])
        best_c, best = C_OPTIONS[0], -1.0
        for c in C_OPTIONS:
            coef, intercept = _fit(x_fit, y[fit], c, self.hp.penalty, self.spec.num_classes)
            pred = linear_logits(x_score, coef, intercept).argmax(1)
            acc = worst_group_accuracy(pred, y[score], groups[score])
            if acc > best:
                best_c, best = c, acc
        return best_c, best

    def retrain(
        self,
        x: np.ndarray,
        y: np.ndarray,
        groups: np.ndarray,
        c: float,
        scaler: StandardScaler,
        draws: np.random.Generator,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``dfr_on_validation_eval``: the mean coefficients and intercept of ``num_retrains``
        fits, each on a fresh balanced subsample of the half, standardised by ``scaler``."""
        coefs, intercepts = [], []
        for _ in range(self.hp.num_retrains):
            rows = balanced_rows(groups, draws)
            coef, intercept = _fit(scaler.transform(x[rows]), y[rows], c, self.hp.penalty,
                                   self.spec.num_classes)  # fmt: skip
            coefs.append(coef)
            intercepts.append(intercept)
        coef, intercept = np.mean(coefs, axis=0), np.mean(intercepts, axis=0)
        # fold the standardisation in: w (x - m) / s + b = (w / s) x + (b - w m / s)
        scale = np.where(scaler.scale_ == 0, 1.0, scaler.scale_)
        return coef / scale, intercept - (coef / scale) @ scaler.mean_

    def set_head(self, coef: np.ndarray, intercept: np.ndarray) -> None:
        """The head whose arg-max is the fitted model's (two classes: ``[0, w x + b]``)."""
        if coef.shape[0] == 1:
            coef = np.vstack([np.zeros_like(coef), coef])
            intercept = np.concatenate([np.zeros(1), intercept])
        with torch.no_grad():
            self.head.weight.copy_(torch.as_tensor(coef, dtype=torch.float32))
            finite = np.where(np.isfinite(intercept), intercept, -1e9)
            self.head.bias.copy_(torch.as_tensor(finite, dtype=torch.float32))

    # ------------------------------------------------------------------ the (empty) run
    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        return {}  # all of DFR's training is in prepare()

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.model.features(x))

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.model.features(x)

    def backbone_module(self) -> nn.Module:
        return self.model.backbone

    def classifier_weight(self) -> torch.Tensor:
        return self.head.weight
