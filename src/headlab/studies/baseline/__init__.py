"""The 8L baseline: BLEU of every model of the ``baseline`` study on every test set.

Rows: pair (and corpus/size/layers/heads when the study varies them); columns: test sets;
several ``seeds``: each cell the mean ± sd (n) over them (the tidy rows keep one per seed).
The sacreBLEU signature goes into the caption (all scores share one)."""
from __future__ import annotations

import json
from typing import Any, Mapping

import pandas as pd

from headlab.studies.tables import pivot
from headlab.naming import model_path, results_paths, study_models

OUTDIR = "tables"
_VARYING = ("size", "layers", "heads")  # shown in the row label only when they vary


def models(study: Mapping[str, Any], root: str | None = None):
    for model in study_models(study):
        yield model, dict(study.get("overrides", {}))


class Files:
    def __init__(self, config, study, root):
        self.config, self.study, self.scores = config, study, results_paths(root)["scores"]

    def bleu(self, model, test):
        return f"{self.scores}/{model_path(model)}/{test}.full.json"


def baseline(f: Files):
    pairs = [(m, t) for m in study_models(f.study) for t in f.config["corpora"][m["corpus"]]["tests"]]
    inputs = [f.bleu(m, t) for m, t in pairs]

    def build():
        rows = []
        for model, test in pairs:
            with open(f.bleu(model, test), encoding="utf-8") as handle:
                score = json.load(handle)
            rows.append({**model, "test": test, "bleu": score["bleu"], "chrf": score.get("chrf"),
                         "signature": score.get("signature")})
        tidy = pd.DataFrame(rows)
        label = ["corpus"] if tidy["corpus"].nunique() > 1 else []
        label += ["pair"] + [k for k in _VARYING if tidy[k].nunique() > 1]
        tidy["system"] = tidy[label].astype(str).agg(" ".join, axis=1)
        study = f.study
        caption = (f"BLEU of the {', '.join(study['heads'])} model(s), preset {study['preset']}, layers "
                   f"{', '.join(study['layers'])}. sacreBLEU: {'; '.join(sorted(set(tidy['signature'].dropna())))}")
        table = pivot(tidy, index="system", columns="test", values="bleu", best=None, caption=caption,
                      label="tab:baseline", over="seed")
        return table, tidy
    return inputs, build


TABLES = {"baseline": baseline}
FIGURES: dict = {}


def readme(f: Files, provenance: Mapping[str, Any]) -> str:
    """What was trained on which data (own corpora: files, sha256, lines removed), and where
    the numbers are."""
    s = f.study
    lines = ["# Baseline (generated)", "",
             "This file is written by the workflow (`headlab study-table`); do not edit it.", "",
             "- data: " + "; ".join(f"{c} {', '.join(p)}" for c, p in s["data"].items()),
             f"- preset `{s['preset']}`, layers {', '.join(s['layers'])}, heads {', '.join(s['heads'])}, "
             f"sizes {', '.join(map(str, s.get('sizes', ['full'])))}, seeds {s.get('seeds', [1])}"]
    lines += [f"- {k}: {v}" for k, v in provenance.items()]
    lines += ["", "## Outputs", "", "- [baseline](baseline.md) ([csv](baseline.csv), [tex](baseline.tex))"]
    return "\n".join(lines) + "\n"
