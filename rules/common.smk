# Shared helpers: paths, the experiment grid, and the list of final outputs.
import json

import headlab.data.registry
import headlab.engine.malloc
import headlab.engine.opts
import headlab.engine.trained_code
import headlab.studies
import headlab.naming
import headlab.workflow.code_digest
import headlab.workflow.runlock
from headlab.studies import STUDIES
import os
import sys
from pathlib import Path

# `make run` calls .venv/bin/snakemake without activating the venv: put its bin first so
# that shell rules find `headlab` (conda envs, --sdm conda, bring their own).
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"

# other snakemake runs working here keep their .snakemake/incomplete and their locks
# (upstream removes both with its own: headlab.workflow.runlock.share_the_folder)
headlab.workflow.runlock.share_the_folder(Path.cwd())

# glibc's allocator as every job runs it (headlab.engine.malloc: -18% wall time on CPU);
# a user's own MALLOC_* settings win.
os.environ.update(headlab.engine.malloc.job_environ())

RESULTS = config.get("results", "results")
# 1 when the config trains and decodes on a GPU (translation, scoring, export: one GPU each)
GPU = 1 if config.get("training", {}).get("device") == "gpu" else 0
# training.precision: the GPU precision of every model (`preset`: the preset's model_dtype,
# base*: fp16 mixed precision); CPU runs train in fp32 (headlab.engine.config.model_dtype)
PRECISION = config.get("training", {}).get("precision", "preset")

# training.compile: how every training's forward runs (torch.compile's mode, or off). No part of
# a model's config or path (the same function up to float rounding, as the attention path), it
# reaches `headlab train` as its -compile default, $HEADLAB_COMPILE, which no rerun trigger
# reads: changing it retrains nothing (docs/heads.md, "Compiled training"). Absent: the
# caller's $HEADLAB_COMPILE stands.
if config["training"].get("compile") is not None:
    os.environ[headlab.engine.opts.COMPILE_VARIABLE] = config["training"]["compile"] or "off"

# GPUs of one training job (training.gpus: OpenNMT-py world_size, headlab.engine.config.gpu_options)
TRAIN_GPUS = config["training"].get("gpus", 1) * GPU

# Job priorities (greedy scheduler, profiles/local): trainings before the short jobs that
# read their checkpoints, and the steps of a staged search (paper B's grid stages, paper D's
# gates and the fine-tunes they configure) before trainings, so that each chain of stages
# starts as early as it can; otherwise the run ends on one core, waiting for its last stage.
PRIORITY = {"train": 10, "stage": 20}


