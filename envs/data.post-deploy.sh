#!/usr/bin/env bash
# Run by snakemake after creating this conda env (--sdm conda): headlab itself, without
# letting pip re-resolve what the env file pinned.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python -m pip install --no-deps -e "$repo"
