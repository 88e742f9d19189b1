"""`bench data`: prepare, verify and describe datasets; fixtures; LfF npy import/export; a
loading benchmark."""

from __future__ import annotations

import argparse
import contextlib
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from tabulate import tabulate

from debias_bench import paths
from debias_bench.config.run_config import parse_overrides
from debias_bench.data.download import fetch
from debias_bench.data.family import fixture_root
from debias_bench.data.folder_swap import build_lock
from debias_bench.data.options import data_options_by_dataset
from debias_bench.data.split_store import describe_dataset
from debias_bench.datasets import lff_npy
from debias_bench.datasets.lff_npy import ImportableFamily, exports_lff
from debias_bench.errors import BenchError, ConfigError, CorruptDataError, is_disk_full
from debias_bench.registry import DATASETS

from .common import command_with_verbs, data_args, floats

if TYPE_CHECKING:  # the dataset modules are imported when a command needs them
    from debias_bench.data.family import DatasetFamily
    from debias_bench.data.spec import DatasetSpec
    from debias_bench.datasets.lff_npy import ImportableFamily


def _family(name: str, args: argparse.Namespace, raw_root: Path | None = None) -> DatasetFamily:
    """The dataset family with the ``--data-option`` values it declares (checked)."""
    raw = raw_root or paths.raw_root(args.raw_root)
    given = parse_overrides(getattr(args, "data_option", None))
    options = data_options_by_dataset(DATASETS.resolve(args.name), given)[name] if given else {}
    family: DatasetFamily = DATASETS.get(name)(raw, paths.data_root(args.data_root), **options)
    return family


_FREE_SPACE = re.compile(r"Not enough free space to write (\d+) bytes")


@contextlib.contextmanager
def disk_full_named(name: str, data_root: Path) -> Iterator[None]:
    """A full disk while ``name`` is prepared (ENOSPC, EDQUOT, or NumPy's errno-less "Not
    enough free space") as one :class:`BenchError`: what was being prepared, where, the free
    space there and, when the error says it, the size of the write that did not fit. The
    build removes its own half-written folder (``DatasetFamily.build_into``)."""
    try:
        yield
    except Exception as exc:
        if not is_disk_full(exc):
            raise
        usage = shutil.disk_usage(data_root) if data_root.exists() else None
        needed = _FREE_SPACE.search(str(exc))
        raise BenchError(
            f"disk full while preparing {name} in {data_root}"
            + (
                f" ({usage.free / 2**20:,.1f} of {usage.total / 2**20:,.1f} MiB free once the "
                "partial build was removed)"
                if usage is not None
                else ""
            )
            + (f": a write of {int(needed[1]) / 2**20:,.1f} MiB did not fit" if needed else "")
            + (f" ({exc.filename})" if isinstance(exc, OSError) and exc.filename else ""),
            hint="free space there, or prepare it on another disk (--data-root / "
            "$BENCH_DATA_ROOT); nothing half-built was kept",
        ) from None


