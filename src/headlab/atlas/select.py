"""Which models the atlas characterises, and what each one's ``atlas-model`` job reads.

Config key ``atlas`` (config/schema.yaml; absent: no atlas):

* ``models``: ``headline`` (default), ``all``, or a list of model-path patterns
  (``fnmatch`` on the whole path, e.g. ``multi30k/en-de/*``; one that matches no model is a
  config error when the DAG is built, :func:`check_patterns`). ``headline`` = the models of each study's
  headline comparison (:meth:`headlab.studies.base.Study.is_headline`) and every model with head gates, DHICM, RHE heads
  or a head mask, in any study, each at its study's first seed: the other seeds of a
  headline comparison repeat the same kinds at the same sizes, so their heads add rows but
  no kind (``all`` or a pattern such as ``*/seed2`` characterises them too);
* ``valid_sentences``, ``treebank_sentences``, ``examples``, ``batch_size``: sizes of the
  passes (:mod:`headlab.atlas.model`); ``treebank``: gold trees of the syntactic profile
  (``ud-en_ewt``, ``ud-en_pud``, ``spacy-SPLIT``; null: none), English-source models only;
* ``bleu``: true asks for the test-time ΔBLEU of every encoder head of every atlas model
  (paper A's ablation ``no-hK``: head K disabled in every encoder layer); otherwise only
  the models whose study computes it already have it (paper A Table 4's 7Ftoken+1L).

The explorer lists every model of every study; models outside the selection are listed
as not characterised.
"""
from __future__ import annotations

import difflib
import re
from fnmatch import fnmatch
from typing import Any, Mapping

from headlab.errors import ConfigError
from headlab.globs import overlap
from headlab.naming import model_path, parse_heads_name, parse_tune, path

DEFAULTS = {"models": "headline", "valid_sentences": 100, "treebank": "ud-en_ewt", "treebank_sentences": 100,
            "examples": 3, "batch_size": 32, "bleu": False}
OUTDIR = "atlas"


def settings(config: Mapping[str, Any]) -> dict | None:
    """The ``atlas`` section with its defaults, or None (no atlas)."""
    section = config.get("atlas")
    if section is None or section is False:
        return None
    return {**DEFAULTS, **(section if isinstance(section, Mapping) else {})}


def special(m: Mapping[str, str]) -> bool:
    """A model with head gates, DHICM, RHE heads or a head mask (always in the headline set)."""
    specs = parse_heads_name(m["heads"])
    text = " ".join(specs.values())
    segments, _ = parse_tune(m.get("tune", ""))
    tuned = any("gate" in s or "enc_head_mask" in s for s in segments)
    return tuned or "gate" in text or "dhicm" in text or "RHE" in text


def run_models(config, root: str) -> dict[str, dict]:
    """Every model of every configured study: path -> {"model": dict, "studies": [names]},
    in study order (the explorer's list)."""
    from headlab.studies import study_models

    out: dict[str, dict] = {}
    for name in config["studies"]:
        for m, _ in study_models(config, name, root):
            m = {**m, "tune": m.get("tune", "")}
            entry = out.setdefault(model_path(m), {"model": m, "studies": []})
            if name not in entry["studies"]:
                entry["studies"].append(name)
    return out


def selected(config, root: str) -> dict[str, dict]:
    """The run's models the atlas characterises (path -> entry of :func:`run_models`)."""
    from headlab.studies.common import first_seed

    atlas = settings(config)
    if atlas is None:
        return {}
    models = run_models(config, root)
    choice = atlas["models"]
    if choice == "all":
        return models
    if isinstance(choice, list):
        return {p: e for p, e in models.items() if any(fnmatch(p, pattern) for pattern in choice)}
    from headlab.studies import STUDIES

    keep = {}
    # each study says which of its models its paper's headline compares (paper A: Table 1's
    # deep row and Table 4's system; paper B: Table 3; paper C: Table 1; others: all)
    headline = {name: STUDIES[name].is_headline(config["studies"][name], root) for name in config["studies"]}
    for folder, entry in models.items():
        m = entry["model"]
        first = [name for name in entry["studies"] if m["seed"] == first_seed(config["studies"][name])]
        if first and (special(m) or any(headline[name](m) for name in first)):
            keep[folder] = entry
    return keep


