"""The documentation (README.md and the mkdocs site under docs/) does not drift from the code.

What can be generated is checked against the code: the method and dataset tables against the
registries and ``bench list methods``, every count of methods (and of methods x datasets)
against the registries or, for the paper's own counts, its reference file, and the run states
and failure reasons listed in the docs against their enums. The site's navigation lists every
page and only pages that exist; the plugin examples import only from the top-level package, and
every example file on the pages is one that a test runs (the tracker's here, the others in
tests/test_readme_*.py); the docs environment of tox installs exactly the ``docs`` extra."""

from __future__ import annotations

import configparser
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support.processes import run_bench

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
README = REPO / "README.md"
REFERENCE = REPO / "results" / "reference" / "etf_debias_cvpr2024.yaml"

#: the example files on the docs pages, and the test that runs each as printed
EXAMPLES = {
    "my_method.py": "tests/project/test_readme_plugins.py",
    "my_jtt.py": "tests/project/test_readme_plugins.py",
    "my_jtt.yaml": "tests/project/test_readme_plugins.py",
    "cfashion.py": "tests/project/test_readme_plugins.py",
    "my_launcher.py": "tests/project/test_readme_launcher.py",
    "my_table.py": "tests/project/test_readme_table.py",
    "my_tracker.py": "tests/project/test_docs.py",
}
FILE_BLOCK = re.compile(r"<!-- file: (\S+) -->\n```(\w*)\n(.*?)```", re.DOTALL)


def pages() -> list[Path]:
    """Every Markdown page of the site."""
    return sorted(DOCS.rglob("*.md"))


def text_of(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def table_after(text: str, header_start: str) -> list[list[str]]:
    """The body rows of the Markdown table whose header line starts with ``header_start``."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(header_start)]
    assert len(starts) == 1, f"{len(starts)} tables start with {header_start!r}"
    rows = []
    for line in lines[starts[0] + 2 :]:
        if not line.startswith("|"):
            break
        cells = re.split(r"(?<!\\)\|", line.strip().strip("|"))  # not at an escaped pipe
        rows.append([cell.strip() for cell in cells])
    return rows


# ------------------------------------------------------------------------------- the site


def nav_pages(nav: object) -> list[str]:
    """The page paths of an mkdocs ``nav`` (nested lists of {title: path-or-list})."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for item in nav for page in nav_pages(item)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in nav_pages(value)]
    raise AssertionError(f"unexpected nav entry {nav!r}")


def test_every_page_in_the_nav_exists_and_every_page_is_in_the_nav():
    config = yaml.safe_load(text_of(REPO / "mkdocs.yml"))
    listed = nav_pages(config["nav"])
    assert len(listed) == len(set(listed)), "a page is listed twice"
    missing = [page for page in listed if not (DOCS / page).is_file()]
    assert not missing, f"mkdocs.yml lists pages that do not exist: {missing}"
    on_disk = {path.relative_to(DOCS).as_posix() for path in pages()}
    assert on_disk - set(listed) == set(), "pages under docs/ that mkdocs.yml's nav leaves out"


def test_the_readmes_links_lead_to_files():
    """mkdocs checks the links between pages; the README is outside the site."""
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text_of(README))
    local = [t for t in targets if not re.match(r"[a-z]+://", t)]
    assert local and not [t for t in local if not (REPO / t).exists()]


def test_the_docs_environment_installs_the_docs_extra():
    """tox's docs environment does not install the package (its API pages are read from source,
    so torch is not needed); its deps are the ``docs`` extra, written twice, kept equal here."""
    tomllib = pytest.importorskip("tomllib")
    extra = tomllib.loads(text_of(REPO / "pyproject.toml"))["project"]["optional-dependencies"]
    tox = configparser.ConfigParser(interpolation=None)
    tox.read_string(text_of(REPO / "tox.ini"))
    deps = [line.strip() for line in tox["testenv:docs"]["deps"].splitlines() if line.strip()]
    assert deps == extra["docs"]
    assert "docs" in [env.strip() for env in tox["tox"]["env_list"].split(",")]


# ----------------------------------------------------------------- tables and counts

#: the built-in registries as a fresh interpreter sees them (this process's registries also hold
#: the test suite's own entries, such as conftest's ``toy`` dataset)
REGISTRIES = """
import json
from debias_bench.registry import DATASETS, METHODS
print(json.dumps({
    "methods": [
        {"name": e.name, "display_name": e.display_name,
         "bias_labels": "yes" if e.meta.get("needs_bias_labels") else "no",
         "cost": e.meta.get("cost", "")}
        for e in METHODS
    ],
    "datasets": [
        {"name": e.name, "display_name": e.display_name,
         "ratios": ", ".join(f"{r:g}" for r in e.obj.spec.ratios),
         "test_kind": e.obj.spec.test_kind, "backbone": e.obj.spec.backbone}
        for e in DATASETS
    ],
}))
"""


