"""Which models the atlas characterises, and what each one's ``atlas-model`` job reads.

Config key ``atlas`` (config/schema.yaml; absent: no atlas):

* ``models``: ``headline`` (default), ``all``, or a list of model-path patterns
  (``fnmatch``, e.g. ``multi30k/en-de/*``). ``headline`` = the models of each study's
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

from fnmatch import fnmatch
from typing import Any, Mapping

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
