#!/usr/bin/env bash
# The GPU checks of results/gpu/README.md (issue 51, item 5), as one script for a GPU machine
# that has the working tree but not the package installed (a lent machine, a fresh cluster
# node). It writes its log and each stage's results under OUT.
#
#   OUT=/tmp/gpu RAW=/path/to/raw bash scripts/gpu_check.sh              # syncs speed pack perf
#   OUT=/tmp/gpu RAW=/path/to/raw bash scripts/gpu_check.sh e2e amp      # the older checks
#   DRY_RUN=1 OUT=/tmp/dry bash scripts/gpu_check.sh                     # every stage, tiny, CPU
#
# RAW defaults to BENCH_RAW_ROOT, else .gpu/data; DATA (the prepared data) to a folder under WORK.
# For a machine that gets only the working tree, copy MNIST's four files into .gpu/data/mnist, list
# /.gpu/ in .git/info/exclude and send that folder along.
#
# Stages, in the order given (none given: syncs speed pack perf, within 10 minutes on a GPU):
# - syncs: `bench perf --host-syncs` over every method on Colored MNIST and Corrupted CIFAR-10
#   (SYNC_METHODS, SYNC_DATASETS) -> OUT/syncs.json; on CUDA again under PyTorch's
#   `torch.cuda.set_sync_debug_mode("error")` (`--cuda-sync-debug`: a step that syncs fails its
#   cell) -> OUT/syncs-torch.json, the cross-check of the count.
# - speed: ms/step of every method (SPEED_METHODS) on a 32-px and a 224-px cell (SPEED_DATASETS:
#   cifar10c,bffhq), float32 against `--set amp=bf16` -> OUT/speed-none.json, speed-bf16.json.
# - pack: 12 Colored MNIST runs packed on one GPU (LC and DeNetDM at 1 and 5 %, seeds 0-2:
#   issue 41's reproduction; PACK_METHODS, PACK_RATIOS, PACK_SEEDS, PACK_FLAGS, default
#   `--jobs-per-gpu 12`; `--jobs-per-gpu auto --perf-json F` to let the rule choose), stopped
#   at PACK_S -> OUT/pack.csv: each run's state, step and steps/s (its status.json).
# - perf: `bench perf --project` over the paper's methods and every dataset (PERF_DATASETS), the
#   paper grid's GPU-hours -> OUT/perf.json.
# - e2e: `bench reproduce run`: Vanilla and ETF-Debias on Colored MNIST at paper length, 1 %,
#   seed 0, side by side on one GPU, ending in the export -> OUT/repro/ (E2E_METHODS, E2E_RATIOS,
#   E2E_SEEDS and JOBS_PER_GPU change it). Needs MNIST under RAW.
# - amp: the bf16 accuracy check: Vanilla and ETF-Debias on Colored MNIST, float32 against
#   `--set amp=bf16`, quick preset, seeds 0-1 -> OUT/amp-none.md, amp-bf16.md.
#
# DEVICE (default cuda) and RUN_ARGS (flags added to each training command, e.g. `--epochs 1`)
# let the script be tried on a CPU. DRY_RUN=1 runs every stage on the CPU with tiny settings
# (two methods, Colored MNIST only, a few steps; tests/perf/test_gpu_check.py runs it in CI).
# TIMING: the timing flags of the perf stages. Each stage runs under its own time limit
# (SYNCS_S, SPEED_S each precision, PACK_S, PERF_S, E2E_S, AMP_S seconds). A stage that overruns
# stops (a stopped `bench perf` still writes what it measured), and the next one still runs.
# The run stores but their checkpoints are packed into OUT/results.tgz.
set -u
out="${OUT:?set OUT to the folder for the log and results}"
work="${WORK:-/tmp/gpu-check}"
mkdir -p "$out"
rm -rf "$work"
mkdir -p "$work"
export PYTHONUNBUFFERED=1 BENCH_RAW_ROOT="${RAW:-${BENCH_RAW_ROOT:-$PWD/.gpu/data}}"
export BENCH_DATA_ROOT="${DATA:-$work/data}"
exec > >(tee "$out/log.txt") 2>&1
paper_methods=vanilla,lff,lff_be,end,sd,disent,selecmix,etf_debias
if [ "${DRY_RUN:-0}" = 1 ]; then  # every stage on the CPU, each in seconds
  DEVICE=cpu
  : "${SYNC_DATASETS:=cmnist}" "${SYNC_METHODS:=vanilla,lc}" "${SPEED_METHODS:=vanilla,lc}"
  : "${SPEED_DATASETS:=cmnist}"
  : "${PERF_DATASETS:=cmnist}" "${PACK_METHODS:=vanilla,lc}" "${PACK_RATIOS:=1}"
  : "${PACK_SEEDS:=0}" "${PACK_FLAGS:=--workers 2 --threads 1}" "${E2E_METHODS:=vanilla}"
  : "${AMP_METHODS:=vanilla}" "${AMP_SEEDS:=0}" "${RUN_ARGS:=--set steps=20 --set eval_every=10}"
  : "${TIMING:=--steps 2 --warmup 1 --min-time 0 --budget 2 --threads 1 --cell-timeout 60}"
  paper_methods=vanilla
fi
device="${DEVICE:-cuda}"
timing="${TIMING:---steps 5 --warmup 2 --min-time 0.5 --budget 4 --cell-timeout 40}"

