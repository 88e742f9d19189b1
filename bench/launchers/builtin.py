"""The launchers that come with bench; importing this registers them (``LAUNCHERS`` does, on
its first lookup). ``ray`` imports Ray only when a sweep builds it (the ``ray`` extra)."""

from . import inline, local, ray_launcher, slurm  # noqa: F401
from .factories import LAUNCHERS

LAUNCHERS.list_first(["inline", "local", "slurm", "ray"])  # before plugins', in this order
