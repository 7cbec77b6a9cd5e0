"""Paper D's generated README: the scale of the run, its seeds, the verdicts, the outputs."""
from __future__ import annotations

from typing import Any, Mapping

from headlab.naming import path
from headlab.studies import common
from headlab.studies.common import corpus_pairs, first_seed, headline_seeds, seeds as study_seeds
from headlab.studies.paper_D.grid import OUTDIR, finetune_options, lambdas, models
from headlab.studies import published
from headlab.studies.timing import training_time


def readme(files, provenance: Mapping[str, Any]) -> str:
    study = files.study
    preset = files.options()
    trained = [model for model, _ in models(study, files.root)]
    lines = [
        "# Paper D reproduction (generated)",
        "",
        "Ondov et al. *Interpretability in Neural Machine Translation* (a Transformer trained on English-German "
        "translation): L0 head gates (§3) and pruned / inverse-pruned fine-tuning. Tables show our numbers beside "
        "the paper's (`ours` / `paper`). This file is written by the workflow; do not edit it.",
        "",
        "## Scale of this run",
        "",
        "- data: " + "; ".join(f"{corpus} {pair} (test: {files.test(corpus)})" for corpus, pair in corpus_pairs(study)),
        f"- converged baseline: preset `{study['preset']}` (d={preset.get('hidden_size')}, {preset.get('heads')} heads), "
        f"layers {study['layers']}, heads {study.get('heads', '8L')}, {preset.get('train_steps')} steps",
        f"- gates: hard-concrete (tau 0.33, stretch (-0.1, 1.1)) on {study.get('gate_sites', 'enc')} self-attention, "
        f"lambda_l0 {lambdas(study)[0]}; fine-tune options {finetune_options(study)}; pruned fine-tunes "
        f"{study.get('prune') or {}}",
        f"- lambda sweep: {', '.join(f'{value:g}' for value in lambdas(study))}; fixed-head model: "
        f"{study.get('fixed_heads') or 'none'}",
        "- pruned heads are masked in every forward (`-enc_head_mask`); their parameters are kept and frozen "
        "(zero gradient), not removed",
        f"- seeds: Table 3 and its curve at {headline_seeds(study)} (each seed's masks from its own gated model), the "
        f"lambda sweep at {study_seeds(study)}, the gates' tables, the join and the head profile at seed "
        f"{first_seed(study)}",
        f"- training: {training_time(trained, files.root)}",
        published.summary(published.read(files.published), "paper_D"),
        *common.readme_tail(provenance, path("study_output", files.root, outdir=OUTDIR, name="effects", ext="csv"), [
            "`T2`: converged gates 0/1 (test-time gate >= 0.5); `T2values`: the continuous gates; `F_gates`: heatmap",
            "`T3`: BLEU of baseline, gated, pruned and inverted (initial / fine-tuned); `curve`: BLEU over fine-tuning",
            "`lambda_sweep`: heads kept and BLEU per lambda; `join`: gate vs best syntactic relation per head; "
            "`fixed`: gates on the fixed-head model"]),
    ]
    return "\n".join(lines)