def check_patterns(config) -> None:
    """Each ``atlas.models`` pattern matches a model the config trains, or could match one
    that a search names later: else the atlas would leave it out silently (fnmatch on the
    whole path, so ``en-de/*`` matches nothing: paths start with the corpus)."""
    atlas = settings(config)
    if atlas is None or not isinstance(atlas["models"], list):
        return
    known = list(run_models(config, None))     # no results folder: what the config alone names
    later = later_paths(config)
    for index, pattern in enumerate(atlas["models"]):
        if any(fnmatch(known_path, pattern) for known_path in known) or any(overlap(pattern, path) for path in later):
            continue
        example = f", e.g. {_example(pattern, known)!r}" if known else ""
        raise ConfigError(f"pattern {pattern!r} matches no model this config trains: patterns are matched against "
                          f"whole model paths (corpus/pair/size/preset/variant/layers/heads/seedN){example}",
                          key=f"atlas.models[{index}]")


def later_paths(config) -> list[str]:
    """The paths of the models the studies' searches may name once their stages have run
    (paper B's T-optimal and DHICM finals at each choice its grids allow, paper D's pruned
    fine-tunes, their head mask a placeholder), as patterns: a ``*``, ``?`` or ``[`` in a
    path (a mixer's heads name, ``*4L.4L~dhicm``) is escaped, a character like any other."""
    from headlab.studies import STUDIES

    return [re.sub(r"([*?\[])", r"[\1]", model_path(model)) for name, study in config["studies"].items()
            for model in STUDIES[name].later_models(study)]


def _example(pattern: str, paths: list[str]) -> str:
    """The model path most like ``pattern``, among those holding all its literal parts if any do."""
    parts = [part.strip("/") for part in re.split(r"[*?\[\]]", pattern) if part.strip("/")]
    holding = [p for p in paths if all(part in p for part in parts)] or paths
    return (difflib.get_close_matches(pattern, holding, n=1, cutoff=0) or holding)[0]


def bleu_scores(config, root: str, m: Mapping[str, str]) -> dict[str, str]:
    """``-bleu`` score files of one atlas model: full and each encoder head K disabled in
    every layer (first test set), where a study computes them or ``atlas.bleu`` asks."""
    from headlab.heads.spec import parse_spec
    from headlab.studies import STUDIES

    atlas = settings(config) or {}
    # a study that translates with each head disabled (paper A's Table 4) computes them anyway
    ablated = any(STUDIES[name].ablates_heads(study, m) for name, study in config["studies"].items())
    if not (ablated or atlas.get("bleu")):
        return {}
    enc_layers = int(m["layers"].split("+")[0])
    heads = min(layer.num_heads for layer in parse_spec(parse_heads_name(m["heads"])["enc"], enc_layers, "enc"))
    test = config["corpora"][m["corpus"]]["tests"][0]
    out = {"full": path("score", root, m, split=test, ablation="full")}
    out.update({str(k): path("score", root, m, split=test, ablation=f"no-h{k}") for k in range(1, heads + 1)})
    return out


def model_dir(root: str, m: Mapping[str, str]) -> str:
    """One model's atlas folder (``heads.csv``, ``examples.json``, ``timing.json``)."""
    return path("atlas_model", root, m, part="").rstrip("/")


#: the atlas's final files, beside its index (``atlas/<part>``)
INDEX_FILES = ("index.html", "agreement.csv", "agreement.md", "claims.csv", "claims.md", "agreement.png")


def outputs(config, root: str) -> list[str]:
    """The atlas's final files (none without an ``atlas`` section)."""
    if settings(config) is None:
        return []
    return [path("atlas_index", root, part=part) for part in INDEX_FILES]
