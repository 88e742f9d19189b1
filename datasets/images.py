"""Decoding image files into uint8 arrays: once, in parallel, into a memory-mappable ``.npy``.

The 224-px datasets are decoded a single time at a fixed size (PIL bilinear with antialiasing,
what torchvision's ``Resize((224, 224))`` does on a PIL image) and kept as
``N x H x W x 3`` uint8 arrays that training memory-maps, instead of re-decoding every file
every epoch as the official loaders do. Errors name the file that could not be read.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from debias_bench.data.folder_swap import replace_dir
from debias_bench.data.progress import progress_bar
from debias_bench.errors import CorruptDataError

from .parallel import parallel_chunks

CHUNK = 256  # images per parallel task


def decode(source: Path | bytes, size: tuple[int, int] | None, name: str = "") -> np.ndarray:
    """One image file (path or bytes) -> uint8 ``H x W x 3`` RGB, resized to ``size`` (h, w)."""
    label = name or str(source)
    try:
        with Image.open(io.BytesIO(source) if isinstance(source, bytes) else source) as opened:
            img = opened.convert("RGB")
            if size is not None and img.size != (size[1], size[0]):
                img = img.resize((size[1], size[0]), Image.Resampling.BILINEAR)
            return np.asarray(img, dtype=np.uint8)
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise CorruptDataError(
            f"cannot decode image {label}: {exc}",
            hint="the file is corrupt or not an image; restore it from the original release",
        ) from exc


def _decode_chunk(paths: Sequence[Path], size: tuple[int, int]) -> np.ndarray:
    return np.stack([decode(p, size) for p in paths]) if paths else np.empty((0, *size, 3))


def decode_files(
    paths: Sequence[Path],
    size: tuple[int, int],
    out: Path | None = None,
    desc: str = "decoding",
    n_jobs: int = 2,
) -> np.ndarray:
    """Decode ``paths`` in parallel into one uint8 ``N x H x W x 3`` array.

    With ``out`` the array is written straight into that ``.npy`` file (a memory map), so a
    set larger than memory can be built; the return value is then the open memory map."""
    shape = (len(paths), size[0], size[1], 3)
    array: np.ndarray
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        array = np.lib.format.open_memmap(out, mode="w+", dtype=np.uint8, shape=shape)
    else:
        array = np.empty(shape, dtype=np.uint8)
    chunks = [(list(paths[i : i + CHUNK]), size) for i in range(0, len(paths), CHUNK)]
    bar = progress_bar(total=len(paths), desc=desc, unit="img")
    start = 0
    for block in parallel_chunks(_decode_chunk, chunks, n_jobs):
        array[start : start + len(block)] = block
        start += len(block)
        bar.update(len(block))
    bar.close()
    if isinstance(array, np.memmap):
        array.flush()
    return array


def extract_tar(tar_path: Path, target: Path) -> Path:
    """Unpack a release tar once into ``target`` (in the data root, never the raw root)."""
    done = target / ".extracted"
    if done.is_file():
        return target
    staging = target.with_name(target.name + ".extracting")
    staging.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(tar_path) as tar:
            try:
                tar.extractall(staging, filter="data")  # refuses paths outside staging
            except TypeError:  # Python without extraction filters
                tar.extractall(staging)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise CorruptDataError(
            f"cannot read {tar_path}: {exc}",
            hint="the archive is damaged; download it again and check its SHA-256",
        ) from exc
    (staging / ".extracted").write_text(str(tar_path))  # last: the extraction is complete
    replace_dir(staging, target)  # the old copy stays whole until the new one is in place
    return target


def fixture_jpeg(label: int, bias: int, seed: int, size: int = 16) -> bytes:
    """A small noise JPEG with a class pattern (a bright band) and a bias cue (a colour cast),
    for the fixtures of the image families (results on them mean nothing)."""
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 100, (size, size, 3)).astype(np.int16)
    img[(label * 3) % size : (label * 3) % size + 3] += 120
    img[..., bias % 3] += 60
    buffer = io.BytesIO()
    Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(buffer, format="JPEG")
    return buffer.getvalue()


def write_tar(path: Path, files: dict[str, bytes]) -> Path:
    """A tar archive holding ``files`` (member name -> content)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path
