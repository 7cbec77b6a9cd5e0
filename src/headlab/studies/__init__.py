"""Study builders. A study module declares:

- ``OUTDIR``: its outputs go to ``<results>/<OUTDIR>/``;
- ``models(study, root=None)``: (model wildcards, OpenNMT overrides) of every model it
  trains (``root``: the results folder, for studies whose later models depend on results);
- ``Files(config, study, results_root)``: where the generic rules wrote what it reads;
- ``TABLES`` / ``FIGURES``: name -> builder(files) -> (inputs, build); ``build()`` returns
  (Table, tidy DataFrame) for tables and (tidy DataFrame, plot keywords) for figures;
- optionally ``effects(files) -> (inputs, build)``: the paper's claims judged on our runs,
  ``build()`` returning the rows of ``effects.csv`` (:mod:`headlab.studies.effects`); the
  README renders its verdicts from that file and ``results/effects.md`` lists every study's;
- optionally ``readme(files, provenance) -> str`` (a generated ``README.md``);
- optionally stages of a data-dependent DAG (paper B's grid search): ``STAGES``,
  ``stage_keys(study)`` (dicts of corpus, pair, stage, in order), ``stage_inputs(files,
  corpus, pair, stage)`` and ``select(files, corpus, pair, stage) -> dict``; the generic
  ``study_stage`` Snakemake checkpoint writes ``<results>/<OUTDIR>/stages/CORPUS/PAIR/STAGE.json``
  from ``select``, and ``models(study, root)`` reads those files to name the later models.

One generic Snakemake rule per output kind renders them (rules/tables.smk, through
:mod:`headlab.report.build`).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import time

from headlab.studies import baseline, paper_A, paper_B, paper_C, paper_D

STUDIES = {
    "baseline": baseline,
    "paper_A": paper_A,
    "paper_B": paper_B,
    "paper_C": paper_C,
    "paper_D": paper_D,
}


#: the keys of each study that hold head specs as the user writes them (``4L|gate``,
#: ``*(8L),8L|dhicm``): its models, tables and files name them by ``heads_name``
HEAD_SPECS = {"baseline": ("heads",), "paper_A": ("heads", "eight_fixed"), "paper_D": ("heads", "fixed_heads")}


def head_spec_keys(config) -> list[tuple[str, str, int | None]]:
    """(study, key, list index or None) of every head spec the config's studies set."""
    out = []
    for name in config["studies"]:
        for key in HEAD_SPECS.get(name, ()):
            value = config["studies"][name].get(key)
            if isinstance(value, list):
                out += [(name, key, i) for i in range(len(value))]
            elif value:
                out.append((name, key, None))
    return out


def name_head_specs(config) -> None:
    """Rewrite (in place) every study's head specs as their path names, so that what the
    DAG and the jobs read of a study (its Files, tables, compare groups) names each model
    exactly as its directory does; a path name reads back as the same spec."""
    from headlab.naming import heads_name

    for name, key, index in head_spec_keys(config):
        study = config["studies"][name]
        if index is None:
            study[key] = heads_name(study[key])
        else:
            study[key][index] = heads_name(study[key][index])


def study_models(config, study: str, root: str | None = None) -> list[tuple[dict, dict]]:
    """(model, overrides) of every model a study trains; with ``root``, also those that its
    finished stages name (see the module doc)."""
    return list(STUDIES[study].models(config["studies"][study], root))


def sentence_splits(config) -> dict[str, tuple[str, str]]:
    """Extra test splits of one sentence each that studies declare (``sentences(study)``:
    split -> (source, reference), e.g. paper C Figure 5's sentence); the generic
    ``sentence_split`` rule writes them for every corpus pair, to be tokenised, BPE-segmented
    (and parsed) like any test set."""
    out: dict[str, tuple[str, str]] = {}
    for name, study in config["studies"].items():
        if hasattr(STUDIES[name], "sentences"):
            out.update(STUDIES[name].sentences(study))
    return out


def stage_keys(config, study: str) -> list[dict[str, str]]:
    module = STUDIES[study]
    return list(module.stage_keys(config["studies"][study])) if hasattr(module, "STAGES") else []


