"""The baseline table: BLEU of every model on every test set of its corpus."""
from __future__ import annotations

import json

import pandas as pd

from headlab.naming import path, study_models
from headlab.studies.common import StudyFiles
from headlab.studies.tables import pivot

_VARYING = ("size", "layers", "heads")  # shown in the row label only when they vary


class Files(StudyFiles):
    def bleu_on(self, model, test: str) -> str:
        """A model's score on one test set (any of its corpus's, not only the first)."""
        return path("score", self.root, model, split=test, ablation="full")


def baseline(files: Files):
    runs = [(model, test) for model in study_models(files.study) for test in files.config["corpora"][model["corpus"]]["tests"]]
    inputs = [files.bleu_on(model, test) for model, test in runs]

    def build():
        rows = []
        for model, test in runs:
            with open(files.bleu_on(model, test), encoding="utf-8") as handle:
                score = json.load(handle)
            rows.append({**model, "test": test, "bleu": score["bleu"], "chrf": score.get("chrf"),
                         "signature": score.get("signature")})
        tidy = pd.DataFrame(rows)
        label = ["corpus"] if tidy["corpus"].nunique() > 1 else []
        label += ["pair"] + [key for key in _VARYING if tidy[key].nunique() > 1]
        tidy["system"] = tidy[label].astype(str).agg(" ".join, axis=1)
        study = files.study
        caption = (f"BLEU of the {', '.join(study['heads'])} model(s), preset {study['preset']}, layers "
                   f"{', '.join(study['layers'])}. sacreBLEU: {'; '.join(sorted(set(tidy['signature'].dropna())))}")
        table = pivot(tidy, index="system", columns="test", values="bleu", best=None, caption=caption,
                      label="tab:baseline", over="seed")
        return table, tidy
    return inputs, build


TABLES = {"baseline": baseline}
