"""Counting host synchronisations: the operations that make the host wait for a GPU
(``bench perf --host-syncs``).

On a GPU, PyTorch queues kernels and returns at once; the host runs ahead and keeps the device
fed. An operation whose result the host must *see* (a Python number from a tensor, a copy into
host memory, an output whose size depends on the data) waits until everything queued before
it has run, and the device then idles while the host catches up: one per step is enough to
make a small model launch-bound, and runs sharing a GPU stall each other.

The counter sees every ATen operation through a dispatch mode, and the conversions that run
no ATen operation on the CPU (``tolist``, ``numpy``) through a function mode, so it works on
CPU tensors, where nothing ever waits: on the CPU every tensor counts as a device tensor
(a conservative count: on a GPU, a tensor kept on the host by design would not sync). On a
GPU only tensors off the CPU count. What counts is listed in :data:`SYNC_OPS`,
:data:`MASK_INDEXED`, :data:`HOST_COPIES` and :data:`CONVERSIONS`, and nowhere else.

On CUDA, ``torch_check`` also puts the counted window under PyTorch's own detector,
``torch.cuda.set_sync_debug_mode("error")`` (``bench perf --host-syncs --cuda-sync-debug``): a
step that synchronises then fails with PyTorch's error, a cross-check of the count.

Not counted: reads of the step counter PyTorch's optimisers keep on the host by design (a
non-capturable Adam's ``step``; ``torch/optim`` frames), which never wait for the device.
"""

from __future__ import annotations

import collections
import os
import sys
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

#: ATen operations (overload packets) that wait for the device whatever their arguments, and why
SYNC_OPS: dict[str, str] = {
    "_local_scalar_dense": "a Python number: .item(), float(), int(), bool() of a tensor",
    "nonzero": "output size depends on the data (also torch.where(c), argwhere)",
    "masked_select": "output size depends on the data",
    "_unique": "output size depends on the data",
    "_unique2": "output size depends on the data (torch.unique)",
    "unique_dim": "output size depends on the data",
    "unique_consecutive": "output size depends on the data",
    "unique_dim_consecutive": "output size depends on the data",
    "bincount": "output size read from the input's maximum",
    "equal": "returns a Python bool",
    "_linalg_check_errors": "linear algebra's error check reads the device's info codes",
}
#: ATen operations that wait when indexed with a boolean mask (its nonzero runs inside them)
MASK_INDEXED = frozenset({"index", "index_put", "index_put_", "_index_put_impl_"})
#: ATen operations that wait when they copy between host and device: a device tensor into
#: host memory, or host memory to the device without ``non_blocking`` (PyTorch then waits for
#: the stream); never seen on a CPU-only run, where there is no such copy
HOST_COPIES = frozenset({"_to_copy", "copy_", "copy"})
#: ``repeat_interleave`` waits unless told its output size
REPEAT = "repeat_interleave"
#: tensor methods that hand a tensor's values to Python or NumPy (no ATen op on the CPU)
CONVERSIONS = frozenset({"tolist", "numpy", "__array__"})
#: functions that read their input's range on the CPU only (CUDA asserts on the device): the
#: reads are not counted when the output size is given (``one_hot(x, num_classes)``)
CPU_ONLY_CHECKS = frozenset({"one_hot"})

_TORCH_DIR = os.path.dirname(torch.__file__)
_OPTIM_DIR = os.path.join(_TORCH_DIR, "optim")
_HERE = os.path.abspath(__file__)


