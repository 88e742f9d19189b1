"""The launchers that come with bench; importing this registers them (``LAUNCHERS`` does, on
its first lookup)."""

from . import inline, local, slurm  # noqa: F401
