"""Code is part of a run's identity: a run whose method's or dataset's code changed since it
was trained is ``stale`` (never reported), and rerunning the grid retrains it with the current
code, its old files kept under ``superseded/``. Comments, docstrings and type annotations do
not count. The code is every first-party module the method and dataset import, transitively
(a plugin's helper module, a built-in shared module such as ``methods/common.py``); a plugin's
code is its code, not the folder it lies in or the name it is imported under; a result that
records no code identity is stale.

The plugin is a real file in a temporary folder, loaded by path in fresh ``bench`` processes
(as a user edits it between two sweeps)."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO
from support.processes import run_bench

from debias_bench.runs.provenance import code_modules, normalized_code
from debias_bench.runs.store import RunStore

PLUGIN = """
from pathlib import Path

import torch

from debias_bench.data.contract import Split, Splits
from debias_bench.data.spec import DatasetSpec
from debias_bench.data.family import DatasetFamily
from debias_bench.methods.vanilla import Vanilla
from debias_bench.registry import DATASETS, register_method


def split(n, seed, name):
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % 2
    images = (torch.rand(n, 8, 8, 3, generator=g) * 255).to(torch.uint8)
    return Split(images, labels, labels.clone(), name=name)


@register_method("mine", display_name="Mine", citation="test", needs_bias_labels=False)
class Mine(Vanilla):
    def update(self, batch):
        return super().update(batch)  # CHANGE


@DATASETS.register("tiny", display_name="Tiny", citation="test")
class Tiny(DatasetFamily):
    spec = DatasetSpec(name="tiny", num_classes=2, num_biases=2, ratios=(5.0,),
                       image_size=(8, 8), channels=3, backbone="mlp", test_kind="unbiased")

    def prepare(self, ratios=None) -> Path:
        return self.data_root

    def load(self, ratio):
        return Splits(train=split(64, 1, "train"), valid=split(32, 2, "valid"),
                      test=split(32, 3, "test"))
"""


def _bench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "BENCH_PLUGINS": str(tmp_path / "plugin" / "mine.py"),
        "BENCH_DATA_ROOT": str(tmp_path / "data"),
        "OMP_NUM_THREADS": "1",
    }
    return run_bench(*args, env=env, cwd=tmp_path / "plugin", timeout=300)


def test_a_run_of_changed_code_is_stale_and_retrained(tmp_path):
    plugin = tmp_path / "plugin" / "mine.py"
    plugin.parent.mkdir()
    plugin.write_text(PLUGIN)
    out = tmp_path / "runs"
    grid = ["--methods", "mine", "--datasets", "tiny", "--ratios", "5", "--set", "steps=6",
            "--set", "eval_every=3", "--set", "batch_size=16", "--out", str(out)]  # fmt: skip
    done = _bench(tmp_path, "run", *grid)
    assert done.returncode == 0, done.stderr
    (run,) = RunStore(out).runs()
    first = run.result_path.read_bytes()

    # a comment, a docstring and type annotations: the same code
    documented = PLUGIN.replace("# CHANGE", "# reworded")
    documented = documented.replace("(Vanilla):\n", '(Vanilla):\n    """Doc."""\n\n')
    plugin.write_text(_annotated(documented))
    again = _bench(tmp_path, "run", *grid)
    assert again.returncode == 0 and "already done" in again.stderr + again.stdout
    assert run.result_path.read_bytes() == first

    # a change of the code: stale for every reader, then retrained by the same grid
    changed = "out = super().update(batch)\n        return out"
    plugin.write_text(PLUGIN.replace("return super().update(batch)", changed))
    status = _bench(tmp_path, "status", "--out", str(out))
    assert "stale" in status.stdout and "code changed" in status.stdout, status.stdout
    report = _bench(tmp_path, "report", "--out", str(out), "--table", "other")
    assert "stale" in report.stdout + report.stderr
    rerun = _bench(tmp_path, "run", *grid)
    assert rerun.returncode == 0, rerun.stderr
    assert "code changed" in rerun.stderr and "retraining" in rerun.stderr
    (aside,) = (run.path / "superseded").iterdir()
    assert (aside / "result.json").read_bytes() == first
    status = _bench(tmp_path, "status", "--out", str(out))
    assert "| done" in status.stdout and "stale" not in status.stdout


def _annotated(source: str) -> str:
    """``source`` with annotations added: the future import, a TYPE_CHECKING import, argument,
    return and variable annotations."""
    source = source.replace(
        "\nfrom pathlib import Path\n",
        "\nfrom __future__ import annotations\n\nfrom pathlib import Path\n"
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
        "    from debias_bench.data.contract import Batch\n",
    )
    source = source.replace("def update(self, batch):", "def update(self, batch: Batch) -> dict:")
    source = source.replace("def split(n, seed, name):", "def split(n: int, seed: int, name: str):")
    return source.replace("    g = torch.Generator()", "    g: torch.Generator = torch.Generator()")


@pytest.mark.parametrize(
    ("edit", "same"),
    [
        (_annotated, True),
        (lambda s: s.replace("return self.data_root", "return self.raw_root"), False),
        (lambda s: s.replace("labels = torch.arange(n) % 2", "labels: Any = torch.arange(n) % 3"),
         False),
        (lambda s: s.replace("labels.clone()", "labels"), False),
    ],
)  # fmt: skip
def test_annotation_only_edits_keep_the_normalized_code(edit, same):
    assert edit(PLUGIN) != PLUGIN
    assert (normalized_code(edit(PLUGIN)) == normalized_code(PLUGIN)) is same


def test_dataclass_field_annotations_count():
    """A params class's annotations declare each hyperparameter's kind (and a dataclass's
    fields): they are code."""
    params = "@dataclass(frozen=True)\nclass P(EngineParams):\n    q: float = gce_q()\n"
    assert normalized_code(params) != normalized_code(params.replace("q: float", "q: int"))
    plain = "class C:\n    q: float = 0.5\n"
    assert normalized_code(plain) == normalized_code(plain.replace("q: float", "q: int"))


# ------------------------------------------------------------------ imported modules count
#: a plugin method whose loss lives in a helper module beside it (found on sys.path: the
#: working directory of ``python -m``, as PYTHONPATH would put it there)
HELPED = """
from debias_bench.methods.vanilla import Vanilla
from debias_bench.registry import register_method

