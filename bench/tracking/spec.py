"""``--track KIND[=TARGET]``: which trackers a sweep sends to, checked before any run starts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from debias_bench.errors import ConfigError

from .base import TRACKERS, Tracker


@dataclass(frozen=True)
class TrackSpec:
    kind: str
    target: str  # resolved: the same in every process of the sweep

    @property
    def key(self) -> str:
        """How the run's ``tracking.json`` names this target."""
        return f"{self.kind}={self.target}"

    def tracker(self, experiment: str) -> Tracker:
        return TRACKERS.get(self.kind)(self.target, experiment)

    @classmethod
    def parse(cls, key: str) -> TrackSpec:
        kind, _, target = key.partition("=")
        return cls(kind, target)


def parse_specs(texts: list[str], out: Path) -> list[TrackSpec]:
    """``--track`` values, resolved against ``--out``; an unknown kind, a tracker whose
    library is missing (naming the install command) or a target the tracker does not take
    (naming the forms it takes: ``Tracker.target_problem``) is a ConfigError (exit 2), before
    anything is created."""
    specs: list[TrackSpec] = []
    for text in texts:
        kind, _, target = text.partition("=")
        cls = TRACKERS.get(kind.strip())  # unknown: lists the valid kinds
        missing = cls.missing()
        if missing:
            raise ConfigError(
                f"--track {kind}: {', '.join(missing)} is not installed",
                hint=f'pip install -e ".[{cls.extra}]"  (or: pip install {" ".join(missing)})',
            )
        problem = cls.target_problem(target.strip())
        if problem:  # one line: the forms it takes are the fix
            raise ConfigError(f"--track {text!r}: {problem}; {cls.kind} takes {cls.accepted}")
        spec = TrackSpec(cls.kind, cls.resolve(target.strip(), out))
        if spec not in specs:
            specs.append(spec)
    return specs


def experiment_name(out: Path) -> str:
    """A sweep is one experiment (one W&B group), named after its run store."""
    return str(out.resolve())


def prepare_trackers(specs: list[TrackSpec], out: Path) -> None:
    """Set each target up before any run starts (workers then only connect); a target that
    cannot be reached is a ConfigError, before anything is trained."""
    for spec in specs:
        try:
            spec.tracker(experiment_name(out)).prepare()
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            raise ConfigError(
                f"--track {spec.key}: cannot set the tracker up ({type(exc).__name__}: {first})",
                hint="check the target (a tracking server must be running), or leave --track out",
            ) from None
