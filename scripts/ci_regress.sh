#!/usr/bin/env bash
# The project's accuracy regression check: every method on every dataset whose raw data is
# here, with the `ci` preset, compared with the committed baseline (or recorded as it).
#
#   bash scripts/ci_regress.sh check  [RUNS]   # what tests/analysis/test_regress.py runs
#   bash scripts/ci_regress.sh record [RUNS]   # after a deliberate change; commit the JSON
#
# The design (docs/regression.md, "How the check was sized"): Colored MNIST's `ci` preset scores
# the whole test set (10,000 images) every 20 steps, and `bench regress sweep` trains each of
# its cells the fewest seeds (0..M-1) that bring the cell's headline allowance under 3.75 points
# (debias_bench.analysis.check_design: the sharper of the last model's test accuracy and its
# learning curve's mean), the image sets seed 0 only, which is all the budget allows (1.5x
# the time of the one-seed sweep), all in one sweep of 2 workers. The baseline holds 20 seeds
# per Colored MNIST cell and 5 per image-set cell: their spread is what another CPU's kernels
# may move a run by. `record` also runs the Colored MNIST seeds under each kernel setting older
# than this CPU's own and keeps them beside the baseline (bench regress kernels): where those
# kernels move a seed less than another seed would, the check compares each of its seeds with
# its own recorded value (docs/regression.md, "Paired by seed"). Needs BENCH_RAW_ROOT (MNIST,
# CIFAR-10, Dogs & Cats, BAR). RUNS defaults to results/ci-regress (check) and
# results/ci-regress-record (record; RUNS-kernels-NAME for the other kernels).
# BENCH_REGRESS_CMNIST_CHECK_SEEDS gives every cell of the check those seeds instead.
set -euo pipefail
cd "$(dirname "$0")/.."
verb="${1:-check}"
baseline="tests/baselines/ci_preset.json"
datasets="${BENCH_REGRESS_DATASETS:-cmnist,cifar10c,dogs_and_cats,bar}"

case "$verb" in
  check) out="${2:-results/ci-regress}" ;;
  record)
    out="${2:-results/ci-regress-record}"
    cmnist_seeds="${BENCH_REGRESS_CMNIST_SEEDS:-0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19}"
    image_seeds="${BENCH_REGRESS_SEEDS:-0,1,2,3,4}"
    ;;
  *) echo "usage: $0 check|record [RUNS]" >&2; exit 2 ;;
esac

workers=(--launcher local --workers "${BENCH_REGRESS_WORKERS:-2}")
if [ "$verb" = check ]; then
  seeds=()
  [ -n "${BENCH_REGRESS_CMNIST_CHECK_SEEDS:-}" ] && seeds=(--seeds "$BENCH_REGRESS_CMNIST_CHECK_SEEDS")
  # the runs, then the check in the same process (a failed run is a missing cell there)
  exec bench regress sweep --baseline "$baseline" --out "$out" --datasets "$datasets" \
    "${seeds[@]}" "${workers[@]}" --check --tolerance "${BENCH_REGRESS_TOLERANCE:-1.0}" </dev/null
fi

# record: every method, Colored MNIST's seeds apart (more of them), then the image sets
sweep=(--preset ci --protocol clean --ratios 5 --methods all "${workers[@]}")
images=$(echo "$datasets" | tr ',' '\n' | grep -vx cmnist | paste -sd, - || true)
has_cmnist=$(echo "$datasets" | tr ',' '\n' | grep -cx cmnist || true)
status=0
if [ "$has_cmnist" = 1 ]; then
  bench run "${sweep[@]}" --out "$out" --datasets cmnist --seeds "$cmnist_seeds" </dev/null ||
    status=$?
fi
if [ -n "$images" ]; then
  bench run "${sweep[@]}" --out "$out" --datasets "$images" --seeds "$image_seeds" </dev/null ||
    status=$?
fi
[ "$status" = 0 ] || exit "$status"  # a baseline holds finished runs only
bench regress record --out "$out" -o "$baseline"
# The Colored MNIST seeds again under each kernel setting older than this CPU's own
# (debias_bench.analysis.kernel_pairs.OLDER_KERNELS; BENCH_REGRESS_KERNELS=none skips it):
# the check compares a seed with itself where other kernels move it less than another seed
# (docs/regression.md, "Paired by seed").
if [ "$has_cmnist" = 1 ] && [ "${BENCH_REGRESS_KERNELS:-}" != none ]; then
  python -m debias_bench.analysis.kernel_pairs | while read -r name settings; do
    # shellcheck disable=SC2086 # settings: VAR=VALUE words
    env $settings bench run "${sweep[@]}" --out "$out-kernels-$name" --datasets cmnist \
      --seeds "$cmnist_seeds" </dev/null
    bench regress kernels --out "$out-kernels-$name" --baseline "$baseline" --name "$name"
  done
fi
