"""`bench report --format html`: one self-contained page, read as markup and in a real browser.

The page is built once from the golden store of test_report.py (plus a run whose error message
is markup, to check the escaping). The browser tests open it in headless Chromium: a probe copy
of the page (the page itself has no script) records each image's decoded width, and a
screenshot of the page itself must show the plots' colours. They skip when no Chromium or
Chrome is on PATH (Debian: apt-get install chromium; scripts/ci_services.sh installs it).
"""

from __future__ import annotations

import base64
import io
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from test_report import fixed_store, write_run
from test_statistics import plant_reproduction

from debias_bench.cli import main
from debias_bench.reporting import build_tables, load_records, render
from debias_bench.runs.store import RunStore

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FAILURE = re.compile(
    r"cmnist_lff_r1_s2_[0-9a-f]{10}: failed \(crashed: RuntimeError: out of memory\)"
)
MARKUP_ERROR = '<img src="http://evil.example/x.png" onerror="alert(1)"> & more'
#: attributes that make a browser fetch something
FETCHING = ("src", "href", "srcset", "poster", "data", "action", "background")
#: matplotlib's first two line colours (tab:blue, tab:orange): only the plots draw them
PLOT_COLOURS = ((31, 119, 180), (255, 127, 14))


class Page(HTMLParser):
    """The tags of a page, with their attributes and the text inside each element by id."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def all(self, tag: str) -> list[dict[str, str]]:
        return [attrs for name, attrs in self.tags if name == tag]

    @property
    def plain(self) -> str:
        return "".join(self.text)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(run store, report.html), written by `bench report --format html -o`."""
    where = tmp_path_factory.mktemp("html")
    store = fixed_store(where / "runs")
    write_run(store, "vanilla", "toy", 20.0, 2, state="failed", note=MARKUP_ERROR)
    target = where / "report" / "report.html"
    assert main(["report", "--out", str(store), "--format", "html", "-o", str(target)]) == 0
    return store, target


@pytest.fixture(scope="module")
def page(built: tuple[Path, Path]) -> str:
    return built[1].read_text()


# ----------------------------------------------------------------------------- markup
def test_page_is_self_contained(page):
    parsed = Page(page)
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    for tag, attrs in parsed.tags:
        for key in FETCHING:
            value = attrs.get(key, "").strip()
            assert not value or value.startswith(("data:", "#")), f"<{tag} {key}={value[:60]!r}>"
    assert not parsed.all("script") and not parsed.all("link") and not parsed.all("iframe")
    assert not re.search(r"url\(\s*['\"]?(?!data:)", page) and "@import" not in page
    assert not re.search(r"(?:src|href)\s*=\s*['\"]?\s*(?:https?:)?//", page)
    (policy,) = [m for m in parsed.all("meta") if m.get("http-equiv") == "Content-Security-Policy"]
    assert "default-src 'none'" in policy["content"] and "script-src" not in policy["content"]


def test_plots_are_embedded_pngs(page):
    images = Page(page).all("img")
    assert sorted(i["alt"].rsplit(": ", 1)[1] for i in images) == [
        f"{d}_official_paper_accuracy_last" for d in ("bar", "cmnist", "toy")
    ]
    for image in images:
        prefix, data = image["src"].split(",", 1)
        assert prefix == "data:image/png;base64"
        with Image.open(io.BytesIO(base64.b64decode(data, validate=True))) as png:
            assert png.format == "PNG" and png.width >= 300 and png.height >= 200
            assert len(png.convert("RGB").getcolors(1 << 20) or []) > 20  # a drawing, not a fill


def test_tables_marks_notes_and_cost(page):
    parsed = Page(page)
    blocks = [d["data-table"] for d in parsed.all("div") if "data-table" in d]
    assert blocks == ["synthetic", "real", "other", "bar-classwise", "cost"]
    assert len(parsed.all("table")) == len(blocks) + 1  # and the runs' provenance
    assert '<strong class="best">82.17</strong> <span class="std">± 2.02</span>' in page
    assert '<span class="gain">(+11.55)</span>' in page and '<span class="n">(n=1)</span>' in page
    assert '– <span class="missing">(skipped)</span>' in page
    text = parsed.plain
    assert "Debiasing performance on synthetic datasets (the paper's Table 1)." in text
    assert "Training cost per run" in text and "time / run (s)" in text and "(×1.90)" in text
    assert "Not in the table:" in text and FAILURE.search(text)
    assert "skipped (needs a GPU)" in text


