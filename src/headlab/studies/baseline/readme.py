"""The baseline's generated README."""
from __future__ import annotations

from typing import Any, Mapping


def readme(files, provenance: Mapping[str, Any]) -> str:
    """What was trained on which data (own corpora: files, sha256, lines removed), and where
    the numbers are."""
    study = files.study
    lines = ["# Baseline (generated)", "",
             "This file is written by the workflow (`headlab study-table`); do not edit it.", "",
             "- data: " + "; ".join(f"{corpus} {', '.join(pairs)}" for corpus, pairs in study["data"].items()),
             f"- preset `{study['preset']}`, layers {', '.join(study['layers'])}, heads {', '.join(study['heads'])}, "
             f"sizes {', '.join(map(str, study.get('sizes', ['full'])))}, seeds {study.get('seeds', [1])}"]
    lines += [f"- {key}: {value}" for key, value in provenance.items()]
    lines += ["", "## Outputs", "", "- [baseline](baseline.md) ([csv](baseline.csv), [tex](baseline.tex))"]
    return "\n".join(lines) + "\n"
