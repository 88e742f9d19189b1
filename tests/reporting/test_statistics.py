"""Statistics of the reporter (issue 40): intervals, paired and Welch tests, Holm, power, ranks.

The numbers are checked against independent computations on the same values: scipy's functions
called directly and Holm's step-down written out here, on the committed Colored MNIST
reproduction (results/reproduction/cmnist.csv, 84 recipe runs) and on small planted stores. The
docs page docs/statistics.md carries `bench compare`'s output on that CSV; a test regenerates it.
"""

from __future__ import annotations

import io
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.power import TTestIndPower, TTestPower
from test_report import write_run

from debias_bench.cli import main
from debias_bench.reporting import ReportOptions, build_tables, load_records, render
from debias_bench.reporting.layout import method_name
from debias_bench.reporting.significance import (
    PAIRED,
    WELCH,
    IntervalSpec,
    Sample,
    difference,
    holm,
    pair,
    power,
    rank_test,
    seeds_needed,
    t_interval,
)
from debias_bench.reproduction.export import read_csv
from debias_bench.runs.store import RunStore
from debias_bench.session.compare import CompareRequest, compare_text

REPO = Path(__file__).resolve().parents[2]
CSV = REPO / "results" / "reproduction" / "cmnist.csv"
DOCS = REPO / "docs" / "statistics.md"
TOL = 1e-9
RATIOS = (0.5, 1.0, 2.0, 5.0)
BASELINES = ("vanilla", "lff", "lff_be", "end", "sd", "disent")
#: the docs page's generated block and the command that writes it
DOCS_COMMAND = [
    "compare",
    "etf_debias",
    *BASELINES,
    "--csv",
    "results/reproduction/cmnist.csv",
    "--compare-paper",
    "--format",
    "markdown",
]


# ----------------------------------------------------------------------------- references
def recipe_runs() -> pd.DataFrame:
    """The reproduction's recipe runs of the paper's methods under the tables' default
    selection, by hand (the CSV also holds LC's and DeNetDM's, compared with their own papers)."""
    frame = read_csv(CSV)
    paper = frame["method"].isin([*BASELINES, "etf_debias"])
    return frame[paper & (frame["selection"] == "last") & (frame["overrides"] == "")]


def holm_by_hand(pvalues: list[float]) -> list[float]:
    """Holm's step-down: the k-th smallest p times (m - k + 1), running maximum, capped at 1."""
    m = len(pvalues)
    order = np.argsort(pvalues)
    adjusted = np.empty(m)
    running = 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, (m - k) * pvalues[i]))
        adjusted[i] = running
    return adjusted.tolist()


def plant_reproduction(root: Path) -> Path:
    """The 84 recipe runs of the reproduction CSV planted as a run store (last = the CSV)."""
    for run in recipe_runs().itertuples():
        write_run(root, str(run.method), "cmnist", float(run.ratio), int(run.seed), run.accuracy)
    return root


@pytest.fixture(scope="module")
def cmnist_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return plant_reproduction(tmp_path_factory.mktemp("cmnist") / "runs")


# ----------------------------------------------------------------------------- Done when
def test_the_csv_holds_the_84_recipe_runs():
    runs = recipe_runs()
    assert len(runs) == 84 and runs.groupby(["method", "ratio"]).size().eq(3).all()
    assert sorted(runs["method"].unique()) == sorted((*BASELINES, "etf_debias"))


