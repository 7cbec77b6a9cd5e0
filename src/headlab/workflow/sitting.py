"""A GPU sitting's evaluation and publication (run by the bundle's ``run.py`` once the
trainings are stopped at its deadline):

    python -m headlab.workflow.sitting --manifest BUNDLE/manifest.json --out results/published/gpu-sitting
                                       --state WORK/state.json [--device cuda|cpu] [--sentences N]

1. the **common step**: the newest ``save_checkpoint_steps`` multiple that every model has
   on disk whole (a checkpoint cut short by the stop does not load and is passed over), so
   the models are compared after the same number of updates, not the same minutes;
2. each model's checkpoint of that step translates the corpus's first test split, all
   models at once (``headlab translate``: beam 5, ``-precision fp16`` after mixed-precision
   training, as the workflow's ``translate`` rule does), then BPE removal, detruecasing and
   Moses detokenisation (:func:`headlab.data.preprocess.postprocessor`);
3. sacreBLEU BLEU and chrF with their 95% bootstrap intervals (1,000 resamples,
   :func:`headlab.eval.bleu.corpus_scores`), and sacreBLEU's paired bootstrap test of each
   model against the first (the baseline, 8L);
4. ``OUT/``: ``T1_deep.csv`` / ``T1_deep.md`` (beside paper A's numbers, which are WMT19
   de-en after 100k+ steps: the comparison is of the ordering, not the values), the
   hypotheses, ``scores.json`` and ``provenance.json`` (GPU, torch, CUDA, the commit, steps
   reached, tokens/s of each model, wall time of each phase, sacreBLEU's signatures).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from headlab.errors import HeadlabError

BEAM = 5
BOOTSTRAP = 1000
PAPER_TABLE = ("T1", "T5")   # paper A: 8L and 7Ftoken+1L in Table 1, 8Ftoken in Table 5
_TOKS = re.compile(r"Step\s+(\d+)/\s*\d+;.*?(\d+)/\s*(\d+) tok/s")


def loadable(path: Path) -> bool:
    import torch
    try:
        torch.load(path, map_location="cpu", weights_only=False, mmap=True)
        return True
    except Exception:           # cut short by the stop, or rewritten at that moment
        return False


def common_step(save_models: list[str]) -> int | None:
    """The newest step whose checkpoint every model has and loads, or None."""
    from headlab.engine.run import checkpoints

    per_model = [dict(checkpoints(save_model)) for save_model in save_models]
    shared = sorted(set.intersection(*(set(steps) for steps in per_model)), reverse=True)
    for step in shared:
        if all(loadable(steps[step]) for steps in per_model):
            return step
    return None


def throughput(log: Path) -> dict:
    """Median source and target tokens/s of a training's reports, and its last step."""
    reports = _TOKS.findall(log.read_text(errors="replace")) if log.is_file() else []
    if not reports:
        return {"last_logged_step": 0, "src_tok_s": None, "tgt_tok_s": None}
    return {"last_logged_step": int(reports[-1][0]),
            "src_tok_s": round(statistics.median(int(r[1]) for r in reports)),
            "tgt_tok_s": round(statistics.median(int(r[2]) for r in reports))}


def translate(checkpoint: Path, src: Path, hyp: Path, device: str, dtype: str, log: Path,
              max_length: int = 250) -> None:
    from headlab.engine.config import translate_precision

    cmd = [sys.executable, "-m", "headlab.cli", "translate", "-model", str(checkpoint), "-src", str(src),
           "-output", str(hyp), "-beam_size", str(BEAM), "-batch_size", "4096", "-batch_type", "tokens",
           "-max_length", str(max_length)]
    if device == "cuda":
        cmd += ["-gpu", "0"] + (["-precision", p] if (p := translate_precision(dtype)) else [])
    with open(log, "w") as out:
        result = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT)
    if result.returncode:
        raise HeadlabError(f"translation of {checkpoint} failed: see {log}")


def paired(systems: dict[str, list[str]], refs: list[str]) -> dict[str, dict]:
    """sacreBLEU's paired bootstrap (1,000 resamples) of each system against the first."""
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    named = list(systems.items())
    if len(named) < 2:
        return {}
    _, scores = PairedTest(named, {"BLEU": BLEU()}, [refs], test_type="bs", n_samples=BOOTSTRAP)()
    return {name: {"p_value": round(float(result.p_value), 4), "bootstrap_mean": round(float(result.mean), 2),
                   "bootstrap_ci": round(float(result.ci), 2)}
            for name, result in zip(scores["System"][1:], scores["BLEU"][1:])}