from helped_losses import helped_loss


@register_method("helped", display_name="Helped", citation="test", needs_bias_labels=False)
class Helped(Vanilla):
    def update(self, batch):
        loss = helped_loss(self.model(batch.x), batch.y)
        self.step(loss, (self.optimizer, self.scheduler))
        return {"loss": loss.detach()}
"""
LOSSES = """
import torch.nn.functional as F


def helped_loss(logits, labels):
    return F.cross_entropy(logits, labels)  # LOSS
"""
LOSS = "F.cross_entropy(logits, labels)"
HELPED_GRID = ("--methods", "helped", "--datasets", "cmnist", "--ratios", "1", "--preset", "smoke",
               "--device", "cpu")  # fmt: skip


def _write_plugin(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "helped.py").write_text(HELPED)
    (folder / "helped_losses.py").write_text(LOSSES)
    return folder / "helped.py"


def _helped(
    folder: Path, env: dict[str, str], *args: str, plugin: str | None = None
) -> subprocess.CompletedProcess:
    """``bench ARGS`` with the plugin in ``folder`` (by path unless ``plugin`` names it)."""
    plugins = {"BENCH_PLUGINS": plugin or str(folder / "helped.py"), "OMP_NUM_THREADS": "1"}
    return run_bench(*args, env={**env, **plugins}, cwd=folder, timeout=300)


def _train_losses(run) -> list[float]:
    return [record["train"]["loss"] for record in run.metrics() if "train" in record]


@pytest.fixture
def real_env(raw_root, data_root) -> dict[str, str]:
    return {**os.environ, "BENCH_RAW_ROOT": str(raw_root), "BENCH_DATA_ROOT": str(data_root)}


@pytest.fixture(scope="module")
def helped_store(tmp_path_factory, raw_root, data_root) -> tuple[Path, Path]:
    """(plugin folder, store) of one finished run of the helped plugin on Colored MNIST, for
    tests that copy the store and must find it done (or not) without training it again."""
    base = tmp_path_factory.mktemp("helped")
    folder, out = base / "plugin", base / "runs"
    _write_plugin(folder)
    env = {**os.environ, "BENCH_RAW_ROOT": str(raw_root), "BENCH_DATA_ROOT": str(data_root)}
    done = _helped(folder, env, "run", *HELPED_GRID, "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "1 ran, 0 failed" in done.stderr, done.stderr
    return folder, out


@pytest.mark.realdata
def test_an_edit_of_a_helper_module_the_plugin_imports_is_a_code_change(tmp_path, real_env):
    folder, out = tmp_path / "plugin", tmp_path / "runs"
    _write_plugin(folder)
    grid = [*HELPED_GRID, "--out", str(out)]
    first = _helped(folder, real_env, "run", *grid)
    assert first.returncode == 0 and "1 ran, 0 failed" in first.stderr, first.stderr
    (run,) = RunStore(out).runs()
    before = json.loads(run.result_path.read_text())
    losses_before = _train_losses(run)
    assert losses_before, run.metrics_path.read_text()

    helper = folder / "helped_losses.py"
    helper.write_text(LOSSES.replace("# LOSS", "# a comment is not code"))
    status = _helped(folder, real_env, "status", "--out", str(out))
    assert "| done" in status.stdout and "stale" not in status.stdout, status.stdout

    helper.write_text(LOSSES.replace(LOSS, "F.cross_entropy(logits, labels, label_smoothing=0.5)"))
    status = _helped(folder, real_env, "status", "--out", str(out))
    assert "stale" in status.stdout and "code changed" in status.stdout, status.stdout
    rerun = _helped(folder, real_env, "run", *grid)
    assert rerun.returncode == 0, rerun.stderr
    assert "code changed" in rerun.stderr and "retraining" in rerun.stderr, rerun.stderr
    assert "1 ran, 0 failed" in rerun.stderr
    (aside,) = (run.path / "superseded").iterdir()
    assert json.loads((aside / "result.json").read_text()) == before
    after = json.loads(run.result_path.read_text())
    assert after["code"] != before["code"]
    assert _train_losses(run) != losses_before  # the edited loss trained it
    status = _helped(folder, real_env, "status", "--out", str(out))
    assert "| done" in status.stdout and "stale" not in status.stdout, status.stdout


@pytest.mark.realdata
def test_a_copied_plugin_keeps_its_runs_done(tmp_path, helped_store, real_env):
    """Where the plugin lies and the name it is imported under are not its code."""
    folder, trained = helped_store
    out = tmp_path / "runs"
    shutil.copytree(trained, out)
    elsewhere = tmp_path / "elsewhere" / "plugins"
    shutil.copytree(folder, elsewhere)
    (run,) = RunStore(out).runs()
    recorded = json.loads(run.result_path.read_text())["code"]

    moved = _helped(elsewhere, real_env, "status", "--out", str(out))
    assert "| done" in moved.stdout and "stale" not in moved.stdout, moved.stdout
    by_name = _helped(elsewhere, real_env, "status", "--out", str(out), plugin="helped")
    assert "| done" in by_name.stdout and "stale" not in by_name.stdout, by_name.stdout
    again = _helped(elsewhere, real_env, "run", *HELPED_GRID, "--out", str(out))
    assert again.returncode == 0 and "0 ran" in again.stderr, again.stderr
    assert json.loads(run.result_path.read_text())["code"] == recorded

    # the copy is code of its own: editing it leaves the original's runs done
    (elsewhere / "helped_losses.py").write_text(LOSSES.replace(LOSS, f"0.5 * {LOSS}"))
    edited = _helped(elsewhere, real_env, "status", "--out", str(out))
    assert "stale" in edited.stdout and "code changed" in edited.stdout, edited.stdout
    original = _helped(folder, real_env, "status", "--out", str(out))
    assert "| done" in original.stdout and "stale" not in original.stdout, original.stdout


@pytest.mark.realdata
def test_a_result_without_a_code_identity_is_stale_and_retrained(tmp_path, helped_store, real_env):
    """A result whose ``code`` was removed (and its version lowered, as a store recorded before
    the hash existed reads) is not taken as done."""
    folder, trained = helped_store
    out = tmp_path / "runs"
    shutil.copytree(trained, out)
    (run,) = RunStore(out).runs()
    result = json.loads(run.result_path.read_text())
    legacy = {k: v for k, v in result.items() if k != "code"}
    legacy["code_version"] = "0.1.0"
    run.result_path.write_text(json.dumps(legacy))

    status = _helped(folder, real_env, "status", "--out", str(out))
    assert "stale" in status.stdout and "no code identity" in status.stdout, status.stdout
    rerun = _helped(folder, real_env, "run", *HELPED_GRID, "--out", str(out))
    assert rerun.returncode == 0 and "1 ran, 0 failed" in rerun.stderr, rerun.stderr
    assert "no code identity recorded" in rerun.stderr and "retraining" in rerun.stderr
    assert json.loads(run.result_path.read_text())["code"] == result["code"]
    status = _helped(folder, real_env, "status", "--out", str(out))
    assert "| done" in status.stdout and "stale" not in status.stdout, status.stdout


# ------------------------------------------------------------------ built-in shared modules
#: prints the code hash of every built-in method on Colored MNIST, as JSON
HASHES = (
    "import json, debias_bench.methods as m; from debias_bench.runs.provenance import code_hash;"
    "from debias_bench.registry import METHODS;"
    "print(json.dumps({'package': m.__file__,"
    " 'hashes': {name: code_hash(name, 'cmnist') for name in METHODS.names()}}))"
)


def _package_copy(root: Path) -> Path:
    """The ``debias_bench`` package laid out under ``root`` from this checkout's folders
    (pyproject.toml's mapping): a copy whose modules a test may edit."""
    skip = shutil.ignore_patterns("__pycache__")
    package = root / "debias_bench"
    shutil.copytree(REPO / "bench", package, ignore=skip)
    for folder, name in (("methods", "methods"), ("datasets", "datasets"),
                         ("results/reference", "reference")):  # fmt: skip
        shutil.copytree(REPO / folder, package / name, ignore=skip)
    return package


def _hashes(root: Path) -> dict[str, str]:
    """The code hashes the package copy under ``root`` computes, in a fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", HASHES], capture_output=True, text=True, env=env, cwd=root,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert Path(out["package"]).resolve().is_relative_to(root.resolve()), out  # the copy ran
    return out["hashes"]


def test_an_edit_of_a_built_in_shared_module_changes_the_methods_that_import_it(tmp_path):
    """``methods/common.py`` (imported by Vanilla and, through Vanilla, by GroupDRO) and
    ``methods/losses.py`` (imported by JTT only through ``methods/biased.py``), edited in a
    copy of the package: the hash of every method that imports them changes, transitively,
    and no other's."""
    package = _package_copy(tmp_path)
    common, losses = package / "methods" / "common.py", package / "methods" / "losses.py"
    original = _hashes(tmp_path)

    common.write_text(common.read_text() + "\n# a comment is not code\n")
    assert _hashes(tmp_path) == original

    common.write_text(common.read_text() + "\nEDITED = 1\n")
    edited = _hashes(tmp_path)
    changed = {name for name in original if edited[name] != original[name]}
    assert {"vanilla", "groupdro", "lff", "lff_be", "jtt", "pgd"} <= changed, changed
    assert not {"end", "sd", "etf_debias", "disent"} & changed, changed

    losses.write_text(losses.read_text() + "\nEDITED = 1\n")
    again = _hashes(tmp_path)
    changed = {name for name in edited if again[name] != edited[name]}
    assert {"jtt", "lff", "lff_be", "disent", "pgd"} <= changed, changed
    assert not {"vanilla", "groupdro", "end", "sd", "etf_debias"} & changed, changed


def test_the_modules_of_a_plugin_package_are_followed_through_its_imports(tmp_path, monkeypatch):
    """Relative imports, a name re-exported by a package's ``__init__`` (which itself does not
    use it) and an import inside a function are followed; a ``TYPE_CHECKING`` import, the
    engine, the standard library and installed packages are not the run's code."""
    package = tmp_path / "mypkg"
    package.mkdir()
    sources = {
        "__init__.py": "from .losses import loss\n",
        "losses.py": "from ._impl import core\n\n\ndef loss(x):\n    return core(x)\n",
        "_impl.py": "import torch\n\n\ndef core(x):\n    from . import lazy\n"
        "    return lazy.twice(torch.as_tensor(x))\n",
        "lazy.py": "def twice(x):\n    return 2 * x\n",
        "hints.py": "Hint = int\n",
        "unused.py": "X = 1\n",
    }
    for name, source in sources.items():
        (package / name).write_text(source)
    (tmp_path / "plug.py").write_text(
        "from typing import TYPE_CHECKING\n\nimport os\n\n"
        "from debias_bench.methods.vanilla import Vanilla\n"
        "from mypkg import loss\nfrom mypkg.unused import X\n\n"
        "if TYPE_CHECKING:\n    from mypkg.hints import Hint\n\n\n"
        "class Plug(Vanilla):\n    def update(self, batch):\n"
        "        return {'loss': loss(os.sep)}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(sys.modules)
    try:
        plug = importlib.import_module("plug")
        modules = code_modules(plug.Plug)
        names = [module.name for module in modules]
        assert names == [module.name for module in code_modules(plug.Plug)]  # a fixed order
    finally:
        for name in set(sys.modules) - before:
            del sys.modules[name]
    assert set(names) == {
        "plug", "mypkg", "mypkg.losses", "mypkg._impl", "mypkg.lazy",
        "debias_bench.methods.vanilla", "debias_bench.methods.common",
    }, names  # fmt: skip
    homes = {module.home for module in modules if not module.name.startswith("debias_bench")}
    assert homes == {tmp_path.resolve()}
