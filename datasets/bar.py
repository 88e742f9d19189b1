"""BAR, Biased Action Recognition (Nam et al., NeurIPS 2020), with 1 % / 5 % conflicting splits.

Six actions, each photographed in its usual place: (Climbing, RockWall), (Diving, Underwater),
(Fishing, WaterSurface), (Vaulting, Sky), (Racing, APavedTrack), (Throwing, PlayingField).
Labels follow the paper's class order, which is the alphabetical order of the release's file
prefixes (``climbing, diving, fishing, pole vaulting, racing, throwing``).

**Built from the official release** (``<raw root>/bar.tar``: ``train/<action>_<n>.jpg``, 1,941
images, all bias-aligned; ``test/<action>_<n>.jpg``, 654 images, all bias-conflicting). The
release has no conflicting training images; the literature's 1 % / 5 % splits (BiasEnsemble)
were made by moving some conflicting images into training and were published without a
script, so the protocol here is:

* train at r %: all 1,941 release-train images plus ``round(n_train_c * r / (100 - r))``
  release-test images of each class c (5 %: 103 in all; 1 %: 20), taken in a seeded order
  so the 1 % set is inside the 5 % set;
* the release-test images not reserved for the 5 % set are split per class, 20 % valid and
  80 % test, shared by both ratios (bias-conflicting only, disjoint from training).

**Bias labels are synthetic**, as in BiasEnsemble's loader: the release labels no places, so
an aligned image gets ``bias = label`` and a conflicting one ``bias = (label + 1) mod 6``.
Only "aligned vs conflicting" is real; methods that use bias labels (EnD, SD, ETF-Debias's
prime features) see this convention, which is what the published numbers used.

**Read from the BiasEnsemble layout** (``<raw root>/bar/``)::

    train/align/<cls>/*    train/conflict/{1pct,5pct}/<cls>/*    valid/<cls>/*    test/<cls>/*

file names ``<idx>_<label>_<bias>.<ext>``; training biases are overwritten by the convention
above (as BiasEnsemble does), valid/test biases are taken from the names.

224 x 224, CIFAR normalisation, RandomCrop(224, padding=4) + flip (BiasEnsemble's transforms),
ImageNet-pretrained ResNet-18 by default.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from debias_bench.data.extraction import extract_archive
from debias_bench.data.family import PresetValues
from debias_bench.data.options import DataOption
from debias_bench.data.split_store import ratio_dirname
from debias_bench.errors import CorruptDataError
from debias_bench.registry import register_dataset
from debias_bench.streams import rng

from .cached import (
    SMALL_16PX,
    VALID_FRACTION,
    CachedImageFamily,
    conflicting_counts,
    partition_conflicting,
    photo_spec,
    resolve_source,
    source_option,
)
from .folder_layout import Record, image_files, read_records, require_dir, scan_class_folders
from .images import fixture_jpeg, write_tar

TAR = "bar.tar"
PREFIXES = ("climbing", "diving", "fishing", "pole vaulting", "racing", "throwing")
CLASS_NAMES = ("Climbing", "Diving", "Fishing", "Vaulting", "Racing", "Throwing")
PLACES = ("RockWall", "Underwater", "WaterSurface", "Sky", "APavedTrack", "PlayingField")
_FILE = re.compile(r"^(.+)_(\d+)$")


#: the small build that ``smoke`` and ``ci`` read (one build for both)
SMALL_BUILD: dict[str, Any] = {"limit_per_class": 60}


@register_dataset(
    "bar",
    display_name="BAR",
    citation="Nam et al., Learning from Failure, NeurIPS 2020 (BAR); 1%/5% splits of Lee et "
    "al., BiasEnsemble, AAAI 2023",
    kind="real",
)
class BAR(CachedImageFamily):
    spec = photo_spec("bar", CLASS_NAMES, PLACES, backbone="resnet18_pretrained")
    build_version = "1"
    source_kinds = ("release", "biasensemble")
    presets: ClassVar[Mapping[str, PresetValues]] = {
        # a ResNet-20 from scratch (no pretrained weights to download)
        "smoke": PresetValues(SMALL_16PX, SMALL_BUILD),
        "ci": PresetValues(SMALL_16PX, SMALL_BUILD),
    }
    # the release's 1,941 training images + 20 / 103 conflicting
    train_sizes: ClassVar[Mapping[float, int]] = {1.0: 1_961, 5.0: 2_044}
    valid_split = (
        "20 % of the held-out bias-conflicting release-test images (conflicting only, disjoint "
        "from test)"
    )
    source = source_option(
        "auto: bar.tar, else the BiasEnsemble bar/ folder; release: bar.tar; "
        "biasensemble: <raw root>/bar/ (BiasEnsemble's 1pct/5pct layout)"
    )
    limit_per_class = DataOption[int | None](
        int, None, "only the first N images of each class (quick builds, CI)", minimum=1
    )
    how_to_get = (
        "put the official release bar.tar (github.com/alinlab/BAR) or the BiasEnsemble bar/ "
        "folder into the raw root (--raw-root / $BENCH_RAW_ROOT), e.g. --raw-root ../shared/data"
    )

    def find_source(self) -> Path:
        return resolve_source(self, self.raw_root / TAR, self.raw_root / "bar", self.how_to_get)

    def source_kind(self) -> str:
        return "release" if self.find_source().name == TAR else "biasensemble"

    def build(self, staging: Path) -> None:
        if self.source_kind() == "release":
            plan = self.plan(*self.release_records())
        else:
            plan = self.layout_plan(self.find_source())
        for rel, recs in plan.items():
            (staging / rel).mkdir(parents=True)
            read_records(recs, self.spec.image_size, f"{self.spec.name} {rel}", staging / rel)

    # ------------------------------------------------------------------ release tar
    def release_records(self) -> tuple[list[Record], list[Record]]:
        """(aligned release-train images, conflicting release-test images), bias synthetic."""
        root = extract_archive(self.find_source(), self.data_root / "extracted" / self.spec.name)
        out = []
        for part in ("train", "test"):
            folder = require_dir(root / part, f"{self.find_source()}: {part}/")
            recs = []
            for path in image_files(folder):
                match = _FILE.match(path.stem)
                if not match or match.group(1) not in PREFIXES:
                    raise CorruptDataError(f"{path}: not an <action>_<n> image of BAR")
                label = PREFIXES.index(match.group(1))
                bias = label if part == "train" else (label + 1) % len(PREFIXES)
                recs.append((int(match.group(2)), Record(path, label, bias)))
            out.append([r for _, r in sorted(recs, key=lambda t: (t[1].label, t[0]))])
        return out[0], out[1]

    def plan(self, aligned: list[Record], conflict: list[Record]) -> dict[str, list[Record]]:
        limit = self.limit_per_class  # tests, CI: a small deterministic subset
        by_class = {c: [r for r in aligned if r.label == c] for c in range(6)}
        pool = {c: [r for r in conflict if r.label == c] for c in range(6)}
        if limit:
            by_class = {c: v[: int(limit)] for c, v in by_class.items()}
            pool = {c: v[: int(limit)] for c, v in pool.items()}
        n_aligned = {c: len(v) for c, v in by_class.items()}
        most = conflicting_counts(n_aligned, max(self.spec.ratios))
        draws = rng(self.data_seed, "bar.plan")
        reserve, valid, test = partition_conflicting(pool, most, VALID_FRACTION, draws)
        plan: dict[str, list[Record]] = {"valid": valid, "test": test}
        for ratio in self.spec.ratios:
            need = conflicting_counts(n_aligned, ratio)
            train = [r for c in range(6) for r in by_class[c]]
            train += [r for c in range(6) for r in reserve[c][: need[c]]]
            plan[f"{ratio_dirname(ratio)}/train"] = train
        return plan

    # ------------------------------------------------------------------ BiasEnsemble layout
    def layout_plan(self, root: Path) -> dict[str, list[Record]]:
        c = self.spec.num_classes
        align = [
            Record(r.path, r.label, r.label)
            for r in scan_class_folders(root / "train" / "align", c, "BAR train/align")
        ]
        plan = {
            "valid": scan_class_folders(root / "valid", c, "BAR valid"),
            "test": scan_class_folders(root / "test", c, "BAR test"),
        }
        for ratio in self.spec.ratios:
            folder = root / "train" / "conflict" / ratio_dirname(ratio)
            conflict = [
                Record(r.path, r.label, (r.label + 1) % c)
                for r in scan_class_folders(folder, c, f"BAR train/conflict/{folder.name}")
            ]
            plan[f"{ratio_dirname(ratio)}/train"] = align + conflict
        return plan

    def params(self) -> dict[str, Any]:
        return {**super().params(), "limit_per_class": self.limit_per_class}

    def tag_suffix(self) -> str:
        return f"-limit{self.limit_per_class}" if self.limit_per_class else ""

    def write_fixture(self, per_class: int | None = None) -> dict[str, Any]:
        """A tiny bar.tar (8 release-train and 6 release-test images per action)."""
        files = {}
        for c, prefix in enumerate(PREFIXES):
            for n in range(8):
                files[f"train/{prefix}_{n}.jpg"] = fixture_jpeg(c, c, 100 * c + n)
            for n in range(6):
                files[f"test/{prefix}_{n}.jpg"] = fixture_jpeg(c, (c + 1) % 6, 100 * c + 50 + n)
        write_tar(self.raw_root / TAR, files)
        return {"source": "release"}