class SyncCounter:
    """Host synchronisations counted while :attr:`active` (``with counter:`` installs the
    modes; the caller opens and closes the window, e.g. around a run's steps). ``device``: the
    run's device; on the CPU every tensor counts as a device tensor. ``torch_check`` (CUDA):
    while active inside ``with``, PyTorch's ``set_sync_debug_mode("error")`` too."""

    def __init__(self, device: torch.device | str = "cpu", torch_check: bool = False) -> None:
        self.every_tensor = torch.device(device).type == "cpu"
        self.torch_check = torch_check and not self.every_tensor
        self._active = True
        self.total = 0
        self.sites: collections.Counter[str] = collections.Counter()  # "op at file:line"
        self._quiet = 0  # inside a counted conversion: its own copies are not counted again
        self._modes: list[Any] = []

    @property
    def active(self) -> bool:
        return self._active

    @active.setter
    def active(self, value: bool) -> None:
        self._active = value
        if self.torch_check and self._modes:
            torch.cuda.set_sync_debug_mode("error" if value else "default")

    def __enter__(self) -> SyncCounter:
        self._modes = [_Conversions(self), _Dispatch(self)]
        for mode in self._modes:
            mode.__enter__()
        self.active = self._active
        return self

    def __exit__(self, *exc: object) -> None:
        if self.torch_check:
            torch.cuda.set_sync_debug_mode("default")
        for mode in reversed(self._modes):
            mode.__exit__(*exc)
        self._modes = []

    def on_device(self, value: Any) -> bool:
        return torch.is_tensor(value) and (self.every_tensor or value.device.type != "cpu")

    def count(self, what: str) -> None:
        """One synchronisation, recorded with the first frame outside torch that caused it."""
        if not self.active or self._quiet:
            return
        site = _site()
        if site is None:  # an optimiser's host-side step counter
            return
        self.total += 1
        self.sites[f"{what} at {site}"] += 1

    def top_sites(self, n: int = 8) -> dict[str, int]:
        return dict(self.sites.most_common(n))

    def dispatched(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Count the ATen operation ``name`` (an overload packet's name) if it syncs."""
        first = args[0] if args else None
        if name in SYNC_OPS:
            if self.on_device(first):
                self.count(name)
        elif name in MASK_INDEXED:
            indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
            if self.on_device(first) and any(_is_mask(i) for i in indices or ()):
                self.count(f"{name} with a boolean mask")
        elif name == REPEAT:
            if kwargs.get("output_size") is None and self.on_device(first):
                self.count("repeat_interleave without output_size")
        elif name in HOST_COPIES and (way := _blocking_copy(name, args, kwargs)):
            self.count(f"{name} {way}")


def _is_mask(index: Any) -> bool:
    return torch.is_tensor(index) and index.dtype in (torch.bool, torch.uint8)


def _blocking_copy(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """ "to the host" or "to the device, blocking" for a copy that waits, else ""."""
    if name == "_to_copy":
        src, target = args[0], kwargs.get("device") or args[0].device
        non_blocking = kwargs.get("non_blocking", False)
    else:
        src, target = args[1] if len(args) > 1 else None, args[0].device
        non_blocking = args[2] if len(args) > 2 else kwargs.get("non_blocking", False)
    if not torch.is_tensor(src) or (src.device.type == "cpu") == (target.type == "cpu"):
        return ""
    if target.type == "cpu":
        return "to the host"
    return "" if non_blocking else "to the device, blocking"


def _sized(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """``one_hot``'s output size is given (its default, -1, reads the input's maximum)."""
    size = args[1] if len(args) > 1 else kwargs.get("num_classes", -1)
    return isinstance(size, int) and size >= 0


def _site() -> str | None:
    """``file:line`` of the innermost frame outside torch and this module; None when the call
    comes from a ``torch.optim`` optimiser (its host-side step counter)."""
    frame: Any = sys._getframe(1)
    while frame is not None:
        path = frame.f_code.co_filename
        if path.startswith(_OPTIM_DIR):
            return None
        if not path.startswith(_TORCH_DIR) and os.path.abspath(path) != _HERE:
            return f"{_short(path)}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


def _short(path: str) -> str:
    """A path relative to the working directory when it is under it."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


class _Dispatch(TorchDispatchMode):
    """Sees every ATen operation, CPU or device; counts the synchronising ones."""

    def __init__(self, counter: SyncCounter) -> None:
        super().__init__()
        self.counter = counter

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        self.counter.dispatched(func.overloadpacket.__name__, args, kwargs)
        return func(*args, **kwargs)


class _Conversions(TorchFunctionMode):
    """Counts ``tolist`` / ``numpy`` of a device tensor, which on the CPU run no ATen op."""

    def __init__(self, counter: SyncCounter) -> None:
        super().__init__()
        self.counter = counter

    def __torch_function__(
        self, func: Callable[..., Any], types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in CPU_ONLY_CHECKS and _sized(args, kwargs):
            pass  # its range check reads the input on the CPU only
        elif name not in CONVERSIONS or not args or not self.counter.on_device(args[0]):
            return func(*args, **kwargs)
        else:
            self.counter.count(f"Tensor.{name}")  # its copy to the host (on a GPU): the same
        self.counter._quiet += 1
        try:
            return func(*args, **kwargs)
        finally:
            self.counter._quiet -= 1
