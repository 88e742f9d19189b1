"""What a run starts from: its data (:func:`load_data`: the dataset's splits, the last dataset
cached for a sweep while unchanged, subsampled and resized as the run asks), its method built
fresh and seeded by the run's seed (:func:`setup_run`), or, to look at a run that trained, its
method restored from its checkpoint (:func:`restore_method`). The training loop that runs them is
:mod:`debias_bench.training.engine`.
"""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from debias_bench.config.run_config import RunConfig
from debias_bench.data.contract import Splits, TrainStream, resize_split, resized_spec
from debias_bench.data.family import DatasetFamily
from debias_bench.data.folder_swap import build_lock
from debias_bench.data.split_guard import SplitGuard
from debias_bench.data.split_store import prepared_fingerprint
from debias_bench.errors import BenchError
from debias_bench.paths import DataPlace
from debias_bench.registry import DATASETS, METHODS
from debias_bench.runs.run_dir import RunDir
from debias_bench.streams import stream_seed
from debias_bench.training.method import Method, TrainEnv


def limit_split(split: Any, limit: int | None, seed: int) -> Any:
    """A seeded subset of ``limit`` of ``split``'s samples, in their order (``split`` itself when
    no limit is set or it has no more)."""
    if not limit or limit >= len(split):
        return split
    rows = torch.randperm(len(split), generator=torch.Generator().manual_seed(seed))[:limit]
    return split.subset(rows.sort().values)


_DATA_CACHE: dict[tuple, tuple[DatasetFamily, Splits, SplitGuard, str | None]] = {}


def _cached(key: tuple, config: RunConfig) -> bool:
    """Whether the data cached under ``key`` is still the data to train on: no run wrote to
    its splits (its :class:`SplitGuard`), and the prepared data was not rebuilt since it was
    read (its manifest's fingerprint)."""
    if key not in _DATA_CACHE:
        return False
    family, _, guard, prepared = _DATA_CACHE[key]
    return not guard.changes() and prepared_fingerprint(family, config.ratio) == prepared


def load_data(config: RunConfig, place: DataPlace) -> tuple[DatasetFamily, Splits]:
    """The run's dataset family and splits (subsampled by ``train_limit`` / ``eval_limit``, the
    valid split by ``valid_limit`` where it is set; resized to ``image_size``; the family
    returned then carries the resized spec).

    The last loaded dataset is cached, so a sweep does not re-read it for every run; it is
    read again when a run wrote to it or when it was rebuilt since (:func:`_cached`)."""
    key = (config.dataset, config.ratio, repr(sorted(config.data_options.items())), place)
    if not _cached(key, config):
        family = DATASETS.get(config.dataset)(
            place.raw_root, place.data_root, **config.data_options
        )
        _DATA_CACHE.clear()
        with build_lock(family):
            loaded = family.load(config.ratio)
        prepared = prepared_fingerprint(family, config.ratio)
        _DATA_CACHE[key] = (family, loaded, SplitGuard(vars(loaded)), prepared)
    family, splits, _, _ = _DATA_CACHE[key]
    hp = config.params
    subset_seed = int(config.data_options.get("data_seed", 0))  # same subset for every method
    splits = Splits(
        train=limit_split(splits.train, hp.train_limit, stream_seed(subset_seed, "subset.train")),
        valid=limit_split(
            splits.valid, hp.valid_limit or hp.eval_limit, stream_seed(subset_seed, "subset.valid")
        ),
        test=limit_split(splits.test, hp.eval_limit, stream_seed(subset_seed, "subset.test")),
    )
    side = hp.image_size
    if side and (side, side) != tuple(family.spec.image_size):
        family = copy.copy(family)  # the cached family keeps its own spec
        family.spec = resized_spec(family.spec, side)
        splits = Splits(*(resize_split(split, side) for split in splits))
    return family, splits


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


#: a dataset family and its splits, as ``load_data`` returns them
LoadedData = tuple[DatasetFamily, Splits]


def setup_run(
    config: RunConfig,
    place: DataPlace,
    device: torch.device,
    data: LoadedData | None = None,
    store: Path | None = None,
) -> tuple[DatasetFamily, Splits, TrainStream, Method, SplitGuard]:
    """Data (``data``, else loaded), batch stream, a freshly initialised method (seeded by
    the run seed) and the fingerprints of the splits it is scored on, taken before the method
    saw them. A method that keeps state its checkpoint would lose is refused here, before it
    trains (:meth:`Method.checkpointed`)."""
    method_cls: type[Method] = METHODS.get(config.method)
    hp = config.params  # the method's Params, built once per run
    family, splits = data or load_data(config, place)
    guard = SplitGuard({"valid": splits.valid, "test": splits.test})  # before the method sees them
    stream = TrainStream(splits.train, family.spec, hp.batch_size, config.seed, device)
    total_steps = hp.steps or hp.epochs * stream.steps_per_epoch
    env = TrainEnv(
        device, len(splits.train), stream.steps_per_epoch, total_steps, config.seed,
        config=config, store=store,
    )  # fmt: skip
    _seed_everything(config.seed)
    method = method_cls(family.spec, hp, env)
    evaluated = method.evaluation_splits(splits)  # DFR keeps half of the validation split
    guard.check(config.method, "in evaluation_splits()")
    if evaluated.valid is not splits.valid or evaluated.test is not splits.test:
        guard = SplitGuard({"valid": evaluated.valid, "test": evaluated.test})
    method.checkpointed()
    stream.sampler = method.batch_sampler()  # how the method draws its batches (uniform: N/B)
    return family, evaluated, stream, method, guard


def restore_method(
    run_dir: RunDir, place: DataPlace, device: torch.device
) -> tuple[Method, DatasetFamily, Splits]:
    """A run's method with the weights of its latest checkpoint, in eval mode."""
    config = RunConfig.from_json(run_dir.config())
    family, splits, _, method, _ = setup_run(config, place, device, store=run_dir.path.parent)
    checkpoint = run_dir.load_checkpoint()
    if checkpoint is None:
        raise BenchError(f"{run_dir.path} has no checkpoint", hint="train it with `bench run`")
    method.load_state_dict(checkpoint["method"])
    method.eval_mode()
    return method, family, splits
