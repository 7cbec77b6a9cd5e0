"""Paper C's generated README: the scale of the run, the verdicts on the paper's claims, the
outputs."""
from __future__ import annotations

from typing import Any, Mapping

from headlab.naming import path
from headlab.studies import common
from headlab.studies.common import corpus_pairs, headline_seeds, seeds as study_seeds
from headlab.studies.paper_C.grid import analysis_pair, models, option_defaults
from headlab.studies.paper_C.outputs import OUTDIR, Files
from headlab.studies import published
from headlab.studies.timing import training_time


def readme(files: Files, provenance: Mapping[str, Any]) -> str:
    study = files.study
    preset = files.options()
    every = [model for model, _ in models(study, files.root)]
    translation = (f"average of the last {int(study.get('average_last', 1))} checkpoints" if files.ablation != "full"
                   else "the trained model (no checkpoint averaging)")
    lines = [
        "# Paper C reproduction (generated)",
        "",
        "Redundant heads enlivening (RHE) with syntax-enhanced attention: DEA (dependency mask, eqs. 4-5) and "
        "LPEA (local-phrase bias, eqs. 7-8), against Rel_Pos (Shaw et al. 2018) and Localness (Yang et al. 2018). "
        "Every table shows our number beside the paper's (`ours` / `paper`). This file is written by the "
        "workflow; do not edit it.",
        "",
        "## Scale of this run",
        "",
        "- data: " + "; ".join(f"{corpus} {pair} (test: {files.test(corpus)})" for corpus, pair in corpus_pairs(study))
        + f"; analyses on {' '.join(analysis_pair(study))}",
        f"- model preset `{study['preset']}`: d={preset.get('hidden_size')}, layers {study['layers']}, "
        f"{preset.get('train_steps')} steps of {preset.get('batch_size')} {preset.get('batch_type', 'tokens')}",
        f"- enhanced encoder layers: {study.get('enhanced', '1-1')}; LPEA clipping k (T1): the option default "
        f"{option_defaults().get('lpea_k')}; T3 k in {study.get('k', [])}; A2 layers {study.get('layer_ranges', [])}; "
        f"F4 fixed gates {study.get('fixed_gates', [])}; parsers {study.get('parsers', [])}",
        f"- translation: {translation}",
        f"- seeds: {study_seeds(study)} (every model), {headline_seeds(study)} (T1's Transformer, +DEA+RHE and "
        f"+LPEA+RHE on {' '.join(analysis_pair(study))})",
        f"- training: {training_time(every, files.root)}",
        published.summary(published.read(files.published), "paper_C"),
        *common.readme_tail(provenance, path("study_output", files.root, outdir=OUTDIR, name="effects", ext="csv"), [
            "`T1`: BLEU and #params of the seven systems, per pair, with paired-bootstrap marks vs the Transformer",
            "`T2`: RHE on Rel_Pos / Localness, and pruning; `T3`: LPEA+RHE by k; `A2`: by enhanced layers; "
            "`A3`: parsers (F1, BLEU); `redundant`: share of heads labelled redundant by training step",
            "`F4`: fixed vs dynamic Syn_gate; `F5`: one first-layer head's attention on the paper's sentence"]),
    ]
    return "\n".join(lines)
