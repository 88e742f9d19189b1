"""What an experiment tracker implements: a target (``--track KIND=TARGET``) and, per run of
the store, a tracked run that takes metrics against the step and a final state."""

from __future__ import annotations

import importlib.util
from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar

from debias_bench.registry import Registry
from debias_bench.runs.states import RunState


class TrackedRun(ABC):
    """One run of the store in one tracker; ``id`` is the tracker's own id for it (kept in the
    run's ``tracking.json``, so a resumed run continues the same tracked run)."""

    id: str

    @abstractmethod
    def log(self, step: int, metrics: dict[str, float]) -> None:
        """Send the scalars of one evaluation (the engine's logging cadence)."""

    @abstractmethod
    def finish(self, state: RunState, reason: str, files: list[Path]) -> None:
        """Record the run's final state (and why), attach ``files``, and close."""


class Tracker(ABC):
    """A tracking target. ``target`` is resolved (:meth:`resolve`) in the process that starts
    the sweep, so workers on other hosts or in other directories send to the same place."""

    kind: ClassVar[str]
    #: the pip extra that installs it, and the modules it imports
    extra: ClassVar[str]
    modules: ClassVar[tuple[str, ...]]

    def __init__(self, target: str, experiment: str) -> None:
        self.target, self.experiment = target, experiment

    #: the forms of ``--track KIND[=TARGET]`` it takes, for the error naming a bad target
    accepted: ClassVar[str] = ""

    @classmethod
    def target_problem(cls, target: str) -> str | None:
        """Why ``target`` (as given, ``""``: the default) is not one this tracker takes, or
        None; checked before any run starts (``spec.parse_specs``)."""
        return None

    @classmethod
    @abstractmethod
    def resolve(cls, target: str, out: Path) -> str:
        """``target`` as every process sees it (``""``: this tracker's default under ``out``)."""

    @classmethod
    def missing(cls) -> list[str]:
        """The modules this tracker needs that are not installed."""
        return [name for name in cls.modules if importlib.util.find_spec(name) is None]

    def prepare(self) -> None:  # noqa: B027 (most trackers need no set-up)
        """Set the target up once, before workers start (a database schema, an experiment)."""

    @abstractmethod
    def start(
        self, run_id: str, resume: str | None, params: dict[str, str], tags: dict[str, str]
    ) -> TrackedRun:
        """The tracked run of ``run_id``: the one with id ``resume`` when it still exists,
        otherwise a new one; ``params`` and ``tags`` are (re)sent either way."""


TRACKERS: Registry[type[Tracker]] = Registry("tracker")
register_tracker = TRACKERS.register
