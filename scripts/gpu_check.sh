#!/usr/bin/env bash
# The GPU checks of results/gpu/README.md, as one script for a GPU machine that has the working
# tree but not the package installed (a lent machine, a fresh cluster node). It writes its
# log and results under OUT.
#
#   OUT=/tmp/gpu RAW=/path/to/raw bash scripts/gpu_check.sh e2e perf amp
#
# RAW defaults to .gpu/data. For a machine that gets only the working tree, copy MNIST's four
# files into .gpu/data/mnist, list /.gpu/ in .git/info/exclude and send that folder along.
#
# Stages, in the order given:
# - e2e: `bench reproduce run --device cuda`. It trains Vanilla and ETF-Debias on Colored MNIST
#   at paper length, 1 %, seed 0, side by side on one GPU, and ends in the export. Needs MNIST
#   under RAW. E2E_METHODS, E2E_RATIOS, E2E_SEEDS and JOBS_PER_GPU change what it trains and how
#   many runs share the GPU (issue 41's reproduction: lc,denetdm at 1,5 and 0,1,2, 12 jobs).
# - perf: `bench perf --device cuda --project` over the paper's methods. The datasets are
#   PERF_DATASETS (default: every dataset) and the extra flags PERF_ARGS.
# - amp: the bf16 accuracy check that `amp` waits for (README, "GPU"). Vanilla and ETF-Debias
#   on Colored MNIST, float32 against `--set amp=bf16`, quick preset, seeds 0-1.
#
# DEVICE (default cuda) and RUN_ARGS (flags added to each training command, e.g. `--epochs 1`)
# let the script be tried on a CPU first.
# Each stage runs under its own time limit (E2E_S, PERF_S, AMP_S seconds). A stage that
# overruns stops, and the next one still runs. What finished is packed into OUT/results.tgz.
set -u
out="${OUT:?set OUT to the folder for the log and results}"
work="${WORK:-/tmp/gpu-check}"
mkdir -p "$out"
rm -rf "$work"
mkdir -p "$work"
export PYTHONUNBUFFERED=1 BENCH_RAW_ROOT="${RAW:-$PWD/.gpu/data}" BENCH_DATA_ROOT="$work/data"
exec > >(tee "$out/log.txt") 2>&1
paper_methods=vanilla,lff,lff_be,end,sd,disent,selecmix,etf_debias
device="${DEVICE:-cuda}"

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

for what in "$@"; do
  case "$what" in
    e2e)
      # shellcheck disable=SC2086  # RUN_ARGS is a list of flags
      stage e2e "${E2E_S:-180}" bench reproduce run --out "$work/runs" --device "$device" \
        --datasets cmnist --ratios "${E2E_RATIOS:-1}" --seeds "${E2E_SEEDS:-0}" \
        --methods "${E2E_METHODS:-vanilla,etf_debias}" --launcher local \
        --jobs-per-gpu "${JOBS_PER_GPU:-2}" --results "$work/repro" ${RUN_ARGS:-} ;;
    perf)
      # shellcheck disable=SC2086  # PERF_ARGS is a list of flags
      stage perf "${PERF_S:-600}" bench perf --device "$device" --methods "$paper_methods" \
        --datasets "${PERF_DATASETS:-all}" --repeats 1 --project --devices 8 \
        --json "$work/perf.json" ${PERF_ARGS:-} ;;
    amp)
      for amp in none bf16; do
        # shellcheck disable=SC2086  # RUN_ARGS is a list of flags
        stage "amp=$amp" "${AMP_S:-150}" bench run --device "$device" --datasets cmnist \
          --methods vanilla,etf_debias --ratios 1 --seeds 0,1 --preset quick --set "amp=$amp" \
          --launcher local --jobs-per-gpu 4 --out "$work/amp-$amp" ${RUN_ARGS:-}
        bench report --out "$work/amp-$amp" --table synthetic --format markdown \
          -o "$work/amp-$amp.md" && cat "$work/amp-$amp.md"
      done ;;
    *) echo "unknown stage $what (valid: e2e, perf, amp)" >&2; exit 2 ;;
  esac
done
# The whole run store but its checkpoints (a few MB a run), so that `bench reproduce export` can
# read the runs back on another machine: a result is checked against its metrics.jsonl there.
(cd "$work" && tar -czf "$out/results.tgz" --ignore-failed-read --exclude='checkpoint.pt*' \
  repro perf.json amp-*.md runs 2>/dev/null)
ls -la "$out"