date -u
nvidia-smi -L 2>/dev/null || echo "nvidia-smi: none"
if ! command -v bench >/dev/null; then
  python3 -m pip install -q --no-deps --no-build-isolation --no-compile --target "$work/site" . || exit 3
  export PYTHONPATH="$work/site" PATH="$work/site/bin:$PATH"
fi
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"

stage() {  # NAME SECONDS COMMAND...
  local name=$1 limit=$2 t0=$SECONDS
  shift 2
  echo "== $name (at most ${limit} s)"
  timeout -k 10 "$limit" "$@"
  echo "== $name: rc=$? in $((SECONDS - t0)) s"
}

[ $# -gt 0 ] || set -- syncs speed pack perf
for what in "$@"; do
  case "$what" in
    syncs)
      # shellcheck disable=SC2086  # TIMING is a list of flags
      stage syncs "${SYNCS_S:-45}" bench perf --host-syncs --device "$device" \
        --methods "${SYNC_METHODS:-all}" \
        --datasets "${SYNC_DATASETS:-cmnist,cifar10c}" $timing --json "$out/syncs.json"
      if [ "$device" = cuda ]; then
        # shellcheck disable=SC2086
        stage syncs-torch "${SYNCS_S:-45}" bench perf --host-syncs --cuda-sync-debug \
          --device "$device" --methods "${SYNC_METHODS:-all}" \
          --datasets "${SYNC_DATASETS:-cmnist,cifar10c}" \
          $timing --json "$out/syncs-torch.json"
      else
        echo "== syncs-torch: skipped (set_sync_debug_mode is CUDA's)"
      fi ;;
    speed)
      for amp in none bf16; do
        # shellcheck disable=SC2086
        stage "speed amp=$amp" "${SPEED_S:-110}" bench perf --device "$device" --repeats 1 \
          --methods "${SPEED_METHODS:-all}" --datasets "${SPEED_DATASETS:-cifar10c,bffhq}" \
          --set "amp=$amp" $timing --json "$out/speed-$amp.json"
      done ;;
    pack)
      # shellcheck disable=SC2086  # PACK_FLAGS and RUN_ARGS are lists of flags
      stage pack "${PACK_S:-120}" bench run --device "$device" --datasets cmnist \
        --methods "${PACK_METHODS:-lc,denetdm}" --ratios "${PACK_RATIOS:-1,5}" \
        --seeds "${PACK_SEEDS:-0,1,2}" --launcher local ${PACK_FLAGS:---jobs-per-gpu 12} \
        --grace 5 --out "$work/pack" ${RUN_ARGS:-}
      python3 - "$work/pack" "$out/pack.csv" <<'PY'
import csv, json, sys
from pathlib import Path
keys = ["method", "ratio", "seed", "state", "gpu", "step", "total_steps", "steps_per_s"]
rows = []
for status in sorted(Path(sys.argv[1]).glob("*/status.json")):
    config = json.loads((status.parent / "config.json").read_text())
    found = json.loads(status.read_text())
    rows.append({k: found.get(k, config.get(k)) for k in keys})
with open(sys.argv[2], "w", newline="") as f:
    writer = csv.DictWriter(f, keys)
    writer.writeheader()
    writer.writerows(rows)
total = sum(r["steps_per_s"] or 0 for r in rows)
print(f"pack: {len(rows)} runs, {total:.0f} steps/s together -> {sys.argv[2]}")
PY
      ;;
    e2e)
      # shellcheck disable=SC2086  # RUN_ARGS is a list of flags
      stage e2e "${E2E_S:-180}" bench reproduce run --out "$work/runs" --device "$device" \
        --datasets cmnist --ratios "${E2E_RATIOS:-1}" --seeds "${E2E_SEEDS:-0}" \
        --methods "${E2E_METHODS:-vanilla,etf_debias}" --launcher local \
        --jobs-per-gpu "${JOBS_PER_GPU:-2}" --results "$out/repro" ${RUN_ARGS:-} ;;
    perf)
      # shellcheck disable=SC2086  # TIMING and PERF_ARGS are lists of flags
      stage perf "${PERF_S:-150}" bench perf --device "$device" --methods "$paper_methods" \
        --datasets "${PERF_DATASETS:-all}" --repeats 1 --project --devices 8 $timing \
        --json "$out/perf.json" ${PERF_ARGS:-} ;;
    amp)
      for amp in none bf16; do
        # shellcheck disable=SC2086  # RUN_ARGS is a list of flags
        stage "amp=$amp" "${AMP_S:-150}" bench run --device "$device" --datasets cmnist \
          --methods "${AMP_METHODS:-vanilla,etf_debias}" --ratios 1 --seeds "${AMP_SEEDS:-0,1}" \
          --preset quick --set "amp=$amp" --launcher local ${AMP_FLAGS:---jobs-per-gpu 4} \
          --out "$work/amp-$amp" ${RUN_ARGS:-}
        bench report --out "$work/amp-$amp" --table synthetic --format markdown \
          -o "$out/amp-$amp.md" && cat "$out/amp-$amp.md"
      done ;;
    *) echo "unknown stage $what (valid: syncs, speed, pack, perf, e2e, amp)" >&2; exit 2 ;;
  esac
done
# The run stores but their checkpoints (a few MB a run), so that `bench reproduce export` can
# read the runs back on another machine: a result is checked against its metrics.jsonl there.
(cd "$work" && tar -czf "$out/results.tgz" --ignore-failed-read --exclude='checkpoint.pt*' \
  runs pack amp-none amp-bf16 2>/dev/null)
ls -la "$out"
