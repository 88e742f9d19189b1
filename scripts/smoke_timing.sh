#!/usr/bin/env bash
# How long `--preset smoke` takes on a real image set (issue 39): every method on Dogs & Cats at
# 1 %, from a fresh data root (the small build included) into a fresh run store. Prints the
# machine, its load before the sweep, the sweep's table (seconds per run) and the wall seconds.
#
#   BENCH_RAW_ROOT=../shared/data bash scripts/smoke_timing.sh [DATASET] [RATIO]
#
# The docs quote its number (docs/protocols.md, Presets): rerun it after changing the preset.
set -uo pipefail
cd "$(dirname "$0")/.."
dataset="${1:-dogs_and_cats}"
ratio="${2:-1}"
: "${BENCH_RAW_ROOT:?set BENCH_RAW_ROOT to the folder that holds the raw data (../shared/data)}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "machine: $(getconf _NPROCESSORS_ONLN) cores, ${cpu:-unknown CPU}; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
start="$(date +%s.%N)"
BENCH_DATA_ROOT="$work/data" bench run --methods all --datasets "$dataset" --ratios "$ratio" \
  --preset smoke --device cpu --out "$work/runs" 2>/dev/null
code=$?
end="$(date +%s.%N)"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python -c "print(f'smoke, every method on $dataset at $ratio %: {$end - $start:.0f} s wall (exit code $code)')"
exit "$code"
