"""The experiment grid, shared by the Snakefile and the table builders.

A *model* is identified by corpus/pair/size/preset/layers/heads/seed (``MODEL``); a study
of the config names a grid of them. Keeping the expansion here (not in the Snakefile)
lets table builders find their inputs exactly as the workflow produced them.
"""
from __future__ import annotations

from typing import Any, Iterator, Mapping

MODEL = "{corpus}/{pair}/{size}/{preset}/{layers}/{heads}/seed{seed}"
MODEL_KEYS = ("corpus", "pair", "size", "preset", "layers", "heads", "seed")


def study_models(study: Mapping[str, Any]) -> Iterator[dict[str, str]]:
    """Every model (a dict of wildcard values) of a study's grid, in config order.

    ``study["data"]`` maps corpus -> language pairs; the other grid axes are lists."""
    for corpus, pairs in study["data"].items():
        for pair in pairs:
            for size in study.get("sizes", ["full"]):
                for layers in study["layers"]:
                    for heads in study["heads"]:
                        for seed in study.get("seeds", [1]):
                            yield dict(corpus=corpus, pair=pair, size=str(size),
                                       preset=study["preset"], layers=layers, heads=heads,
                                       seed=str(seed))


def model_path(model: Mapping[str, str]) -> str:
    return MODEL.format(**{k: model[k] for k in MODEL_KEYS})


def score_path(scores_root: str, model: Mapping[str, str], test: str, ablation: str = "full") -> str:
    return f"{scores_root}/{model_path(model)}/{test}.{ablation}.json"


def results_paths(root: str) -> dict[str, str]:
    """Where the workflow's generic rules write, under the config's ``results`` folder."""
    return {name: f"{root}/{sub}" for name, sub in (
        ("data", "data"), ("models", "models"), ("translations", "translations"),
        ("scores", "scores"), ("logs", "logs"))}