def test_ranks_friedman_and_p_values_on_the_reproduction_equal_scipy(cmnist_store):
    """`bench report --interval`'s table on the reproduction's numbers: average ranks, Friedman
    statistic and p, Nemenyi p-values and critical difference, each cell's paired t p-value
    against its row's best after Holm: equal to scipy called directly, to 1e-9."""
    spec = IntervalSpec()
    opts = ReportOptions(interval=spec)
    (table,) = build_tables(load_records(RunStore(cmnist_store)), "synthetic", opts)
    ranks = table.ranks
    assert ranks is not None

    runs = recipe_runs()
    means = runs.groupby(["ratio", "method"])["accuracy"].mean().unstack()  # 4 cells x 7
    methods = list(means.columns)
    by_hand = np.vstack([stats.rankdata(-row) for row in means.to_numpy()]).mean(axis=0)
    for method, rank in zip(methods, by_hand, strict=True):
        assert ranks.ranks[method] == pytest.approx(rank, abs=TOL)
    friedman = stats.friedmanchisquare(*means.to_numpy().T)
    assert ranks.statistic == pytest.approx(friedman.statistic, abs=TOL)
    assert ranks.p == pytest.approx(friedman.pvalue, abs=TOL)
    k, n = len(methods), len(means)
    scale = math.sqrt(k * (k + 1) / (6 * n))
    for a in methods:
        for b in methods:
            if a != b:
                q = abs(by_hand[methods.index(a)] - by_hand[methods.index(b)]) / scale
                expected = stats.studentized_range.sf(q * math.sqrt(2), k, np.inf)
                assert ranks.nemenyi[(a, b)] == pytest.approx(expected, abs=TOL)
    cd = stats.studentized_range.ppf(0.95, k, np.inf) / math.sqrt(2) * scale
    assert ranks.cd == pytest.approx(cd, abs=TOL)

    # per cell: the best of each row against every other method, paired by seed, Holm over all
    raw, where = [], []
    for ratio in RATIOS:
        row = runs[runs["ratio"] == ratio].pivot(index="seed", columns="method", values="accuracy")
        best = row.mean().idxmax()
        for method in methods:
            if method != best:
                raw.append(stats.ttest_rel(row[best], row[method]).pvalue)
                where.append((ratio, method))
    expected = dict(zip(where, holm_by_hand(raw), strict=True))
    cells = {(float(r.labels[1]), m): c for r in table.rows for m, c in r.cells.items()}
    for key, p in expected.items():
        assert cells[key].p == pytest.approx(p, abs=TOL), key
        assert cells[key].tie == (p >= 0.05)
    assert sum(c.bold for c in cells.values()) == len(RATIOS)
    assert "paired t-test on the seeds both ran (24 comparisons" in table.caption
    assert "Welch t-test where the seeds or the data build differ (0)" in table.caption
    # intervals: scipy's t-interval of each cell's seeds
    for (ratio, method), cell in cells.items():
        values = runs[(runs["ratio"] == ratio) & (runs["method"] == method)]["accuracy"]
        low, high = stats.t.interval(0.95, 2, loc=values.mean(), scale=stats.sem(values))
        assert (cell.low, cell.high) == (pytest.approx(low, abs=TOL), pytest.approx(high, abs=TOL))


def test_bench_compare_on_the_reproduction_csv(capsys):
    """`bench compare etf_debias lff --csv`: per ratio the difference, its interval, the test,
    the Holm-corrected p and the seeds needed, as scipy gives them."""
    assert main(["compare", "etf_debias", "lff", "--csv", str(CSV), "--format", "csv"]) == 0
    out = pd.read_csv(io.StringIO(capsys.readouterr().out), dtype=str)
    assert list(out["ratio"]) == ["0.5", "1.0", "2.0", "5.0"] and set(out["test"]) == {PAIRED}
    assert all(name.isascii() for name in out.columns)  # issue 49: `A - B`, not `A − B`
    runs = recipe_runs()
    raw, diffs = [], []
    for ratio in RATIOS:
        row = runs[runs["ratio"] == ratio].pivot(index="seed", columns="method", values="accuracy")
        raw.append(stats.ttest_rel(row["etf_debias"], row["lff"]).pvalue)
        diffs.append(row["etf_debias"].mean() - row["lff"].mean())
    assert [float(v) for v in out["A - B"]] == pytest.approx(diffs, abs=TOL)
    assert [float(v) for v in out["p"]] == pytest.approx(raw, abs=TOL)
    assert [float(v) for v in out["p (Holm)"]] == pytest.approx(holm_by_hand(raw), abs=TOL)
    for needed, ratio in zip(out["seeds needed"], RATIOS, strict=True):
        row = runs[runs["ratio"] == ratio].pivot(index="seed", columns="method", values="accuracy")
        d = row["etf_debias"] - row["lff"]
        n = int(needed)
        effect = abs(d.mean()) / d.std(ddof=1)
        assert power(effect, n, True) >= 0.8 > power(effect, n - 1, True)  # checked below


