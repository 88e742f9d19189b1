"""What `bench perf` measured, as summary rows, a table and lines of text: per (dataset, method)
medians over repeats, harness Vanilla against the bare loop, and the projected grid time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tabulate import tabulate

from debias_bench.perf.measurement import BARE, Measurement, median_ms
from debias_bench.perf.projection import PAPER_SEEDS, Projection

#: harness Vanilla's speed as a fraction of the bare loop's that counts as on target
TARGET = 0.90
BARE_LABEL = "bare PyTorch loop"

Key = tuple[str, str]  # (dataset, method)


def group(measurements: list[Measurement]) -> dict[Key, list[Measurement]]:
    out: dict[Key, list[Measurement]] = {}
    for m in measurements:
        out.setdefault((m.dataset, m.method), []).append(m)
    return out


def summarise(measurements: list[Measurement]) -> list[dict[str, Any]]:
    """One row per (dataset, method): median ms/step over repeats, ratio to harness Vanilla,
    largest peak memory; the error when no repeat succeeded."""
    groups = group(measurements)
    rows = []
    for (dataset, method), ms in groups.items():
        ok = [m for m in ms if not m.error]
        median = median_ms(ok)
        vanilla = median_ms(groups.get((dataset, "vanilla"), []))
        first = (ok or ms)[0]
        rows.append(
            {
                "dataset": dataset,
                "method": method,
                "backbone": first.backbone,
                "batch_size": first.batch_size,
                "repeats": len(ok),
                "timed_steps": [m.timed_steps for m in ok],
                "ms_per_step": median,
                "steps_per_s": 1000.0 / median if median else None,
                "x_vanilla": median / vanilla if median and vanilla else None,
                "peak_mb": max((m.peak_mb for m in ok), default=None),
                "start_mb": min((m.start_mb for m in ok), default=None),
                "error": None if ok else first.error,
                **_syncs(ok),
            }
        )
    return rows


def _syncs(ok: list[Measurement]) -> dict[str, Any]:
    """The host synchronisations counted (``--host-syncs``): the most per step over repeats."""
    counted = [m for m in ok if m.host_syncs_per_step is not None]
    if not counted:
        return {"host_syncs_per_step": None}
    worst = max(counted, key=lambda m: m.host_syncs_per_step or 0.0)
    return {
        "host_syncs_per_step": worst.host_syncs_per_step,
        "host_sync_sites": worst.host_sync_sites,
        "host_sync_note": worst.host_sync_note,
    }


def harness_vs_bare(measurements: list[Measurement]) -> dict[str, dict[str, float]]:
    """Per dataset: median ms/step of the bare loop and of harness Vanilla, and the harness's
    speed as a fraction of the bare loop's (bare ms / harness ms)."""
    groups = group(measurements)
    out = {}
    for dataset in dict.fromkeys(m.dataset for m in measurements):
        bare = median_ms(groups.get((dataset, BARE), []))
        harness = median_ms(groups.get((dataset, "vanilla"), []))
        if bare and harness:
            out[dataset] = {"bare_ms": bare, "harness_ms": harness, "speed": bare / harness}
    return out


def _num(value: float | None, digits: int = 1) -> str:
    return "" if value is None else f"{value:,.{digits}f}"


def _steps(row: dict[str, Any]) -> str:
    """Steps timed per repeat: ``30``, ``3 x 30``, or ``30/12/30`` when they differ."""
    steps = row["timed_steps"]
    if len(set(steps)) > 1:
        return "/".join(map(str, steps))
    return f"{len(steps)} x {steps[0]}" if len(steps) > 1 else "".join(map(str, steps))


def _growth(row: dict[str, Any]) -> str:
    if row["peak_mb"] is None:
        return ""
    return f"+{row['peak_mb'] - row['start_mb']:,.0f}"


#: the table's columns: header and how a summary row shows in it
COLUMNS: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
    ("dataset", lambda r: r["dataset"]),
    ("method", lambda r: BARE_LABEL if r["method"] == BARE else r["method"]),
    ("backbone", lambda r: r["backbone"]),
    ("batch", lambda r: str(r["batch_size"] or "")),
    ("steps timed", _steps),
    ("ms/step", lambda r: _num(r["ms_per_step"])),
    ("steps/s", lambda r: _num(r["steps_per_s"], 2)),
    ("x Vanilla", lambda r: "" if r["x_vanilla"] is None else f"{r['x_vanilla']:.2f}x"),
    ("peak MB", lambda r: _num(r["peak_mb"], 0)),
]