def built_in_env() -> dict[str, str]:
    env = {**os.environ}
    env.pop("BENCH_PLUGINS", None)  # the built-in entries only
    return env


@pytest.fixture(scope="module")
def registries() -> dict[str, list[dict[str, str]]]:
    done = subprocess.run(
        [sys.executable, "-c", REGISTRIES],
        env=built_in_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("path", [README, DOCS / "methods.md"], ids=["README", "methods.md"])
def test_the_method_table_is_the_registry(path, registries):
    rows = table_after(text_of(path), "| method (`--methods`) |")
    entries = registries["methods"]
    assert [row[0] for row in rows] == [f"`{e['name']}`" for e in entries], "names or order"
    for row, entry in zip(rows, entries, strict=True):
        paper, labels, cost = row[1], row[2], row[3]
        name = entry["display_name"]
        assert paper == name or paper.startswith(f"{name} ("), row
        assert labels == entry["bias_labels"], row
        assert cost == entry["cost"], row


@pytest.mark.parametrize("path", [README, DOCS / "datasets.md"], ids=["README", "datasets.md"])
def test_the_dataset_table_is_the_registry(path, registries):
    rows = table_after(text_of(path), "| dataset (`--datasets`) |")
    entries = registries["datasets"]
    assert [row[0] for row in rows] == [f"`{e['name']}`" for e in entries], "names or order"
    for row, entry in zip(rows, entries, strict=True):
        assert row[1] == entry["display_name"], row
        assert row[3] == entry["ratios"], row
        assert row[4] == entry["test_kind"], row
        assert row[5].startswith(f"`{entry['backbone']}`"), row


def test_the_method_table_is_what_bench_list_methods_prints():
    listed = run_bench("list", "methods", env=built_in_env(), timeout=300)
    assert listed.returncode == 0, listed.stderr
    names = [line.split("|")[1].strip() for line in listed.stdout.splitlines()[2:] if "|" in line]
    rows = table_after(text_of(DOCS / "methods.md"), "| method (`--methods`) |")
    assert [row[0].strip("`") for row in rows] == names


#: a count of all methods: ``N methods x M datasets``, ``all N methods``, ``N built-in methods``,
#: and the paper's own (``the paper's N methods``); other counts (``7 methods x 4 ratios`` of a
#: reproduction) are not claims about the registry
COUNT = re.compile(
    r"(?P<paper>paper's\s+)?(?P<all>\ball\s+)?\b(?P<methods>\d+)\s+(?P<kind>built-in\s+)?methods\b"
    r"(?:\s*[x×]\s*(?P<datasets>\d+)\s+datasets\b)?"
)


def test_every_count_of_methods_is_the_registrys(registries):
    """Where the docs count the methods (and datasets), the count is the number registered;
    where they count the paper's, it is the paper's own (its reference file)."""
    paper = yaml.safe_load(text_of(REFERENCE))
    expected = {
        False: (len(registries["methods"]), len(registries["datasets"])),
        True: (len(paper["methods"]), len(paper["datasets"])),
    }
    wrong, seen = [], 0
    for path in [README, *pages()]:
        for match in COUNT.finditer(text_of(path)):
            if not (match["paper"] or match["all"] or match["kind"] or match["datasets"]):
                continue  # a count of something else
            seen += 1
            methods, datasets = expected[bool(match["paper"])]
            if int(match["methods"]) != methods or (
                match["datasets"] and int(match["datasets"]) != datasets
            ):
                wrong.append(f"{path.relative_to(REPO)}: {' '.join(match[0].split())!r}")
    assert not wrong, f"counts that are not the registry's ({expected[False]}): {wrong}"
    assert seen >= 3  # the README's headline, the docs' home page, the paper grid


@pytest.mark.parametrize("path", [README, DOCS / "index.md"], ids=["README", "index.md"])
def test_the_headline_names_every_method_beyond_the_papers(path, registries):
    """The headline's count is the registry's (above), and its parenthesis names the methods
    beyond the paper's 8: it read "(the paper's 8 methods and GroupDRO, JTT and PGD)" under a
    count of 14 once LC, DeNetDM and DFR had landed."""
    paper = yaml.safe_load(text_of(REFERENCE))["methods"]
    headline = " ".join(text_of(path).split("\n\n")[1].split())  # the first paragraph
    named = headline.split("methods x", 1)[1].split("(", 1)[1].split(")", 1)[0]
    names = {n.strip() for part in named.split(",") for n in part.split(" and ")}
    beyond = {e["display_name"] for e in registries["methods"] if e["name"] not in paper}
    assert beyond and beyond <= names, named


def test_the_reproduction_pages_comparison_rows_are_the_generated_ones():
    """docs/reproduction.md shows the measured rows of the comparison tables that `bench
    reproduce table` writes into results/reproduction/README.md: each row must be one of the
    generated rows, so a rerun that changes a number fails here until the page is updated."""
    header = "| method | ratio (%) | ours | n | paper | ours − paper | flag | reason |"
    generated = set(text_of(REPO / "results" / "reproduction" / "README.md").splitlines())
    rows = []
    for table in text_of(DOCS / "reproduction.md").split(header)[1:]:
        for row in table.splitlines()[2:]:
            if not row.startswith("|"):
                break
            rows.append(row)
    assert len(rows) >= 30  # both tables: the paper's Table 1 and LC's and DeNetDM's
    assert [row for row in rows if row not in generated] == []


def test_the_run_states_and_failure_reasons_listed_are_the_enums():
    from debias_bench.errors import FailReason
    from debias_bench.runs.states import RunState

    listed = " ".join(text_of(DOCS / "sweeps.md").split())  # a value may wrap across lines
    missing = [s.value for s in RunState if f"`{s.value}`" not in listed]
    missing += [r.value for r in FailReason if f"`{r.value}`" not in listed]
    assert not missing, f"docs/sweeps.md does not list: {missing}"


def test_the_rules_table_lists_every_selection_rule_and_only_those():
    """docs/protocols.md's table of model-selection rules is the code's tuple of rules."""
    from debias_bench.config.selection import SELECTIONS

    table = text_of(DOCS / "protocols.md").split("| rule | picks the evaluation with |", 1)[1]
    rows = [line for line in table.split("\n\n", 1)[0].splitlines() if line.startswith("| `")]
    listed = [row.split("`")[1] for row in rows]
    assert sorted(listed) == sorted(SELECTIONS), listed


DOTTED = re.compile(r"\bdebias_bench(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
FILE_PATH = re.compile(r"`((?:bench|methods|datasets|scripts|tests|results)/[\w./-]+\.\w+)`")

#: resolve dotted names (module, then attributes) in a fresh interpreter; prints the failures
RESOLVE = """
import importlib, json, sys, warnings
warnings.simplefilter("error", DeprecationWarning)  # an old path is not a documented one
failed = []
for name in json.loads(sys.stdin.read()):
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            failed.append(name)
        break
    else:
        failed.append(name)
print(json.dumps(failed))
"""


def test_every_module_and_name_the_docs_cite_exists():
    """``debias_bench.x.y`` anywhere in the docs imports (at its current path, not a deprecated
    one), and every repository file they cite in backticks is there (placeholders such as
    ``<dataset>.csv`` and the examples' own ``my_*`` files aside)."""
    texts = {path: text_of(path) for path in [README, *pages()]}
    names = sorted({name for text in texts.values() for name in DOTTED.findall(text)})
    done = subprocess.run(
        [sys.executable, "-c", RESOLVE],
        input=json.dumps(names),
        env=built_in_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [], "cited in the docs, not in the code"
    files = {name for text in texts.values() for name in FILE_PATH.findall(text)}
    examples = {name for name in files if "<" in name or Path(name).name.startswith("my_")}
    missing = sorted(name for name in files - examples if not (REPO / name).exists())
    assert not missing, f"files the docs cite that do not exist: {missing}"


def test_the_architecture_pages_layers_are_the_import_contract():
    """The layers table, top to bottom, is pyproject.toml's import-linter layers contract."""
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads(text_of(REPO / "pyproject.toml"))["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["type"] == "layers"]
    rows = table_after(text_of(DOCS / "architecture.md"), "| layer | package(s) | what it holds |")
    shown = [" | ".join(re.findall(r"`([^`]+)`", row[1])) for row in rows]
    layers = [" | ".join(part.strip() for part in layer.split("|")) for layer in contract["layers"]]
    assert shown == layers


def test_the_architecture_page_lists_the_plugin_api_and_the_moves():
    import debias_bench

    page = text_of(DOCS / "architecture.md")
    api = table_after(page, "| for | names |")
    listed = [name for row in api for name in re.findall(r"`([^`]+)`", row[1])]
    assert sorted(listed) == sorted(set(debias_bench.__all__) - {"__version__"})
    moves = {
        f"debias_bench.{old.strip('`')}": f"debias_bench.{new.strip('`')}"
        for old, new in table_after(page, "| old module | new module |")
        if new != "unchanged"
    }
    assert debias_bench.MOVED.items() <= moves.items(), "a move the page does not list"
    unmoved = [old for old in moves if old not in debias_bench.MOVED]
    assert sorted(unmoved) == sorted(
        f"debias_bench.{name}" for name in ("config", "data", "perf", "selection")
    ), "the page's notes cover these (packages that forward their names; a new module)"
    missing = [module for module in moves.values() if importlib.util.find_spec(module) is None]
    assert not missing, f"new homes that do not exist: {missing}"


# ------------------------------------------------------------------------------ examples


def file_blocks() -> dict[str, tuple[Path, str, str]]:
    """``<!-- file: NAME -->`` blocks of every page -> (page, language, code)."""
    found: dict[str, tuple[Path, str, str]] = {}
    for path in pages():
        for name, language, code in FILE_BLOCK.findall(text_of(path)):
            assert name not in found, f"{name} is on {found[name][0]} and on {path}"
            found[name] = (path, language, code)
    return found


def test_every_example_file_is_run_by_a_test():
    assert set(file_blocks()) == set(EXAMPLES)
    assert not FILE_BLOCK.findall(text_of(README)), "the examples live on the docs pages"
    for name, test in EXAMPLES.items():
        assert name in text_of(REPO / test), f"{test} does not run {name}"


def test_the_plugin_examples_import_only_from_the_top_level_package():
    """Plugins import ``from debias_bench import ...``: the stage modules behind the names may
    move (docs/architecture.md)."""
    deep = re.compile(r"^\s*(from\s+debias_bench\.\S+\s+import|import\s+debias_bench\b)", re.M)
    for path in sorted((DOCS / "extending").glob("*.md")):
        for block in re.findall(r"```python\n(.*?)```", text_of(path), re.DOTALL):
            assert not deep.findall(block), f"{path.name}: {deep.findall(block)}"


def docs_file(name: str) -> str:
    return file_blocks()[name][2]


@pytest.mark.slow  # two short runs on a tiny raw source (half a minute)
def test_the_tracker_example_tracks_runs_as_printed(tmp_path):
    home = tmp_path / "my_project"  # outside the repository
    home.mkdir()
    (home / "my_tracker.py").write_text(docs_file("my_tracker.py"))
    env = {
        **os.environ,
        "BENCH_PLUGINS": "./my_tracker.py",
        "BENCH_RAW_ROOT": str(tmp_path / "raw"),
        "BENCH_DATA_ROOT": str(tmp_path / "data"),
        "OMP_NUM_THREADS": "1",
    }
    env.pop("PYTHONPATH", None)

    def bench(*args: str) -> subprocess.CompletedProcess[str]:
        return run_bench(*args, env=env, cwd=home, timeout=600)

    listed = bench("list", "trackers")
    assert listed.returncode == 0, listed.stderr
    assert "jsonl" in listed.stdout and "JSON lines" in listed.stdout

    done = bench("data", "fixture", "cmnist", "--out", env["BENCH_RAW_ROOT"])
    assert done.returncode == 0, done.stderr
    run = bench(
        "run", "--methods", "vanilla,etf_debias", "--datasets", "cmnist", "--ratios", "1",
        "--preset", "ci", "--set", "steps=30", "--track", "jsonl", "--out", "runs",
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    run_ids = sorted(p.name for p in (home / "runs").iterdir() if (p / "result.json").is_file())
    assert len(run_ids) == 2

    def records(folder: Path, run_id: str) -> list[dict]:
        lines = (folder / f"{run_id}.jsonl").read_text().splitlines()
        return [json.loads(line) for line in lines]

    for run_id in run_ids:
        sent = records(home / "runs" / "jsonl", run_id)  # the default target: OUT/jsonl
        assert sent[0]["tags"]["run_id"] == run_id and "lr" in sent[0]["params"]
        steps = [r["step"] for r in sent if "step" in r]
        assert steps and steps == sorted(set(steps))  # every evaluation, once
        assert sent[-1]["state"] == "done"
        assert sent[-1]["files"] == ["config.json", "result.json"]

    # a backfill sends only what a target lacks: nothing to the same target, all to a new one
    before = {r: (home / "runs" / "jsonl" / f"{r}.jsonl").read_text() for r in run_ids}
    again = bench("track", "export", "--out", "runs", "--to", "jsonl")
    assert again.returncode == 0, again.stdout + again.stderr
    assert before == {r: (home / "runs" / "jsonl" / f"{r}.jsonl").read_text() for r in run_ids}
    other = home / "other"
    backfill = bench("track", "export", "--out", "runs", "--to", f"jsonl={other}")
    assert backfill.returncode == 0, backfill.stdout + backfill.stderr
    for run_id in run_ids:
        ours, theirs = records(home / "runs" / "jsonl", run_id), records(other, run_id)
        assert [r.get("step") for r in theirs] == [r.get("step") for r in ours]
        assert theirs[-1]["state"] == "done"
