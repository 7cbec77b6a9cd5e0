"""Paper B's generated README: the scale of this run, the verdicts, the outputs."""
from __future__ import annotations

from typing import Any, Mapping

from headlab.naming import path
from headlab.studies import common
from headlab.studies.common import corpus_pairs, first_seed, headline_seeds, seeds as study_seeds
from headlab.studies.paper_B.grid import OUTDIR, STAGES, models
from headlab.studies import published
from headlab.studies.timing import training_time


def readme(files, provenance: Mapping[str, Any]) -> str:
    study = files.study
    options = files.options()
    lines = [
        "# Paper B reproduction (generated)",
        "",
        "Goindani & Shrivastava (2021). *A Dynamic Head Importance Computation Mechanism for Neural Machine "
        "Translation*. Every table shows our number beside the paper's (`ours` / `paper`).",
        "This file is written by the workflow; do not edit it.",
        "",
        "## Scale of this run",
        "",
        "- data: " + "; ".join(f"{corpus} {pair} (test: {files.test(corpus)})" for corpus, pair in corpus_pairs(study)),
        f"- model preset `{study['preset']}`: d={options.get('hidden_size')}, layers {study['layers']}, "
        f"{options.get('train_steps')} steps of {options.get('batch_size')} {options.get('batch_type', 'tokens')}, "
        f"validation every {options.get('valid_steps')} steps, the best checkpoint by validation cross-entropy",
        f"- DHICM: last layer of encoder self-, decoder self- and cross-attention, lambda_kl = {study.get('lambda_kl', 0.1)}"
        + (" (tuned by the grid)" if any("lambda_kl" in (study["grid"].get(stage) or {}) for stage in STAGES) else ""),
        "- grid: " + "; ".join(f"{stage}: " + ", ".join(f"{option} {values}" for option, values in study['grid'][stage].items())
                               for stage in STAGES),
        f"- data-size sweep: {', '.join(map(str, study.get('sizes', [])))} x {study.get('subsamples', 3)} subsamples, "
        "and the full set",
        f"- seeds: the grid search at seed {first_seed(study)}; T3's systems at {headline_seeds(study)}, the sweep at "
        f"{study_seeds(study)}",
        f"- training: {training_time([model for model, _ in models(study, files.root)], files.root)}",
        published.summary(published.read(files.published), "paper_B"),
        *common.readme_tail(provenance, path("study_output", files.root, outdir=OUTDIR, name="effects", ext="csv"), [
            "`T2`: default and chosen hyper-parameters; `T2grid`: every candidate's validation cross-entropy",
            "`T3`: T-base / T-optimal / DHICM BLEU with paired-bootstrap marks (DHICM vs T-optimal)",
            "`T4`: BLEU by training size (mean ± sd over subsamples)",
            "`importance`: DHICM importance per head (mean) and its entropy, every DHICM model",
            "`F1`, `F2`: cross-attention of T-base vs DHICM (small / full training set); `F3`: importance per "
            "token and head, last encoder layer"]),
    ]
    return "\n".join(lines)
