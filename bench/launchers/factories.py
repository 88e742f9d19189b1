"""The launchers `bench run --launcher NAME` can pick, registered like methods and datasets.

A launcher the command line can build is a :class:`Launchable`: a :class:`Launcher` that
declares its own flags (:meth:`Launchable.add_arguments`, shown under its name in
``bench run --help``) and builds itself from the parsed command line and a
:class:`LaunchContext` (:meth:`Launchable.from_args`). :func:`register_launcher` puts it in
:data:`LAUNCHERS` with the metadata the sweep needs (``where``: the phrase the start line
prints; ``catches_sigint``: the stop signals (Ctrl-C, SIGTERM, SIGHUP) go to the running run
itself, not to the sweep;
``kill_on_second_signal``: a second SIGTERM/SIGINT kills its runs at once). A plugin module
named in ``BENCH_PLUGINS`` registers one the same way; a new launcher is one more class, not
another branch in the CLI.
"""

from __future__ import annotations

import argparse
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from debias_bench.launchers.run_one import MAX_ATTEMPTS
from debias_bench.paths import DataPlace
from debias_bench.registry import Registry
from debias_bench.runs.progress import Progress
from debias_bench.runs.store import RunStore
from debias_bench.tracking import TrackSpec

from .job import WorkerJob
from .scheduler import Launcher, Task


@dataclass(frozen=True)
class LaunchContext:
    """What every launcher gets besides its own flags: the shared flags of ``bench run``
    (``--device``, ``--max-attempts``, ``--timeout``, ``--grace``, ``--track``) and the
    sweep's callbacks."""

    store: RunStore
    place: DataPlace
    device: str = "auto"  # --device as given: auto | cpu | cuda | cuda:N
    max_attempts: int = MAX_ATTEMPTS
    timeout_s: float | None = None
    grace_s: float = 30.0  # a stopped run's time to checkpoint before SIGKILL
    should_stop: Callable[[], bool] = lambda: False  # the sweep was asked to stop (a signal)
    on_submitted: Callable[[dict[str, str]], None] = lambda jobs: None  # run id -> job id
    progress: Callable[[Task], Progress] = lambda task: Progress()  # a display, in process
    track: tuple[TrackSpec, ...] = ()  # experiment trackers every run is sent to

    def worker_job(self, task: Task, device: str = "cpu", **status_fields: Any) -> WorkerJob:
        """What a worker process needs to run ``task`` into this sweep's store (see
        :mod:`.worker`); ``status_fields`` go into the run's ``status.json``."""
        return WorkerJob.for_run(
            task.config,
            self.store.root,
            self.place,
            device=device,
            max_attempts=self.max_attempts,
            track=self.track,
            status_fields=status_fields,
        )


class Launchable(Launcher):
    """A launcher that ``bench run --launcher NAME`` builds from its command line."""

    @classmethod
    def add_arguments(cls, group: argparse._ArgumentGroup) -> None:
        """Declare this launcher's own flags in ``group`` (its section of ``--help``; the flag
        names are shared with every other command-line flag of ``bench run``). None by
        default."""

    @classmethod
    @abstractmethod
    def from_args(cls, args: argparse.Namespace, ctx: LaunchContext) -> Launcher:
        """The launcher for the parsed command line: check its flags (a
        :class:`~debias_bench.errors.ConfigError` names the problem and the fix) and build."""


LAUNCHERS: Registry[type[Launchable]] = Registry("launcher", "debias_bench.launchers.builtin")

L = TypeVar("L", bound=type[Launchable])


def register_launcher(
    name: str,
    *,
    display_name: str,
    where: str = "on {parallelism} worker(s)",
    catches_sigint: bool = False,
    kill_on_second_signal: bool = True,
) -> Callable[[L], L]:
    """Class decorator: register a :class:`Launchable` as ``--launcher name``.

    ``display_name``: one line for ``--help`` and ``bench list launchers``; ``where``: how the
    start line says where runs execute (``{device}``: ``--device``, ``{parallelism}``: its
    :meth:`~Launcher.parallelism`); ``catches_sigint``: it runs in the ``bench`` process and
    handles the stop signals (Ctrl-C, SIGTERM, SIGHUP) itself while its runs execute, setting
    its ``stop_signal``; ``kill_on_second_signal``: a second signal kills its runs at once
    (the first asks them to checkpoint)."""

    def decorator(cls: L) -> L:
        if not (isinstance(cls, type) and issubclass(cls, Launchable)):
            raise TypeError(
                f"launcher {name!r}: {cls!r} is not a subclass of "
                "debias_bench.launchers.factories.Launchable"
            )
        LAUNCHERS.register(
            name,
            display_name=display_name,
            where=where,
            catches_sigint=catches_sigint,
            kill_on_second_signal=kill_on_second_signal,
        )(cls)
        cls.name = name  # what its runs record as their launcher
        return cls

    return decorator


def declared_flags(launcher: type[Launchable]) -> list[argparse.Action]:
    """The flags ``launcher`` declares (its :meth:`~Launchable.add_arguments`, on a scratch
    parser: the command line's parser is not at hand where the sweep is built)."""
    group = argparse.ArgumentParser(add_help=False).add_argument_group()
    launcher.add_arguments(group)
    return list(group._group_actions)


def foreign_flags(args: argparse.Namespace, chosen: str) -> dict[str, str]:
    """Flag -> launcher, for each flag given on the command line (not at its default) that
    another launcher declares and ``chosen`` does not: it would do nothing (``--threads``
    under ``--launcher inline``), so the sweep refuses it, as the inline launcher refuses
    ``--timeout``."""
    own = {action.dest for action in declared_flags(LAUNCHERS.get(chosen))}
    found: dict[str, str] = {}
    for entry in LAUNCHERS:
        if entry.name == chosen:
            continue
        for action in declared_flags(entry.obj):
            given = getattr(args, action.dest, action.default)
            if action.dest not in own and given != action.default and action.option_strings:
                found.setdefault(action.option_strings[0], entry.name)
    return found
