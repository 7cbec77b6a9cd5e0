"""The 8L baseline: BLEU of every model of the ``baseline`` study on every test set."""
from __future__ import annotations

import json
from typing import Any, Mapping

import pandas as pd

from headlab.workflow import score_path, study_models


def inputs(config: Mapping[str, Any], name: str, scores_root: str) -> list[str]:
    study = config["studies"][name]
    tests = config["corpora"][study["corpus"]]["tests"]
    return [score_path(scores_root, m, t) for m in study_models(study) for t in tests]


def table(config: Mapping[str, Any], name: str, scores_root: str) -> pd.DataFrame:
    study = config["studies"][name]
    rows = []
    for model in study_models(study):
        for test in config["corpora"][study["corpus"]]["tests"]:
            with open(score_path(scores_root, model, test), encoding="utf-8") as handle:
                score = json.load(handle)
            rows.append({**model, "test": test, "bleu": score["bleu"], "chrf": score.get("chrf"),
                         "signature": score.get("signature")})
    return pd.DataFrame(rows)