def test_bench_compare_text_names_the_tests_and_corrections(capsys):
    assert main(["compare", "etf_debias", "lff", "--csv", str(CSV)]) == 0
    captured = capsys.readouterr()
    assert "p (Holm): corrected over the 4 tests below" in captured.out
    assert "seeds needed" in captured.out and "paired t" in captured.out
    assert "runs off the recipe left out" in captured.err


def test_the_docs_page_is_what_bench_compare_prints(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    assert main(DOCS_COMMAND) == 0
    generated = capsys.readouterr().out.strip()
    page = DOCS.read_text()
    begin, end = "<!-- bench compare: begin -->", "<!-- bench compare: end -->"
    assert begin in page and end in page, "docs/statistics.md lost its generated block"
    block = page.split(begin, 1)[1].split(end, 1)[0].strip()
    assert block == generated, (
        "docs/statistics.md is stale: replace its block with `bench "
        + " ".join(DOCS_COMMAND[:-2])
        + " --format markdown`"
    )


def test_the_docs_page_counts_are_the_verdicts(capsys, monkeypatch):
    """The page's sentence of counts (how many claims hold, need more seeds, are reversed)."""
    monkeypatch.chdir(REPO)
    assert main([*DOCS_COMMAND[:-1], "csv"]) == 0
    verdicts = pd.read_csv(io.StringIO(capsys.readouterr().out))["paper's claim here"]
    holds = int((verdicts == "holds").sum())
    more = int(verdicts.str.startswith("needs").sum())
    reversed_ = int(verdicts.str.startswith("reversed").sum())
    assert holds + more + reversed_ == 24
    text = " ".join(DOCS.read_text().split())
    assert f"{holds} of the 24 claimed improvements hold at 3 seeds" in text
    assert f"{more} point the paper's way but need more seeds" in text
    assert f"{reversed_} are reversed in our runs" in text
    runs = recipe_runs()
    means = runs.groupby(["ratio", "method"])["accuracy"].mean().unstack()
    ranks = rank_test({f"cmnist {r:g}": means.loc[r].to_dict() for r in means.index})
    assert ranks is not None and ranks.describe(method_name) in text


# ----------------------------------------------------------------------------- the pieces
def test_t_interval_is_the_textbook_formula():
    values = [80.0, 82.5, 84.0]
    low, high = t_interval(values, 0.05)  # type: ignore[misc]
    half = stats.t.ppf(0.975, 2) * np.std(values, ddof=1) / math.sqrt(3)
    assert (low, high) == (
        pytest.approx(np.mean(values) - half),
        pytest.approx(82.1666 + half, abs=1e-3),
    )
    assert t_interval([61.0]) is None


def test_bootstrap_interval_is_seeded_and_stated():
    spec = IntervalSpec("bootstrap", resamples=2000, seed=3)
    values = [62.4, 70.1, 55.0, 66.3, 58.8]
    assert spec.of(values) == spec.of(values)
    assert spec.of(values) != IntervalSpec("bootstrap", resamples=2000, seed=4).of(values)
    low, high = spec.of(values)  # type: ignore[misc]
    assert min(values) <= low < high <= max(values)  # a mean of resamples stays inside
    assert "2000 resamples, seed 3" in spec.describe()
    with pytest.raises(ValueError, match="interval must be one of"):
        IntervalSpec("normal")


def test_runs_pair_by_seed_and_data_build_only():
    a = Sample({0: 80.0, 1: 82.5, 2: 84.0}, frozenset({"d1"}))
    same = Sample({0: 40.0, 1: 42.0, 2: 44.0}, frozenset({"d1"}))
    other_seeds = Sample({0: 40.0, 1: 42.0, 3: 44.0}, frozenset({"d1"}))
    other_data = Sample({0: 40.0, 1: 42.0, 2: 44.0}, frozenset({"d2"}))
    assert pair(a, same) and not pair(a, other_seeds) and not pair(a, other_data)
    paired = difference(a, same)
    assert paired is not None and paired.test == PAIRED
    assert paired.p == pytest.approx(stats.ttest_rel(a.array(), same.array()).pvalue, abs=TOL)
    welch = difference(a, other_data)
    assert welch is not None and welch.test == WELCH
    expected = stats.ttest_ind(a.array(), other_data.array(), equal_var=False)
    assert welch.p == pytest.approx(expected.pvalue, abs=TOL)
    ci = expected.confidence_interval(0.95)
    assert (welch.low, welch.high) == (pytest.approx(ci.low), pytest.approx(ci.high))
    assert difference(a, Sample({0: 50.0})) is None  # one seed: nothing to test


def test_holm_is_the_step_down():
    pvalues = [0.01, 0.04, 0.03, 0.2, 0.001]
    assert holm(pvalues) == pytest.approx(holm_by_hand(pvalues), abs=TOL)


@pytest.mark.parametrize("paired", [True, False])
def test_power_equals_statsmodels_and_seeds_needed_is_the_smallest(paired):
    reference = TTestPower() if paired else TTestIndPower()
    for effect in (0.3, 1.0, 2.5):
        for n in (2, 3, 5, 20):
            kwargs = {"nobs": n} if paired else {"nobs1": n, "ratio": 1.0}
            expected = reference.power(effect_size=effect, alpha=0.05, **kwargs)
            if not math.isnan(expected):  # statsmodels' NaN: below
                assert power(effect, n, paired, 0.05) == pytest.approx(expected, abs=TOL)
        n = seeds_needed(effect, paired)
        assert n is not None
        assert power(effect, n, paired) >= 0.8 > power(effect, n - 1, paired)
    # where statsmodels gives NaN (scipy's lower tail underflows), the power is still defined
    assert math.isnan(TTestPower().power(effect_size=5.7, nobs=3, alpha=0.05 / 24))
    assert 0.0 < power(5.7, 3, True, 0.05 / 24) < 0.8 <= power(5.7, 5, True, 0.05 / 24)
    assert seeds_needed(0.0, True) is None and seeds_needed(math.inf, True) == 2


def test_rank_test_leaves_out_methods_missing_a_cell():
    grid = {
        "a": {"x": 1.0, "y": 2.0, "z": 3.0, "w": 0.0},
        "b": {"x": 1.5, "y": 2.5, "z": 2.0},
        "c": {"x": 0.5, "y": 3.0, "z": 2.5},
    }
    found = rank_test(grid)
    assert found is not None and found.left_out == ("w",) and found.methods == ("x", "y", "z")
    assert rank_test({"a": grid["a"]}) is None  # one cell ranks nothing


# ----------------------------------------------------------------------------- table marks
@pytest.fixture(scope="module")
def marked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """cmnist 1 %: ETF-Debias best, LfF close (a tie), Vanilla far below; 0.5 %: one seed."""
    root = tmp_path_factory.mktemp("marks") / "runs"
    for seed, (van, lff, etf) in enumerate(
        [(40.0, 79.0, 80.0), (42.0, 83.5, 82.5), (44.0, 82.0, 84.0)]
    ):
        write_run(root, "vanilla", "cmnist", 1.0, seed, van)
        write_run(root, "lff", "cmnist", 1.0, seed, lff)
        write_run(root, "etf_debias", "cmnist", 1.0, seed, etf)
    write_run(root, "vanilla", "cmnist", 0.5, 0, 30.0)
    write_run(root, "etf_debias", "cmnist", 0.5, 0, 61.0)
    return root


def test_every_renderer_prints_the_marks(marked, capsys):
    opts = ReportOptions(interval=IntervalSpec())
    tables = build_tables(load_records(RunStore(marked)), "synthetic", opts)
    cells = {(r.labels[1], m): c for r in tables[0].rows for m, c in r.cells.items()}
    assert cells[("1.0", "etf_debias")].bold and not cells[("1.0", "etf_debias")].tie
    assert cells[("1.0", "lff")].tie and not cells[("1.0", "vanilla")].tie
    assert cells[("0.5", "vanilla")].tie and cells[("0.5", "vanilla")].p is None  # one seed
    markdown = render(tables, "markdown")
    assert re.search(r"81\.50 ± 2\.29 \[\d+\.\d\d, \d+\.\d\d\] ≈", markdown)
    assert "**82.17** ± 2.02 [77.15, 87.19]" in markdown
    latex = render(tables, "latex")
    assert r"\dbci{77.15}{87.19}" in latex and r"\dbtie{}" in latex
    html = render(tables, "html")
    assert '<span class="ci">[77.15, 87.19]</span>' in html and 'class="tie"' in html
    frame = pd.read_csv(io.StringIO(render(tables, "csv")))
    lff = frame[(frame["column"] == "lff") & (frame["ratio %"] == 1.0)].iloc[0]
    assert bool(lff["tie"]) and lff["p"] >= 0.05 and lff["low"] < lff["mean"] < lff["high"]
    plain = render(build_tables(load_records(RunStore(marked)), "synthetic"), "markdown")
    assert "≈" not in plain and "[" not in plain.split("|", 1)[1]  # off by default


def test_report_interval_flags(marked, capsys):
    out = str(marked)
    assert main(["report", "--out", out, "--table", "synthetic", "--interval", "bootstrap",
                 "--bootstrap-resamples", "500", "--bootstrap-seed", "7"]) == 0  # fmt: skip
    assert "500 resamples, seed 7" in capsys.readouterr().out
    for bad, says in (
        (["--alpha", "0.1"], "--alpha needs --interval"),
        (["--interval", "--bootstrap-seed", "1"], "--bootstrap-seed needs --interval bootstrap"),
        (["--interval", "--alpha", "2"], "alpha must lie in (0, 1)"),
    ):
        assert main(["report", "--out", out, *bad]) == 2
        err = capsys.readouterr().err
        assert says in err and "Traceback" not in err and err.count("\n") <= 2


def test_compare_errors_are_one_line(marked, capsys):
    out = str(marked)
    for args, says in (
        (["etf_debias", "selecmix", "--out", out], "no finished runs of 'selecmix'"),
        (["etf_debias", "etf_debias", "--out", out], "compared with itself"),
        (["etf_debias", "lff", "--out", out, "--csv", str(CSV)], "--csv and --out both given"),
        (["etf_debias", "lff", "--csv", str(CSV), "--split", "valid"], "test numbers only"),
    ):
        assert main(["compare", *args]) == 2
        err = capsys.readouterr().err
        assert says in err and "Traceback" not in err


def test_compare_over_a_store_pairs_and_corrects(marked):
    text = compare_text(CompareRequest("etf_debias", ("lff", "vanilla"), out=marked))
    assert "corrected over the 2 tests below" in text  # 0.5 %: one seed each, not tested
    assert "none (n < 2)" in text and text.count("paired t ") >= 2


def test_plot_writes_the_critical_difference_diagram(cmnist_store, tmp_path, capsys):
    plots = tmp_path / "plots"
    args = ["report", "--out", str(cmnist_store), "--table", "synthetic", "--interval"]
    assert main([*args, "--plot", str(plots)]) == 0
    stem = plots / "ranks_synthetic_official_paper_accuracy_last"
    assert stem.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"
    assert stem.with_suffix(".pdf").read_bytes()[:4] == b"%PDF"
    assert "Friedman χ²(6) = 16.39, p = 0.0118" in capsys.readouterr().out
