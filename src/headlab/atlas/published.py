"""The GPU sittings' head tables as atlas models of their own.

A sitting writes ``results/published/<slice>/<sitting>/atlas/<model>/heads.csv`` (with
``examples.json`` and ``timing.json``) on the GPU machine, ``headlab atlas-model`` on the
checkpoint it scored (:func:`headlab.workflow.sitting.head_atlas`): checkpoints never come
back, so the atlas reads these tables as they are, retraining and loading nothing. Each is
one model named ``GPU <slice> <sitting> <model>`` in the study group :data:`STUDY`.
"""
from __future__ import annotations

import glob
import json
import os

import pandas as pd

from headlab.errors import DataError

#: the published tree, from the workflow's directory (as :mod:`headlab.studies.published`)
ROOT = "results/published"
#: the explorer's group and the agreement's study of the published models
STUDY = "GPU sittings"


def files(root: str = ROOT) -> list[str]:
    """Every published ``heads.csv``, in slice, sitting and model order."""
    return sorted(glob.glob(os.path.join(root, "*", "*", "atlas", "*", "heads.csv")))


def label(file: str) -> str:
    """``.../A-T1-deep/2026-11-27-h100-65e2124/atlas/8L/heads.csv`` ->
    ``GPU A-T1-deep 2026-11-27-h100-65e2124 8L``: a reader sees a GPU-scale model."""
    model_dir = os.path.dirname(file)
    sitting_dir = os.path.dirname(os.path.dirname(model_dir))
    return " ".join(["GPU", os.path.basename(os.path.dirname(sitting_dir)), os.path.basename(sitting_dir),
                     os.path.basename(model_dir)])


def read(root: str = ROOT) -> dict[str, dict]:
    """label -> {"heads": the table (``model`` = the label), "examples": the explorer's
    sentences (none where the sitting wrote no ``examples.json``)}; a table that lacks a
    column of :data:`headlab.atlas.model.COLUMNS` is an error naming its file."""
    from headlab.atlas.model import COLUMNS

    out = {}
    for file in files(root):
        heads = pd.read_csv(file)
        missing = [c for c in COLUMNS if c not in heads.columns]
        if missing:
            raise DataError(f"a published head table lacks column(s) {', '.join(sorted(missing))}", path=file)
        name = label(file)
        examples_file = os.path.join(os.path.dirname(file), "examples.json")
        examples = {"sentences": []}
        if os.path.isfile(examples_file):
            with open(examples_file, encoding="utf-8") as handle:
                examples = json.load(handle)
        # the GPU side's own name (slice/sitting/model) gives way to the label the atlas shows
        out[name] = {"heads": heads.assign(model=name)[COLUMNS], "examples": examples}
    return out
