#!/usr/bin/env bash
# Run by snakemake after creating this conda env (--sdm conda): headlab itself, without
# letting pip re-resolve what the env file pinned.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# OpenNMT-py 3.5.1 pins torch<2.3: install it without its dependency list (option names).
python -m pip install --no-deps OpenNMT-py==3.5.1
python -m pip install --no-deps -e "$repo"
