"""Helpers every paper study uses: score files, the paper's reference numbers, seeds, the
README's end.

Seeds (issue 22): ``seeds`` trains every model of a study at each listed seed;
``headline_seeds`` trains the models of the paper's headline comparison (each study names
them: paper A's T1 deep row and T2, paper B's T3, paper C's T1 on the analysis pair, paper
D's T3) at those seeds too (the union, in order), so that the comparison the paper is about
has several runs while the rest of the grid stays at ``seeds``. A seed changes OpenNMT-py's
``seed`` option only: parameter initialisation, dropout and the order of the batches (see
:mod:`headlab.engine.config`). Tables average a cell over its runs (``pivot(...,
over="seed")``); analyses of one model's internals (attention maps, gates, head profiles)
and the figures of one system's behaviour use the first seed.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from io import StringIO
from typing import TYPE_CHECKING, Any, Mapping

from headlab.naming import path

if TYPE_CHECKING:  # a study's grid imports this module, and planning needs no pandas
    import pandas as pd


def corpus_pairs(study: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(corpus, pair) of every language pair a study's ``data`` lists, in config order."""
    return [(corpus, pair) for corpus, pairs in study["data"].items() for pair in pairs]


def pair_label(corpus: str, pair: str) -> str:
    """How a table row or figure panel names a corpus pair: ``multi30k en-de``."""
    return f"{corpus} {pair}"


def stage_file(root: str, outdir: str, corpus: str, pair: str, stage: str) -> str:
    """The JSON a study's search stage wrote (the ``study_stage`` checkpoint)."""
    return path("stage", root, outdir=outdir, corpus=corpus, pair=pair, stage=stage)


def read_stage(root: str | None, outdir: str, corpus: str, pair: str, stage: str) -> dict | None:
    """A finished search stage's choice; None before it ran (or with no results folder)."""
    import os

    if root is None:
        return None
    file = stage_file(root, outdir, corpus, pair, stage)
    return load_json(file) if os.path.isfile(file) else None


def load_json(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def reference(study: str, table: str, dtype=None) -> "pd.DataFrame":
    """The rows of ``table`` in a study's ``reference.csv`` (the paper's own numbers)."""
    import pandas as pd

    text = resources.files(f"headlab.studies.{study}").joinpath("reference.csv").read_text(encoding="utf-8")
    ref = pd.read_csv(StringIO(text), dtype=dtype)
    return ref[ref["table"] == table].copy()


#: the significance mark of a score that compare-mt's bootstrap has no result for: not
#: judged, which an empty mark would misreport as "not significant"
UNTESTED = "n/a"


def bootstrap_row(boot: "pd.DataFrame", system: str, *needed: str) -> "pd.Series | None":
    """``system``'s row of compare-mt's bootstrap CSV (:mod:`headlab.eval.compare`); None
    where the CSV has no result for it: no row, or an empty cell among ``needed``."""
    import pandas as pd

    rows = boot[boot["system"] == system]
    if rows.empty or any(pd.isna(rows[column].iloc[0]) for column in needed):
        return None
    return rows.iloc[0]


def seeds(study: Mapping[str, Any]) -> list[str]:
    """The seeds every model of the study is trained at (``seeds``, default [1])."""
    return [str(s) for s in study.get("seeds", [1])]


def headline_seeds(study: Mapping[str, Any]) -> list[str]:
    """The seeds of the headline comparison's models: ``seeds``, then ``headline_seeds``."""
    out = seeds(study)
    return out + [str(s) for s in study.get("headline_seeds", []) if str(s) not in out]


def first_seed(study: Mapping[str, Any]) -> str:
    return seeds(study)[0]


def at_seeds(model: Mapping[str, str], which: list[str]) -> list[dict[str, str]]:
    """The model at each of ``which`` seeds (its runs)."""
    return [{**model, "seed": str(s)} for s in which]


@dataclass
class StudyFiles:
    """Where the workflow's generic rules write what a study's tables read (each study's
    ``Files`` extends it): the config, the study's block, the results folder."""

    config: Mapping[str, Any]
    study: Mapping[str, Any]
    root: str
    #: what the GPU sittings published (:mod:`headlab.studies.published`), from the
    #: workflow's directory: the tracked tree, whatever the results folder
    published: str = "results/published"

    def test(self, corpus) -> str:
        """The test set a study's tables score: the corpus's first."""
        return self.config["corpora"][corpus]["tests"][0]

    def bleu(self, model, ablation: str = "full") -> str:
        """A model's score on the study's test set (what its tables report)."""
        return path("score", self.root, model, split=self.test(model["corpus"]), ablation=ablation)

    def hyp(self, model, ablation: str = "full", split: str | None = None) -> str:
        """A model's detokenised translation of the test set (what ``bleu`` scored)."""
        return path("translation", self.root, model, split=split or self.test(model["corpus"]), ablation=ablation)

    def ref(self, model, split: str | None = None) -> str:
        """The reference the ``bleu`` rule scores a model's test translation against."""
        return path("raw", self.root, model, split=split or self.test(model["corpus"]), side="tgt")

    def model_file(self, kind: str, model, **fields) -> str:
        """Any other file of :data:`headlab.naming.PATHS` of one model (``params``,
        ``gates``, ``train_benchmark``…)."""
        return path(kind, self.root, model, **fields)

    def scored(self, model, ablation: str = "full") -> tuple[str, str, str]:
        """(translation, reference, target language) of what the ``bleu`` rule scored: a run
        of a system in :meth:`headlab.studies.effects.Judge.systems`."""
        return self.hyp(model, ablation), self.ref(model), model["pair"].split("-")[1]

    def samples(self) -> int:
        """Bootstrap resamples of the test set (``evaluation.bootstrap_samples``)."""
        return int(self.config.get("evaluation", {}).get("bootstrap_samples", 1000))

    def significance(self) -> float:
        """The level of compare-mt's marks in the tables (``evaluation.significance``, the
        ``compare`` rule's ``--p``): what a caption says its marks mean."""
        return float(self.config.get("evaluation", {}).get("significance", 0.05))

    def options(self) -> dict:
        """The study preset's options with the config's training overrides (what its models
        were trained with, for READMEs and speeds)."""
        from headlab.engine.config import resolve_preset
        return {**resolve_preset(self.study["preset"]), **self.config.get("training", {}).get("overrides", {})}


def arrows(level: float) -> str:
    """What paper B's and C's marks of a system better than its baseline mean, at the marks'
    configured ``level``: ⇑ where the bootstrap's p < 0.01, ↑ below the level above that (at
    a level of 0.01 or less, every mark is a ⇑)."""
    if level <= 0.01:
        return f"⇑: p < {level:g}"
    return f"⇑ / ↑: p < 0.01 / p < {level:g}"


def readme_tail(provenance: Mapping[str, Any], effects_csv: str, outputs: list[str]) -> list[str]:
    """The end of a generated study README: provenance lines, the paper's effects rendered
    from the study's ``effects.csv`` (:func:`headlab.studies.effects.readme_lines`), and the
    list of outputs."""
    from headlab.studies.effects import readme_lines

    return [*[f"- {k}: {v}" for k, v in provenance.items()], "", *readme_lines(effects_csv), "## Outputs", "",
            "- `effects.csv`: every claim of the paper judged here (mean difference over seeds, 95% interval, "
            "p-value and Holm's adjusted one over the paper's claims, the verdict alone and after Holm's correction)", *[f"- {line}" for line in outputs], ""]
