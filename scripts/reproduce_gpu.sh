#!/usr/bin/env bash
# The paper's whole grid on a GPU machine (issue 16, item 3): Table 1 (Colored MNIST, Corrupted
# CIFAR-10), Table 2 (BFFHQ, Dogs & Cats, BAR) and Tables D.1/D.2 (BAR class-wise, from the
# same BAR runs): 8 methods x 5 datasets x their ratios x seeds 0-2 = 360 runs, `--preset paper
# --protocol official`, then the same CSVs and tables as the committed CPU reproduction.
#
#   BENCH_RAW_ROOT=/data/raw OUT=/scratch/runs/paper GPUS=8 bash scripts/reproduce_gpu.sh
#
# Needs the raw data of every dataset under BENCH_RAW_ROOT and, for BAR (and the
# --set backbone=resnet18_etf variant), torchvision's ImageNet ResNet-18 weights in the torch
# cache or $BENCH_RESNET18_WEIGHTS (README, Data). Rerun the same command to resume: done runs are skipped, interrupted ones resume from their
# checkpoints, failed ones are retried. Writes, in the repository:
#   results/reproduction/<dataset>.csv      one row per done run and selection (bench reproduce)
#   results/reproduction/<dataset>.md       ours vs the paper, flagged cells with reasons
#   results/reproduction/tables.md          bench report --compare-paper: Tables 1, 2, D.1/D.2
#   results/reproduction/perf-gpu.json      bench perf --project on this GPU (the cost model)
# Expected cost: see README, "Reproduction status" (cost of the GPU grid).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$HOME/runs/paper-gpu}"
GPUS="${GPUS:-$(nvidia-smi -L 2>/dev/null | wc -l)}"
JOBS_PER_GPU="${JOBS_PER_GPU:-1}"
DATASETS="${DATASETS:-cmnist,cifar10c,bffhq,dogs_and_cats,bar}"
SEEDS="${SEEDS:-0,1,2}"
RESULTS=results/reproduction
if [ "${GPUS:-0}" -lt 1 ]; then
  echo "no GPU found (nvidia-smi -L); set GPUS=N to override" >&2
  exit 2
fi
mkdir -p "$RESULTS"

# 1. The cost model on this GPU, before anything long starts (minutes; --skip-perf to skip).
if [ "${1:-}" != "--skip-perf" ]; then
  bench perf --device cuda --project --devices "$GPUS" --json "$RESULTS/perf-gpu.json" \
    | tee "$RESULTS/perf-gpu.txt"
fi

# 2. The grid: the cheap synthetic sets first, so partial results are useful early; SelecMix
#    (the official auxiliary CIFAR ResNet-18 on every dataset) last.
common=(--preset paper --protocol official --seeds "$SEEDS" --launcher local
        --jobs-per-gpu "$JOBS_PER_GPU" --device cuda --retry-failed --out "$OUT")
status=0
for dataset in ${DATASETS//,/ }; do
  bench run --methods vanilla,etf_debias,lff,lff_be,end,sd,disent --datasets "$dataset" \
    "${common[@]}" || status=1
done
bench run --methods selecmix --datasets "$DATASETS" "${common[@]}" || status=1

# 3. The same outputs as the committed CPU reproduction, one CSV and table per dataset.
for dataset in ${DATASETS//,/ }; do
  bench reproduce export --out "$OUT" --dataset "$dataset" -o "$RESULTS/$dataset.csv"
  bench reproduce table "$RESULTS/$dataset.csv" --dataset "$dataset" \
    --readme "$RESULTS/$dataset.md" > /dev/null
done
bench report --out "$OUT" --table all --format markdown --compare-paper --protocol official \
  --preset paper > "$RESULTS/tables.md" || status=1
echo "wrote $RESULTS/{<dataset>.csv,<dataset>.md,tables.md}; runs in $OUT" >&2
exit $status
