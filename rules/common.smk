# Shared helpers: paths, the experiment grid, and the list of final outputs.
import json

import headlab.workflow
import os
import sys
from pathlib import Path

# `make run` calls .venv/bin/snakemake without activating the venv: put its bin first so
# that shell rules find `headlab` (conda envs, --sdm conda, bring their own).
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"

RESULTS = config.get("results", "results")
DATA = f"{RESULTS}/data"
MODELS = f"{RESULTS}/models"
TRANS = f"{RESULTS}/translations"
SCORES = f"{RESULTS}/scores"
TABLES = f"{RESULTS}/tables"
LOGS = f"{RESULTS}/logs"

# one model of the grid: corpus/pair/size/preset/layers/heads/seedN
MODEL = headlab.workflow.MODEL

wildcard_constraints:
    corpus=r"[A-Za-z0-9_.-]+",
    pair=r"[a-z]{2,3}-[a-z]{2,3}",
    size=r"full|[0-9]+",
    preset=r"[A-Za-z0-9_]+",
    layers=r"[0-9]+\+[0-9]+",
    heads=r"[A-Za-z0-9+*,()]+",
    seed=r"[0-9]+",
    side=r"src|tgt",
    split=r"[A-Za-z0-9_]+",
    ablation=r"full|no-h[0-9]+",
    dataset=r"[A-Za-z0-9_.-]+",


def mirror_args():
    """--mirror/--offline flags for `headlab fetch` from config[data]."""
    data = config.get("data", {})
    args = []
    if data.get("mirror"):
        mirror = Path(data["mirror"])
        if not mirror.is_absolute():
            mirror = Path(workflow.basedir) / mirror
        args += ["--mirror", str(mirror)]
    if data.get("offline"):
        args.append("--offline")
    return " ".join(args)


def corpus(name):
    return config["corpora"][name]


def lang(pair, side):
    src, tgt = pair.split("-")
    return src if side == "src" else tgt


def data_dir(w):
    return f"{DATA}/{w.corpus}/{w.pair}/{w.size}"


def model_dir(w):
    return f"{MODELS}/" + MODEL.format(**{k: w[k] for k in ("corpus", "pair", "size", "preset", "layers", "heads", "seed")})


def study_models(name):
    """Every model (as a dict of wildcards) the study's grid names."""
    return list(headlab.workflow.study_models(config["studies"][name]))


def study_overrides(w):
    """OpenNMT-py overrides for a model: config[training][overrides], then every study that
    names this model (a model shared by studies must agree, else it is ambiguous)."""
    overrides = dict(config.get("training", {}).get("overrides", {}))
    found = []
    for name, study in config["studies"].items():
        for m in study_models(name):
            if all(str(m[k]) == str(w[k]) for k in m):
                found.append((name, study.get("overrides", {})))
    distinct = {json.dumps(o, sort_keys=True) for _, o in found}
    if len(distinct) > 1:
        raise ValueError(f"studies {[n for n, _ in found]} train the same model with different overrides")
    if found:
        overrides.update(found[0][1])
    return overrides


def final_outputs():
    return [f"{TABLES}/{name}.{ext}" for name in config["studies"] for ext in ("csv", "md", "tex")]