def stage_inputs(config, study: str, corpus: str, pair: str, stage: str, root: str) -> list[str]:
    module = STUDIES[study]
    return module.stage_inputs(module.Files(config, config["studies"][study], root), corpus, pair, stage)


def _learning_curves(config, study: str, root: str):
    from headlab.studies.curves import figure

    return figure(config, study, root)


#: figures every study has: name -> builder(config, study, root) -> (inputs, build)
COMMON_FIGURES = {"learning_curves": _learning_curves}


#: the output name of a study's judged claims (``<outdir>/effects.csv``)
EFFECTS = "effects"
SUMMARY = "effects.md"


def judges_effects(name: str) -> bool:
    return hasattr(STUDIES[name], EFFECTS)


def study_outputs(name: str, root: str) -> list[str]:
    """The final files of one study."""
    module = STUDIES[name]
    prefix = f"{root}/{module.OUTDIR}"
    files = [f"{prefix}/{t}.{ext}" for t in module.TABLES for ext in ("csv", "md", "tex", "tidy.csv")]
    files += [f"{prefix}/{fig}.{ext}" for fig in [*module.FIGURES, *COMMON_FIGURES] for ext in ("png", "pdf", "csv")]
    if judges_effects(name):
        files.append(f"{prefix}/{EFFECTS}.csv")
    if hasattr(module, "readme"):
        files.append(f"{prefix}/README.md")
    return files


def effects_files(config, root: str) -> list[str]:
    """The ``effects.csv`` of every configured study that judges its paper's claims."""
    return [f"{root}/{STUDIES[name].OUTDIR}/{EFFECTS}.csv" for name in config["studies"] if judges_effects(name)]


def outputs(config, root: str) -> list[str]:
    """Every final file of the configured studies, and ``effects.md`` over all of them."""
    files = [path for name in config["studies"] for path in study_outputs(name, root)]
    return files + ([f"{root}/{SUMMARY}"] if effects_files(config, root) else [])


#: top-level config sections every study output may read (beside its own study and corpora)
SETTINGS = ("training", "translation", "evaluation")
#: those a search stage reads itself: the paths of the models and translations it names.
#: Evaluation settings reach a stage only through its input files (scores, gates), which
#: they rerun; as a param of the stage they reran paper D's gates stages for a figure's
#: sentence count (a checkpoint: the DAG below it is re-evaluated, and every job that
#: reads its JSON reruns).
STAGE_SETTINGS = ("training", "translation")


def config_slices(config, study: str) -> dict[str, str]:
    """What one study's tables, figures, README and publish read of the config, as compact
    JSON in three parts (its ``studies`` entry, the corpora its models use, the training /
    translation / evaluation settings): the generic rules pass them as params, so a change
    to another study reruns none of this study's outputs, and snakemake's rerun reason
    shows only the part that changed. :func:`merge_config` puts them back together.
    ``stage_settings`` replaces ``settings`` for the study's search stages
    (:data:`STAGE_SETTINGS`).

    Keys keep the config's order (no ``sort_keys``): order is meaning there (a study's
    figures and analyses take the *first* pair of its ``data``), and the job must see the
    config the DAG saw. Sorted, a paper.yaml study with several corpora had its figure's
    inputs named for one pair at DAG time and read another in the job."""
    corpora = {m["corpus"] for m, _ in study_models(config, study)}
    parts = {"study": {"studies": {study: config["studies"][study]}},
             "corpora": {"corpora": {c: v for c, v in config["corpora"].items() if c in corpora}},
             "settings": {k: config[k] for k in SETTINGS if k in config},
             "stage_settings": {k: config[k] for k in STAGE_SETTINGS if k in config}}
    return {name: json.dumps(part, separators=(",", ":")) for name, part in parts.items()}


def merge_config(parts: list[str]) -> dict:
    """The config slices of :func:`config_slices` (JSON texts) as one config dict."""
    config: dict = {}
    for text in parts:
        config.update(json.loads(text))
    return config


def scored_tests(study: str, corpus) -> list[str]:
    """The test sets of a corpus that a study scores: ``tests(corpus)`` of its module where
    it has one (paper A: the first), else all of them."""
    module = STUDIES[study]
    return list(module.tests(corpus)) if hasattr(module, "tests") else list(corpus["tests"])