def paper_numbers(pair: str, layers: str) -> dict[str, tuple[str, str]]:
    """heads -> (table, BLEU) of paper A's rows for this pair and depth."""
    import csv
    reference = Path(__file__).resolve().parents[1] / "studies/paper_A/reference.csv"
    found = {}
    with open(reference, newline="") as handle:
        for row in csv.DictReader(handle):
            if (row["table"] in PAPER_TABLE and row["pair"] == pair and row["layers"] == layers
                    and row["metric"] == "bleu" and row["ablation"] == "full"):
                found.setdefault(row["system"], (row["table"], row["value"]))
    return found


def evaluate(manifest: dict, out: Path, device: str, state: dict, sentences: int | None, budget_s: float,
             logs: Path, max_length: int = 250) -> dict:
    from headlab.data.preprocess import postprocessor
    from headlab.eval.bleu import corpus_scores

    from headlab.engine.run import checkpoints

    began = time.monotonic()
    test = manifest["test"]
    # a model whose training died before its first checkpoint is left out, and named
    models = [m for m in manifest["models"] if checkpoints(m["save_model"])]
    left_out = [m["heads"] for m in manifest["models"] if m not in models]
    if not models:
        raise HeadlabError("no model wrote a checkpoint: nothing to evaluate (see the training logs)")
    step = common_step([m["save_model"] for m in models])
    if step is None:
        raise HeadlabError("no checkpoint step is common to every model: nothing to evaluate "
                           "(the trainings stopped before their first save_checkpoint_steps)")
    out.parent.mkdir(parents=True, exist_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    src_lines = Path(test["src"]).read_text(encoding="utf-8").splitlines()
    refs = Path(test["ref"]).read_text(encoding="utf-8").splitlines()
    if sentences:
        src_lines, refs = src_lines[:sentences], refs[:sentences]
    src = staging / f"{test['split']}.src"
    src.write_text("\n".join(src_lines) + "\n", encoding="utf-8")
    hyps_bpe = {m["heads"]: staging / f"{m['heads']}.bpe" for m in models}
    with concurrent.futures.ThreadPoolExecutor(len(models)) as pool:
        jobs = [pool.submit(translate, Path(f"{m['save_model']}_step_{step}.pt"), src, hyps_bpe[m["heads"]], device,
                            m["model_dtype"], logs / f"translate.{m['heads']}.log", max_length) for m in models]
        for job in jobs:
            job.result()
    translated_s = time.monotonic() - began
    post = postprocessor(test["pair"].split("-")[1])
    systems = {}
    for model in models:
        lines = [post(line) for line in hyps_bpe[model["heads"]].read_text(encoding="utf-8").splitlines()]
        systems[model["heads"]] = lines
        (staging / f"{model['heads']}.{test['split']}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        hyps_bpe[model["heads"]].unlink()
    scores = {name: corpus_scores(lines, refs, lang_pair=test["pair"], confidence=BOOTSTRAP)
              for name, lines in systems.items()}
    tests = paired(systems, refs)
    paper = paper_numbers(test["pair"], models[0]["layers"])
    rows = []
    for model in models:
        name, score = model["heads"], scores[model["heads"]]
        speed = throughput(Path(model["dir"]) / "train.log")
        table, value = paper.get(name, ("", ""))
        rows.append({"heads": name, "layers": model["layers"], "seed": model["seed"], "step": step,
                     "bleu": score["bleu"], "bleu_ci_low": score["bleu_ci_low"], "bleu_ci_high": score["bleu_ci_high"],
                     "chrf": score["chrf"], "p_vs_baseline": tests.get(name, {}).get("p_value", ""),
                     "src_tok_s": speed["src_tok_s"], "tgt_tok_s": speed["tgt_tok_s"],
                     "last_logged_step": speed["last_logged_step"], "paper_table": table, "paper_bleu": value})
    _write_tables(staging, rows, test, manifest, device, sentences)
    (staging / "scores.json").write_text(json.dumps({"scores": scores, "paired_bootstrap": tests}, indent=1) + "\n")
    provenance = {
        "headlab commit": manifest["commit"], "bundle": {k: manifest[k] for k in ("created", "config_sources",
                                                                                  "wheels")},
        "device": device, "machine": state.get("machine"), "budget_s": budget_s,
        "common_step": step, "left_out": left_out, "test": {**test, "sentences": len(refs)}, "beam_size": BEAM,
        "models": {m["heads"]: {"dir": m["dir"], "model_dtype": m["model_dtype"] if device == "cuda" else "fp32",
                                "checkpoints": state.get("models", {}).get(m["heads"], {}).get("checkpoints"),
                                **throughput(Path(m["dir"]) / "train.log")} for m in models},
        "phases_s": (state.get("calls") or [{}])[-1].get("phases", {}),
        "evaluation_wall_s": {"translate": round(translated_s, 1), "all": round(time.monotonic() - began, 1)},
        "signatures": {"bleu": scores[models[0]["heads"]]["confidence_signature"],
                       "chrf": scores[models[0]["heads"]]["chrf_signature"]},
        "created": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }
    (staging / "provenance.json").write_text(json.dumps(provenance, indent=1, sort_keys=True) + "\n")
    src.unlink()
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists():
        shutil.rmtree(out)
    os.replace(staging, out)
    return provenance


def _write_tables(folder: Path, rows: list[dict], test: dict, manifest: dict, device: str, sentences) -> None:
    import pandas as pd

    frame = pd.DataFrame(rows)
    frame.to_csv(folder / "T1_deep.csv", index=False)
    lines = [f"# Paper A, Table 1's deep row at base size: {rows[0]['layers']} on {manifest['models'][0]['corpus']} "
             f"{test['pair']}, {rows[0]['seed']}",
             "",
             f"One GPU sitting ({device}), the models trained side by side until its deadline and compared at the "
             f"newest checkpoint step they all reached (step {rows[0]['step']}); {test['split']}"
             + (f" (first {sentences} sentences)" if sentences else "") + f", beam {BEAM}. "
             "BLEU's interval is sacreBLEU's 95% bootstrap interval (1,000 resamples, centred on the resamples' mean, "
             "so it need not contain the score); p: sacreBLEU's paired bootstrap against the first row. "
             "Paper A's numbers are WMT19 de-en after a full training: compare the ordering, not the values.",
             "",
             "| heads | step | BLEU | 95% interval | chrF | p vs first | tok/s (src/tgt) | paper A |",
             "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        paper = f"{row['paper_bleu']} ({row['paper_table']})" if row["paper_bleu"] else ""
        lines.append(f"| {row['heads']} | {row['step']} | {row['bleu']:.2f} | {row['bleu_ci_low']:.2f}-"
                     f"{row['bleu_ci_high']:.2f} | {row['chrf']:.2f} | {row['p_vs_baseline']} | "
                     f"{row['src_tok_s']}/{row['tgt_tok_s']} | {paper} |")
    (folder / "T1_deep.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m headlab.workflow.sitting", description=__doc__.splitlines()[0])
    parser.add_argument("--manifest", required=True, help="the bundle's manifest.json")
    parser.add_argument("--out", required=True, help="the publication folder (replaced)")
    parser.add_argument("--state", required=True, help="the runner's state.json (machine, phases, checkpoints)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cuda, or cpu for a rehearsal")
    parser.add_argument("--sentences", type=int, default=None, help="score the first N test sentences only")
    parser.add_argument("--budget-s", type=float, default=None, help="seconds the sitting may take (default: run.py's)")
    parser.add_argument("--logs", default=".", help="where the translations' logs go")
    parser.add_argument("--max-length", type=int, default=250, help="translate's -max_length (a rehearsal: short)")
    args = parser.parse_args(argv)
    manifest = json.loads(Path(args.manifest).read_text())
    state = json.loads(Path(args.state).read_text()) if Path(args.state).is_file() else {}
    try:
        provenance = evaluate(manifest, Path(args.out), args.device, state, args.sentences, args.budget_s,
                              Path(args.logs), args.max_length)
    except HeadlabError as err:
        print(f"sitting: {err}", file=sys.stderr)
        return 1
    print(f"sitting: published {args.out} (step {provenance['common_step']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
