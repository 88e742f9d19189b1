"""`bench` starts without importing what its command does not need (issue 39.9).

``bench --help`` names every command without importing their modules (several import torch,
pandas or scipy: seconds each), and a command imports only its own module. The checks run
``bench`` with torch made unimportable, so they fail whenever startup imports it again."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest
from support.no_torch import bench_without_torch, python_without_torch

from debias_bench.cli import build_parser
from debias_bench.commands import COMMANDS
from debias_bench.commands.listing import LISTS


def test_the_no_torch_environment_refuses_torch(tmp_path: Path) -> None:
    """The environment the other checks use does block torch (else they could not fail)."""
    done = python_without_torch(tmp_path, "-c", "import torch.nn")
    assert done.returncode != 0
    assert "no-torch environment: torch" in done.stderr


#: the commands whose ``--help`` imports torch, which is what they work with: ``perf`` times
#: training, ``regress`` records the torch build and its CPU kernels beside its baseline, ``viz``
#: draws a stored model's class activation maps
HELP_IMPORTS_TORCH = {"perf", "regress", "viz"}


@pytest.mark.parametrize(
    "args",
    [
        ("--help",),
        ("list", "--help"),
        *[("list", what) for what in LISTS],
        ("config", "lff", "cmnist"),
        ("config", "denetdm", "bffhq", "--preset", "smoke", "--set", "lr=1e-3"),
        *[(c.name, "--help") for c in COMMANDS if c.name not in HELP_IMPORTS_TORCH],
    ],
    ids=lambda args: "-".join(a.lstrip("-") for a in args),
)
def test_a_command_that_needs_no_torch_runs_without_it(tmp_path: Path, args: tuple[str]) -> None:
    """``--help``, every ``bench list`` and ``bench config`` read declarations, never a trainer
    (docs/architecture.md, What imports torch)."""
    done = bench_without_torch(tmp_path, *args)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout.strip()


def _help_lines(parser: argparse.ArgumentParser) -> dict[str, str | None]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {action.dest: action.help for action in sub._choices_actions}


def test_help_lists_every_command_with_its_own_help_line() -> None:
    """The table's help lines are those the command modules give their parsers."""
    own = _help_lines(build_parser())  # every command in full
    assert own == {command.name: command.help for command in COMMANDS}
    assert _help_lines(build_parser([])) == own  # none loaded: the same names and lines


def test_a_command_line_still_parses_in_full_for_the_command_it_runs() -> None:
    args = build_parser(["list"]).parse_args(["list", "selections"])
    assert args.what == "selections" and callable(args.func)


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path: Path) -> None:
    """``bench list methods | head -1``: the pipe closes under the listing."""
    bench = "import sys; from debias_bench.cli import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run(
        ["sh", "-c", f'"{sys.executable}" -c "{bench}" list methods | head -1'],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.startswith("| name")
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
