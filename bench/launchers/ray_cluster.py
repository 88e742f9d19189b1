"""The Ray side of ``--launcher ray``: importing Ray (an optional extra), connecting to a
cluster or starting a local instance, and the resources each run asks for.

Ray is imported here and in :mod:`.ray_task` only, when a sweep builds the launcher: ``bench``
works, and lists the launcher, without it. Where it is missing, :func:`import_ray` is one
:class:`~debias_bench.errors.ConfigError` that names the extra to install.

Where runs execute: ``--ray-address`` (or ``RAY_ADDRESS``) names a running cluster (``auto``:
the one started on this machine with ``ray start``; ``ray://host:10001``: Ray Client);
without either, a local Ray instance starts with ``--ray-local-cpus`` CPUs (default: the
cores this process may use) and the GPUs Ray finds, and stops with the sweep.
"""

from __future__ import annotations

import logging
import math
import os
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from debias_bench.errors import ConfigError

from .slots import cpu_cores

#: the command that installs what ``--launcher ray`` needs
INSTALL = "pip install -e '.[ray]'  (or: pip install 'ray>=2.9')"


def import_ray() -> ModuleType:
    """The ``ray`` module; a ConfigError naming the extra where it is not installed."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(
            f"--launcher ray needs Ray, which is not installed here ({exc})",
            hint=f"install the ray extra: {INSTALL}",
        ) from None
    return ray


@dataclass(frozen=True)
class RunResources:
    """What one run asks Ray for: CPUs (fractions allowed), GPUs (fractions of one GPU, or
    whole GPUs) and the device its worker trains on."""

    cpus: float
    gpus: float

    @property
    def device(self) -> str:
        return "cuda" if self.gpus > 0 else "cpu"

    @property
    def threads(self) -> int:
        """CPU threads of the run's worker: its whole CPUs, at least one."""
        return max(1, math.floor(self.cpus))

    def as_fields(self) -> dict[str, float]:
        return {"cpus": self.cpus, "gpus": self.gpus}


def run_resources(
    device: str, cpus: float | None, gpus: float | None, cluster_gpus: float = 0.0
) -> RunResources:
    """A run's resources from ``--device``, ``--cpus-per-run`` and ``--gpus-per-run``
    (``cpus`` None: one; ``gpus`` None: one GPU under ``--device cuda``, none under ``cpu``,
    and under ``auto`` one where the cluster has GPUs (``cluster_gpus``), else none)."""
    cpus = 1.0 if cpus is None else cpus
    if cpus <= 0:
        raise ConfigError(
            f"--launcher ray: --cpus-per-run {cpus:g}: a run needs some CPU",
            hint="give a positive number, such as 1 or 0.5",
        )
    if device.startswith("cuda:"):
        raise ConfigError(
            f"--launcher ray: --device {device}: Ray chooses each run's GPU",
            hint="use --device cuda (with --gpus-per-run 0.5 to put two runs on one GPU)",
        )
    if device == "cpu" and gpus:
        raise ConfigError(
            f"--launcher ray: --device cpu with --gpus-per-run {gpus:g}",
            hint="leave out --gpus-per-run, or use --device cuda",
        )
    if device == "cuda" and gpus == 0:
        raise ConfigError(
            "--launcher ray: --device cuda with --gpus-per-run 0: the runs would see no GPU",
            hint="give --gpus-per-run a fraction such as 0.25 or 1, or use --device cpu",
        )
    if gpus is not None and gpus > 1 and gpus != int(gpus):
        raise ConfigError(
            f"--launcher ray: --gpus-per-run {gpus:g}: Ray takes a fraction of one GPU "
            "or whole GPUs",
            hint=f"use {math.floor(gpus)} or {math.ceil(gpus)}",
        )
    if gpus is None:
        gpus = 1.0 if device == "cuda" or (device == "auto" and cluster_gpus > 0) else 0.0
    return RunResources(cpus, gpus)


