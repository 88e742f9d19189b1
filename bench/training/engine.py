"""The training loop: step-based, with evaluation cadence, selection, checkpoints and resume
(what a run starts from, its data and its method: :mod:`debias_bench.training.run_setup`).

A run is a pure function of its config: the same config on the same machine gives the same
numbers, and a run stopped at any step and resumed from its checkpoint ends exactly where an
uninterrupted run would (batch order is a function of ``(seed, epoch)``; RNG states, the
method's state, the selection tracker and the running loss sums are checkpointed).
"""

from __future__ import annotations

import contextlib
import math
import random
import resource
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from debias_bench import __version__
from debias_bench.config.run_config import RunConfig
from debias_bench.config.terms import run_terms
from debias_bench.data.iid import iid_valid
from debias_bench.errors import BenchError, FailReason, Interrupted, RunFailure
from debias_bench.paths import DataPlace
from debias_bench.runs.progress import Progress
from debias_bench.runs.provenance import config_json
from debias_bench.runs.run_dir import RunDir
from debias_bench.streams import stream_seed
from debias_bench.training.acceleration import accelerate, amp_dtype, autocast
from debias_bench.training.method import Method
from debias_bench.training.metrics import SelectionTracker, collect_features, evaluate_split
from debias_bench.training.nc import neural_collapse_by_alignment
from debias_bench.training.run_setup import LoadedData, limit_split, setup_run
from debias_bench.training.run_setup import load_data as load_data  # re-export
from debias_bench.training.run_setup import restore_method as restore_method  # re-export
from debias_bench.training.stages import StageStopped, stop_between_steps


