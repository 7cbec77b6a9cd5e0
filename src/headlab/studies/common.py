"""Helpers every paper study uses: score files, the paper's reference numbers, verdicts."""
from __future__ import annotations

import json
from importlib import resources
from io import StringIO

import pandas as pd


def load_json(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def reference(csv_name: str, table: str, dtype=None) -> pd.DataFrame:
    """The rows of ``table`` in a study's reference CSV (the paper's own numbers)."""
    text = resources.files("headlab.studies").joinpath(csv_name).read_text(encoding="utf-8")
    ref = pd.read_csv(StringIO(text), dtype=dtype)
    return ref[ref["table"] == table].copy()


def verdict(hits: int, total: int) -> str:
    """A paper claim checked on ``total`` cases, ``hits`` of which agree."""
    if total == 0:
        return "not measured in this run"
    word = "holds" if hits == total else ("partly holds" if hits else "does not hold")
    return f"{word} ({hits} of {total})"
