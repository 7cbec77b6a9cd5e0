"""Helpers every paper study uses: score files, the paper's reference numbers, verdicts."""
from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from io import StringIO
from typing import Any, Mapping

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


@dataclass
class StudyFiles:
    """Where the workflow's generic rules write what a study's tables read (each study's
    ``Files`` extends it): the config, the study's block, the results folder."""

    config: Mapping[str, Any]
    study: Mapping[str, Any]
    root: str

    def test(self, corpus) -> str:
        """The test set a study's tables score: the corpus's first."""
        return self.config["corpora"][corpus]["tests"][0]

    def _scores(self, m) -> str:
        from headlab.naming import model_path, results_paths
        return f"{results_paths(self.root)['scores']}/{model_path(m)}"

    def bleu(self, m, ablation: str = "full") -> str:
        return f"{self._scores(m)}/{self.test(m['corpus'])}.{ablation}.json"

    def options(self) -> dict:
        """The study preset's options with the config's training overrides (what its models
        were trained with, for READMEs and speeds)."""
        from headlab.engine.config import resolve_preset
        return {**resolve_preset(self.study["preset"]), **self.config.get("training", {}).get("overrides", {})}


def readme_tail(provenance: Mapping[str, Any], effects: list[tuple[str, str]], outputs: list[str]) -> list[str]:
    """The end of a generated study README: provenance lines, the paper's effects with our
    verdicts, and the list of outputs."""
    return [*[f"- {k}: {v}" for k, v in provenance.items()], "",
            "## Which effects of the paper hold here", "", "| claim | here |", "|---|---|",
            *[f"| {claim} | {v} |" for claim, v in effects], "", "## Outputs", "",
            *[f"- {line}" for line in outputs], ""]
