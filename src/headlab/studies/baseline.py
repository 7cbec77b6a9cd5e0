"""The 8L baseline: BLEU of every model of the ``baseline`` study on every test set.

Rows: pair (and layers/heads/size/seed when the study varies them); columns: test sets.
The sacreBLEU signature is kept in the table caption (all scores share one signature).
"""
from __future__ import annotations

import json
from typing import Any, Mapping

import pandas as pd

from headlab.report.tables import Table, pivot
from headlab.workflow import score_path, study_models

_VARYING = ("size", "layers", "heads", "seed")  # shown in the row label only when they vary


def inputs(config: Mapping[str, Any], name: str, scores_root: str) -> list[str]:
    study = config["studies"][name]
    return [score_path(scores_root, m, t) for m in study_models(study)
            for t in config["corpora"][m["corpus"]]["tests"]]


def scores(config: Mapping[str, Any], name: str, scores_root: str) -> pd.DataFrame:
    """One tidy row per (model, test set) with BLEU, chrF and the sacreBLEU signature."""
    study = config["studies"][name]
    rows = []
    for model in study_models(study):
        for test in config["corpora"][model["corpus"]]["tests"]:
            with open(score_path(scores_root, model, test), encoding="utf-8") as handle:
                score = json.load(handle)
            rows.append({**model, "test": test, "bleu": score["bleu"], "chrf": score.get("chrf"),
                         "signature": score.get("signature")})
    return pd.DataFrame(rows)


def table(config: Mapping[str, Any], name: str, scores_root: str) -> Table:
    tidy = scores(config, name, scores_root)
    label = ["corpus"] if tidy["corpus"].nunique() > 1 else []
    label += ["pair"] + [k for k in _VARYING if tidy[k].nunique() > 1]
    tidy["system"] = tidy[label].astype(str).agg(" ".join, axis=1)
    signatures = sorted(set(tidy["signature"].dropna()))
    study = config["studies"][name]
    caption = (f"BLEU of the {', '.join(study['heads'])} model(s), preset {study['preset']}, "
               f"layers {', '.join(study['layers'])}. sacreBLEU: {'; '.join(signatures)}")
    return pivot(tidy, index="system", columns="test", values="bleu", best=None,
                 caption=caption, label=f"tab:{name}")