def gpu_resources(gpus):
    """A job's GPU resources: `gpu`, the GPUs it holds (the SLURM executor submits
    `--gpus=N`), and `gpu_percent`, its share of one GPU's capacity: 100 / jobs_per_gpu for a
    one-GPU job, so that training.jobs_per_gpu small jobs run on one GPU at once; 100 N for N
    GPUs (never shared), on one node (`nodes=1`: `sbatch --nodes=1`; OpenNMT-py's processes
    meet at localhost). profiles/local caps gpu_percent at 100: one GPU. (Snakemake rounds
    fractional resources to integers, hence percent.)"""
    if not gpus:
        return {"gpu": 0, "gpu_percent": 0}
    if gpus > 1:
        return {"gpu": gpus, "gpu_percent": 100 * gpus, "nodes": 1}
    return {"gpu": 1, "gpu_percent": -(-100 // config["training"].get("jobs_per_gpu", 1))}


# Every artifact's path comes from one table, headlab.naming.PATHS: outputs are its
# patterns (headlab.naming.pattern), input functions its paths (headlab.naming.path,
# data_file, model_file below), so the studies, the atlas and publish read what the rules
# write. Logs are no artifacts: they stay under LOGS.
LOGS = f"{RESULTS}/logs"


def pattern(kind, **fields):
    """The output pattern of file `kind` under RESULTS (fields left out stay wildcards)."""
    return headlab.naming.pattern(kind, RESULTS, **fields)


def data_file(kind, w, **fields):
    """File `kind` of the data folder (corpus/pair/size) that the wildcards `w` name."""
    return headlab.naming.path(kind, RESULTS, data=headlab.naming.data_path(w), **fields)


def model_file(kind, w, **fields):
    """File `kind` of the model that the wildcards (or model dict) `w` name."""
    return headlab.naming.path(kind, RESULTS, {k: w[k] for k in MODEL_KEYS}, **fields)


def release_file(dataset, file):
    """A file of a fetched release (a treebank, a test suite)."""
    return headlab.naming.path("release_file", RESULTS, dataset=dataset, file=file)


# Shell commands name files of a fetched release and of a pair's data folder as text
# (`{DATA}/raw/<dataset>/...`, `{DATA}/<corpus>/<pair>/<size>/...`; a changed command would
# rerun its jobs): DATA is the folder PATHS puts both in, and the layout they assume is checked.
DATA = headlab.naming.pattern("raw", RESULTS).partition("/{corpus}/")[0]
_SHELL_LAYOUT = {
    "release_file": "{DATA}/raw/{dataset}/{file}",
    "fetched": "{DATA}/raw/{dataset}/.verified",
    "raw": "{DATA}/{corpus}/{pair}/{size}/raw/{split}.{side}",
    "vocab": "{DATA}/{corpus}/{pair}/{size}/vocab.txt",
    "vocab_side": "{DATA}/{corpus}/{pair}/{size}/vocab.{side}.txt",
}
for _kind, _layout in _SHELL_LAYOUT.items():
    if headlab.naming.pattern(_kind, RESULTS) != _layout.replace("{DATA}", DATA):
        _stop(f"headlab.naming.PATHS[{_kind!r}] = {headlab.naming.PATHS[_kind]!r}: the shell commands of "
              f"rules/*.smk expect {_layout} (change them with it)")

# one model of the grid: corpus/pair/size/preset/variant/layers/heads/seedN
MODEL = headlab.naming.MODEL
MODEL_KEYS = headlab.naming.MODEL_KEYS

wildcard_constraints:
    corpus=r"[A-Za-z0-9_.-]+",
    pair=r"[a-z]{2,3}-[a-z]{2,3}",
    size=r"full|[0-9]+(?:\.s[0-9]+)?",
    preset=r"[A-Za-z0-9_]+",
    layers=r"[0-9]+\+[0-9]+",
    variant=r"default|[A-Za-z0-9_.,=+:-]+",
    heads=r"[A-Za-z0-9_+*,.~@=]+",
    seed=r"[0-9]+",
    # fine-tunes and their checkpoints (headlab.naming: /ft_OPTIONS.../step_N); empty for
    # a model trained from scratch
    tune=headlab.naming.TUNE_PATTERN,
    side=r"src|tgt",
    split=r"[A-Za-z0-9_]+",
    ablation=r"full|no-h[0-9]+|avg[0-9]+|rhe-prune",
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
    if data.get("allow_unverified"):
        args.append("--allow-unverified")
    return " ".join(args)


def fetch_files(dataset):
    """`headlab fetch --file` arguments: only the files that the configured corpora's splits
    read (a WMT19 de-en run without Table 3 never downloads ParaCrawl); every file of a
    test suite or treebank."""
    splits = set()
    for c in config["corpora"].values():
        if c["dataset"] == dataset:
            splits |= {c["train"], c["valid"], *c["tests"]}
    rels = headlab.data.registry.get(dataset).files_for(splits)
    return ("--file " + " ".join(rels)) if rels else ""


def corpus(name):
    return config["corpora"][name]


def lang(pair, side):
    src, tgt = pair.split("-")
    return src if side == "src" else tgt


def tokenizer_arg(corpus_name, pair, side):
    """`--tokenizer NAME` where the corpus tokenises this side's language with other than Moses."""
    name = corpus(corpus_name).get("tokenizers", {}).get(lang(pair, side), "moses")
    return "" if name == "moses" else f"--tokenizer {name}"


def model_dir(w):
    return model_file("model_dir", w)


def study_models(name):
    """(model wildcards, OpenNMT overrides) of every model the study trains."""
    return headlab.studies.study_models(config, name, RESULTS)


#: stage state of every study -> {model's wildcard values: {study: its overrides}}. The DAG
#: asks for a model's overrides once per job of the model (thousands for config/paper.yaml);
#: walking every study's grid each time was most of the time a dry run took.
_TRAINED_BY: dict = {}


def _trained_index() -> dict:
    """{model's wildcard values: {study: its overrides}} of every model the config trains,
    rebuilt when a search stage's choice appears or changes (a checkpoint finished)."""
    state = tuple(headlab.studies.stage_state(config, name, RESULTS) for name in config["studies"])
    if state not in _TRAINED_BY:
        _TRAINED_BY.clear()
        index = _TRAINED_BY[state] = {}
        for name in config["studies"]:
            for m, extra in study_models(name):
                m = headlab.naming.with_variant(m, extra)
                index.setdefault(tuple(str(m.get(k, "")) for k in MODEL_KEYS), {})[name] = extra
    return _TRAINED_BY[state]


def model_code(module):
    """The ``code`` param of a rule running headlab command ``module`` on a model: the digest
    of the code it runs for the model's heads (headlab.workflow.code_digest.model_digest), so
    a changed engine or head kind reruns it. Of the wildcards only: Snakemake leaves a params
    function taking ``input`` out of its params check."""
    return lambda w: headlab.workflow.code_digest.model_digest(module, w.heads)


def module_code(*modules):
    """The ``code`` param of a rule running headlab ``modules`` on no model (their digest)."""
    return headlab.workflow.code_digest.module_digest(*modules)


def trained_by(w) -> dict:
    """{study: OpenNMT-py overrides} of the studies that train the model of wildcards ``w``."""
    return _trained_index().get(tuple(str(w[k]) for k in MODEL_KEYS), {})


def _trained_folders() -> set:
    """The folders of the models this config trains."""
    return {Path(model_file("model_dir", dict(zip(MODEL_KEYS, key)))) for key in _trained_index()}


# trained models whose code has changed since: named when the DAG is built, not retrained
# (a model's path names its options, not its code: headlab.engine.trained_code)
if workflow.is_main_process:
    for _line in headlab.engine.trained_code.report(RESULTS, _trained_folders):
        print(f"headlab: {_line}", file=sys.stderr)


def study_overrides(w):
    """OpenNMT-py overrides for a model: config[training][overrides], then those of the
    studies that train it (the path's variant names them, so studies sharing a model
    agree by construction; the check guards a study whose variant name hides a difference)."""
    overrides = dict(config.get("training", {}).get("overrides", {}))
    found = trained_by(w)
    if len({json.dumps(o, sort_keys=True) for o in found.values()}) > 1:
        raise ValueError(f"studies {sorted(found)} train {model_dir(w)} with different overrides")
    for extra in found.values():
        overrides.update(extra)
    return overrides


def translate_precision_args(w):
    """`-precision fp16` where the model trained in mixed precision on GPU (OpenNMT-py's
    fp16 translation), else nothing (float32)."""
    import headlab.engine.config as onmt_config
    options = {**onmt_config.resolve_preset(w.preset), **study_overrides(w)}
    dtype = onmt_config.model_dtype(options, "gpu" if GPU else "cpu", PRECISION)
    precision = onmt_config.translate_precision(dtype)
    return f"-precision {precision}" if precision else ""


def final_outputs():
    import headlab.atlas.select
    return headlab.studies.outputs(config, RESULTS) + headlab.atlas.select.outputs(config, RESULTS)
