"""The run store: one directory per run, written only by the run's own process.

    <out>/<run_id>/config.json    resolved configuration + provenance (code and data version)
    <out>/<run_id>/status.json    state, reason, host, pid, heartbeat, attempt, exit code, error
    <out>/<run_id>/metrics.jsonl  one line per evaluation
    <out>/<run_id>/checkpoint.pt  latest checkpoint (for resume)
    <out>/<run_id>/result.json    final result; a complete, finite one marks the run as done
    <out>/<run_id>/.lock          held (flock) by the process that owns the run while it lives
    <out>/<run_id>/stderr.log     the worker's stderr, one header line per start (launchers)

Every JSON file and the checkpoint are written to a temporary file and renamed into place,
so a reader (``bench status``, ``bench report``) never sees a half-written file; a failed
write removes its temporary file and raises an ``OSError`` naming the file it was writing
(``store_write`` set on it), so a full disk fails the run with the path and the errno.

Faults stay local: a run whose ``config.json``, ``status.json`` or ``result.json`` is missing
or unreadable is ``corrupt`` (:meth:`RunDir.fault` names the file and the fix), and every
command goes on with the other runs. A torn line in ``metrics.jsonl`` is skipped, never the
records after it.

Ownership: a run's files are written only by the process that holds its lock: the worker while
it lives; before it starts, the sweep that plans it (``config.json`` and a ``pending`` status,
so ``bench status`` counts it; the SLURM job id it was submitted as); after it has exited, the
launcher that started it (to record the exit code and the tail of stderr of a worker that
could not). The lock is what tells a live run from a dead
one on the same host; across hosts (a shared file system whose locks are host-local) a run is
dead when its heartbeat, refreshed every ``HEARTBEAT_EVERY_S`` by a thread, is stale
(the lock: :mod:`debias_bench.runs.lock`). What each file must hold, and the fix for one that
does not, is checked in :mod:`debias_bench.runs.files`; what a run's files mean together is
decided in :mod:`debias_bench.runs.states`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from debias_bench.errors import ConfigError
from debias_bench.paths import check_path
from debias_bench.runs.files import MOVED_ASIDE
from debias_bench.runs.run_dir import RunDir


class RunStore:
    """All runs under one output directory."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def run(self, run_id: str) -> RunDir:
        return RunDir(self.root / run_id)

    def runs(self) -> Iterator[RunDir]:
        """Every run directory, including those whose config.json is missing or unreadable
        (they are corrupt: ``RunDir.fault`` says why); hidden folders and folders moved aside
        (``<run id>.bad``, as the fixes say) are not runs."""
        if not self.root.is_dir():
            return iter(())
        return (
            RunDir(p)
            for p in sorted(self.root.iterdir())
            if p.is_dir()
            and not p.name.startswith(".")
            and not p.name.endswith(MOVED_ASIDE)
            and RunDir(p)._has_files()
        )

    def other_folders(self) -> list[Path]:
        """The folders that are not runs (no run file in them; moved aside as ``.bad``), so
        that ``bench status`` accounts for every folder of the store; hidden ones are the
        launchers' own."""
        if not self.root.is_dir():
            return []
        return [
            p
            for p in sorted(self.root.iterdir())
            if p.is_dir()
            and not p.name.startswith(".")
            and (p.name.endswith(MOVED_ASIDE) or not RunDir(p)._has_files())
        ]

    def readable_runs(self) -> Iterator[RunDir]:
        """The runs whose files can all be read (analyses skip corrupt ones; `bench status`
        and `bench report` list those with their fault)."""
        return (run for run in self.runs() if run.fault() is None)


#: names a run store holds besides its runs (``bench tune``'s file, hidden temporaries)
STORE_FILES = ("tuned.yaml",)


def _store_entry(entry: Path) -> bool:
    """Whether ``entry`` may sit in a run store that has no run yet: a hidden file, a known
    file, a run folder moved aside (``<id>.bad``) or one that is being planned (empty)."""
    if entry.name.startswith(".") or entry.name in STORE_FILES:
        return True
    if entry.is_dir():
        return entry.name.endswith(MOVED_ASIDE) or not any(entry.iterdir())
    return False


def check_store(out: Path | str) -> RunStore:
    """The run store at ``out`` for a command that only reads it: an error naming the path and
    the fix when it does not exist, is a file, cannot be read, or is a directory that holds
    other things and no run (a mistyped --out); an existing empty store is fine (the command
    then says it has no runs)."""
    out = Path(out).expanduser()
    check_path(out, "--out")
    create = f"`bench run --out {out} ...` creates it; or pass the --out your sweep wrote to"
    try:
        if not out.exists():
            raise ConfigError(f"no run store at {out}: the directory does not exist", hint=create)
        if not out.is_dir():
            raise ConfigError(f"--out {out} is a file, not a run store", hint=create)
        entries = sorted(out.iterdir())
        store = RunStore(out)
        if next(iter(store.runs()), None) is not None:
            return store
        strangers = [e.name for e in entries if not _store_entry(e)]
    except OSError as exc:
        raise ConfigError(
            f"cannot read the run store {out} ({exc.strerror or exc})",
            hint="check the path and its permissions",
        ) from None
    if strangers:
        shown = ", ".join(strangers[:5]) + (", ..." if len(strangers) > 5 else "")
        raise ConfigError(
            f"{out} is not a run store: it holds no run folder (it holds {shown})",
            hint="pass the --out that `bench run` wrote to",
        )
    return store