def cmd_data(args: argparse.Namespace) -> int:
    names = DATASETS.resolve(args.name)
    failed = []
    for name in names:
        try:
            family = _family(name, args)
            ratios = floats(args.ratios) if args.ratios else None
            # --force only where asked: plugins may not take it
            with build_lock(family), disk_full_named(name, family.data_root):
                folder = (
                    family.prepare(ratios, force=True) if args.force else family.prepare(ratios)
                )
                damage = family.damage()
            if damage:  # never "prepared" with a file missing (a family that did not rebuild)
                raise CorruptDataError(
                    f"{name}: the prepared data in {folder} is incomplete: {damage[0]}",
                    hint=f"rebuild it: `{family.repair_command()}`",
                )
        except BenchError as exc:
            if len(names) == 1:
                raise
            failed.append(name)  # several datasets: report, go on with the others
            print(f"{name}: FAILED: {exc}", file=sys.stderr)
            continue
        print(f"{name}: prepared in {folder}")
    if failed:
        print(f"not prepared: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def _counts_table(folder: Path, spec: DatasetSpec) -> str:
    rows = []
    for rel, info in describe_dataset(folder, spec.num_classes, spec.num_biases).items():
        counts = info["counts"]
        aligned = sum(counts[c][c] for c in range(min(spec.num_classes, spec.num_biases)))
        for c, row in enumerate(counts):
            name = spec.class_names[c] if c < len(spec.class_names) else str(c)
            rows.append([rel, name, *row, sum(row)])
        rows.append([rel, "(all)", *["" for _ in counts[0]], f"{info['n']} ({aligned} aligned)"])
    headers = ["split", "class", *[f"b{b}" for b in range(spec.num_biases)], "n"]
    return tabulate(rows, headers=headers, tablefmt="simple")


def cmd_verify(args: argparse.Namespace) -> int:
    failed = 0
    for name in DATASETS.resolve(args.name):
        family = _family(name, args)
        try:
            problems = family.verify()
            prepared = family.is_prepared()
        except BenchError as exc:  # e.g. the source of a folder-reading family is absent
            problems, prepared = [str(exc)], False
        if prepared and not args.quiet:
            print(f"{name}: {family.folder}")
            try:
                print(_counts_table(family.folder, family.spec))
            except (ValueError, OSError, EOFError) as exc:
                problems.append(f"cannot read the counts: {exc}")
        if problems:
            failed += 1
            print(f"{name}: FAILED", file=sys.stderr)
            for problem in problems:
                print(f"  - {problem}", file=sys.stderr)
        else:
            print(f"{name}: OK (checksums, counts and image sizes match the manifest)")
    return 1 if failed else 0


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def cmd_info(args: argparse.Namespace) -> int:
    rows = []
    for entry in DATASETS:
        try:
            family = _family(entry.name, args)
            prepared = family.is_prepared()
            folder = family.folder
        except BenchError as exc:  # e.g. no source: still report the dataset
            rows.append([entry.name, "no", "", "", exc.message.splitlines()[0]])
            continue
        size = f"{_size(folder) / 2**20:,.1f} MiB" if prepared else ""
        note = family.version() if prepared else "run `bench data prepare " + entry.name + "`"
        rows.append([entry.name, "yes" if prepared else "no", str(folder), size, note])
    print(f"data root: {paths.data_root(args.data_root)}")
    print(f"raw root:  {paths.raw_root(args.raw_root)}")
    print(tabulate(rows, headers=["dataset", "prepared", "folder", "size", "version / note"]))
    return 0


def cmd_fixture(args: argparse.Namespace) -> int:
    """A tiny synthetic stand-in of a dataset's raw sources, in its published layout."""
    data_root = paths.data_root(args.data_root)
    raw = Path(args.out) if args.out else fixture_root(data_root)
    family = _family(args.name, args, raw_root=raw)
    options = family.write_fixture(per_class=args.per_class)
    print(f"{args.name}: synthetic fixture (published layout) written under {raw}")
    print("  it stands in for the real data in pipeline tests only; results on it mean nothing")
    if family.reads_fixture_root and not args.out:
        print(f"  {args.name} reads it from there when its raw sources are absent")
    else:
        extra = "".join(f" --data-option {k}={v}" for k, v in options.items())
        print(f"  build it with: bench data prepare {args.name} --raw-root {raw}{extra}")
    return 0


def cmd_download(args: argparse.Namespace) -> int:
    """Fetch a dataset's public raw sources into the raw root (checksums checked)."""

    raw = paths.raw_root(args.raw_root)
    failed = []
    for name in DATASETS.resolve(args.name):
        remote = _family(name, args).remote()
        if remote is None:
            failed.append(name)
            print(f"{name}: no public download; see `bench data prepare {name}`", file=sys.stderr)
            continue
        folder = fetch(remote, raw, force=args.force)
        print(f"{name}: raw sources in {folder}; next: bench data prepare {name}")
    return 1 if failed else 0


def cmd_options(args: argparse.Namespace) -> int:
    """The declared build/read options of each dataset (``--data-option NAME=VALUE``)."""
    for name in DATASETS.resolve(args.name):
        cls = DATASETS.get(name)
        print(name)
        for option in cls.data_options().values():
            print(f"  {option.describe()}")
    return 0


def _lff_family(args: argparse.Namespace, verb: str) -> ImportableFamily:
    """The family of ``args.name`` when it can ``verb`` ("import", "export") the LfF layouts;
    a ConfigError naming the datasets that can, when not."""

    def able(cls: type) -> bool:
        return exports_lff(cls) if verb == "export" else issubclass(cls, ImportableFamily)

    if not able(DATASETS.get(args.name)):
        can = [entry.name for entry in DATASETS if able(entry.obj)]
        why = {
            "export": "cannot be written in the LfF npy layout (LfF has no such dataset)",
            "import": "cannot read imported LfF or DisEnt data (no source=imported option)",
        }[verb]
        raise ConfigError(
            f"bench data {verb}: {args.name} {why}",
            hint=f"datasets that can: {', '.join(can) or 'none'}",
        )
    family = _family(args.name, args)
    assert isinstance(family, ImportableFamily)
    return family


def cmd_export(args: argparse.Namespace) -> int:

    family = _lff_family(args, "export")
    folder = lff_npy.export_lff(family, float(args.ratio), Path(args.out))
    print(f"{args.name} {args.ratio}%: LfF npy layout written to {folder}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:

    family = _lff_family(args, "import")
    source = Path(args.source)
    fmt = args.format or ("lff" if (source / "train" / "images.npy").is_file() else "disent")
    importer = lff_npy.import_lff if fmt == "lff" else lff_npy.import_disent
    folder = importer(family, source, float(args.ratio))
    print(f"{args.name} {args.ratio}%: imported {args.source} ({fmt} layout) into {folder}")
    print(f"  train on it with the dataset option source=imported ({args.name})")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from debias_bench.perf.loading import run as measure_loading  # torch: prepare needs none

    family = _family(args.name, args)
    ratio = float(args.ratio) if args.ratio else family.spec.ratios[-1]
    measure_loading(family, ratio, args.batch_size, args.batches, args.workers)
    return 0


def _names_arg(parser: argparse.ArgumentParser) -> None:
    """The datasets a verb works on (``DATASETS.resolve`` reads them)."""
    parser.add_argument("name", help="dataset name, comma list or 'all'")


def _option_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-option",
        action="append",
        metavar="KEY=VALUE",
        help="a declared build option (see `bench data options NAME`)",
    )


def add(sub: argparse._SubParsersAction) -> None:
    data_sub = command_with_verbs(
        sub, "data", "prepare, verify and describe datasets", dest="data_command"
    )

    prepare = data_sub.add_parser("prepare", help="build a dataset from its raw sources")
    _names_arg(prepare)
    prepare.add_argument("--ratios", help="only these ratios (%%)")
    prepare.add_argument(
        "--force", action="store_true", help="rebuild even if prepared (corrupt or changed data)"
    )
    _option_arg(prepare)
    data_args(prepare)
    prepare.set_defaults(func=cmd_data)

    download = data_sub.add_parser(
        "download", help="fetch the public raw sources into the raw root (checksums checked)"
    )
    _names_arg(download)
    download.add_argument("--force", action="store_true", help="download again")
    data_args(download)
    download.set_defaults(func=cmd_download)

    options = data_sub.add_parser("options", help="the build/read options a dataset declares")
    options.add_argument("name", nargs="?", default="all", help="dataset name(s) (default all)")
    options.set_defaults(func=cmd_options)

    verify = data_sub.add_parser(
        "verify", help="check counts per split x class x bias, image sizes and checksums"
    )
    _names_arg(verify)
    verify.add_argument("--quiet", action="store_true", help="no count tables")
    _option_arg(verify)
    data_args(verify)
    verify.set_defaults(func=cmd_verify)

    info = data_sub.add_parser("info", help="what is prepared, where, and its size")
    data_args(info)
    info.set_defaults(func=cmd_info)

    fixture = data_sub.add_parser(
        "fixture", help="write a tiny synthetic stand-in of a dataset's raw sources"
    )
    fixture.add_argument("name", help="dataset name")
    fixture.add_argument("--out", help="raw root to write it under (default <data root>/fixtures)")
    fixture.add_argument("--per-class", type=int, help="images per class (a size knob)")
    data_args(fixture)
    fixture.set_defaults(func=cmd_fixture)

    export = data_sub.add_parser("export", help="write a prepared split set in the LfF npy layout")
    export.add_argument("name", help="a dataset LfF has (Colored MNIST, Corrupted CIFAR-10)")
    export.add_argument("--ratio", required=True, help="bias-conflicting ratio (%%)")
    export.add_argument("--out", required=True, help="folder to hold the LfF <Tag>/ folder")
    data_args(export)
    export.set_defaults(func=cmd_export)

    imp = data_sub.add_parser(
        "import",
        help="use data built by LfF's make_dataset.py (<Tag>/{train,valid}/*.npy) or a DisEnt "
        "PNG folder (cmnist/, cifar10c/)",
    )
    imp.add_argument("name", help="a dataset that reads imported data (Colored MNIST, ...)")
    imp.add_argument(
        "source", help="the LfF <Tag> folder (e.g. CorruptedCIFAR10-Type0-...) or DisEnt folder"
    )
    imp.add_argument("--format", choices=["lff", "disent"], help="default: detected")
    imp.add_argument("--ratio", required=True, help="the ratio (%%) it was built with")
    data_args(imp)
    imp.set_defaults(func=cmd_import)

    bench = data_sub.add_parser(
        "bench", help="samples/s of the in-memory/memmap batch path vs per-file PIL + DataLoader"
    )
    bench.add_argument("name")
    bench.add_argument("--ratio", help="ratio (%%) to load (default: the largest)")
    bench.add_argument("--batch-size", type=int, default=64)
    bench.add_argument("--batches", type=int, default=20, help="batches timed per path")
    bench.add_argument("--workers", type=int, default=2, help="DataLoader workers (baseline)")
    data_args(bench)
    bench.set_defaults(func=cmd_bench)