def test_failures_and_provenance(built, page):
    store, _ = built
    failures = page.split('<section id="failures">', 1)[1].split("</section>", 1)[0]
    assert FAILURE.search(failures) and "toy_vanilla_r20_s2_" in failures
    assert "skipped" not in failures  # a skip is no failure: it is under its table
    runs = page.split('<section id="runs">', 1)[1].split("</section>", 1)[0]
    assert runs.count("<details>") == 1 and "31 runs: state and provenance" in runs
    rows = {m[0]: m for m in re.findall(r"<tr><td>([^<]+)</td><td>([^<]*)</td>(.*?)</tr>", runs)}
    assert len(rows) == 31
    for run in RunStore(store).runs():
        recorded = run.config()["provenance"]
        _, state, rest = rows[run.run_id]
        assert state == run.effective_state().value
        cells = re.findall(r"<td>([^<]*)</td>", rest)
        method, dataset, ratio, seed, protocol, preset, version, commit, torch = cells[:9]
        assert (method, dataset, protocol, preset) == (
            run.config()["method"],
            run.config()["dataset"],
            "official",
            "paper",
        )
        assert float(ratio) == run.config()["ratio"] and int(seed) == run.config()["seed"]
        assert (version, commit, torch) == (
            recorded["code_version"],
            recorded["git_commit"] or "",
            recorded["torch"],
        )
    lff = next(r for k, r in rows.items() if k.startswith("cmnist_lff_r1_s0_"))
    assert lff[1] == "done" and lff[2].endswith("<td>cuda:0</td><td>20.0 s</td>")
    failed = next(r for k, r in rows.items() if k.startswith("cmnist_lff_r1_s2_"))
    assert failed[1] == "failed" and failed[2].endswith("<td></td><td></td>")  # no device, time


def test_text_from_the_store_is_escaped(page):
    assert MARKUP_ERROR not in page and "evil.example/x.png&quot; onerror" in page
    assert "&lt;img src=&quot;http://evil.example/x.png&quot;" in page and "&amp; more" in page
    assert not any(i.get("onerror") for i in Page(page).all("img"))


