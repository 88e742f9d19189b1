"""Plugins are imported before the command line is read: a plugin's launcher (with its own
flags), method and dataset are valid names and appear in ``--help`` and ``bench list``; a
broken plugin is one ``error:`` line with a hint, exit 2, also for ``--help``."""

from __future__ import annotations

import sys
import textwrap

import pytest

from debias_bench.cli import main
from debias_bench.launchers import LAUNCHERS
from debias_bench.plugins.loading import import_plugin
from debias_bench.registry import METHODS
from debias_bench.reporting import TABLES

LAUNCHER_PLUGIN = textwrap.dedent(
    '''
    """A launcher plugin (and a method and a table) that lives outside the repository."""
    from debias_bench.launchers import Launchable, register_launcher
    from debias_bench.methods.vanilla import Vanilla
    from debias_bench.registry import register_method
    from debias_bench.reporting import register_table

    register_method("{name}_method", display_name="Plugin method")(type("M", (Vanilla,), {{}}))
    register_table("{name}_table", display_name="a plugin's table")(lambda runs, opts, paper: [])


    @register_launcher("{name}", display_name="a plugin's launcher")
    class PluginLauncher(Launchable):
        @classmethod
        def add_arguments(cls, group):
            group.add_argument("{flag}", type=int, default=3, help="{name}: its own flag")

        @classmethod
        def from_args(cls, args, ctx):
            raise SystemExit("not reached in these tests")
    '''
)


@pytest.fixture
def write_plugin(tmp_path, monkeypatch):
    """Write a launcher plugin named ``name`` declaring ``flag``; name it in BENCH_PLUGINS."""
    names = []

    def write(name: str, flag: str) -> None:
        path = tmp_path / f"{name}.py"
        path.write_text(LAUNCHER_PLUGIN.format(name=name, flag=flag))
        monkeypatch.setenv("BENCH_PLUGINS", str(path))
        names.append(name)

    yield write
    for name in names:
        LAUNCHERS.unregister(name)
        METHODS.unregister(f"{name}_method")
        TABLES.unregister(f"{name}_table")


def test_a_plugin_launcher_is_a_choice_with_its_flags_in_help_and_list(write_plugin, capsys):
    write_plugin("cli_plugin_launcher", "--plugin-knob")
    with pytest.raises(SystemExit) as done:
        main(["run", "--help"])
    assert done.value.code == 0
    shown = capsys.readouterr().out
    assert "{inline,local,slurm,ray,cli_plugin_launcher}" in shown
    section = shown.split("--launcher cli_plugin_launcher:")[1]
    assert "--plugin-knob" in section and "cli_plugin_launcher: its own flag" in section
    methods_help = shown.split("\n  --methods")[1].split("\n  --datasets")[0]
    assert "cli_plugin_launcher_method" in methods_help

    assert main(["list", "launchers"]) == 0
    (row,) = [r for r in capsys.readouterr().out.splitlines() if "cli_plugin_launcher" in r]
    assert "--plugin-knob" in row and "cli_plugin_launcher.py" in row
    assert main(["list", "methods"]) == 0
    assert "cli_plugin_launcher_method" in capsys.readouterr().out
    assert main(["list", "tables"]) == 0
    (row,) = [r for r in capsys.readouterr().out.splitlines() if "cli_plugin_launcher" in r]
    assert "a plugin's table" in row and "cli_plugin_launcher.py" in row
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    assert "cli_plugin_launcher_table: a plugin's table" in capsys.readouterr().out

    # its flag is parsed with its declared type, and --dry-run needs no launcher
    args = ["run", "--launcher", "cli_plugin_launcher", "--plugin-knob", "x", "--dry-run"]
    assert main(args) == 2
    assert "--plugin-knob" in capsys.readouterr().err


def test_a_plugin_launcher_flag_that_bench_already_has_is_named(write_plugin, capsys):
    write_plugin("cli_clashing_launcher", "--workers")
    assert main(["run", "--help"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: launcher 'cli_clashing_launcher'") and "--workers" in err
    assert "hint:" in err and "Traceback" not in err


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"], ["list", "launchers"]])
def test_a_broken_plugin_stops_every_command_and_help_with_one_error(
    tmp_path, monkeypatch, capsys, argv
):
    path = tmp_path / "broken_cli_plugin.py"
    path.write_text("raise RuntimeError('plugin is broken')\n")
    monkeypatch.setenv("BENCH_PLUGINS", str(path))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: plugin") and "RuntimeError: plugin is broken" in err
    assert "hint: fix the plugin or remove it from BENCH_PLUGINS" in err
    assert "Traceback" not in err
    assert "broken_cli_plugin" not in "".join(sys.modules)


def test_a_registered_launcher_must_be_launchable(tmp_path):
    path = tmp_path / "not_launchable.py"
    path.write_text(
        "from debias_bench.launchers import register_launcher\n"
        "@register_launcher('not_launchable', display_name='x')\n"
        "class NotLaunchable: ...\n"
    )
    with pytest.raises(Exception, match=r"is not a subclass of .*Launchable"):
        import_plugin(str(path))
    assert "not_launchable" not in LAUNCHERS


BAD_NAME_PLUGIN = textwrap.dedent(
    '''
    """README "Adding a method", with a name that holds a path."""
    from debias_bench.methods.vanilla import Vanilla
    from debias_bench.registry import register_method

    register_method("{name}", display_name="Bad name")(type("M", (Vanilla,), {{}}))
    '''
)


@pytest.mark.parametrize("name", ["../cli_escaping_method", "cli/method", "cli method", ".."])
def test_a_plugin_that_registers_a_name_with_a_path_in_it_is_one_error(
    tmp_path, monkeypatch, capsys, registries_restored, name
):
    """A method named ``../x`` became part of run ids and file names: `bench run` ended in
    a ValueError traceback (``Path.with_name``). Refused where the plugin registers it,
    naming the name and the plugin's line; nothing registered."""
    path = tmp_path / "bad_name_plugin.py"
    path.write_text(BAD_NAME_PLUGIN.format(name=name))
    monkeypatch.setenv("BENCH_PLUGINS", str(path))
    argv = ["run", "--methods", name, "--datasets", "cmnist", "--dry-run"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.startswith(f"error: plugin {str(path)!r} failed to import: ValueError: ")
    assert f"method name {name!r} is not a plain name: letters, digits, _ and - only" in err
    assert f"(at {path}:6)" in err  # the plugin's register_method line, not the registry's
    assert name not in METHODS
