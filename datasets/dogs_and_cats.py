"""Dogs & Cats (Kim et al., CVPR 2019 colour-bias lists; BiasEnsemble's 1 % / 5 % splits).

Target: animal (0 = cat, 1 = dog); bias: fur colour (0 = dark, 1 = bright). Aligned = dark
cats + bright dogs (the lists' TB1, 10,047 images here); conflicting = bright cats + dark dogs
(TB2, 6,738).

**Built from the release** (``<raw root>/dogs-and-cats-128.tar``: ``images/{cat,dog}.N.jpg``,
``list_bright.txt``, ``list_dark.txt``), by this protocol (BiasEnsemble did not publish its
own script):

* train at r %: every aligned image, plus ``round(n_aligned_c * r / (100 - r))`` conflicting
  images of each class c (5 %: 250 cats, 279 dogs; 1 %: 48, 54), taken in a seeded order so
  the 1 % set is contained in the 5 % set;
* the conflicting images not reserved for the 5 % training set are split per class, 20 % valid
  and 80 % test (shared by both ratios): valid and test are bias-conflicting only and disjoint
  from every training set.

**Read from the BiasEnsemble layout** (``<raw root>/dogs_and_cats/``)::

    {1pct,5pct}/{align,conflict}/<label>/<idx>_<label>_<bias>.<ext>
    {1pct,5pct}/valid/*            test/<label>/*

Images are decoded once at 224 x 224 (the official ``Resize((224, 224))``; the release here is
already down-sized to 128 px, so this is an upsampling) with CIFAR normalisation,
RandomCrop(224, padding=4) and flip, as BiasEnsemble's transforms.
"""

from __future__ import annotations

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
from .folder_layout import (
    Record,
    find_ratio_dir,
    read_records,
    scan_class_folders,
    scan_flat_or_nested,
)
from .images import fixture_jpeg, write_tar

TAR = "dogs-and-cats-128.tar"
CLASSES = ("cat", "dog")
DARK, BRIGHT = 0, 1


#: the small build that ``smoke`` and ``ci`` read (one build for both)
SMALL_BUILD: dict[str, Any] = {"limit_per_group": 150}