def data_reports(config, study: str, root: str) -> list[str]:
    """The ``prepare-local`` reports (sha256 of each file read, lines removed and normalised)
    of every split the study's models read from local corpora (``dataset: local``)."""
    from headlab.data.local import is_local
    from headlab.naming import results_paths

    paths: dict[str, None] = {}
    for m, _ in study_models(config, study, root):
        c = config["corpora"].get(m["corpus"], {})
        if is_local(c):
            for split in [c["train"], c["valid"], *scored_tests(study, c)]:
                paths[f"{results_paths(root)['data']}/{m['corpus']}/{m['pair']}/{m['size']}/raw/{split}.report.json"] = None
    return list(paths)


def data_provenance(config, study: str, root: str) -> dict[str, str]:
    """``data CORPUS/PAIR/SIZE/SPLIT`` -> one line: the files' sha256, pairs read, removed
    (by reason) and normalised; for a study README."""
    from headlab.data.local import summary

    lines = {}
    for path in data_reports(config, study, root):
        with open(path, encoding="utf-8") as handle:
            report = json.load(handle)
        name = "/".join(path.split("/")[-5:-2] + [report["split"]])
        files = ", ".join(f"`{f['path']}` sha256 {f['sha256']}" for f in report["files"])
        lines[f"data {name}"] = f"{files}; {summary(report)}"
    return lines


def builder(config, study: str, name: str, root: str):
    if name in COMMON_FIGURES and name not in STUDIES[study].FIGURES:
        return COMMON_FIGURES[name](config, study, root)
    module = STUDIES[study]
    files = module.Files(config, config["studies"][study], root)
    kind = module.TABLES.get(name) or module.FIGURES.get(name) or (
        getattr(module, EFFECTS) if name == EFFECTS and judges_effects(study) else None)
    if kind is None:
        raise KeyError(f"study {study!r} has no output {name!r}")
    return kind(files)


def inputs(config, study: str, name: str, root: str) -> list[str]:
    if name == "README":
        module = STUDIES[study]
        prefix = f"{root}/{module.OUTDIR}"
        judged = [EFFECTS] if judges_effects(study) else []
        return ([f"{prefix}/{t}.csv" for t in [*module.TABLES, *judged]] + [f"{prefix}/{f}.csv" for f in module.FIGURES]
                + [i for n in [*module.TABLES, *module.FIGURES, *judged] for i in builder(config, study, n, root)[0]]
                + data_reports(config, study, root))
    return builder(config, study, name, root)[0]


def provenance(config) -> dict:
    try:
        commit = subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=7"], capture_output=True, text=True,
                                check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        # not a git checkout: the GPU bundle's runner names the commit it was built from
        commit = os.environ.get("HEADLAB_COMMIT", "unknown")
    import torch  # the README names the build and the accelerator the numbers came from

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    return {"headlab commit": commit, "generated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "host": f"{os.uname().nodename} ({os.cpu_count()} CPUs, GPU: {gpu})",
            "torch": torch.__version__}


def main_study_stage(argv: list[str]) -> int:
    """``headlab study-stage --study S --corpus C --pair P --stage K --results DIR
    --config-json JSON --out FILE``: one stage of a study's data-dependent search, as JSON
    (written by the generic ``study_stage`` checkpoint)."""
    from headlab.io import atomic_write

    parser = argparse.ArgumentParser(prog="headlab study-stage")
    for name in ("study", "corpus", "pair", "stage", "results", "out"):
        parser.add_argument(f"--{name}", required=True, help="(study, corpus, pair, stage, results folder, output JSON)")
    parser.add_argument("--config-json", required=True, action="append", help="the workflow's config as JSON (repeatable: merged in order)")
    args = parser.parse_args(argv)
    config = merge_config(args.config_json)
    module = STUDIES[args.study]
    files = module.Files(config, config["studies"][args.study], args.results)
    result = module.select(files, args.corpus, args.pair, args.stage)
    with atomic_write(args.out) as handle:
        json.dump(result, handle, indent=1, sort_keys=True)
    return 0
