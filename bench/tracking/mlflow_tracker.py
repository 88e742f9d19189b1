"""MLflow: one MLflow run per run of the store, in one experiment per sweep (named after
``--out``), through ``MlflowClient`` (no global active run: several runs may share a
process). Default target: a SQLite database in ``--out``, artifacts beside it."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from debias_bench.runs.states import RunState

from .base import TRACKERS, TrackedRun, Tracker

T = TypeVar("T")

#: the MLflow status of each final state (a resumed run goes back to RUNNING)
STATUS = {
    RunState.DONE: "FINISHED",
    RunState.SKIPPED: "FINISHED",
    RunState.FAILED: "FAILED",
    RunState.INTERRUPTED: "KILLED",
    RunState.DEAD: "KILLED",
}
SQLITE = "sqlite:///"
#: the schemes of the tracking URIs MLflow's client takes: its database stores (SQLAlchemy
#: dialects, ``+driver`` allowed), a tracking server, a file store, Databricks
SCHEMES = ("sqlite", "postgresql", "mysql", "mssql", "http", "https", "file", "databricks")
#: what a plain path must end in: it names a SQLite database file
SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def uri_problem(target: str) -> str | None:
    """Why ``target`` is not an MLflow tracking URI or SQLite file path, or None. Checked
    before any run starts: a typo (``htp://``, ``http:/host``, ``::not a uri::``) was a
    SQLite file of that name in the working directory, and the sweep went on."""
    if not target or target == "databricks":
        return None
    if "://" not in target:
        if Path(target).suffix.lower() in SQLITE_SUFFIXES:  # ".db" alone has no suffix
            return None
        return "neither a tracking URI (SCHEME://...) nor the path of a SQLite file"
    scheme, _, rest = target.partition("://")
    base = scheme.split("+")[0]
    if base not in SCHEMES:
        return f"MLflow has no tracking store for the scheme {scheme!r}"
    if any(c.isspace() for c in target):
        return "a URI holds no whitespace"
    if base == "sqlite":
        path = rest.removeprefix("/")
        if not rest.startswith("/") or not path or path == ":memory:" or path.endswith("/"):
            return "sqlite:/// must be followed by a database file (sqlite:///PATH.db)"
        return None
    try:
        parts = urlsplit(target)
    except ValueError as exc:  # a bad IPv6 literal, ...
        return f"not a URI ({exc})"
    if base == "file" and not parts.path:
        return "file:// must be followed by a folder (file:///DIR)"
    if base in ("http", "https") and not parts.hostname:
        return f"{scheme}:// must be followed by a host (the tracking server)"
    if not rest:
        return f"{scheme}:// must be followed by where the store is"
    return None


def _retry(call: Callable[[], T], tries: int = 8) -> T:
    """``call()``, again after a pause while SQLite says another worker holds its lock."""
    for attempt in range(tries):
        try:
            return call()
        except Exception as exc:  # MlflowException wraps SQLAlchemy's OperationalError
            if "locked" not in str(exc).lower() or attempt == tries - 1:
                raise
            time.sleep(0.05 * 2**attempt)
    raise AssertionError("unreachable")


def _chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


class MlflowRun(TrackedRun):
    def __init__(self, client: Any, run_id: str) -> None:
        self.client, self.id = client, run_id

    def log(self, step: int, metrics: dict[str, float]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        batch = [Metric(key, value, now, step) for key, value in metrics.items()]
        for part in _chunks(batch, 1000):  # MLflow's limit per batch
            _retry(functools.partial(self.client.log_batch, self.id, metrics=part))

    def finish(self, state: RunState, reason: str, files: list[Path]) -> None:
        _retry(lambda: self.client.set_tag(self.id, "state", state.value))
        if reason:
            _retry(lambda: self.client.set_tag(self.id, "reason", reason[:5000]))
        for path in files:
            self.client.log_artifact(self.id, str(path))
        _retry(lambda: self.client.set_terminated(self.id, STATUS.get(state, "KILLED")))


@TRACKERS.register("mlflow", display_name="MLflow (default: sqlite:///OUT/mlflow.db)")
class MlflowTracker(Tracker):
    kind, extra, modules = "mlflow", "track", ("mlflow",)
    accepted = (
        "--track mlflow (sqlite:///OUT/mlflow.db), mlflow=PATH.db (a SQLite file), "
        "mlflow=sqlite:///PATH.db, mlflow=http(s)://HOST[:PORT], "
        "mlflow=postgresql|mysql|mssql://USER@HOST/DB, mlflow=file:///DIR or mlflow=databricks"
    )

    @classmethod
    def target_problem(cls, target: str) -> str | None:
        return uri_problem(target)

    @classmethod
    def resolve(cls, target: str, out: Path) -> str:
        if not target:
            return SQLITE + str((out / "mlflow.db").resolve())
        if target.startswith(SQLITE):  # sqlite:///relative.db is relative to this directory
            return SQLITE + str(Path(target.removeprefix(SQLITE)).resolve())
        if "://" not in target and target != "databricks":  # a .db path: a SQLite database
            return SQLITE + str(Path(target).resolve())
        return target  # a tracking server (http://...) or another store URI

    def _client(self) -> Any:
        from mlflow.tracking import MlflowClient

        # after the import: importing mlflow sets its own loggers to INFO
        logging.getLogger("mlflow").setLevel(logging.WARNING)
        logging.getLogger("alembic").setLevel(logging.WARNING)

        return MlflowClient(tracking_uri=self.target)

    def _experiment(self, client: Any) -> str:
        found = _retry(lambda: client.get_experiment_by_name(self.experiment))
        if found is not None:
            return str(found.experiment_id)
        location = None
        if self.target.startswith(SQLITE):  # not ./mlruns of whatever directory a worker is in
            location = (Path(self.target.removeprefix(SQLITE)).parent / "mlflow-artifacts").as_uri()
        try:
            return str(client.create_experiment(self.experiment, artifact_location=location))
        except Exception:  # another process created it meanwhile
            found = _retry(lambda: client.get_experiment_by_name(self.experiment))
            if found is None:
                raise
            return str(found.experiment_id)

    def prepare(self) -> None:
        self._experiment(self._client())

    def start(
        self, run_id: str, resume: str | None, params: dict[str, str], tags: dict[str, str]
    ) -> TrackedRun:
        from mlflow.entities import Param, RunTag

        client = self._client()
        experiment = self._experiment(client)
        tracked = None
        if resume:
            try:
                tracked = client.get_run(resume)
            except Exception:  # deleted, or another database: a new tracked run
                tracked = None
        if tracked is not None and tracked.info.experiment_id == experiment:
            mlflow_id = tracked.info.run_id
            _retry(lambda: client.update_run(mlflow_id, status="RUNNING"))
        else:
            created = _retry(lambda: client.create_run(experiment, run_name=run_id))
            mlflow_id = created.info.run_id
        for part in _chunks([Param(k, v[:6000]) for k, v in params.items()], 100):
            _retry(functools.partial(client.log_batch, mlflow_id, params=part))
        run_tags = [RunTag(k, v) for k, v in tags.items()]
        _retry(lambda: client.log_batch(mlflow_id, tags=run_tags))
        return MlflowRun(client, mlflow_id)