def test_stdout_without_output_and_tables_only_render(built, capsys):
    store, _ = built
    assert main(["report", "--out", str(store), "--format", "html", "--table", "cost"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("<!DOCTYPE html>") and 'data-table="cost"' in out
    assert 'data-table="synthetic"' not in out and "data:image/png;base64," in out
    tables = build_tables(load_records(RunStore(store)), "real")
    alone = render(tables, "html")
    assert 'data-table="real"' in alone and "<img" not in alone and 'id="runs"' not in alone


# ----------------------------------------------------------------------------- browser
def browser() -> str:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    pytest.skip(
        f"no headless browser on PATH ({', '.join(BROWSERS)}); on Debian: apt-get install "
        "chromium (scripts/ci_services.sh does it)"
    )


def run_browser(where: Path, *args: str) -> str:
    command = [
        browser(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        f"--user-data-dir={where / 'profile'}",
        *args,
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


#: added to a copy of the page only, once all images have loaded: each image's decoded width and
#: how many of its pixels are drawn (dark enough to be ink: axes, text, lines), read back from a
#: canvas it is painted on; a control image that cannot decode shows the probe tells them apart
PROBE = """<img id="control" src="data:image/png;base64,iVBORw0KGgoAAAA=" alt="broken">
<script>addEventListener("load", () => {
  for (const img of document.images) {
    img.dataset.decoded = img.complete ? img.naturalWidth : -1;
    if (!img.naturalWidth) continue;
    const canvas = document.createElement("canvas");
    canvas.width = img.naturalWidth;
    canvas.height = img.naturalHeight;
    const context = canvas.getContext("2d");
    context.drawImage(img, 0, 0);
    const rgba = context.getImageData(0, 0, canvas.width, canvas.height).data;
    let ink = 0;
    for (let i = 0; i < rgba.length; i += 4)
      if (rgba[i + 3] > 0 && Math.min(rgba[i], rgba[i + 1], rgba[i + 2]) < 160) ink++;
    img.dataset.ink = ink;
  }
  document.body.dataset.probed = "yes";
});</script>
"""


def test_browser_decodes_every_image(built, tmp_path):
    _, target = built
    probe = target.read_text().replace(
        "default-src 'none';", "default-src 'none'; script-src 'unsafe-inline';"
    )
    probe = probe.replace("</body>", PROBE + "</body>")
    (tmp_path / "probe.html").write_text(probe)
    dom = run_browser(
        tmp_path,
        "--run-all-compositor-stages-before-draw",
        "--virtual-time-budget=10000",
        "--dump-dom",
        (tmp_path / "probe.html").as_uri(),
    )
    parsed = Page(dom)
    assert parsed.all("body")[0].get("data-probed") == "yes", "the probe did not run"
    images = {
        i["alt"]: (i.get("data-decoded"), int(i.get("data-ink", 0))) for i in parsed.all("img")
    }
    assert images.pop("broken") == ("0", 0)  # the probe tells a broken image from a good one
    assert len(images) == 3 and {w for w, _ in images.values()} == {"600"}, images
    assert min(ink for _, ink in images.values()) > 2000, images  # axes, labels, curves
    assert len(parsed.all("table")) == 6 and len(parsed.all("details")) == 1
    assert FAILURE.search(parsed.plain) and "31 runs: state and provenance" in parsed.plain


def test_browser_screenshot_shows_the_plots(built, tmp_path):
    _, target = built
    shot = tmp_path / "page.png"
    run_browser(tmp_path, f"--screenshot={shot}", "--window-size=1280,2000", target.as_uri())
    with Image.open(shot) as image:
        rgb = image.convert("RGB")
    assert rgb.size == (1280, 2000)
    colours = rgb.getcolors(1 << 24) or []
    assert len(colours) > 200  # text, tables and plots, not a blank or single-colour page
    for colour in PLOT_COLOURS:
        near = sum(n for n, c in colours if max(map(abs, np.subtract(c, colour))) <= 12)
        assert near > 300, f"no plot drawn in {colour}: {near} pixels"


# ----------------------------------------------------------------------------- --interval
@pytest.fixture(scope="module")
def ranked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`bench report --format html --interval` on the Colored MNIST reproduction's 84 runs."""
    where = tmp_path_factory.mktemp("ranked")
    store = plant_reproduction(where / "runs")
    target = where / "report.html"
    args = ["report", "--out", str(store), "--format", "html", "--interval", "-o", str(target)]
    assert main(args) == 0
    return target


def test_interval_page_has_the_critical_difference_diagram(ranked):
    page = ranked.read_text()
    section = page.split('<section id="ranks">', 1)[1].split("</section>", 1)[0]
    (image,) = Page(section).all("img")
    assert image["alt"] == (
        "critical-difference diagram: ranks_synthetic_official_paper_accuracy_last"
    )
    assert '<a href="#ranks">Ranks</a>' in page and 'class="tie"' in page
    assert "Friedman χ²(6) = 16.39, p = 0.0118" in Page(page).plain


def test_browser_renders_the_critical_difference_diagram(ranked, tmp_path):
    probe = ranked.read_text().replace(
        "default-src 'none';", "default-src 'none'; script-src 'unsafe-inline';"
    )
    (tmp_path / "probe.html").write_text(probe.replace("</body>", PROBE + "</body>"))
    dom = run_browser(
        tmp_path,
        "--run-all-compositor-stages-before-draw",
        "--virtual-time-budget=10000",
        "--dump-dom",
        (tmp_path / "probe.html").as_uri(),
    )
    parsed = Page(dom)
    assert parsed.all("body")[0].get("data-probed") == "yes", "the probe did not run"
    images = {
        i["alt"]: (i.get("data-decoded"), int(i.get("data-ink", 0))) for i in parsed.all("img")
    }
    width, ink = images["critical-difference diagram: ranks_synthetic_official_paper_accuracy_last"]
    assert int(width or 0) >= 600 and ink > 1500, images  # axis, markers, labels, bars
    assert "DisEnt (2.00)" not in parsed.plain  # labels are drawn, not text of the page
