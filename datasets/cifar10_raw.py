"""The raw CIFAR-10 images: torchvision's pickled batches or an image-folder tarball.

Looked for, in order, under the raw root: ``cifar-10-batches-py/`` (torchvision's download,
pixel-exact), ``cifar-10-python.tar.gz`` (the same, packed), and ``cifar10-jpeg.tar.gz``
(``{train,test}/<class>/NNNN.jpg``; JPEG re-encoded, so pixels differ slightly from the
official batches). Decoded once into ``<data root>/downloads/cifar10/*.npy``.
"""

from __future__ import annotations

import io
import pickle
import tarfile
from pathlib import Path

import numpy as np

from debias_bench.data.download import Download, RemoteFile
from debias_bench.data.progress import progress_bar
from debias_bench.errors import CorruptDataError, DataNotFoundError

from .images import decode

CLASSES = (
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)
EXPECTED = {"train": 50000, "test": 10000}
HOW_TO_GET = (
    "put torchvision's cifar-10-batches-py/ (or cifar-10-python.tar.gz from "
    "https://www.cs.toronto.edu/~kriz/cifar.html) or cifar10-jpeg.tar.gz into the raw root "
    "(--raw-root / $BENCH_RAW_ROOT), e.g. --raw-root ../shared/data, or run "
    "`bench data download cifar10c`"
)


#: `bench data download cifar10c`: the official python batches (MD5 as torchvision checks it)
REMOTE = Download(
    target=".",
    files=(
        RemoteFile(
            "cifar-10-python.tar.gz",
            ("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",),
            md5="c58f30108f718f92721af3b95e74349a",
            unpack=True,
        ),
    ),
    present=("cifar-10-batches-py/test_batch",),
    note="CIFAR-10 (163 MB) from www.cs.toronto.edu, MD5-checked",
)


def candidates(raw_root: Path) -> list[Path]:
    return [
        raw_root / "cifar-10-batches-py",
        raw_root / "cifar-10-python.tar.gz",
        raw_root / "cifar10-jpeg.tar.gz",
    ]


def find(raw_root: Path) -> Path:
    """The first CIFAR-10 source present under the raw root; DataNotFoundError if none."""
    for source in candidates(raw_root):
        if source.exists():
            return source
    where = "\n    ".join(str(p) for p in candidates(raw_root))
    raise DataNotFoundError(f"CIFAR-10 not found; looked for:\n    {where}", hint=HOW_TO_GET)


def write_fixture(raw_root: Path, per_class_train: int = 4, per_class_test: int = 3) -> Path:
    """Tiny ``cifar-10-batches-py/`` (random images, class-major) for pipeline tests."""
    folder = raw_root / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    batches = [(f"data_batch_{i}", per_class_train if i == 1 else 0) for i in range(1, 6)]
    for name, per_class in [*batches, ("test_batch", per_class_test)]:
        labels = np.repeat(np.arange(len(CLASSES)), per_class)
        data = rng.integers(0, 256, (len(labels), 3 * 32 * 32), dtype=np.uint8)
        with open(folder / name, "wb") as handle:
            pickle.dump({"data": data, "labels": labels.tolist()}, handle)
    return folder