@register_dataset(
    "dogs_and_cats",
    display_name="Dogs & Cats",
    citation="Kim et al., Learning Not to Learn, CVPR 2019; 1%/5% splits of Lee et al., "
    "BiasEnsemble, AAAI 2023",
    kind="real",
)
class DogsAndCats(CachedImageFamily):
    spec = photo_spec("dogs_and_cats", CLASSES, ("dark", "bright"))
    build_version = "1"
    source_kinds = ("release", "biasensemble")
    presets: ClassVar[Mapping[str, PresetValues]] = {
        "smoke": PresetValues(SMALL_16PX, SMALL_BUILD),
        "ci": PresetValues(SMALL_16PX, SMALL_BUILD),
    }
    # 10,047 aligned + 102 / 529 conflicting
    train_sizes: ClassVar[Mapping[float, int]] = {1.0: 10_149, 5.0: 10_576}
    valid_split = (
        "20 % of the held-out bias-conflicting images (conflicting only, disjoint from test)"
    )
    source = source_option(
        f"auto: {TAR}, else the BiasEnsemble dogs_and_cats/ folder; release: {TAR}; "
        "biasensemble: <raw root>/dogs_and_cats/ (BiasEnsemble's 1pct/5pct layout)"
    )
    limit_per_group = DataOption[int | None](
        int,
        None,
        "only the first N images of each (class, colour) group (quick builds, CI)",
        minimum=1,
    )
    how_to_get = (
        f"put {TAR} (Kaggle Dogs vs. Cats images of the Kim et al. lists, with list_bright.txt "
        "and list_dark.txt) or the BiasEnsemble dogs_and_cats/ folder into the raw root "
        "(--raw-root / $BENCH_RAW_ROOT), e.g. --raw-root ../shared/data"
    )

    def find_source(self) -> Path:
        return resolve_source(
            self, self.raw_root / TAR, self.raw_root / "dogs_and_cats", self.how_to_get
        )

    def source_kind(self) -> str:
        return "release" if self.find_source().name == TAR else "biasensemble"

    def build(self, staging: Path) -> None:
        if self.source_kind() == "release":
            self._build_from_release(staging)
        else:
            self._read_layout(self.find_source(), staging)

    # ------------------------------------------------------------------ release tar
    def release_records(self) -> list[Record]:
        """Every listed image with its label and colour, in list order."""
        root = extract_archive(self.find_source(), self.data_root / "extracted" / self.spec.name)
        recs = []
        for bias, listing in ((BRIGHT, "list_bright.txt"), (DARK, "list_dark.txt")):
            path = root / listing
            if not path.is_file():
                raise CorruptDataError(f"{self.find_source()} has no {listing}")
            for line in path.read_text().split():
                animal = line.split(".")[0]
                if animal not in CLASSES:
                    raise CorruptDataError(f"{path}: unexpected entry {line!r}")
                image = root / "images" / line
                if not image.is_file():
                    raise CorruptDataError(f"{path} lists {line}, which is not in the archive")
                recs.append(Record(image, CLASSES.index(animal), bias))
        return recs

    def plan(self, recs: list[Record]) -> dict[str, list[Record]]:
        """The split of every image: ``<pct>/train`` per ratio, ``valid``, ``test``."""
        limit = self.limit_per_group  # tests, CI: a small deterministic subset
        draws = rng(self.data_seed, "dogs_and_cats.plan")
        aligned = {c: [r for r in recs if r.label == c and r.bias == c] for c in (0, 1)}
        conflict = {c: [r for r in recs if r.label == c and r.bias != c] for c in (0, 1)}
        if limit:
            aligned = {c: v[: int(limit)] for c, v in aligned.items()}
            conflict = {c: v[: int(limit)] for c, v in conflict.items()}
        n_aligned = {c: len(v) for c, v in aligned.items()}
        most = conflicting_counts(n_aligned, max(self.spec.ratios))
        reserve, valid, test = partition_conflicting(conflict, most, VALID_FRACTION, draws)
        plan = {"valid": valid, "test": test}
        for ratio in self.spec.ratios:
            need = conflicting_counts(n_aligned, ratio)
            train = [r for c in (0, 1) for r in aligned[c]]
            train += [r for c in (0, 1) for r in reserve[c][: need[c]]]
            plan[f"{ratio_dirname(ratio)}/train"] = train
        return plan

    def _build_from_release(self, staging: Path) -> None:
        for rel, recs in self.plan(self.release_records()).items():
            (staging / rel).mkdir(parents=True)
            read_records(recs, self.spec.image_size, f"{self.spec.name} {rel}", staging / rel)

    # ------------------------------------------------------------------ BiasEnsemble layout
    def _read_layout(self, root: Path, staging: Path) -> None:
        c, size = self.spec.num_classes, self.spec.image_size
        for ratio in self.spec.ratios:
            pct = find_ratio_dir(root, ratio, "Dogs & Cats (BiasEnsemble layout)")
            train = []
            for part in ("align", "conflict"):
                train += scan_class_folders(pct / part, c, f"Dogs & Cats {pct.name} {part}")
            rel = f"{pct.name}/train"
            (staging / rel).mkdir(parents=True)
            read_records(train, size, f"{self.spec.name} {rel}", staging / rel)
            valid = scan_flat_or_nested(pct / "valid", c, f"Dogs & Cats {pct.name} valid")
            (staging / pct.name / "valid").mkdir()
            read_records(
                valid, size, f"{self.spec.name} {pct.name} valid", staging / pct.name / "valid"
            )
        test = scan_class_folders(root / "test", c, "Dogs & Cats test")
        (staging / "test").mkdir()
        read_records(test, size, f"{self.spec.name} test", staging / "test")

    def params(self) -> dict[str, Any]:
        return {**super().params(), "limit_per_group": self.limit_per_group}

    def tag_suffix(self) -> str:
        return f"-limit{self.limit_per_group}" if self.limit_per_group else ""

    def write_fixture(self, per_class: int | None = None) -> dict[str, Any]:
        """A tiny release tar: 10 dark cats, 10 bright dogs, 6 of each conflicting group."""
        files: dict[str, bytes] = {}
        lists: dict[int, list[str]] = {DARK: [], BRIGHT: []}
        n = 0
        for label, animal in enumerate(CLASSES):
            for bias, count in ((label, 10), (1 - label, 6)):
                for _ in range(count):
                    name = f"{animal}.{n}.jpg"
                    files[f"images/{name}"] = fixture_jpeg(label, bias, n)
                    lists[bias].append(name)
                    n += 1
        files["list_bright.txt"] = "\n".join(lists[BRIGHT]).encode()
        files["list_dark.txt"] = "\n".join(lists[DARK]).encode()
        write_tar(self.raw_root / TAR, files)
        return {"source": "release"}
