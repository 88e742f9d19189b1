#!/usr/bin/env bash
# What the full test suite needs beyond Python, so that CI runs those tests instead of skipping:
# a LaTeX engine (the reporter's tables must compile), a headless Chromium (the HTML report must
# render, tests/reporting/test_report_html.py) and a single-node Slurm (the real-Slurm launcher test).
# All come from Debian's packages and need root; elsewhere this says what it skipped, and the
# tests that need the missing piece skip with the reason.
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

if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1 \
    && ! command -v google-chrome >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "ci_services: installing a headless browser (chromium, fonts-dejavu-core)" >&2
        apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            chromium fonts-dejavu-core >/dev/null
    else
        echo "ci_services: no chromium and no root apt-get: the HTML report's browser tests" \
            "will skip" >&2
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
