"""`bench` starts without importing what its command does not need (issue 39.9).

``bench --help`` names every command without importing their modules (several import torch,
pandas or scipy: seconds each), and a command imports only its own module. The checks run
``bench`` with torch made unimportable, so they fail whenever startup imports it again."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from debias_bench.cli import build_parser
from debias_bench.commands import COMMANDS

#: a ``sitecustomize`` that makes every ``import torch`` (and its submodules) an ImportError
NO_TORCH = """
import sys


class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError(f"torch imported by the test's no-torch environment: {name}")
        return None


sys.meta_path.insert(0, _NoTorch())
"""


def _bench_without_torch(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "sitecustomize.py").write_text(NO_TORCH)
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    env.pop("BENCH_PLUGINS", None)
    code = "import sys; from debias_bench.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_the_no_torch_environment_refuses_torch(tmp_path: Path) -> None:
    """The environment the other checks use does block torch (else they could not fail)."""
    (tmp_path / "sitecustomize.py").write_text(NO_TORCH)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", "import torch.nn"], capture_output=True, text=True, env=env
    )
    assert done.returncode != 0
    assert "no-torch environment: torch" in done.stderr


@pytest.mark.parametrize(
    "args",
    [("--help",), ("list", "--help"), ("list", "selections")],
    ids=["help", "list-help", "list-selections"],
)
def test_a_command_that_needs_no_torch_runs_without_it(tmp_path: Path, args: tuple[str]) -> None:
    done = _bench_without_torch(tmp_path, *args)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


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
