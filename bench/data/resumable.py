"""One file over HTTP(S), resumable, from mirrors tried in order, checked against its pinned
checksum (what ``bench data download`` does for every :class:`~debias_bench.data.download.
RemoteFile`).

The bytes go to ``<name>.part`` beside the target and the file is renamed into place only once
complete and matching its checksum, so nothing that looks finished is ever left half-written.
A ``.part`` left by an interrupted download (a dropped connection, a killed process) is resumed
with an HTTP ``Range`` request, from any mirror (they serve the same pinned bytes); a server
that ignores the range (200) starts it over, one that refuses it (416) has nothing more to
send. A resumed file that fails its checksum is fetched once more from the start before the
next mirror is tried. When every mirror fails, the error names each URL with what went wrong
and the checksum expected.
"""

from __future__ import annotations

import hashlib
import http.client
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from debias_bench.errors import DataNotFoundError

Log = Callable[[str], None]
BLOCK = 1 << 20
TIMEOUT_S = 60


@dataclass(frozen=True)
class Pinned:
    """A file's published checksum: SHA-256 (preferred) or MD5; both None when no source
    publishes one (the caller then checks what it unpacks)."""

    sha256: str | None = None
    md5: str | None = None

    @property
    def algorithm(self) -> str | None:
        return "sha256" if self.sha256 else "md5" if self.md5 else None

    @property
    def expected(self) -> str | None:
        return self.sha256 or self.md5

    def describe(self) -> str:
        if self.algorithm is None:
            return "no published checksum"
        return f"{self.algorithm} {self.expected}"


def digest(path: Path, algorithm: str) -> str:
    """The hex digest of a file, read in blocks."""
    hashed = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        while block := handle.read(BLOCK):
            hashed.update(block)
    return hashed.hexdigest()


def matches(path: Path, pinned: Pinned) -> bool:
    """Whether ``path`` has the pinned checksum (True when none is pinned)."""
    algorithm = pinned.algorithm
    return algorithm is None or digest(path, algorithm) == pinned.expected


class _Mismatch(Exception):
    """A complete download whose checksum is not the pinned one."""


def _transfer(url: str, part: Path, log: Log) -> None:
    """Append ``url``'s bytes to ``part`` from its current size (a Range request), or write
    them afresh when the server sends the whole file."""
    have = part.stat().st_size if part.is_file() else 0
    name = part.name.removesuffix(".part")
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        response = urllib.request.urlopen(request, timeout=TIMEOUT_S)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:  # nothing after what we hold: it is complete (or wrong)
            log(f"  {url}: the {have:,} bytes of {name} kept are all it has")
            return
        raise
    with response:
        resumed = have and response.status == 206
        if have:
            log(
                f"  resuming {name} at byte {have:,}"
                if resumed
                else f"  {url} ignores ranges: downloading {name} from the start"
            )
        announced = response.getheader("Content-Length")
        received = 0
        with open(part, "ab" if resumed else "wb") as out:
            while block := response.read(BLOCK):
                out.write(block)
                received += len(block)
        if announced is not None and announced.isdigit() and received < int(announced):
            raise ConnectionError(  # an OSError: the .part is kept and resumed
                f"the connection closed after {received:,} of {int(announced):,} bytes"
            )


def fetch_file(name: str, urls: tuple[str, ...], pinned: Pinned, target: Path, log: Log) -> Path:
    """``target`` downloaded from the first of ``urls`` that gives bytes with the pinned
    checksum; DataNotFoundError naming every URL tried, what each did and the checksum
    expected when none does. A ``.part`` of an earlier attempt is resumed."""
    part = target.with_name(target.name + ".part")
    errors: list[str] = []
    for url in urls:
        while True:
            resuming = part.is_file() and part.stat().st_size > 0
            try:
                log(f"downloading {url}")
                _transfer(url, part, log)
                if not matches(part, pinned):
                    got = digest(part, pinned.algorithm or "sha256")
                    raise _Mismatch(f"checksum mismatch: got {pinned.algorithm} {got}")
            except _Mismatch as exc:
                part.unlink(missing_ok=True)
                if resuming:  # the kept bytes may be another file's: once more from the start
                    log(f"  {url}: the resumed {name} failed its checksum; starting over")
                    continue
                errors.append(f"{url}: {exc}")
                break  # a fresh copy with other bytes: this mirror serves another file
            except (OSError, http.client.HTTPException) as exc:  # URLError, HTTPError, resets
                errors.append(f"{url}: {exc}")
                break  # the .part is kept: the next mirror (or the next run) resumes it
            part.replace(target)
            return target
    listing = "\n    ".join(errors)
    kept = f" ({part.stat().st_size:,} bytes kept in {part} to resume)" if part.is_file() else ""
    raise DataNotFoundError(
        f"could not download {name} (expected {pinned.describe()}); tried:\n    {listing}{kept}",
        hint="check the network (or a proxy) and run the command again to resume, or put the "
        "file into the raw root by hand",
    )
