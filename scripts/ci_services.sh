#!/usr/bin/env bash
# What the full test suite needs beyond Python, so that CI runs those tests instead of skipping:
# a LaTeX engine (the reporter's tables must compile) and a single-node Slurm (the real-Slurm
# launcher test). Both come from Debian's packages and need root; elsewhere this says what it
# skipped, and the tests that need the missing piece skip with the reason.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

if ! command -v pdflatex >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "ci_services: installing LaTeX (texlive-latex-base, texlive-latex-recommended)" >&2
        apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            texlive-latex-base texlive-latex-recommended >/dev/null
    else
        echo "ci_services: no pdflatex and no root apt-get: the LaTeX compile test will skip" >&2
    fi
fi

if [ "$(id -u)" -eq 0 ]; then
    bash "$here/slurm_local_cluster.sh" && export_slurm=1 || export_slurm=0
else
    echo "ci_services: not root: no local Slurm; the real-Slurm tests will skip" >&2
    export_slurm=0
fi
[ "$export_slurm" = 1 ] && echo "BENCH_REQUIRE_SLURM=1"
exit 0
