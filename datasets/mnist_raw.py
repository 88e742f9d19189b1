"""The raw MNIST idx files: find them, download them when online, read them."""

from __future__ import annotations

import gzip
import hashlib
import shutil
import sys
import urllib.request
from pathlib import Path

import numpy as np

from debias_bench.errors import CorruptDataError, DataNotFoundError

FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
# MD5 of the .gz files as served by the mirrors (the values torchvision checks).
GZ_MD5 = {
    "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
}
MIRRORS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "http://yann.lecun.com/exdb/mnist/",
)
EXPECTED = {"train_images": (60000, 28, 28), "test_images": (10000, 28, 28)}


def candidate_dirs(raw_root: Path, download_dir: Path) -> list[Path]:
    """Where MNIST is looked for: our layout, torchvision's layout, and our download folder."""
    return [raw_root / "mnist", raw_root / "MNIST" / "raw", raw_root, download_dir]


def _find(folder: Path, stem: str) -> Path | None:
    for name in (stem + ".gz", stem):
        if (folder / name).is_file():
            return folder / name
    return None


def locate(raw_root: Path, download_dir: Path, allow_download: bool = True) -> dict[str, Path]:
    """Paths of the four idx files; downloads into ``download_dir`` when they are nowhere."""
    searched = candidate_dirs(raw_root, download_dir)
    for folder in searched:
        found = {key: _find(folder, stem) for key, stem in FILES.items()}
        if all(found.values()):
            return found  # type: ignore[return-value]
    if allow_download:
        try:
            return download(download_dir)
        except OSError as exc:
            reason = f"download failed ({exc})"
    else:
        reason = "download disabled"
    where = "\n    ".join(str(p) for p in searched)
    raise DataNotFoundError(
        f"MNIST idx files not found; looked in:\n    {where}\n  and {reason}",
        hint="point --raw-root (or BENCH_RAW_ROOT) at a folder holding mnist/"
        "train-images-idx3-ubyte.gz etc., e.g. `bench data prepare cmnist --raw-root "
        "../shared/data`",
    )


def download(folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for key, stem in FILES.items():
        name = stem + ".gz"
        target = folder / name
        if not target.is_file():
            _download_one(name, target)
        paths[key] = target
    return paths


def _download_one(name: str, target: Path) -> None:
    errors = []
    for mirror in MIRRORS:
        tmp = target.with_suffix(".part")
        try:
            print(f"downloading {mirror}{name}", file=sys.stderr)
            with urllib.request.urlopen(mirror + name, timeout=30) as resp, open(tmp, "wb") as out:
                shutil.copyfileobj(resp, out)
            digest = hashlib.md5(tmp.read_bytes()).hexdigest()
            if digest != GZ_MD5[name]:
                raise OSError(f"checksum mismatch for {name} from {mirror}: md5 {digest}")
            tmp.replace(target)
            return
        except OSError as exc:
            errors.append(f"{mirror}: {exc}")
            tmp.unlink(missing_ok=True)
    raise OSError("; ".join(errors))


def read_idx(path: Path) -> np.ndarray:
    """Parse an idx file (gzipped or not); errors name the file."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as handle:
            data = handle.read()
    except (OSError, EOFError) as exc:
        raise CorruptDataError(f"cannot read {path}: {exc}") from exc
    if len(data) < 8 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise CorruptDataError(f"{path} is not an unsigned-byte idx file (bad magic number)")
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    offset = 4 + 4 * ndim
    if len(data) - offset != int(np.prod(shape)):
        raise CorruptDataError(f"{path} is truncated: header says {shape}")
    return np.frombuffer(data, dtype=np.uint8, offset=offset).reshape(shape)


def load_mnist(raw_root: Path, download_dir: Path) -> dict[str, np.ndarray]:
    """The four MNIST arrays, checked for the expected shapes."""
    paths = locate(raw_root, download_dir)
    arrays = {key: read_idx(path) for key, path in paths.items()}
    for key, shape in EXPECTED.items():
        if arrays[key].shape != shape:
            raise CorruptDataError(f"{paths[key]}: expected shape {shape}, got {arrays[key].shape}")
    for split in ("train", "test"):
        if len(arrays[f"{split}_labels"]) != len(arrays[f"{split}_images"]):
            raise CorruptDataError(f"{paths[split + '_labels']}: label count does not match images")
    return arrays
