"""Paper D's gates stage (the ``study_stage`` checkpoint): the masks of one seed's pruned
fine-tunes, read from that seed's gated model's converged gates."""
from __future__ import annotations

import pandas as pd

from headlab.errors import DataError
from headlab.naming import model_path
from headlab.studies.paper_D.grid import gated, stage_seed
from headlab.studies.paper_D.outputs import Files


def stage_inputs(files: Files, corpus: str, pair: str, stage: str) -> list[str]:
    return [files.gates(gated(files.study, corpus, pair, seed=stage_seed(stage)))]


def select(files: Files, corpus: str, pair: str, stage: str) -> dict:
    """The masks of one seed's pruned fine-tunes from that seed's gated model's converged gates."""
    from headlab.heads.gates import encoder_mask
    from headlab.heads.prune import invert, mask_string

    model = gated(files.study, corpus, pair, seed=stage_seed(stage))
    gates = pd.read_csv(files.gates(model))
    rows = encoder_mask(gates)
    if not rows:
        raise DataError("the gated model has no encoder gates", path=files.gates(model))
    kept = sum(map(sum, rows))
    return {"study": "paper_D", "corpus": corpus, "pair": pair, "stage": stage, "gated_model": model_path(model),
            "mask": mask_string(rows), "inverse": mask_string(invert(rows)), "kept": kept,
            "heads": sum(map(len, rows))}
