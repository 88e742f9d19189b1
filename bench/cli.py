"""Command-line interface: ``bench run | status | report | list | data | ...``."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Collection, Sequence
from typing import NoReturn

from debias_bench.commands import COMMANDS
from debias_bench.errors import BenchError, ConfigError
from debias_bench.paths import DEFAULT_OUT
from debias_bench.plugins.loading import import_plugins


class UsageError(ConfigError):
    """A command line argparse refuses: an unknown flag, a missing one, a value of the wrong
    type or out of range."""


class Parser(argparse.ArgumentParser):
    """argparse, but a bad command line is one ``error:`` line with a hint and exit code 2
    like every other input error (``main``), not the whole usage text."""

    def error(self, message: str) -> NoReturn:
        # "argument --timeout: bad --timeout '0': ..." -> "bad --timeout '0': ..."
        named = re.match(r"argument (\S+?)(?:/\S+)?: ", message)
        if named and named.group(1) in message[named.end() :]:
            message = message[named.end() :]
        raise UsageError(f"{self.prog}: {message}", hint=f"`{self.prog} --help` lists the options")


def build_parser(commands: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The command line with ``commands`` (default: all) in full; every ``choices=`` and help
    text that lists registered names (methods, datasets, launchers, trackers, presets, ...)
    reads its registry now, so call it after :func:`import_plugins`. The other commands are
    only named, with their help line: their modules are not imported (:data:`COMMANDS`)."""
    parser = Parser(prog="bench", description="Benchmark harness for debiasing methods.")
    sub = parser.add_subparsers(dest="command", required=True)  # subparsers are Parsers too
    for command in COMMANDS:
        if commands is None or command.name in commands:
            command.load().add(sub)
        else:
            sub.add_parser(command.name, help=command.help, add_help=False)
    return parser


def asked(argv: Sequence[str]) -> list[str]:
    """The command the command line runs (its first word, when that names one), else none:
    the only one whose module :func:`main` imports."""
    names = {command.name for command in COMMANDS}
    return [argv[0]] if argv and argv[0] in names else []


def main(argv: Sequence[str] | None = None) -> int:
    try:
        # BENCH_PLUGINS first: their methods, datasets, launchers (with their flags), ... are
        # valid choices and appear in --help; a broken plugin is an error, also for --help
        import_plugins()
        argv = sys.argv[1:] if argv is None else list(argv)
        args = build_parser(asked(argv)).parse_args(argv)
        check_folder_flags(args)  # --out "": not the working directory
        return int(args.func(args))
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader left (`bench list methods | head -3`): nothing to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        return 1


#: the flags that name a folder, by their argparse ``dest``: an empty value is the working
#: directory to ``Path`` (``Path("") == Path(".")``), never what anyone meant
FOLDER_FLAGS = {"out": "--out"}


def check_folder_flags(args: argparse.Namespace) -> None:
    """Refuse a folder flag of :data:`FOLDER_FLAGS` given as an empty (or blank) string, which
    would make the working directory the run store: a ConfigError, before any command runs."""
    for dest, flag in FOLDER_FLAGS.items():
        value = getattr(args, dest, None)
        if isinstance(value, str) and not value.strip():
            raise ConfigError(
                f"{flag} must name a folder, not {value!r} (e.g. {flag} {DEFAULT_OUT})"
            )


if __name__ == "__main__":
    sys.exit(main())
