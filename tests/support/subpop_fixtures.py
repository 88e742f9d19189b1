"""Fixtures of the Waterbirds and CelebA tests: their releases as the official archives hold
them (written by the datasets' own generators) and an HTTP server on 127.0.0.1 that serves
byte ranges and can drop a connection part-way, as a real mirror can."""

from __future__ import annotations

import hashlib
import http.server
import io
import re
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from debias_bench.datasets import celeba, waterbirds


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def waterbirds_tarball(work: Path) -> bytes:
    """``waterbird_complete95_forest2water2.tar.gz`` of the synthetic release, as bytes."""
    root = waterbirds.write_release(work / waterbirds.RELEASE)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(root, arcname=waterbirds.RELEASE)
    return buffer.getvalue()


def celeba_files(work: Path) -> dict[str, bytes]:
    """The three files torchvision's CelebA downloads (the images zipped) of the synthetic
    release, by name."""
    root = celeba.write_release(work / "celeba")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for path in sorted((root / celeba.IMAGES).iterdir()):
            zf.write(path, f"{celeba.IMAGES}/{path.name}")
    return {
        f"{celeba.IMAGES}.zip": buffer.getvalue(),
        celeba.ATTRS: (root / celeba.ATTRS).read_bytes(),
        celeba.PARTITION: (root / celeba.PARTITION).read_bytes(),
    }


@dataclass
class Mirror:
    """What the server serves (path -> bytes), the paths whose first response it cuts after
    so many bytes, and the requests it saw: (path, Range header or None)."""

    files: dict[str, bytes] = field(default_factory=dict)
    cut_after: dict[str, int] = field(default_factory=dict)
    seen: list[tuple[str, str | None]] = field(default_factory=list)
    url: str = ""


def _handler(mirror: Mirror) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            path = self.path.lstrip("/")
            asked = self.headers.get("Range")
            mirror.seen.append((path, asked))
            data = mirror.files.get(path)
            if data is None:
                self.send_error(404)
                return
            start = 0
            match = re.fullmatch(r"bytes=(\d+)-", asked or "")
            if match:
                start = int(match.group(1))
                if start >= len(data):
                    self.send_error(416)
                    return
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            else:
                self.send_response(200)
            body = data[start:]
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            cut = mirror.cut_after.pop(path, None)
            self.wfile.write(body if cut is None else body[:cut])
            if cut is not None:
                self.close_connection = True  # the client sees fewer bytes than announced

    return Handler


@contextmanager
def serving(mirror: Mirror) -> Iterator[Mirror]:
    """``mirror`` served on 127.0.0.1 (its ``url`` set) while the block runs."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(mirror))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    mirror.url = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        yield mirror
    finally:
        server.shutdown()
        server.server_close()


def dead_url() -> str:
    """A URL on 127.0.0.1 where nothing listens (a port bound, then released)."""
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    port = server.server_address[1]
    server.server_close()
    return f"http://127.0.0.1:{port}/gone.tar.gz"