#: the globals the official batches name (NumPy arrays); a pickle naming any other is refused
_BATCH_GLOBALS = frozenset(
    {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.numeric", "_frombuffer"),  # pickle protocol 5
        ("numpy._core.numeric", "_frombuffer"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("_codecs", "encode"),  # how protocol 2 spells bytes (harmless: text to bytes)
    }
)


class _BatchUnpickler(pickle.Unpickler):
    """Reads a CIFAR-10 batch without running code: a downloaded file is never trusted to
    name a callable (a pickle that names one is refused, not executed)."""

    def find_class(self, module: str, name: str) -> object:
        if (module, name) not in _BATCH_GLOBALS:
            raise CorruptDataError(
                f"a CIFAR-10 batch names {module}.{name}, which the official batches never "
                "hold: refused unread (download them again)"
            )
        return super().find_class(module, name)


def _unpickle_batch(data: bytes) -> dict[str, object]:
    batch = _BatchUnpickler(io.BytesIO(data), encoding="latin1").load()
    if not isinstance(batch, dict):
        raise CorruptDataError("a CIFAR-10 batch is not a dictionary (download it again)")
    return batch


def _from_batches(read: dict[str, bytes]) -> dict[str, np.ndarray]:
    out = {}
    for split, names in (
        ("train", [f"data_batch_{i}" for i in range(1, 6)]),
        ("test", ["test_batch"]),
    ):
        images, labels = [], []
        for name in names:
            if name not in read:
                raise CorruptDataError(f"CIFAR-10 batch {name} is missing")
            batch = _unpickle_batch(read[name])
            images.append(np.asarray(batch["data"], np.uint8).reshape(-1, 3, 32, 32))
            labels.append(np.asarray(batch["labels"], np.int64))
        out[f"{split}_images"] = np.concatenate(images).transpose(0, 2, 3, 1).copy()
        out[f"{split}_labels"] = np.concatenate(labels)
    return out


def _from_jpeg_tar(path: Path, limit: int | None = None) -> dict[str, np.ndarray]:
    found: dict[str, list[tuple[str, int, np.ndarray]]] = {"train": [], "test": []}
    try:
        with tarfile.open(path) as tar:
            for member in progress_bar(tar, desc="reading CIFAR-10 images", unit="file"):
                parts = member.name.strip("./").split("/")
                if not member.isfile() or len(parts) != 3 or parts[0] not in found:
                    continue
                if parts[1] not in CLASSES:
                    raise CorruptDataError(f"{path}: unknown class folder in {member.name}")
                stem = Path(parts[2]).stem
                if limit is not None and stem.isdigit() and int(stem) >= limit:
                    continue  # quick subsets: only the first `limit` files of each class
                data = tar.extractfile(member).read()  # type: ignore[union-attr]
                image = decode(data, (32, 32), name=f"{path}:{member.name}")
                found[parts[0]].append((member.name, CLASSES.index(parts[1]), image))
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise CorruptDataError(f"cannot read {path}: {exc}") from exc
    out = {}
    for split, items in found.items():
        items.sort(key=lambda t: t[0])  # a stable order: by class folder, then file name
        out[f"{split}_images"] = np.stack([t[2] for t in items]) if items else np.empty(0)
        out[f"{split}_labels"] = np.array([t[1] for t in items], np.int64)
    return out


def load_cifar10(raw_root: Path, cache: Path, limit: int | None = None) -> dict[str, np.ndarray]:
    """``{train,test}_{images,labels}``: uint8 N x 32 x 32 x 3 and int64 N.

    ``limit`` keeps the first ``limit`` images of each class (quick builds for tests); a
    JPEG folder is then only partly decoded and nothing is cached."""
    keys = ("train_images", "train_labels", "test_images", "test_labels")
    if limit is None and all((cache / f"{k}.npy").is_file() for k in keys):
        return {k: np.load(cache / f"{k}.npy") for k in keys}
    for source in candidates(raw_root):
        if source.is_dir():
            arrays = _from_batches({p.name: p.read_bytes() for p in source.iterdir()})
            break
        if source.is_file() and source.name == "cifar-10-python.tar.gz":
            with tarfile.open(source) as tar:
                read = {
                    Path(m.name).name: tar.extractfile(m).read()  # type: ignore[union-attr]
                    for m in tar
                    if m.isfile()
                }
            arrays = _from_batches(read)
            break
        if source.is_file():
            arrays = _from_jpeg_tar(source, limit)
            break
    else:
        where = "\n    ".join(str(p) for p in candidates(raw_root))
        raise DataNotFoundError(f"CIFAR-10 not found; looked for:\n    {where}", hint=HOW_TO_GET)
    if limit is not None:
        return _first_per_class(arrays, limit)
    for split, n in EXPECTED.items():
        if len(arrays[f"{split}_labels"]) != n:
            raise CorruptDataError(
                f"{source}: expected {n} {split} images, found {len(arrays[f'{split}_labels'])}"
            )
    cache.mkdir(parents=True, exist_ok=True)
    for key, value in arrays.items():
        buffer = io.BytesIO()
        np.save(buffer, value)
        tmp = cache / f"{key}.npy.part"
        try:
            tmp.write_bytes(buffer.getvalue())
            tmp.replace(cache / f"{key}.npy")
        except BaseException:  # a full disk: no part file left behind
            tmp.unlink(missing_ok=True)
            raise
    return arrays


def _first_per_class(arrays: dict[str, np.ndarray], limit: int) -> dict[str, np.ndarray]:
    out = {}
    for split in ("train", "test"):
        y = arrays[f"{split}_labels"]
        rows = np.sort(np.concatenate([np.flatnonzero(y == c)[:limit] for c in range(10)]))
        out[f"{split}_images"], out[f"{split}_labels"] = arrays[f"{split}_images"][rows], y[rows]
    return out
