"""Experiment tracking (``bench run --track``, ``bench track export``): MLflow, TensorBoard
and Weights & Biases, from every launcher, resumable, never failing a run."""

from . import mlflow_tracker, tensorboard_tracker, wandb_tracker  # noqa: F401 (register)
from .base import TRACKERS, TrackedRun, Tracker
from .export import ExportSummary, export_store
from .session import RunTracking, scalars
from .spec import TrackSpec, experiment_name, parse_specs, prepare_trackers

__all__ = [
    "TRACKERS",
    "ExportSummary",
    "RunTracking",
    "TrackSpec",
    "TrackedRun",
    "Tracker",
    "experiment_name",
    "export_store",
    "parse_specs",
    "prepare_trackers",
    "scalars",
]
