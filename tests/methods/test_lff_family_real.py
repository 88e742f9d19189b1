"""LfF, LfF+BE and DisEnt measurably debias on real Colored MNIST at 1 % bias-conflicting samples.

Each method is compared with Vanilla trained with the same protocol (clean) and length (5
epochs of the quick preset), seed 0, on the unbiased test set's bias-conflicting samples.

Shortened schedules, scaled from the official ones (not tuned on the test set):
* LfF+BE: a committee of 5 members trained 100 steps each, checkpoint compared at steps 0 and
  50 (the official 1,000 steps / steps 0 and 500, a tenth; the mask is as clean: 98.7 % of the
  52,779 selected samples are bias-aligned, against 99.9 % of 53,204 with 200 steps).
* DisEnt: the swap starts after 1 epoch and the lr halves every epoch from then on (officially
  after 10k of 50k steps and every 10k: the same fractions of the run).

Not tested here (too slow), measured once under the official protocol (inputs divided by 255
twice), 20 epochs, seed 0, same scaled schedules (committee 200 steps / checkpoint at 0 and 100;
DisEnt swap after 4 epochs, decay every 4), unbiased / conflicting / aligned test accuracy:
Vanilla 34.5 / 27.2 / 99.8, LfF 43.6 / 43.5 / 44.7 (its lr 1e-3 on [0, 1/255] inputs is still
learning the digits), LfF+BE 56.3 / 52.0 / 94.8, DisEnt 71.0 / 69.8 / 82.1.
"""

from __future__ import annotations

import pytest
from support.methods_helpers import real_cmnist_run

from debias_bench.paths import DataPlace

pytestmark = pytest.mark.realdata

EPOCHS = 5
STEPS_PER_EPOCH = 211  # 54,000 training images (60,000 minus the 6,000 held out), batch 256
OVERRIDES = {
    "lff": {},
    "lff_be": {"committee_steps": 100, "committee_valid_every": 50},
    "disent": {"curr_step": STEPS_PER_EPOCH, "lr_decay_step": STEPS_PER_EPOCH},
}


def _test_metrics(method, tmp_path, raw_root, data_root, overrides=None):
    place = DataPlace(raw_root, data_root)
    result = real_cmnist_run(method, tmp_path, place, epochs=EPOCHS, overrides=overrides)
    assert result["steps"] == EPOCHS * STEPS_PER_EPOCH
    return result["selections"]["last"]["test"]


@pytest.fixture(scope="module")
def vanilla(tmp_path_factory, raw_root, data_root):
    """Measured: unbiased 54.0, bias-conflicting 48.9, aligned 99.8."""
    return _test_metrics("vanilla", tmp_path_factory.mktemp("vanilla"), raw_root, data_root)


@pytest.mark.parametrize("method", ["lff", "lff_be", "disent"])
def test_beats_vanilla_on_bias_conflicting_samples(method, vanilla, tmp_path, raw_root, data_root):
    """Measured (seed 0; test accuracy, unbiased / conflicting / aligned; wall time on 2 CPU
    cores shared with other jobs, load about 5):

    Vanilla 54.0 / 48.9 / 99.8   28 s
    LfF     73.3 / 70.7 / 96.3   29 s
    LfF+BE  75.1 / 73.4 / 90.3   48 s, of which the committee 19 s
    DisEnt  73.0 / 70.7 / 93.9   40 s
    """
    ours = _test_metrics(method, tmp_path, raw_root, data_root, OVERRIDES[method])
    assert ours["conflicting_accuracy"] > vanilla["conflicting_accuracy"] + 10
    assert ours["accuracy"] > vanilla["accuracy"] + 8
    assert ours["aligned_accuracy"] > 80  # it still learns the task, not the opposite shortcut
