"""The launchers that come with bench; importing this registers them (``LAUNCHERS`` does, on
its first lookup)."""

from . import inline, local, slurm  # noqa: F401
from .factories import LAUNCHERS

LAUNCHERS.list_first(["inline", "local", "slurm"])  # before plugins', whatever was imported first
