"""The studies: one package per reproduced paper (and the baseline table), each filling
the contract of :class:`headlab.studies.base.Study` (read its docstring first), and what
the workflow asks of all of them: their models, outputs, config slices, stages.

Shared pieces live beside the packages: :mod:`.common` (seeds, ``StudyFiles``, stage
files), :mod:`.tables` (tables), :mod:`.effects` (claims and verdicts), :mod:`.curves`
(every study's learning curves), :mod:`.syntax_tables`, :mod:`.timing`.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import shutil
import subprocess
import time

from headlab.errors import ConfigError
from headlab.naming import path

# importing a study package registers it (headlab.studies.base.register_study)
from headlab.studies import baseline, paper_A, paper_B, paper_C, paper_D  # noqa: F401
from headlab.studies.base import CLAIMS, REGISTRY, Study

#: name -> the study (an instance of its :class:`~headlab.studies.base.Study` subclass)
STUDIES: dict[str, Study] = REGISTRY


def head_spec_keys(config) -> list[tuple[str, str, int | None]]:
    """(study, key, list index or None) of every head spec the config's studies set."""
    out = []
    for name in config["studies"]:
        for key in STUDIES[name].head_spec_keys:
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
    finished stages name (:class:`headlab.studies.base.Study`)."""
    return list(STUDIES[study].models(config["studies"][study], root))


def stage_state(config, study: str, root: str) -> tuple[tuple[str, int], ...]:
    """(file, mtime) of each search-stage choice of the study that exists: all that
    ``models(study, root)`` reads beyond the config, so a list of its models stays valid
    while this stays the same (a study without stages: always)."""
    from headlab.studies.common import stage_file

    outdir = STUDIES[study].outdir
    state = []
    for key in stage_keys(config, study):
        file = stage_file(root, outdir, key["corpus"], key["pair"], key["stage"])
        try:
            state.append((file, os.stat(file).st_mtime_ns))
        except FileNotFoundError:
            pass
    return tuple(state)


def sentence_splits(config) -> dict[str, tuple[str, str]]:
    """Extra test splits of one sentence each that studies declare (``sentences(study)``:
    split -> (source, reference), e.g. paper C Figure 5's sentence); the generic
    ``sentence_split`` rule writes them for every corpus pair, to be tokenised, BPE-segmented
    (and parsed) like any test set."""
    out: dict[str, tuple[str, str]] = {}
    for name, study in config["studies"].items():
        out.update(STUDIES[name].sentences(study))
    return out


def stage_keys(config, study: str) -> list[dict[str, str]]:
    return list(STUDIES[study].stage_keys(config["studies"][study]))


def stage_inputs(config, study: str, corpus: str, pair: str, stage: str, root: str) -> list[str]:
    entry = STUDIES[study]
    return entry.stage_inputs(entry.files(config, config["studies"][study], root), corpus, pair, stage)


def _learning_curves(config, study: str, root: str):
    from headlab.studies.curves import figure

    return figure(config, study, root)


#: figures every study has: name -> builder(config, study, root) -> (inputs, build)
COMMON_FIGURES = {"learning_curves": _learning_curves}


#: the output name of a study's judged claims (``<outdir>/effects.csv``)
EFFECTS = CLAIMS
#: the file extensions of a table and of a figure
TABLE_FILES = ("csv", "md", "tex", "tidy.csv")
FIGURE_FILES = ("png", "pdf", "csv")


def judges_effects(name: str) -> bool:
    return STUDIES[name].judges_claims


def output_file(root: str, name: str, output: str, ext: str) -> str:
    """``<root>/<outdir>/<output>.<ext>`` of study ``name`` (:data:`headlab.naming.PATHS`)."""
    return path("study_output", root, outdir=STUDIES[name].outdir, name=output, ext=ext)


def study_outputs(name: str, root: str) -> list[str]:
    """The final files of one study."""
    entry = STUDIES[name]
    files = [output_file(root, name, table, ext) for table in entry.tables for ext in TABLE_FILES]
    files += [output_file(root, name, figure, ext) for figure in [*entry.figures, *COMMON_FIGURES]
              for ext in FIGURE_FILES]
    if entry.judges_claims:
        files.append(output_file(root, name, EFFECTS, "csv"))
    return files + [output_file(root, name, "README", "md")]


def effects_files(config, root: str) -> list[str]:
    """The ``effects.csv`` of every configured study that judges its paper's claims."""
    return [output_file(root, name, EFFECTS, "csv") for name in config["studies"] if judges_effects(name)]


def summary_file(root: str) -> str:
    """``results/effects.md``: every study's claims at a glance."""
    return path("effects_summary", root)


def outputs(config, root: str) -> list[str]:
    """Every final file of the configured studies, and ``effects.md`` over all of them."""
    files = [file for name in config["studies"] for file in study_outputs(name, root)]
    return files + ([summary_file(root)] if effects_files(config, root) else [])


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
    """The config slices of :func:`config_slices` (JSON texts, ``--config-json`` of the
    commands the workflow runs) as one config dict; a slice that is no JSON object (a file
    name given by hand) is one :class:`ConfigError` line."""
    config: dict = {}
    for text in parts:
        try:
            part = json.loads(text)
        except json.JSONDecodeError as err:
            raise ConfigError(f"--config-json takes the config itself as JSON text, as the workflow passes it, "
                              f"not a file name: {text[:60]!r} is not JSON ({err})") from None
        if not isinstance(part, dict):
            raise ConfigError(f"--config-json must be a JSON object (keys of the config), got {text[:60]!r}")
        config.update(part)
    return config


def scored_tests(study: str, corpus) -> list[str]:
    """The test sets of a corpus that a study scores (paper A: the first; others: all)."""
    return list(STUDIES[study].tests(corpus))


def data_reports(config, study: str, root: str) -> list[str]:
    """The ``prepare-local`` reports (sha256 of each file read, lines removed and normalised)
    of every split the study's models read from local corpora (``dataset: local``)."""
    from headlab.data.local import is_local

    reports: dict[str, None] = {}
    for model, _ in study_models(config, study, root):
        corpus = config["corpora"].get(model["corpus"], {})
        if is_local(corpus):
            for split in [corpus["train"], corpus["valid"], *scored_tests(study, corpus)]:
                reports[path("raw_report", root, model, split=split)] = None
    return list(reports)


def data_provenance(config, study: str, root: str) -> dict[str, str]:
    """``data CORPUS/PAIR/SIZE/SPLIT`` -> one line: the files' sha256, pairs read, removed
    (by reason) and normalised; for a study README."""
    from headlab.data.local import summary

    lines = {}
    for report_file in data_reports(config, study, root):
        with open(report_file, encoding="utf-8") as handle:
            report = json.load(handle)
        name = "/".join(report_file.split("/")[-5:-2] + [report["split"]])
        files = ", ".join(f"`{f['path']}` sha256 {f['sha256']}" for f in report["files"])
        lines[f"data {name}"] = f"{files}; {summary(report)}"
    return lines


def builder(config, study: str, name: str, root: str):
    """(inputs, build) of one output of a study (a table, figure, or its claims)."""
    entry = STUDIES[study]
    if name in COMMON_FIGURES and name not in entry.figures:
        return COMMON_FIGURES[name](config, study, root)
    if name not in entry.output_names():
        raise KeyError(f"study {study!r} has no output {name!r}")
    return entry.builder(name)(entry.files(config, config["studies"][study], root))


def inputs(config, study: str, name: str, root: str) -> list[str]:
    """What one output of a study reads; the README reads every output's CSV and inputs."""
    if name == "README":
        entry = STUDIES[study]
        judged = [EFFECTS] if entry.judges_claims else []
        return ([output_file(root, study, output, "csv") for output in [*entry.tables, *judged, *entry.figures]]
                + [file for output in [*entry.tables, *entry.figures, *judged]
                   for file in builder(config, study, output, root)[0]]
                + data_reports(config, study, root))
    return builder(config, study, name, root)[0]


def provenance(config) -> dict:
    try:
        commit = subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=7"], capture_output=True, text=True,
                                check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        # not a git checkout: the GPU bundle's runner names the commit it was built from
        commit = os.environ.get("HEADLAB_COMMIT", "unknown")
    # the README names the build and the accelerator the numbers came from; torch is imported
    # (1 CPU-s) only where a GPU driver is installed, since only there can it name a GPU
    gpu = "none"
    if shutil.which("nvidia-smi"):
        import torch

        gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    return {"headlab commit": commit, "generated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "host": f"{os.uname().nodename} ({os.cpu_count()} CPUs, GPU: {gpu})",
            "torch": importlib.metadata.version("torch")}


def main_study_stage(argv: list[str]) -> int:
    """``headlab study-stage --study S --corpus C --pair P --stage K --results DIR
    --config-json JSON --out FILE``: one stage of a study's data-dependent search, as JSON
    (written by the generic ``study_stage`` checkpoint)."""
    from headlab.io import atomic_write

    parser = argparse.ArgumentParser(prog="headlab study-stage", description=main_study_stage.__doc__.split("\n\n")[0])
    for name, meaning in (("study", "the study (paper_B, ...): a key of the config's studies"),
                          ("corpus", "the corpus the search runs on"), ("pair", "its language pair, SRC-TGT"),
                          ("stage", "the study's stage of the search (paper B: stage1, stage2)"),
                          ("results", "the workflow's results folder"), ("out", "the stage's choice, JSON")):
        parser.add_argument(f"--{name}", required=True, help=meaning)
    parser.add_argument("--config-json", required=True, action="append", help="the workflow's config as JSON (repeatable: merged in order)")
    args = parser.parse_args(argv)
    config = merge_config(args.config_json)
    if args.study not in STUDIES or args.study not in config.get("studies", {}):
        raise ConfigError(f"--study {args.study!r}: not a configured study (configured: "
                          f"{', '.join(sorted(set(STUDIES) & set(config.get('studies', {}))))})", key="studies")
    entry = STUDIES[args.study]
    files = entry.files(config, config["studies"][args.study], args.results)
    result = entry.select(files, args.corpus, args.pair, args.stage)
    with atomic_write(args.out) as handle:
        json.dump(result, handle, indent=1, sort_keys=True)
    return 0
