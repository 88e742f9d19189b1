"""The samplers (``debias_bench.training.sampling``): exact draws on hand-made weights, resumable
epochs, and, on a real Colored MNIST 1 % build, 10,000 batches of each whose shares match the
exact expectation."""

from __future__ import annotations

import math

import pytest
import torch
from support.planted import finish, plant, selections

from debias_bench.cli import main
from debias_bench.config.run_config import resolve_hparams
from debias_bench.config.sampling import sampling_variant, split_variant, variant_key
from debias_bench.data.contract import Split, TrainStream, uniform_order
from debias_bench.data.spec import DatasetSpec
from debias_bench.methods.groupdro import GroupDRO
from debias_bench.methods.vanilla import Vanilla
from debias_bench.registry import DATASETS
from debias_bench.runs.store import RunStore
from debias_bench.training.method import TrainEnv
from debias_bench.training.sampling import (
    UNIFORM,
    GroupBalanced,
    Sampler,
    Weighted,
    draw_with_replacement,
    expected_share,
)

CPU = torch.device("cpu")
LOSS_WEIGHTS = {"sampling": "loss_weights"}
SPEC = DatasetSpec("t", 2, 2, (1.0,), (2, 2), 1, "mlp", "unbiased")


def _split(labels: list[int], biases: list[int]) -> Split:
    n = len(labels)
    return Split(torch.zeros(n, 2, 2, 1, dtype=torch.uint8), torch.tensor(labels),
                 torch.tensor(biases))  # fmt: skip


def _toy_split(n: int = 40) -> Split:
    labels = [i % 2 for i in range(n)]
    return _split(labels, [y if i % 10 else 1 - y for i, y in enumerate(labels)])


# ------------------------------------------------------------------------------ the draws
def test_uniform_is_the_former_batch_order():
    split = _toy_split()
    for epoch in range(3):
        expected = torch.randperm(
            40, generator=torch.Generator().manual_seed(5 * 1_000_003 + epoch)
        )
        assert torch.equal(UNIFORM.epoch_rows(split, 5, epoch), expected)
        assert torch.equal(uniform_order(40, 5, epoch), expected)
    plain = TrainStream(split, SPEC, 16, 5, CPU).batches()
    sampled = TrainStream(split, SPEC, 16, 5, CPU, UNIFORM).batches()
    for _ in range(7):
        assert torch.equal(next(plain).index, next(sampled).index)


def test_draws_follow_the_weights_and_never_a_weight_of_zero():
    weights = torch.tensor([0.0, 1.0, 3.0, 0.0, 4.0])
    rows = draw_with_replacement(weights, 80_000, torch.Generator().manual_seed(0))
    counts = torch.bincount(rows, minlength=5).double()
    assert counts[0] == counts[3] == 0
    shares = counts / counts.sum()
    expected = weights.double() / weights.sum()
    standard_error = (expected * (1 - expected) / 80_000).sqrt()
    assert bool(((shares - expected).abs() <= 3 * standard_error + 1e-12).all()), shares


def test_group_balanced_weights_are_one_over_the_group_size():
    split = _split([0, 0, 0, 0, 1, 1], [0, 0, 0, 1, 1, 0])  # groups of 3, 1, 1, 1
    sampler = GroupBalanced(2, 2)
    assert sampler.weights(split).tolist() == [1 / 3, 1 / 3, 1 / 3, 1.0, 1.0, 1.0]
    assert sampler.epoch_size(split) == 6 and sampler.state_dict() == {}
    rows = torch.cat([sampler.epoch_rows(split, 0, e) for e in range(4000)])
    groups = (split.labels * 2 + split.biases)[rows]
    shares = torch.bincount(groups, minlength=4).double() / len(rows)
    assert torch.allclose(shares, torch.full((4,), 0.25, dtype=torch.float64), atol=0.01)


