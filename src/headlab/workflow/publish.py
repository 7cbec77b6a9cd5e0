"""Publish a finished study run as a small folder meant for git, with its provenance.

    headlab publish --study paper_A --results results --config-json JSON --out results/published/paper_A

What a reader needs to check the numbers without the models (a few MB at most):

- the study's outputs: tables (.csv, .md), figures (.png and their data .csv), README.md;
- beside them, each model's files at their paths under the results folder
  (:data:`headlab.naming.PATHS`):
- ``scores/<model>/``: every score file of the study's models (BLEU and chrF JSON with the
  sacreBLEU signature, for each test set and head ablation; contrastive-suite CSVs);
- ``translations/<model>/<test>.full.txt``: the detokenised hypotheses of each test set
  (ablated runs are left out: they are rebuilt from the model);
- ``models/<model>/``: the OpenNMT-py config (``onmt.yaml``) and the snakemake benchmark of
  its training (wall time, peak memory);
- ``provenance.json``: headlab commit, time, host, CPUs, GPU, torch build, the
  study's config (its entry, corpora and training/translation/evaluation settings), the
  training wall time of each model, and for own corpora (``dataset: local``) the report of
  every split read: path and sha256 of each file, lines removed and normalised.

Checkpoints and data are never copied. The folder is assembled beside ``--out`` and
renamed into place once complete, so an interrupted publish leaves the old one intact.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from pathlib import Path

import pandas as pd

from headlab.errors import ConfigError
from headlab.naming import PATHS, model_path, path


def _copy(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest)


def _benchmark(path: Path) -> dict | None:
    if not path.is_file():
        return None
    row = pd.read_csv(path, sep="\t").iloc[-1]
    return {"wall_s": float(row["s"]), "max_rss_mb": float(row["max_rss"])}


def collect(config: dict, study: str, results: str | os.PathLike) -> list[tuple[Path, str]]:
    """(source file, path inside the published folder) for everything that is published."""
    from headlab.studies import study_models, study_outputs

    root = Path(results)
    files = []
    for out in study_outputs(study, str(root)):
        if out.endswith((".csv", ".md", ".png")):
            files.append((Path(out), Path(out).name))
    seen = set()
    for m, _ in study_models(config, study, str(root)):
        model = model_path(m)
        if model in seen:
            continue
        seen.add(model)
        scores = Path(path("model_scores", str(root), m))
        model_files = sorted(scores.glob("*.json")) + sorted(scores.glob("*.csv"))
        model_files += [Path(path("translation", str(root), m, split=test, ablation="full"))
                        for test in config["corpora"][m["corpus"]]["tests"]]
        model_files += [Path(path(kind, str(root), m)) for kind in ("onmt_config", "train_benchmark")]
        # published at their paths in the results folder
        files += [(p, p.relative_to(root).as_posix()) for p in model_files]
    missing = [str(src) for src, _ in files if not src.is_file()]
    if missing:
        raise ConfigError(f"study {study!r} has not finished: {len(missing)} files missing, first "
                          f"{missing[0]} (run the workflow for it first)", key=study)
    return files


def provenance(config: dict, study: str, results: str | os.PathLike) -> dict:
    from headlab.studies import data_reports, provenance as run_provenance, study_models

    training = {}
    for m, _ in study_models(config, study, str(results)):
        model = model_path(m)
        training[model] = _benchmark(Path(path("train_benchmark", str(results), m)))
    data = {}
    # own corpora: sha256 of every file read, by the report's path in its data folder (corpus/pair/size/...)
    data_root = Path(f"{results}/" + PATHS["raw_report"].partition("{data}")[0])
    for report in data_reports(config, study, str(results)):
        data[Path(report).relative_to(data_root).as_posix()] = json.loads(Path(report).read_text(encoding="utf-8"))
    return {**run_provenance(config), "study": study, "config": config, "training": training, "data": data,
            "training_wall_s_total": round(sum(t["wall_s"] for t in training.values() if t), 1)}


def publish(config: dict, study: str, results: str | os.PathLike, out: str | os.PathLike) -> int:
    """Write the published folder; returns its size in bytes."""
    if study not in config.get("studies", {}):
        raise ConfigError(f"study {study!r} is not in the config; configured: "
                          f"{', '.join(config.get('studies', {})) or 'none'}", key="studies")
    files = collect(config, study, results)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for src, rel in files:
            _copy(src, staging / rel)
        (staging / "provenance.json").write_text(
            json.dumps(provenance(config, study, results), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.chmod(staging, 0o755)
        old = out.with_name(f".{out.name}.old")
        if out.exists():
            os.replace(out, old)
        os.replace(staging, out)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return sum(p.stat().st_size for p in out.rglob("*") if p.is_file())


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="headlab publish", description=__doc__.split("\n\n")[0])
    parser.add_argument("--study", required=True, help="the study whose outputs are published")
    parser.add_argument("--results", required=True, help="the workflow's results folder")
    parser.add_argument("--config-json", required=True, action="append",
                        help="the workflow config as JSON, or slices of it (repeatable)")
    parser.add_argument("--out", required=True, help="the folder to write (replaced when complete)")
    args = parser.parse_args(argv)
    from headlab.studies import merge_config

    size = publish(merge_config(args.config_json), args.study, args.results, args.out)
    print(f"headlab publish: {args.out} ({size / 1e6:.1f} MB)")
    return 0
