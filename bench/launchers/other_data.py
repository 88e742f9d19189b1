"""Done runs that were trained on other data than the data prepared now.

A run's id is its resolved configuration; the prepared data's fingerprint is recorded in its
result, not in its id. After ``bench data prepare --force`` rebuilt a dataset from other raw
files, the runs done on the old build are still ``done`` under the same ids, and a sweep of the
same grid skips them. It does not do so silently: :func:`other_data_notes` gives one ``note:``
line per dataset and ratio, naming how many runs, both fingerprints and the fix (move a run
aside and the same grid trains it afresh; ``bench report`` never averages runs of different
fingerprints into one cell). The current fingerprint is read from the prepared data's manifest
(no hashing), once per dataset, build options and ratio.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from debias_bench.config.run_config import RunConfig
from debias_bench.data.split_store import prepared_fingerprint
from debias_bench.paths import DataPlace
from debias_bench.registry import DATASETS
from debias_bench.runs.files import MOVED_ASIDE
from debias_bench.runs.store import RunStore


def other_data_notes(configs: Iterable[RunConfig], store: RunStore, place: DataPlace) -> list[str]:
    """One line for each dataset and ratio with done runs of ``configs`` whose recorded data
    fingerprint is not the one of the data prepared now; empty when there are none."""
    current: dict[tuple[str, str, float], str | None] = {}
    found: dict[tuple[str, float, str, str], list[Path]] = {}
    for config in configs:
        run_dir = store.run(config.run_id)
        if not run_dir.is_done():
            continue
        recorded = (run_dir.result() or {}).get("data_fingerprint")
        key = (config.dataset, repr(sorted(config.data_options.items())), float(config.ratio))
        if key not in current:
            family = DATASETS.get(config.dataset)(
                place.raw_root, place.data_root, **config.data_options
            )
            current[key] = prepared_fingerprint(family, config.ratio)
        now = current[key]
        if recorded and now and recorded != now:
            found.setdefault((config.dataset, config.ratio, recorded, now), []).append(run_dir.path)
    notes = []
    for (dataset, ratio, recorded, now), runs in found.items():
        first = runs[0]
        more = f" (and {len(runs) - 1} more)" if len(runs) > 1 else ""
        notes.append(
            f"note: {len(runs)} done run{'s' if len(runs) > 1 else ''} of {dataset} at "
            f"{ratio:g}% {'were' if len(runs) > 1 else 'was'} trained on other data (data "
            f"fingerprint {recorded}, now {now}): kept as done, not retrained; to retrain one "
            f"on this data, mv {first} {first}{MOVED_ASIDE}{more} and run the same grid again"
        )
    return notes
