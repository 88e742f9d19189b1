"""A baseline's kernel pairs: its seeds run again under other SIMD kernels (``bench regress
kernels``).

Another CPU moves a run of one seed by ``tau`` (:mod:`~debias_bench.analysis.regress_rule`):
for most methods far less than another seed would. To measure it, the same sweep is run again
with the kernels forced to older instruction sets (``ATEN_CPU_CAPABILITY``, oneDNN's
``DNNL_MAX_CPU_ISA``, MKL's ``MKL_ENABLE_INSTRUCTIONS``: :data:`OLDER_KERNELS`) and its values
are kept beside the baseline's, cell by cell, under the setting's name. The runs must be the
baseline's own (the same run ids: the same configuration and data), or they are refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from debias_bench.analysis.baseline import baseline_problems, sweep_cells
from debias_bench.errors import BenchError

_AVX2 = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "DNNL_MAX_CPU_ISA": "AVX2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
}
_DEFAULT = {
    "ATEN_CPU_CAPABILITY": "default",
    "DNNL_MAX_CPU_ISA": "SSE41",
    "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
}
#: the kernel settings older than a CPU's own (PyTorch's ``cpu_capability`` as it reports
#: it), newest first, each as the environment that forces it (each library reads its variable
#: when it loads): AVX2 is as fast as AVX-512 here, the default kernels make the image sets
#: 3-4x slower
OLDER_KERNELS: dict[str, dict[str, dict[str, str]]] = {
    "AVX512": {"avx2": _AVX2, "default": _DEFAULT},
    "AVX2": {"default": _DEFAULT},
}


def add_kernels(baseline: dict[str, Any], out: Path, name: str) -> int:
    """Keep the finished runs in ``out`` (the baseline's sweep under kernel setting ``name``)
    in ``baseline``'s cells, replacing that setting's values; returns the runs kept. Refused
    (BenchError): unfinished runs, a run whose cell or seed the baseline lacks, or whose run
    id differs from the baseline's for its seed (another configuration)."""
    cells, unfinished = sweep_cells(out)
    if unfinished:
        raise BenchError(
            f"{len(unfinished)} run(s) in {out} are not finished: " + "; ".join(unfinished[:3]),
            hint="finish them (rerun the same bench run with the same kernel settings)",
        )
    if not cells:
        raise BenchError(f"no finished run in {out}", hint="run the sweep first")
    kept = 0
    for key, cell in cells.items():
        base = baseline["cells"].get(key)
        if base is None:
            raise BenchError(
                f"{out} holds cell {key}, which the baseline does not",
                hint="run the baseline's own sweep (same methods, datasets, seeds, --set)",
            )
        ids = dict(zip(base["seeds"], base.get("run_ids") or [], strict=False))
        for seed, run_id in zip(cell["seeds"], cell["run_ids"], strict=True):
            if ids.get(seed) != run_id:
                raise BenchError(
                    f"{out}: run {run_id} of {key} seed {seed} is not the baseline's run of "
                    f"that seed ({ids.get(seed) or 'none recorded'}): another configuration",
                    hint="run the baseline's own sweep (same preset, --set and seeds)",
                )
        base.setdefault("kernels", {})[name] = {
            "seeds": list(cell["seeds"]),
            "metrics": {m: v for m, v in cell["metrics"].items() if m in base["metrics"]},
        }
        kept += len(cell["seeds"])
    problems = baseline_problems(baseline)
    if problems:
        raise BenchError(f"{out} does not fit the baseline: " + "; ".join(problems[:3]))
    return kept


def older_kernels() -> dict[str, dict[str, str]]:
    """The settings of :data:`OLDER_KERNELS` for this CPU (none for one it does not list)."""
    import torch

    return OLDER_KERNELS.get(torch.backends.cpu.get_cpu_capability(), {})


if __name__ == "__main__":  # scripts/ci_regress.sh record: one line per setting
    for _name, _env in older_kernels().items():
        print(_name, " ".join(f"{k}={v}" for k, v in _env.items()))
