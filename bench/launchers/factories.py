"""The launchers `bench run --launcher NAME` can pick, registered like methods and datasets.

A launcher a sweep can build is a :class:`Launchable`: a :class:`Launcher` that declares its
own options as data (:attr:`Launchable.options`: ``bench run --help`` shows them as flags under
its name, ``debias_bench.run`` takes them as keywords) and builds itself from their values and a
:class:`LaunchContext` (:meth:`Launchable.from_options`; :func:`build_launcher`).
:func:`register_launcher` puts it in :data:`LAUNCHERS` with the metadata the sweep needs
(``where``: the phrase the start line prints; ``catches_sigint``: the stop signals (Ctrl-C,
SIGTERM, SIGHUP) go to the running run itself, not to the sweep; ``kill_on_second_signal``: a
second SIGTERM/SIGINT kills its runs at once). A plugin module named in ``BENCH_PLUGINS``
registers one the same way; a new launcher is one more class, not another branch in the CLI.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from debias_bench.launchers.run_one import MAX_ATTEMPTS
from debias_bench.paths import DataPlace
from debias_bench.registry import Registry
from debias_bench.runs.progress import Progress
from debias_bench.runs.store import RunStore
from debias_bench.tracking import TrackSpec

from .job import WorkerJob
from .options import LauncherOption, LauncherOptions, launcher_options
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
    cells: tuple[tuple[str, str], ...] = ()  # the sweep's (dataset, method) pairs

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
    """A launcher that ``bench run --launcher NAME`` and ``debias_bench.run(launcher=NAME)``
    build: it declares its own options as data (:attr:`options`; the command line makes each
    a flag, Python passes them as keywords) and builds itself from their values
    (:meth:`from_options`)."""

    #: its own options (``--workers`` of the local launcher); none by default
    options: ClassVar[tuple[LauncherOption, ...]] = ()

    @classmethod
    def from_options(cls, options: LauncherOptions, ctx: LaunchContext) -> Launcher:
        """The launcher for these option values (every declared option, checked, at its
        default when not given): check what the declarations cannot (a
        :class:`~debias_bench.errors.ConfigError` names the problem and the fix) and build.

        A launcher written before options were declared (``add_arguments`` and
        ``from_args``) is built by its ``from_args`` with the same values, with a
        DeprecationWarning."""
        legacy = getattr(cls, "from_args", None)
        if legacy is None:
            raise NotImplementedError(f"{cls.__name__} defines no from_options")
        warnings.warn(
            f"launcher {cls.__name__}: add_arguments/from_args are deprecated; declare "
            "`options = (LauncherOption(...), ...)` and define `from_options(cls, options, "
            "ctx)` (docs/extending/launcher.md); they go in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        launcher: Launcher = legacy(options, ctx)
        return launcher


def build_launcher(name: str, given: Mapping[str, Any], ctx: LaunchContext) -> Launcher:
    """The launcher registered as ``name``, built from the option values ``given`` (checked
    against its declarations; a launcher of the older interface takes them as they are)."""
    cls = LAUNCHERS.get(name)
    if cls.options or not hasattr(cls, "from_args"):
        return cls.from_options(launcher_options(name, cls.options, given), ctx)
    return cls.from_options(LauncherOptions(**given), ctx)


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