def test_duplication_is_a_fresh_order_of_the_multiset_every_epoch():
    sampler = Weighted(5, replacement=False)
    sampler.set(torch.tensor([1.0, 3.0, 1.0, 1.0, 2.0]))
    split = _split([0] * 5, [0] * 5)
    assert sampler.epoch_size(split) == 8
    first, second = sampler.epoch_rows(split, 0, 0), sampler.epoch_rows(split, 0, 1)
    for rows in (first, second):
        assert torch.bincount(rows, minlength=5).tolist() == [1, 3, 1, 1, 2]
    assert not torch.equal(first, second)
    assert TrainStream(split, SPEC, 3, 0, CPU, sampler).steps_per_epoch == 3  # ceil(8 / 3)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ([1.0, -1.0, 1.0], "non-negative"),
        ([1.0, math.nan, 1.0], "finite"),
        ([0.0, 0.0, 0.0], "not all be 0"),
        ([1.0, 1.0], "shape"),
    ],
)
def test_bad_weights_are_refused(bad, message):
    with pytest.raises(ValueError, match=message):
        Weighted(3).set(torch.tensor(bad))


def test_duplication_needs_whole_multiplicities_and_weights_before_use():
    with pytest.raises(ValueError, match="whole multiplicities"):
        Weighted(2, replacement=False).set(torch.tensor([1.0, 2.5]))
    with pytest.raises(RuntimeError, match="prepare"):
        Weighted(2).epoch_rows(_split([0, 1], [0, 1]), 0, 0)


# ------------------------------------------------------------------------------ resume
def _samplers() -> dict[str, Sampler]:
    weighted, duplicated = Weighted(40), Weighted(40, replacement=False)
    weighted.set(torch.arange(40, dtype=torch.float64) % 7 + 0.5)
    duplicated.set(torch.arange(40, dtype=torch.float64) % 3 + 1)
    return {"uniform": UNIFORM, "group_balanced": GroupBalanced(2, 2), "weighted": weighted,
            "duplicated": duplicated}  # fmt: skip


@pytest.mark.parametrize("kind", ["uniform", "group_balanced", "weighted", "duplicated"])
def test_a_stream_resumed_at_any_step_draws_what_the_whole_one_draws(kind):
    """An epoch's order is a function of (seed, epoch, the sampler's state): a stream started at
    step k (a resumed run, its sampler restored from the state dict) yields the whole stream's
    batches from step k on, across epoch boundaries."""
    split, sampler = _toy_split(), _samplers()[kind]
    whole = TrainStream(split, SPEC, 16, 3, CPU, sampler).batches()
    rows = [next(whole).index for _ in range(20)]
    restored = sampler
    if isinstance(sampler, Weighted):
        restored = Weighted(40, replacement=sampler.replacement)
        restored.load_state_dict(sampler.state_dict())
    for start in (0, 1, 2, 7, 13):
        resumed = TrainStream(split, SPEC, 16, 3, CPU, restored).batches(start_step=start)
        for step in range(start, 20):
            assert torch.equal(next(resumed).index, rows[step]), (kind, start, step)


# ------------------------------------------------------------------------------ the interface
def test_a_method_draws_uniform_batches_unless_it_says_otherwise():
    spec, env = DATASETS.get("toy").spec, TrainEnv(CPU, 512, 16, 40, 0)
    vanilla = Vanilla(spec, resolve_hparams("vanilla", "toy", protocol="clean"), env)
    assert vanilla.batch_sampler() is UNIFORM
    groupdro = GroupDRO(spec, resolve_hparams("groupdro", "toy", protocol="clean"), env)
    assert isinstance(groupdro.batch_sampler(), GroupBalanced)


def test_a_sampling_variant_is_named_in_tables():
    assert sampling_variant("groupdro", {"sampling": "resample"}) is None
    assert sampling_variant("groupdro", {"sampling": "loss_weights"}) == "sampling=loss_weights"
    assert sampling_variant("vanilla", {"lr": 1e-3}) is None
    assert variant_key("jtt", {"sampling": "loss_weights"}) == "jtt[sampling=loss_weights]"
    assert variant_key("jtt", {"sampling": "resample"}) == "jtt"
    assert split_variant("jtt[sampling=loss_weights]") == ("jtt", "sampling=loss_weights")
    assert split_variant("jtt") == ("jtt", None)
    # a method this process does not know: any value is named
    assert sampling_variant("not_loaded", {"sampling": "resample"}) == "sampling=resample"


# ------------------------------------------------------------------------------ real data
BATCHES, BATCH = 10_000, 256