@dataclass
class Connection:
    """The Ray connection of a sweep: ``started`` when the sweep started a local instance,
    ``owned`` when it connected (and disconnects at the end); ``where`` for messages."""

    ray: ModuleType
    where: str
    started: bool
    owned: bool

    def nodes(self) -> list[dict[str, float]]:
        """The resources of each live node."""
        return [dict(node.get("Resources") or {}) for node in self.ray.nodes() if node.get("Alive")]

    def capacity(self, resources: RunResources) -> int:
        """How many runs of ``resources`` fit on the live nodes at once (at least 1)."""
        fits = 0
        for node in self.nodes():
            by_cpu = math.floor(node.get("CPU", 0.0) / resources.cpus + 1e-9)
            by_gpu = (
                math.floor(node.get("GPU", 0.0) / resources.gpus + 1e-9)
                if resources.gpus > 0
                else by_cpu
            )
            fits += min(by_cpu, by_gpu)
        return max(1, fits)

    def check_fits(self, resources: RunResources) -> None:
        """A ConfigError when no node of a local instance can take one run (its task would
        wait forever); a warning for a cluster, whose autoscaler may add such a node."""
        nodes = self.nodes()
        cpus = max((node.get("CPU", 0.0) for node in nodes), default=0.0)
        gpus = max((node.get("GPU", 0.0) for node in nodes), default=0.0)
        short = []
        if resources.cpus > cpus:
            short.append(f"{resources.cpus:g} CPU(s) (the largest node has {cpus:g})")
        if resources.gpus > gpus:
            short.append(f"{resources.gpus:g} GPU(s) (the largest node has {gpus:g})")
        if not short:
            return
        problem = f"--launcher ray: each run asks for {' and '.join(short)} on {self.where}"
        if self.started:
            raise ConfigError(
                problem,
                hint="lower --cpus-per-run / --gpus-per-run, or give the local instance "
                "more with --ray-local-cpus",
            )
        print(
            f"warning: {problem}; its runs wait until the cluster adds such a node",
            file=sys.stderr,
        )

    def close(self) -> None:
        """Disconnect (and stop a local instance started here); nothing for a connection
        that was there before the sweep (a notebook's ``ray.init``)."""
        if self.owned and self.ray.is_initialized():
            self.ray.shutdown()
        self.owned = False


def connect(address: str | None, local_cpus: int | None) -> Connection:
    """Connect to the Ray cluster at ``address`` (or ``RAY_ADDRESS``), or start a local
    instance; a connection this process already has (``ray.init`` in a notebook) is used as
    it is. A cluster that does not answer is a ConfigError with the address and the fix."""
    address = address or os.environ.get("RAY_ADDRESS") or None
    if local_cpus is not None and address:
        raise ConfigError(
            f"--ray-local-cpus sizes a local Ray instance; with the address {address} the "
            "cluster's nodes decide",
            hint="leave out --ray-local-cpus, or --ray-address and RAY_ADDRESS",
        )
    ray = import_ray()
    if ray.is_initialized():
        return Connection(ray, "the Ray cluster of this process", started=False, owned=False)
    quiet: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.WARNING}
    if address:
        where = f"the Ray cluster at {address}"
        try:
            ray.init(address=address, **quiet)
        except Exception as exc:  # ConnectionError, TimeoutError, RuntimeError, ...
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ConfigError(
                f"--launcher ray: cannot connect to {where}: {first[:300]}",
                hint="check the address (--ray-address or RAY_ADDRESS; `ray status` on the "
                "head node); without either, a local Ray instance starts",
            ) from None
        return Connection(ray, where, started=False, owned=True)
    cpus = local_cpus or cpu_cores()
    try:
        ray.init(address="local", num_cpus=cpus, include_dashboard=False, **quiet)
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(
            f"--launcher ray: the local Ray instance did not start: {first[:300]}",
            hint="`ray start --head` shows why; or connect to a cluster with --ray-address",
        ) from None
    return Connection(ray, f"a local Ray instance ({cpus} CPUs)", started=True, owned=True)
