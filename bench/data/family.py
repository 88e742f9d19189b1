"""Base class of a dataset family: how a registered dataset builds, loads and checks its data
(what it declares and is made with, its options and its sources:
:mod:`debias_bench.data.family_declaration`).

A family builds its prepared splits into the npy store of ``debias_bench.data.split_store`` and
replaces them atomically, in one place (``DatasetFamily.build_into``: ``seal_dataset`` then
``replace_dir`` of ``debias_bench.data.folder_swap``), under the build lock. "Prepared" means every
file the manifest lists is there with its recorded size (``integrity.completeness_problems``):
a ``bench data prepare`` rebuilds a dataset that misses a file, and a run refuses it with an
error naming the file and the command that repairs it (a run never rebuilds data that was
damaged). A half-finished swap left by a kill is put back by ``settle`` before a build and
before a run reads.

Whatever a family's ``load`` returns (a plugin's own ``load`` too: ``__init_subclass__`` wraps
it) is range-checked against its spec: a label or bias label outside the dataset's classes is a
``BadDataError`` naming the dataset, the split, how many and the first one, so a run on it ends
``failed (bad data)`` instead of reporting a wrong accuracy. The npy store refuses such labels
when it is built (``seal_dataset``), and the up-front check of a sweep (``content_problems``)
reads the prepared labels and stamps of the files its runs read before any run folder exists.

What a dataset knows for the engine (its presets' values, its training-set sizes, what its
validation split is) is declared on its class too (``presets``, ``train_sizes``,
``valid_split``); ``debias_bench.data.facts`` resolves them, presets' values with the
dataset's recipe, the facts about its data from its own class only.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from debias_bench import former_names
from debias_bench.data.declared import refuse_inherited_data_facts
from debias_bench.data.family_declaration import FamilyDeclaration
from debias_bench.data.family_declaration import PresetValues as PresetValues  # re-export
from debias_bench.data.family_declaration import exact_ratio as exact_ratio  # re-export
from debias_bench.data.folder_swap import BUILDING, build_lock, leftovers, replace_dir, settle
from debias_bench.data.integrity import (
    MANIFEST,
    BadDataError,
    changed_files,
    check_files,
    completeness_problems,
    fingerprint_of,
    manifest_digests,
    range_checked,
)
from debias_bench.data.pool import pool_ends_with_us
from debias_bench.data.raw_checks import check_raw_sources
from debias_bench.data.spec import range_problems
from debias_bench.data.split_store import (
    SPLIT_FILES,
    read_attrs,
    seal_dataset,
    split_digest,
    verify_dataset,
)
from debias_bench.errors import BenchError, CorruptDataError, DataNotFoundError
from debias_bench.registry import DATASETS

#: what this module offered on 2026-11-26 and no longer holds (``ratio_dirname``, ...)
__getattr__ = former_names(__name__)

if TYPE_CHECKING:  # annotations only (torch): a family registers and is listed without torch
    from debias_bench.data.contract import Splits

DATASETS.add_check(refuse_inherited_data_facts)  # a dataset's own sizes, shape, valid split


def fixture_root(data_root: Path) -> Path:
    """Where ``bench data fixture NAME`` writes a stand-in of the raw sources by default."""
    return data_root / "fixtures"


class DatasetFamily(FamilyDeclaration):
    """A registered dataset: builds itself from raw sources, loads its splits, verifies them.

    Build/read options are declared as ``DataOption`` class attributes (one place: type,
    default, allowed values, doc); the constructor checks the options it is given against them
    and ``self.<option>`` reads a value. A family that stores its splits in the npy layout
    implements ``prepare`` and ``split_dirs``; ``load`` then checks every file a run reads
    against the manifest before reading it. What it declares and is made with (spec, options,
    folder, sources) is :class:`~debias_bench.data.family_declaration.FamilyDeclaration`'s."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A subclass's own ``load`` (a plugin's) is range-checked like the built-in one."""
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("load")
        if own is not None and not getattr(own, "checks_ranges", False):
            cls.load = range_checked(own)  # type: ignore[method-assign]

    def build_into(
        self,
        folder: Path,
        force: bool,
        build: Callable[[Path], None],
        params: Callable[[], dict[str, Any]],
        shape: tuple[int, int] | None = None,
    ) -> Path:
        """The one way a family (re)builds its prepared ``folder``; returns it.

        Puts back a swap that was interrupted earlier (``settle``); then, unless the folder is
        complete (or ``force``), says in one line why it rebuilds, runs ``build(staging)`` on a
        fresh ``<name>.building`` beside it, seals it (manifest last, then checked:
        ``seal_dataset``) and swaps it in by renames (``replace_dir``). Works under the build
        lock (taken here when the caller does not hold it); a complete folder with nothing
        beside it takes no lock and writes nothing."""
        if not force and not leftovers(folder) and not completeness_problems(folder):
            return folder
        shape = shape or (self.spec.num_classes, self.spec.num_biases)  # labels checked by it
        with build_lock(self):
            self._settle(folder)
            problems = completeness_problems(folder)
            if not force and not problems:
                return folder
            if not force and folder.exists():
                print(_rebuild_note(folder, problems), file=sys.stderr)
            staging = folder.with_name(folder.name + BUILDING)
            if staging.exists():
                shutil.rmtree(staging)
            made = [p for p in staging.parents if not p.exists()]  # deepest first
            staging.mkdir(parents=True)
            try:
                check_raw_sources(self)  # raw files with known checksums first (MNIST's idx)
                with pool_ends_with_us():  # no decoding worker outlives a killed build
                    build(staging)
                seal_dataset(staging, params(), shape=shape)
            except Exception as exc:  # an error, not a kill: the live data untouched, nothing left
                shutil.rmtree(staging, ignore_errors=True)
                for parent in made:  # the folders made for it, while empty
                    with contextlib.suppress(OSError):
                        parent.rmdir()
                if isinstance(exc, CorruptDataError):  # labels out of range, a file short
                    raise BadDataError(f"{self.spec.name}: {exc.message}", exc.hint) from None
                raise
            replace_dir(staging, folder)
        return folder

    def _settle(self, folder: Path) -> None:
        """``settle`` under the build lock, its notes on stderr."""
        if not leftovers(folder):
            return
        with build_lock(self):
            for note in settle(folder):
                print(note, file=sys.stderr)

    def _manifest_root(self, ratio: float) -> Path | None:
        """The folder whose manifest covers ``ratio`` (None: the family keeps no npy store, or
        cannot tell where it is)."""
        try:
            return self.split_dirs(ratio)[0]
        except (NotImplementedError, BenchError):
            return None

    def damage(self, ratios: Iterable[float] | None = None) -> list[str]:
        """What is missing from prepared data that has a manifest (a file gone, or of another
        size): data that was built and then damaged. Empty when complete or never built."""
        roots = {self._manifest_root(r) for r in (ratios or self.spec.ratios)}
        problems: list[str] = []
        for root in sorted(r for r in roots if r is not None):
            if (root / MANIFEST).is_file():
                problems += completeness_problems(root)
        return problems

    def ready_to_read(self, ratio: float) -> None:
        """What comes before a run reads ``ratio``: put back a dataset left half-swapped by a
        killed ``prepare``, then refuse one that is damaged (CorruptDataError naming the first
        missing file and the command that repairs it). Data never built is built by
        ``prepare`` as before; data built and then damaged is never rebuilt behind a run."""
        root = self._manifest_root(ratio)
        if root is None:
            return
        self._settle(root)
        problems = self.damage([ratio])
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise BadDataError(
                f"the prepared data of {self.spec.name} in {root} is incomplete: "
                f"{problems[0]}{more}",
                hint=f"repair it: `{self.repair_command()}`",
            )

    def content_problems(self, ratios: Iterable[float]) -> tuple[list[str], list[str]]:
        """What a run at ``ratios`` would refuse in the prepared data, found before it starts:
        (files it reads whose content is not what the manifest says, labels or bias labels
        of a split it reads outside the dataset's classes), one line each. A file costs one
        ``stat`` while its stamp holds (``integrity.changed_files``); labels are read from
        the small attrs.npy. Nothing for data not prepared yet (its build checks both) nor
        for families that keep no npy store (their ``load`` is checked when a run reads)."""
        changed: list[str] = []
        labels_out: list[str] = []
        for ratio in ratios:
            try:
                root, dirs = self.split_dirs(self.check_ratio(ratio))
            except (NotImplementedError, BenchError):
                break
            if completeness_problems(root):
                continue  # not prepared (built by the run) or damaged (``availability``)
            files = [d / f for d in dirs.values() for f in SPLIT_FILES]
            changed += [p for p in changed_files(root, files) if p not in changed]
            for name, folder in dirs.items():
                try:
                    labels, biases = read_attrs(folder)
                except (OSError, ValueError, EOFError) as exc:
                    found = [f"cannot read {folder / 'attrs.npy'} ({exc})"]
                else:
                    spec = self.spec
                    found = [
                        f"{folder}: {problem}"
                        for problem in range_problems(
                            name, labels, biases, spec.num_classes, spec.num_biases
                        )
                    ]
                labels_out += [p for p in found if p not in labels_out]
        return changed, labels_out

    @range_checked
    def load(self, ratio: float) -> Splits:
        """Splits for one bias-conflicting ratio (in percent); prepares them when missing and
        checks every file read against the manifest (CorruptDataError on a mismatch, or when
        a prepared file is gone: ``ready_to_read``)."""
        from debias_bench.data.split_loading import load_splits  # torch: only when data is loaded

        ratio = self.check_ratio(ratio)
        self.ready_to_read(ratio)
        self.prepare([ratio])
        _, dirs = self.split_dirs(ratio)
        self.checked_files(ratio)
        return load_splits(dirs, mmap=self.memory_mapped)

    def checked_files(self, ratio: float) -> dict[str, str]:
        """{relative path: sha256} of the files a run at ``ratio`` reads, checked against the
        manifest (once per instance; memory-mapped files by size and mtime after a first hash)."""
        root, dirs = self.split_dirs(ratio)
        files = [d / f for d in dirs.values() for f in SPLIT_FILES]
        key = (str(root), *(str(f) for f in files))
        if key not in self._verified:
            self._verified[key] = check_files(
                root, files, trust_stat=self.memory_mapped, fix=self.repair_command()
            )
        return self._verified[key]

    def fingerprint(self, ratio: float | None = None) -> str:
        """Content hash of the prepared data a run at ``ratio`` reads (every prepared file when
        None), from the checksums its files were checked against; prepares what is missing.
        Families that keep no npy store are hashed from their loaded splits."""
        try:
            if ratio is not None:
                ratio = self.check_ratio(ratio)
                self.ready_to_read(ratio)
                self.prepare([ratio])
                return fingerprint_of(self.checked_files(ratio))
            root, _ = self.split_dirs(self.spec.ratios[0])
            for r in self.spec.ratios:
                self.ready_to_read(r)
            self.prepare()
            return fingerprint_of(manifest_digests(root, self.repair_command()))
        except NotImplementedError:
            ratios = [ratio] if ratio is not None else list(self.spec.ratios)
            return fingerprint_of(
                {f"{r:g}/{s.name}": split_digest(s) for r in ratios for s in self.load(r)}
            )

    def availability(self, fetch: bool = False) -> str | None:
        """None when the data is prepared, its raw sources are present, or its builder fetches
        them itself; otherwise where it looked and, on one ``hint:`` line, what gets the data.
        Prepared data with a file missing is a problem too (a run would refuse it): the file
        is named, with the command that repairs it.

        ``fetch``: a builder that fetches its raw sources itself (Colored MNIST's mirrors)
        does it now, once (``prepare``, under the build lock), and a failed fetch is the
        problem, where it looked named: what a sweep's up-front check asks, so that the
        sweep stops in one error before any run folder exists instead of every run failing
        on the same download."""
        try:
            damage = self.damage()
            if damage:
                more = f" (and {len(damage) - 1} more)" if len(damage) > 1 else ""
                return (
                    f"{self.spec.name}: the prepared data is incomplete: {damage[0]}{more}\n"
                    f"  hint: repair it with `{self.repair_command()}`"
                )
            if self.is_prepared() or self._recoverable():
                return None
            self.find_raw()
            return None
        except DataNotFoundError as exc:
            if not self.auto_download:
                return self._missing(exc)
            if not fetch:
                return None
        try:
            with build_lock(self):
                self.prepare()
            return None
        except DataNotFoundError as exc:
            return self._missing(exc)

    def _missing(self, exc: DataNotFoundError) -> str:
        """The problem of data neither prepared nor on disk: where it looked (``exc``) and one
        hint, ending in the command that prepares it."""
        name = self.spec.name
        prepare = f"`bench data prepare {name}{self._option_flags()}`"
        how = exc.hint or (
            f"get it with `bench data download {name}`"
            if self.remote() is not None
            else "put its raw sources into the raw root (--raw-root / $BENCH_RAW_ROOT)"
        )
        if f"bench data prepare {name}" not in how:
            how = f"{how.rstrip('.')}; then {prepare}"
        return f"{name}: no prepared data and no raw sources. {exc.message}\n  hint: {how}"

    def is_prepared(self) -> bool:
        """Its manifest (written last) is there and so is every file it lists, with its
        recorded size; a folder missing a file, or left half-swapped, is not prepared."""
        return not completeness_problems(self.folder)

    def _recoverable(self) -> bool:
        """A complete copy of the data sits beside its folder (an interrupted swap), which
        ``prepare`` and a run put back."""
        return any(not completeness_problems(p) for p in leftovers(self.folder))

    def verify(self) -> list[str]:
        """Problems with the prepared data (checksums, counts, sizes); empty when all good."""
        folder = self.folder
        if not (folder / MANIFEST).is_file():
            problems = [f"{self.spec.name} is not prepared ({folder} has no manifest.json)"]
            for left in leftovers(folder):
                state = "complete" if not completeness_problems(left) else "incomplete"
                problems.append(
                    f"{left} is a {state} copy left by an interrupted build or swap: "
                    f"`bench data prepare {self.spec.name}{self._option_flags()}` puts it back "
                    "or rebuilds"
                )
            return problems
        return verify_dataset(folder, self.spec.num_classes, self.spec.num_biases)


def _rebuild_note(folder: Path, problems: list[str]) -> str:
    """The one line ``build_into`` prints before it rebuilds a folder that is there."""
    if not (folder / MANIFEST).is_file():
        return f"note: {folder} has no manifest.json; rebuilding it"
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"note: {folder} is incomplete: {problems[0]}{more}; rebuilding it"