def _batch_shares(sampler: Sampler, split: Split, mask_of_rows: torch.Tensor, seed: int = 0):
    """Per batch of the first BATCHES batches (cut from the sampler's epochs exactly as a
    TrainStream cuts them), the share of rows in each class of ``mask_of_rows`` (int codes)."""
    stream = TrainStream(split, DATASETS.get("cmnist").spec, BATCH, seed, CPU, sampler)
    per_epoch = stream.steps_per_epoch
    codes = int(mask_of_rows.max()) + 1
    shares, epoch = [], 0
    while len(shares) < BATCHES:
        order = stream.epoch_rows(epoch)
        for k in range(per_epoch):
            rows = order[k * BATCH : (k + 1) * BATCH]
            counts = torch.bincount(mask_of_rows[rows], minlength=codes).double()
            shares.append(counts / len(rows))
            if len(shares) == BATCHES:
                break
        epoch += 1
    assert torch.equal(next(stream.batches()).index, stream.epoch_rows(0)[:BATCH])
    return torch.stack(shares)


def _within_three_standard_errors(shares: torch.Tensor, expected: torch.Tensor) -> None:
    mean = shares.mean(0)
    standard_error = shares.std(0) / math.sqrt(len(shares))
    print("measured", mean.tolist()[:4], "expected", expected.tolist()[:4])
    print("max |z|", float(((mean - expected).abs() / standard_error).max()))
    assert bool(((mean - expected).abs() <= 3 * standard_error).all())


@pytest.fixture(scope="module")
def cmnist_train(raw_root, data_root):
    return DATASETS.get("cmnist")(raw_root, data_root).load(1.0).train


@pytest.mark.realdata
def test_group_balanced_batches_hold_every_group_equally(cmnist_train):
    """100 (class, colour) groups, 542 of the 54,000 samples bias-conflicting (about 6 per
    group): drawn with weights 1/n_g, each group is 1/100 of a batch in expectation."""
    split = cmnist_train
    groups = split.labels * 10 + split.biases
    present = int((torch.bincount(groups, minlength=100) > 0).sum())
    shares = _batch_shares(GroupBalanced(10, 10), split, groups)
    _within_three_standard_errors(shares, torch.full((100,), 1.0 / present, dtype=torch.float64))
    conflicting = shares[:, (torch.arange(100) // 10) != (torch.arange(100) % 10)].sum(1)
    print("bias-conflicting share", float(conflicting.mean()), "expected 0.9")


@pytest.mark.realdata
@pytest.mark.parametrize("replacement", [False, True], ids=["duplicated", "weighted"])
def test_upweighted_samples_fill_batches_as_resampling_says(cmnist_train, replacement):
    """The bias-conflicting samples as the upweighted set (JTT's error set at 1 % is about
    them), 1 + 100 times the weight of the others: their share of a batch is
    101 * 542 / (54,000 + 100 * 542) = 0.506 under duplication and resampling alike (0.453
    under the loss weighting of uniform batches: docs/methods-sampling.md)."""
    split = cmnist_train
    upweighted = split.labels != split.biases
    weights = 1.0 + 100.0 * upweighted.double()
    sampler = Weighted(len(split), replacement=replacement)
    sampler.set(weights)
    expected = expected_share(weights, upweighted)
    assert expected == pytest.approx(101 * 542 / (54_000 + 100 * 542))
    shares = _batch_shares(sampler, split, upweighted.long())[:, 1:]
    _within_three_standard_errors(shares, torch.tensor([expected], dtype=torch.float64))


def test_a_store_with_both_sampling_modes_reports_them_as_two_labelled_methods(tmp_path, capsys):
    """The variant is never averaged with the official sampling nor shown under its name."""
    store = RunStore(tmp_path)
    for seed in (0, 1):
        official = plant(store, "groupdro", seed=seed, protocol="clean")
        finish(official, selections=selections(50.0, 40.0))
        variant = plant(store, "groupdro", seed=seed, protocol="clean", overrides=LOSS_WEIGHTS)
        finish(variant, selections=selections(45.0, 30.0))
    assert main(["report", "--out", str(tmp_path), "--table", "subpop"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if "| toy" in line]
    assert [row.split("|")[3].strip() for row in rows] == [
        "GroupDRO*",
        "GroupDRO [sampling=loss_weights]*",
    ]
    assert "50.00 ± 0.00" in rows[0] and "45.00 ± 0.00" in rows[1]
