"""BENCH_PLUGINS: module names and paths to .py files, in the CLI and in worker processes;
a plugin that fails to import is a one-line ConfigError naming it and the error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.path_plugin import PLUGIN, local_sweep

from debias_bench.cli import main
from debias_bench.config.run_config import RunConfig
from debias_bench.errors import ConfigError
from debias_bench.plugins import loading as plugins


@pytest.fixture
def plugin_file(tmp_path, registries_restored):
    """``<tmp>/elsewhere/path_plugin_ds.py``, registering ``path_plugin_ds``; unregistered after."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    path = folder / "path_plugin_ds.py"
    path.write_text(PLUGIN.replace("{name}", "path_plugin_ds"))
    return path


def test_a_path_plugin_needs_no_pythonpath_and_is_seen_by_every_command(
    plugin_file, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(plugin_file.parent.parent)
    monkeypatch.setenv("BENCH_PLUGINS", "elsewhere/path_plugin_ds.py")  # relative to the cwd
    assert str(plugin_file.parent) not in sys.path
    assert main(["list", "datasets"]) == 0
    assert "path_plugin_ds" in capsys.readouterr().out
    # twice in one process (every command imports $BENCH_PLUGINS): no duplicate registration
    assert main(["list", "datasets"]) == 0
    # its declared option is checked like a built-in dataset's
    args = ["run", "--datasets", "path_plugin_ds", "--dry-run", "--out", str(tmp_path / "r")]
    assert main([*args, "--data-option", "size=4"]) == 2
    assert "size=4" in capsys.readouterr().err
    # a worker (any cwd, no PYTHONPATH) gets an absolute path it can import
    config = RunConfig("vanilla", "path_plugin_ds", 5.0, 0)
    entries, _ = plugins.plugins_for([config])
    assert entries == [str(plugin_file)]


def test_a_worker_process_imports_a_path_plugin(plugin_file, tmp_path):
    plugins.import_plugins([str(plugin_file)])
    entries, paths = plugins.plugins_for([RunConfig("vanilla", "path_plugin_ds", 5.0, 0)])
    code = (
        "import json, sys\n"
        "from debias_bench.plugins.loading import import_plugins\n"
        "from debias_bench.registry import DATASETS\n"
        "import_plugins(json.loads(sys.argv[1]), json.loads(sys.argv[2]))\n"
        "print(DATASETS.entry('path_plugin_ds').meta['kind'])\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "BENCH_PLUGINS")}
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(entries), json.dumps(paths)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "real"


@pytest.mark.slow
def test_a_local_sweep_on_a_path_plugin_dataset(plugin_file, tmp_path):
    """End to end: `bench run --launcher local` in a fresh interpreter, plugin given by path."""
    local_sweep(plugin_file, "path_plugin_ds", tmp_path, timeout=300)


@pytest.mark.parametrize(
    "body, error",
    [
        ("raise RuntimeError('plugin is broken')", "RuntimeError: plugin is broken"),
        ("x = 1 / 0", "ZeroDivisionError"),
        ("import no_such_module_xyz", "ModuleNotFoundError"),
        ("def f(:\n    pass", "SyntaxError"),
        ("import sys\nsys.exit(3)", "SystemExit"),
    ],
)
def test_a_failing_plugin_is_a_named_config_error(tmp_path, monkeypatch, capsys, body, error):
    path = tmp_path / "bad_plugin_xyz.py"
    path.write_text(body + "\n")
    with pytest.raises(ConfigError) as err:
        plugins.import_plugins([str(path)])
    assert "bad_plugin_xyz" in str(err.value) and error in str(err.value)
    assert "bad_plugin_xyz" not in sys.modules
    monkeypatch.setenv("BENCH_PLUGINS", str(path))
    assert main(["list", "datasets"]) == 2
    captured = capsys.readouterr().err
    assert "Traceback" not in captured and error in captured and captured.count("\n") <= 3


def test_unknown_module_and_missing_file(tmp_path, monkeypatch, capsys):
    with pytest.raises(ConfigError, match="no module named 'no_such_plugin_mod'") as err:
        plugins.import_plugins(["no_such_plugin_mod"])
    assert "path to its .py file" in (err.value.hint or "")
    with pytest.raises(ConfigError, match="does not exist"):
        plugins.import_plugins([str(tmp_path / "missing.py")])


def test_a_plugin_file_named_like_an_installed_package_does_not_shadow_it(tmp_path):
    path = tmp_path / "json.py"  # the standard library's json must stay importable
    path.write_text("VALUE = 7\n")
    name = plugins.import_plugin(str(path))
    assert name != "json" and sys.modules[name].VALUE == 7
    assert json.dumps({"a": 1}) == '{"a": 1}'
    assert Path(sys.modules[name].__file__) == path.resolve()


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("..", "plugin '..' in BENCH_PLUGINS is neither a module name"),
        ("..my_methods", "plugin '..my_methods' in BENCH_PLUGINS is neither a module name"),
        ("my methods", "plugin 'my methods' in BENCH_PLUGINS is neither a module name"),
        ("../", "(BENCH_PLUGINS entry '../') is a folder, not a .py file"),
        ("../no_such_plugin_xyz.py", "(BENCH_PLUGINS entry '../no_such_plugin_xyz.py') does not"),
        ("sub/../../no_such_plugin_xyz", "entry 'sub/../../no_such_plugin_xyz') does not exist"),
    ],
)
def test_a_plugin_entry_with_dots_or_a_path_up_is_named(
    tmp_path, monkeypatch, capsys, entry, message
):
    """Each entry of BENCH_PLUGINS that is no plugin: one error naming it (as given), exit 2,
    no traceback (``..`` was a TypeError from importlib)."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("BENCH_PLUGINS", entry)
    assert main(["list", "methods"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: plugin") and message in err, err
    assert "Traceback" not in err and err.count("\n") <= 2
