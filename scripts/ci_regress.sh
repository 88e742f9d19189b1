#!/usr/bin/env bash
# The project's accuracy regression check: every method on every dataset whose raw data is
# here, with the `ci` preset, compared with the committed baseline (or recorded as it).
#
#   bash scripts/ci_regress.sh check  [RUNS]   # what tests/analysis/test_regress.py runs: seed 0
#   bash scripts/ci_regress.sh record [RUNS]   # after a deliberate change: seeds 0-4; commit the JSON
#
# The baseline holds 5 seeds per cell (BENCH_REGRESS_SEEDS): their spread is what another CPU's
# kernels may move a run by (docs/regression.md); the check trains seed 0 only. Needs
# BENCH_RAW_ROOT (MNIST, CIFAR-10, Dogs & Cats, BAR). RUNS defaults to results/ci-regress
# (check) and results/ci-regress-record (record).
set -euo pipefail
cd "$(dirname "$0")/.."
verb="${1:-check}"
out="${2:-results/ci-regress}"
baseline="tests/baselines/ci_preset.json"
datasets="${BENCH_REGRESS_DATASETS:-cmnist,cifar10c,dogs_and_cats,bar}"

case "$verb" in
  check|record) ;;
  *) echo "usage: $0 check|record [RUNS]" >&2; exit 2 ;;
esac

if [ "$verb" = record ]; then
  out="${2:-results/ci-regress-record}"
  seeds="${BENCH_REGRESS_SEEDS:-0,1,2,3,4}"
else
  seeds=0
fi
bench run --preset ci --protocol clean --methods all --datasets "$datasets" --ratios 5 \
  --seeds "$seeds" --launcher local --workers "${BENCH_REGRESS_WORKERS:-2}" --out "$out"
if [ "$verb" = record ]; then
  bench regress record --out "$out" -o "$baseline"
else
  bench regress check --out "$out" --baseline "$baseline" --tolerance "${BENCH_REGRESS_TOLERANCE:-1.0}"
fi