def render_table(rows: list[dict[str, Any]], rss: bool = True) -> str:
    """The summary rows as a table; with ``rss`` (CPU) the growth over the process's memory
    after imports too, and a note column when a cell failed or was skipped."""
    columns = list(COLUMNS)
    if rss:
        columns.append(("over start MB", _growth))
    if any(r["error"] for r in rows):
        columns.append(("note", lambda r: r["error"] or ""))
    table = [[show(r) for _, show in columns] for r in rows]
    headers = [name for name, _ in columns]
    return tabulate(table, headers=headers, tablefmt="github", disable_numparse=True)


#: the host-synchronisation table's columns (``bench perf --host-syncs``)
SYNC_COLUMNS: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
    *COLUMNS[:4],
    ("steps counted", _steps),
    ("host syncs/step", lambda r: _num(r["host_syncs_per_step"], 2)),
    ("where (op at file:line, count)", lambda r: _sites(r.get("host_sync_sites"))),
    ("note", lambda r: r["error"] or r.get("host_sync_note") or ""),
]


def _sites(sites: dict[str, int] | None, n: int = 3) -> str:
    return "; ".join(f"{site} x{count}" for site, count in list((sites or {}).items())[:n])


def render_sync_table(rows: list[dict[str, Any]]) -> str:
    """Host synchronisations per training step of each cell, where they happen, and the
    method's note on syncs outside its step."""
    table = [[show(r) for _, show in SYNC_COLUMNS] for r in rows]
    headers = [name for name, _ in SYNC_COLUMNS]
    return tabulate(table, headers=headers, tablefmt="github", disable_numparse=True)


def render_comparison(comparison: dict[str, dict[str, float]], repeats: int) -> list[str]:
    lines = []
    for dataset, c in comparison.items():
        verdict = "" if c["speed"] >= TARGET else "  << below target"
        how = f"medians of {repeats} alternating repeats" if repeats > 1 else "one run each"
        lines.append(
            f"{dataset}: harness Vanilla vs bare loop: {c['speed']:.2f}x the bare loop's speed "
            f"(target >= {TARGET:.2f}); {c['harness_ms']:.1f} vs {c['bare_ms']:.1f} ms/step, "
            f"{how}{verdict}"
        )
    return lines


def duration(seconds: float) -> str:
    """Seconds in the largest unit that keeps the number readable."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:,.1f} {unit}"
    return f"{seconds:,.0f} s"


def render_projection(projection: Projection, detailed: bool) -> list[str]:
    lines = []
    if detailed:
        vanilla = {c.dataset: c.total_seconds for c in projection.cells if c.method == "vanilla"}
        table = [
            [
                c.dataset,
                c.method,
                "/".join(f"{s:,}" for s in sorted(set(c.steps_per_run))),
                _num(c.ms_per_step),
                duration(max(c.run_seconds)),
                c.runs,
                duration(c.total_seconds),
                f"{c.total_seconds / vanilla[c.dataset]:.2f}x" if vanilla.get(c.dataset) else "",
            ]
            for c in projection.cells
        ]
        headers = [
            "dataset",
            "method",
            "steps/run",
            "ms/step",
            "time/run",
            "runs",
            "total",
            "x Vanilla",
        ]
        lines += ["", tabulate(table, headers=headers, tablefmt="github", disable_numparse=True)]
    runs = sum(c.runs for c in projection.cells)
    seeds = projection.cells[0].seeds if projection.cells else PAPER_SEEDS
    lines.append(
        f"projected paper grid ({runs} runs: these methods x datasets, every ratio, {seeds} "
        f"seeds, paper preset): {duration(projection.total_seconds)} on one such device"
    )
    n = projection.devices
    if n > 1:
        lines.append(
            f"  on {n} devices: {duration(projection.seconds_on(n))} (total / {n}, at least the "
            f"longest run: {duration(projection.longest_run_seconds)})"
        )
    lines.append(
        "  counts training steps x measured ms/step only; not included: evaluation, preparation "
        "stages (LfF+BE's committee), dataset builds, process start-up"
        + ("" if detailed else "; breakdown: --project")
    )
    lines += [f"  note: {note}" for note in projection.notes]
    return lines
