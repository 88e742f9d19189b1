"""Raw idx files found in the raw root are checked against the release's MD5s before a build.

``bench data download`` checks what it fetches against the MD5 of the ``.gz`` files the
mirrors serve; files a user put into the raw root were not checked at all, so a damaged MNIST
(a flipped byte in a pixel) built without a word. Before a family with an idx ``raw_source``
(Colored MNIST and its variants) builds, each file it found is checked here: a ``.gz`` with
the mirrors' MD5 passes at once; any other (a re-gzipped or an uncompressed copy) is read,
and when it has the length of the released file its content must have the released MD5. A
file of another length is a subset or a fixture, which the reader already warns about. A
mismatch is a :class:`CorruptDataError` naming the file, both MD5s and the fix.

The content MD5s are the released files' (uncompressed); they sit here, not on the
``IdxSource`` of ``datasets/mnist_raw.py``, whose code is part of every Colored MNIST run's
identity. Reading and hashing MNIST's four files takes about 0.4 s, once per build.
"""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from debias_bench.errors import CorruptDataError, DataNotFoundError

#: (source name, file stem) -> (length, MD5) of the released, uncompressed idx file
RELEASED_IDX: dict[tuple[str, str], tuple[int, str]] = {
    ("MNIST", "train-images-idx3-ubyte"): (47_040_016, "6bbc9ace898e44ae57da46a324031adb"),
    ("MNIST", "train-labels-idx1-ubyte"): (60_008, "a25bea736e30d166cdddb491f175f624"),
    ("MNIST", "t10k-images-idx3-ubyte"): (7_840_016, "2646ac647ad5339dbf082846283269ea"),
    ("MNIST", "t10k-labels-idx1-ubyte"): (10_008, "27ae3e4e09519cfbb04c329615203637"),
}


def _md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def idx_problem(source: Any, path: Path) -> str | None:
    """Why the idx file ``path`` of ``source`` (an ``IdxSource``) is not the released one, or
    None when it is (or when nothing is known to check it against)."""
    stem = path.name.removesuffix(".gz")
    released = RELEASED_IDX.get((source.name, stem))
    served = getattr(source, "gz_md5", {}).get(stem + ".gz")
    if released is None and served is None:
        return None
    raw = path.read_bytes()
    if path.suffix == ".gz" and served is not None and _md5(raw) == served:
        return None  # the mirrors' own .gz
    if released is None:
        return f"{path} is not the {source.name} file the mirrors serve (MD5 {_md5(raw)})"
    if path.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            return f"{path} cannot be read ({exc})"
    length, want = released
    if len(raw) != length:
        return None  # a subset or a fixture: the reader warns about its size
    got = _md5(raw)
    if got != want:
        return f"{path} is damaged: its content has MD5 {got}, the {source.name} release's {want}"
    return None


def check_raw_sources(family: Any) -> None:
    """Check the raw idx files ``family`` would build from (families with an idx
    ``raw_source`` only; nothing to check while they are not found: the build downloads and
    checks them); CorruptDataError naming the first damaged file and the fix."""
    source = getattr(type(family), "raw_source", None)
    if source is None or not hasattr(source, "files"):
        return
    try:
        found: Mapping[str, Path] = family.find_raw()
    except DataNotFoundError:
        return
    problems = [p for path in found.values() if (p := idx_problem(source, path)) is not None]
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        name = family.spec.name
        raise CorruptDataError(
            f"{problems[0]}{more}",
            hint=f"replace it with a fresh copy (`bench data download {name} --force` fetches "
            f"the released files), then `bench data prepare {name}`",
        )
