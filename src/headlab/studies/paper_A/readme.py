"""Paper A's generated README: the scale of the run, the verdicts, the outputs."""
from __future__ import annotations

from typing import Any, Mapping

from headlab.naming import path
from headlab.studies import common
from headlab.studies.common import headline_seeds, seeds as study_seeds
from headlab.studies.paper_A.grid import FIXED, OUTDIR, eight_fixed, models
from headlab.studies.paper_A.outputs import FIGURES, TABLES
from headlab.studies import published
from headlab.studies.timing import training_time


def readme(files, provenance: Mapping[str, Any]) -> str:
    study, config = files.study, files.config
    from headlab.engine.config import resolve_preset

    preset = {**resolve_preset(study["preset"]), **config.get("training", {}).get("overrides", {}),
              **study.get("overrides", {})}
    lines = [
        "# Paper A reproduction (generated)",
        "",
        "Raganato, Scherrer, Tiedemann (2020). *Fixed Encoder Self-Attention Patterns in Transformer-Based "
        "Machine Translation*. Every table shows our number beside the paper's (`ours` / `paper`).",
        "This file is written by the workflow (`headlab study-table --readme`); do not edit it.",
        "",
        "## Scale of this run",
        "",
        "- data: " + "; ".join(f"{corpus} {', '.join(pairs)} (test: {files.test(corpus)})"
                               for corpus, pairs in study["data"].items()),
        f"- model preset `{study['preset']}`: d={preset.get('hidden_size')}, ff={preset.get('transformer_ff')}, "
        f"{preset.get('heads')} heads, {preset.get('train_steps')} training steps of "
        f"{preset.get('batch_size')} {preset.get('batch_type', 'tokens')}",
        f"- layers: T1 {', '.join(study['layers'])}; shallow decoder {study['shallow']} (paper 6+1), "
        f"deep {study['deep']} (paper 6+6)",
        "- low-resource (T2): " + ("; ".join(f"{corpus} {', '.join(pairs)}"
                                             for corpus, pairs in study["lowres"]["data"].items())
                                   + f", preset `{study['lowres']['preset']}`" if study.get("lowres") else "not configured"),
        f"- eight fixed heads (T5): {eight_fixed(study)} on the standard pairs"
        + (f" and low-resource {', '.join(study['eight_fixed_lowres'])}" if study.get("eight_fixed_lowres") else ""),
        "- high-resource (T3): " + ("configured" if study.get("highres") else "not configured (paper numbers only)"),
        f"- device: {config.get('training', {}).get('device', 'cpu')}; seeds: {study_seeds(study)} (every model), "
        f"{headline_seeds(study)} (the headline comparison: T1's {study['deep']} 8L / {FIXED} / {eight_fixed(study)}, "
        f"T2's 8L / {FIXED})",
    ]
    lines.append(f"- training: {training_time([model for model, _ in models(study)], files.root)}")
    lines.append(published.summary(published.read(files.published), "paper_A"))
    lines += common.readme_tail(provenance, path("study_output", files.root, outdir=OUTDIR, name="effects", ext="csv"),
                                [f"[{name}]({name}.md) ([csv]({name}.csv), [tex]({name}.tex))" for name in TABLES]
                                + [f"[{name}]({name}.png) ([pdf]({name}.pdf), data [{name}.csv]({name}.csv))"
                                   for name in FIGURES])
    return "\n".join(lines)