class Diverged(RunFailure):
    """A training scalar became NaN or infinite: the run ends as failed (reason: diverged) at
    the first evaluation that sees it, and never gives a number."""

    def __init__(self, step: int, scalars: dict[str, float]) -> None:
        bad = ", ".join(f"{k}={v}" for k, v in sorted(scalars.items()) if not math.isfinite(v))
        super().__init__(
            FailReason.DIVERGED,
            f"diverged at step {step}: {bad}",
            hint="lower the learning rate (`bench config METHOD DATASET` shows it) and rerun "
            "with --retry-failed",
            step=step,
        )


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None (metrics.jsonl is strict JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _rng_state() -> dict[str, Any]:
    state = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return rss / (2**20 if sys.platform == "darwin" else 2**10)


def _neural_collapse(
    method: Method, split: Any, spec: Any, batch_size: int, device: torch.device
) -> dict[str, Any]:
    feats = collect_features(method.features, split, spec, batch_size, device)
    weight = method.classifier_weight()
    return neural_collapse_by_alignment(feats, split.labels, split.biases, weight)


@contextlib.contextmanager
def pinned_threads(threads: int | None) -> Iterator[None]:
    """Run the block with ``threads`` CPU threads (None: leave the setting alone)."""
    if not threads:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(int(threads))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _check_fingerprint(
    run_dir: RunDir, checkpoint: dict[str, Any] | None, fingerprint: str
) -> None:
    """A run that resumes on data that changed since its checkpoint was written is stopped (it
    would mix two datasets). The fingerprint is recorded in the checkpoint, the live status and
    the result; config.json, written once when the run is planned, does not hold it."""
    before = (checkpoint or {}).get("data_fingerprint")
    if before and before != fingerprint:
        raise BenchError(
            f"{run_dir.run_id}: the prepared data changed since the run started "
            f"(fingerprint {before} -> {fingerprint})",
            hint=f"delete {run_dir.checkpoint_path} to retrain it on the current data",
        )
    run_dir.heartbeat(data_fingerprint=fingerprint)


def train_run(
    config: RunConfig,
    run_dir: RunDir,
    place: DataPlace,
    device: torch.device,
    progress: Progress | None = None,
    should_stop: Callable[[int], bool] = lambda step: False,
    data: LoadedData | None = None,
) -> dict[str, Any]:
    """Train (or resume) one run to completion and write its ``result.json``.

    ``should_stop(step)`` is polled after every step; when it returns True the run checkpoints
    and raises :class:`Interrupted`. The run uses ``num_threads`` CPU threads when it sets them.
    ``data`` replaces the dataset the config names (benchmarks on synthetic tensors).
    """
    with pinned_threads(config.params.num_threads):
        return _train(config, run_dir, place, device, progress or Progress(), should_stop, data)


def _train(
    config: RunConfig,
    run_dir: RunDir,
    place: DataPlace,
    device: torch.device,
    progress: Progress,
    should_stop: Callable[[int], bool],
    data: LoadedData | None,
) -> dict[str, Any]:
    run_dir.plan(config_json(config))  # when no sweep planned it (benchmarks, analyses)
    training = _Training(config, run_dir, place, device, data)
    training.resume_or_prepare(should_stop)
    progress.start(run_dir.run_id, training.total_steps, training.tally.step)
    try:
        training.loop(progress, should_stop)
    except (Diverged, Interrupted):  # a run that ends early closes its progress too
        progress.close()
        raise
    progress.close()
    result = training.result()
    run_dir.write_result(result)
    return result


@dataclass
class _Tally:
    """Where a run stands: steps done, the training scalars summed since the last evaluation
    (``count`` updates), and the seconds spent preparing and training (training includes
    preparation)."""

    step: int = 0
    sums: dict[str, Any] = field(default_factory=dict)
    count: int = 0
    train_time: float = 0.0
    prepare_time: float = 0.0

    def add(self, scalars: Mapping[str, torch.Tensor | float], seconds: float) -> None:
        """Count one update's scalars (tensors stay on their device until an evaluation)."""
        for key, value in scalars.items():
            self.sums[key] = self.sums.get(key, 0.0) + (
                value.detach() if torch.is_tensor(value) else value
            )
        self.count += 1
        self.step += 1
        self.train_time += seconds

    def take_means(self) -> dict[str, float]:
        """The scalars' means since the last evaluation; the sums start again."""
        means = {k: float(v) / max(self.count, 1) for k, v in self.sums.items()}
        self.sums, self.count = {}, 0
        return means


class _Training:
    """One run's training as named steps: set up (:meth:`__init__`), resume from the checkpoint
    or prepare the method, :meth:`loop` over updates with an :meth:`evaluate` every
    ``eval_every`` steps and a :meth:`save` after each, and the :meth:`result`."""

    def __init__(
        self,
        config: RunConfig,
        run_dir: RunDir,
        place: DataPlace,
        device: torch.device,
        data: LoadedData | None,
    ) -> None:
        self.config, self.run_dir, self.device = config, run_dir, device
        self.family, self.splits, self.stream, self.method, self.guard = setup_run(
            config, place, device, data, store=run_dir.path.parent
        )
        self.hp = hp = self.method.hp
        self.checkpoint = run_dir.load_checkpoint()
        self.fingerprint = self.family.fingerprint(config.ratio) if data is None else None
        if self.fingerprint is not None:
            _check_fingerprint(run_dir, self.checkpoint, self.fingerprint)
        accelerate(self.method.modules(), hp.as_dict(), device)
        self.amp = amp_dtype(hp.amp, device, (config.dataset, config.method))
        self.total_steps, self.eval_every = 0, 1  # set once prepared or resumed (set_length)
        self.tracker = SelectionTracker()
        self.iid, self.iid_note = iid_valid(self.splits.valid, config.ratio, config.seed)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        self.tally = _Tally()

    def resume_or_prepare(self, should_stop: Callable[[int], bool]) -> None:
        """Restore the checkpoint's state, or run the method's preparation stage (checkpointed
        when it is expensive, so that a resume does not redo it; ``should_stop`` is polled
        before each of its optimiser steps, and a stop there leaves no checkpoint)."""
        checkpoint = self.checkpoint
        if checkpoint is not None:
            self.method.load_state_dict(checkpoint["method"])
            self.tracker.load_state_dict(checkpoint["tracker"])
            _set_rng_state(checkpoint["rng"])
            self.tally = _Tally(
                step=checkpoint["step"],
                sums=checkpoint["loss_sums"],
                count=checkpoint["loss_count"],
                train_time=checkpoint["train_time"],
                prepare_time=checkpoint["prepare_time"],
            )
            self.run_dir.truncate_metrics(self.tally.step)
            self.set_length()
            self.run_dir.heartbeat(stage="training")
            return
        started = time.perf_counter()
        self.method.train_mode()
        self.run_dir.heartbeat(stage="preparing")
        try:
            with stop_between_steps(lambda: should_stop(0)):
                self.method.prepare(self.splits)
        except StageStopped:
            raise Interrupted(
                f"{self.run_dir.run_id} stopped in its preparation stage; rerun to start it again"
            ) from None
        prepare_time = time.perf_counter() - started
        self.run_dir.heartbeat(stage="training")
        self.tally = _Tally(train_time=prepare_time, prepare_time=prepare_time)
        self.set_length()
        if prepare_time > 0.5:
            self.save()

    def set_length(self) -> None:
        """The run's length and evaluation cadence in steps, in epochs of the method's sampler
        (N samples unless it draws otherwise: JTT's duplicated set is N + lambda_up |E|, known
        once it has prepared or its checkpoint restored the sampler)."""
        hp, steps_per_epoch = self.hp, self.stream.steps_per_epoch
        self.total_steps = self.method.run_length(hp.steps or hp.epochs * steps_per_epoch)
        self.eval_every = hp.eval_every or max(1, round(hp.eval_every_epochs * steps_per_epoch))

    def loop(self, progress: Progress, should_stop: Callable[[int], bool]) -> None:
        """Update until ``total_steps``: evaluate on the cadence, stop (after a checkpoint) when
        ``should_stop`` says so."""
        tally, hp = self.tally, self.hp
        batches = self.stream.batches(start_step=tally.step)
        nc_seed = stream_seed(self.config.seed, "nc_subset")
        nc_split = limit_split(self.splits.train, hp.nc_limit, nc_seed) if hp.track_nc else None
        self.method.train_mode()
        while tally.step < self.total_steps:
            tick = time.perf_counter()
            with autocast(self.amp, self.device):
                scalars = self.method.update(next(batches))
            tally.add(scalars, time.perf_counter() - tick)
            progress.advance(tally.step)
            if tally.step % self.eval_every == 0 or tally.step == self.total_steps:
                record = self.evaluate(nc_split)
                progress.evaluated(record)
            if tally.step < self.total_steps and should_stop(tally.step):
                self.save()
                raise Interrupted(
                    f"{self.run_dir.run_id} stopped at step {tally.step}; rerun to resume"
                )

    def evaluate(self, nc_split: Any | None) -> dict[str, Any]:
        """Evaluate at the current step: the metrics record (appended to metrics.jsonl), the
        selection tracker, a checkpoint and the heartbeat. Diverged training raises
        :class:`Diverged` instead."""
        step, method, spec, device = self.tally.step, self.method, self.family.spec, self.device
        train_means = self.tally.take_means()
        if not all(math.isfinite(v) for v in train_means.values()):
            raise Diverged(step, train_means)

        def accuracy(split: Any) -> dict[str, Any]:
            return evaluate_split(method.predict, split, spec, self.hp.eval_batch_size, device)

        method.eval_mode()
        with autocast(self.amp, device):
            record = {
                "step": step,
                "epoch": step / self.stream.steps_per_epoch,
                "train": train_means,
                "valid": accuracy(self.splits.valid),
                "test": accuracy(self.splits.test),
                **({"valid_iid": accuracy(self.iid)} if self.iid is not None else {}),
                "train_time_s": self.tally.train_time,
            }
            if nc_split is not None:
                record["nc"] = _neural_collapse(
                    method, nc_split, spec, self.hp.eval_batch_size, device
                )
        method.train_mode()
        self.guard.check(self.config.method, f"found at the evaluation of step {step}")
        self.tracker.update(record)
        self.run_dir.append_metrics(_finite(record))
        self.save()
        self.run_dir.heartbeat(step=step, total_steps=self.total_steps)
        return record

    def save(self) -> None:
        """Checkpoint everything a resume needs to end where an uninterrupted run would."""
        tally = self.tally
        self.run_dir.save_checkpoint(
            {
                "step": tally.step,
                "method": self.method.state_dict(),
                "tracker": self.tracker.state_dict(),
                "rng": _rng_state(),
                "loss_sums": {k: float(v) for k, v in tally.sums.items()},
                "loss_count": tally.count,
                "train_time": tally.train_time,
                "prepare_time": tally.prepare_time,
                "data_fingerprint": self.fingerprint,
            }
        )

    def result(self) -> dict[str, Any]:
        """What ``result.json`` holds."""
        config, device, tally = self.config, self.device, self.tally
        return {
            "run_id": self.run_dir.run_id,
            "method": config.method,
            "dataset": config.dataset,
            "ratio": config.ratio,
            "seed": config.seed,
            "protocol": config.protocol,
            "preset": config.preset,
            "terms": run_terms(config.to_json()),  # what its number means beyond its method
            "selections": self.tracker.state_dict(),
            "steps": self.total_steps,
            "epochs": self.total_steps / self.stream.steps_per_epoch,
            "train_size": len(self.splits.train),
            "train_time_s": tally.train_time,
            "prepare_time_s": tally.prepare_time,
            "peak_memory_mb": _peak_memory_mb(device),
            "device": str(device),
            "data_version": self.family.version(),
            "data_fingerprint": self.fingerprint,
            "valid_iid": self.iid_note,  # how the in-distribution split was built, or why none
            "code_version": __version__,
            "finished": time.time(),
            **({"method_record": record} if (record := self.method.record()) else {}),
        }
