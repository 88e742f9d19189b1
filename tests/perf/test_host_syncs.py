"""`bench perf --host-syncs`: the counter of host synchronisations (on CPU tensors), a planted
plugin that reads its loss every step, and the built-in methods' steps, which read nothing."""

from __future__ import annotations

import json
import textwrap

import pytest
import torch
import torch.nn.functional as F

from debias_bench.cli import main
from debias_bench.perf.cells import run_cell
from debias_bench.perf.host_syncs import SyncCounter
from debias_bench.perf.speed import Cell

#: a Vanilla whose step reads its loss as a Python number, every step (a planted sync)
PLUGIN = textwrap.dedent(
    '''
    """Vanilla, reading its loss on the host every step."""
    from debias_bench.methods.vanilla import Vanilla
    from debias_bench.registry import register_method


    @register_method("float_loss", display_name="FloatLoss", citation="test",
                     needs_bias_labels=False)
    class FloatLoss(Vanilla):
        def update(self, batch):
            scalars = super().update(batch)
            self.last = float(scalars["loss"])  # waits for the device
            return scalars
    '''
)

TINY = {"steps": 3, "warmup": 1, "threads": 1, "host_syncs": True}


@pytest.fixture
def plugin(tmp_path, monkeypatch, registries_restored):
    """``float_loss``, a plugin file named by ``BENCH_PLUGINS``; unregistered after."""
    path = tmp_path / "float_loss_plugin.py"
    path.write_text(PLUGIN)
    monkeypatch.setenv("BENCH_PLUGINS", str(path))
    return path


def counted(work) -> SyncCounter:
    with SyncCounter("cpu") as counter:
        work()
    return counter


@pytest.mark.parametrize(
    "work",
    [
        lambda x: float(x.sum()),
        lambda x: x.sum().item(),
        lambda x: bool((x > 0).any()),
        lambda x: x.tolist(),
        lambda x: x.numpy(),
        lambda x: x[x > 0],
        lambda x: torch.nonzero(x),
        lambda x: torch.where(x > 0),
        lambda x: torch.unique(x),
        lambda x: torch.repeat_interleave(torch.arange(4), (x > 0).long()),
        lambda x: torch.bincount((x > 0).long(), minlength=2),
    ],
)
def test_every_kind_of_sync_is_counted_on_cpu_tensors(work):
    x = torch.randn(4)
    counter = counted(lambda: work(x))
    assert counter.total >= 1
    assert all("test_host_syncs.py" in site for site in counter.sites)  # where it happened


def test_device_side_work_counts_nothing():
    """What the methods use instead: masked sums, where, index_add, sized one_hot, sort, and
    a step of Adam (whose step counter lives on the host by design)."""
    model = torch.nn.Linear(4, 3)
    optimizer = torch.optim.Adam(model.parameters())
    x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))

    def step():
        losses = F.cross_entropy(model(x), y, reduction="none")
        selected = y > 0
        loss = torch.where(selected, losses, 0.0).sum() / selected.sum().clamp(min=1)
        counts = torch.zeros(3, dtype=torch.long).index_add_(0, y, torch.ones_like(y))
        F.one_hot(y, 3).float().t() @ losses / counts.clamp(min=1)
        torch.sort(y, stable=True)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    assert counted(step).total == 0


def test_the_counter_counts_only_while_active():
    x = torch.ones(2)
    with SyncCounter() as counter:
        counter.active = False
        float(x.sum())
        counter.active = True
        float(x.sum())
    assert counter.total == 1


def test_a_plugin_reading_its_loss_every_step_counts_one_per_step(plugin):
    from debias_bench.plugins.loading import import_plugins

    import_plugins([str(plugin)])
    found = run_cell(Cell("cmnist", "float_loss", **TINY))
    assert found.error is None and found.timed_steps == 3
    assert found.host_syncs_per_step is not None and found.host_syncs_per_step >= 1
    assert any("float_loss_plugin.py" in site for site in found.host_sync_sites or {})
    vanilla = run_cell(Cell("cmnist", "vanilla", **TINY))
    assert vanilla.host_syncs == 0 and vanilla.host_syncs_per_step == 0


def test_cli_writes_host_syncs_per_step_in_the_summary(plugin, tmp_path, capsys):
    out = tmp_path / "syncs.json"
    args = "perf --host-syncs --datasets cmnist --methods float_loss,dfr --steps 2 --warmup 1"
    assert main([*args.split(), "--threads", "1", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "host syncs/step" in printed and "float_loss" in printed
    rows = {r["method"]: r for r in json.loads(out.read_text())["summary"]}
    assert set(rows) == {"vanilla", "float_loss", "dfr"}  # Vanilla once, no bare loop
    assert rows["float_loss"]["host_syncs_per_step"] >= 1
    assert rows["vanilla"]["host_syncs_per_step"] == 0
    # DFR trains in its preparation stage (not counted) and makes one update, counted
    assert rows["dfr"]["host_syncs_per_step"] == 0 and rows["dfr"]["host_sync_note"]


def test_lc_steps_without_waiting_for_the_device():
    """Issue 51's LC case: 12 runs packed on one H100, LC's six made about 4 steps/s each
    against DeNetDM's 95, LC alone about 137. Its step drew mixup partners on the host (22
    syncs a step on Colored MNIST before cfc4130); a step that waits for a shared GPU waits for
    every other run's kernels. The cause, checked on a CPU: no host sync in its step."""
    found = run_cell(Cell("cmnist", "lc", **TINY))
    assert found.error is None and found.timed_steps == 3
    assert found.host_syncs == 0, found.host_sync_sites
