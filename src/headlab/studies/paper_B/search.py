"""Paper B's grid search, one stage at a time: what a stage reads (its candidates' best
checkpoints) and its choice, which the generic ``study_stage`` checkpoint writes as JSON."""
from __future__ import annotations

from headlab.errors import DataError
from headlab.naming import model_path
from headlab.studies.common import load_json
from headlab.studies.paper_B.grid import stage_models


def stage_inputs(files, corpus: str, pair: str, stage: str) -> list[str]:
    found = stage_models(files.study, files.root, corpus, pair, stage)
    if found is None:
        raise DataError(f"stage {stage} of {corpus} {pair} needs the earlier stage first")
    return [files.model_file("checkpoint", model) for model, _ in found]


def select(files, corpus: str, pair: str, stage: str) -> dict:
    """The stage file: every candidate's best validation cross-entropy, and the choice."""
    rows = []
    for model, overrides in stage_models(files.study, files.root, corpus, pair, stage):
        best = load_json(files.model_file("best_checkpoint", model))
        rows.append({"options": {option: value for option, value in overrides.items()
                                 if option in files.study["grid"][stage]},
                     "overrides": overrides, "model": model_path(model), "valid_xent": best["xent"],
                     "valid_ppl": best["ppl"], "best_step": best["step"]})
    winner = min(rows, key=lambda row: (row["valid_xent"], row["model"]))
    return {"study": "paper_B", "corpus": corpus, "pair": pair, "stage": stage,
            "chosen": winner["overrides"], "chosen_model": winner["model"], "candidates": rows}
