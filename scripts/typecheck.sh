#!/usr/bin/env bash
# Type-check the package with mypy (`tox -e lint` runs this).
#
# The repository maps its folders onto one import name (bench/ -> debias_bench, methods/ ->
# debias_bench.methods, ...: see pyproject.toml), which mypy cannot follow through an editable
# install, so this lays the same mapping out as symbolic links in a temporary folder.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
tree="$(mktemp -d)"
trap 'rm -rf "$tree"' EXIT
mkdir "$tree/debias_bench"
for entry in "$repo"/bench/*; do
  case "$(basename "$entry")" in __pycache__) continue ;; esac
  ln -s "$entry" "$tree/debias_bench/"
done
ln -s "$repo/methods" "$tree/debias_bench/methods"
ln -s "$repo/datasets" "$tree/debias_bench/datasets"
ln -s "$repo/results/reference" "$tree/debias_bench/reference"
cd "$tree"
MYPYPATH="$tree" mypy --config-file "$repo/pyproject.toml" -p debias_bench "$@"
