"""A GPU sitting's evaluation and publication (run by the bundle's ``run.py`` once the
trainings have stopped, by their stop rule or the deadline):

    python -m headlab.workflow.sitting --manifest BUNDLE/manifest.json --out results/published/SLICE/SITTING
        --state WORK/state.json --sitting SITTING --gpu h100 --deadline-s 100 [--device cuda|cpu] [--sentences N]

It never publishes nothing: before anything slow it writes the folder as it stands, labelled
(``status`` partial, ``lacks`` what is missing, ``lacks_by_cause`` why: :data:`LACK_CAUSES`):
each model's learning curve, its stop, the speed rows. Then, within the deadline:

1. each model's **best validation checkpoint** (lowest validation cross-entropy of
   ``<save_model>.valid.csv``, headlab's ``-model_selection valid_loss``; the newest
   checkpoint that loads where the training never validated, said so in ``criterion``);
2. those checkpoints translate the corpus's first test split, all at once, each from its
   own source with the options it was trained with (the manifest's ``test_src`` and
   ``translate_args``: a syntax model's featured source; beam 5, ``-precision fp16``
   after mixed-precision training), then BPE removal, detruecasing and
   Moses detokenisation, in two chunks (the first 250 sentences, then the rest); a
   translation still running at the deadline is stopped and the sentences every model
   translated in whole chunks are scored, the rest listed in ``lacks`` and each such row
   ``partial`` (a model's seed is a row scored on the whole test set); a model whose
   translation failed is left out (its row ``partial``), the others scored;
3. sacreBLEU BLEU and chrF with 95% bootstrap intervals, sacreBLEU's paired bootstrap of
   each model against the first of its seed (``scores.json``);
4. the head atlas of each evaluated checkpoint (:func:`head_atlas`: ``headlab atlas-model``
   over the first validation sentences, on the GPU), written once the scores are
   published and skipped, said in ``lacks``, when too little time is left.

The folder (the contract with the table renderer, docs/gpu-cluster.md): ``rows.csv``
(:data:`headlab.workflow.gpu_plan.ROW_COLUMNS`; ``step`` the last step trained,
``best_step`` the checkpoint evaluated, ``selected_by`` how: :func:`eval_checkpoint`'s
criterion, ``model`` the sitting's name of the model, which names its files, ``recipe`` the
digest of what trained it: :func:`recipes`, the whole recipe in ``provenance.json``),
``provenance.json``, ``learning_curve.<model>.csv``,
``throughput.csv``, the hypotheses, ``scores.json`` and ``atlas/<model>/heads.csv`` (with
``timing.json`` and ``examples.json``: what the CPU side's atlas reads, checkpoints never
coming back).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from headlab.errors import HeadlabError
from headlab.studies.published import AVERAGED, BY_INITIAL, BY_NEWEST, BY_VALIDATION
from headlab.workflow import recipe, sitting_speed
from headlab.workflow.gpu_plan import ROW_COLUMNS
# seconds kept back from the deadline for scoring and the last write: the runner's figures,
# which the plan's evaluation reserves are checked against
from headlab.workflow.gpu_runner import SCORING_S

BEAM = 5
BOOTSTRAP = 1000
#: the first chunk translated (sentences): what a deadline still leaves scored; the second
#: chunk (the rest) costs one more start of each translation (~10 s on a GPU)
FIRST_CHUNK = {"cuda": 250, "cpu": 4}
#: the head atlas (:func:`head_atlas`): validation sentences characterised (a CPU rehearsal:
#: a few, to keep its cost small), the seconds that must be left to start it (process
#: start, base-model load, passes and per-layer ablations, the models at once; on a shared
#: 2-core CPU one 6+6 base model over 2 sentences took 35 s, 27 of them ablations; the GPU's
#: figure is an estimate) and those kept back for the last write
ATLAS_SENTENCES = {"cuda": 100, "cpu": 2}
ATLAS_MIN_S = {"cuda": 45, "cpu": 60}
ATLAS_MARGIN_S = 3
_TOKS = re.compile(r"Step\s+(\d+)/\s*\d+;.*?(\d+)/\s*(\d+) tok/s")
EARLY_STOP = "Early Stop!"
DIVERGED_NATS = 0.5


def loadable(path: Path) -> bool:
    import torch
    try:
        torch.load(path, map_location="cpu", weights_only=False, mmap=True)
        return True
    except Exception:           # cut short by the stop, or rewritten at that moment
        return False


def throughput(log: Path) -> dict:
    """Median source and target tokens/s of a training's reports, and its last step."""
    reports = _TOKS.findall(log.read_text(errors="replace")) if log.is_file() else []
    if not reports:
        return {"last_logged_step": 0, "src_tok_s": None, "tgt_tok_s": None}
    return {"last_logged_step": int(reports[-1][0]),
            "src_tok_s": round(statistics.median(int(r[1]) for r in reports)),
            "tgt_tok_s": round(statistics.median(int(r[2]) for r in reports))}


def curve(model: dict) -> list[dict]:
    from headlab.engine.logs import parse_log
    log = Path(model["dir"]) / "train.log"
    if not log.is_file():
        return []
    with open(log, encoding="utf-8", errors="replace") as handle:
        return parse_log(handle)


def stop_of(model: dict, rows: list[dict], rc, patience) -> tuple[str, str]:
    """(status, stop_reason) of a training from its log, its curve and its exit status."""
    log = Path(model["dir"]) / "train.log"
    text = log.read_text(errors="replace") if log.is_file() else ""
    train = [row["xent"] for row in rows if row["split"] == "train"]
    last = max((row["step"] for row in rows if row["split"] == "train"), default=0)
    # diverged: the last three reports all 0.5 nats above the best one (report noise at 4k-token
    # batches is ~0.2; the H200 sitting's divergence went from 2.3-2.5 to 3.3-3.9)
    if any(not math.isfinite(x) for x in train) or (len(train) >= 6 and min(train[-3:]) > min(train) + DIVERGED_NATS):
        return "diverged", f"training cross-entropy rose from {min(train):.2f} to {train[-1]:.2f} by step {last}"
    if EARLY_STOP in text:
        return "converged", f"no valid improvement for {patience} checks (stopped at step {last})"
    if rc == 0:
        # ended by itself without an early stop: it trained every step it was given (a chain's
        # fine-tune of fixed length, as the paper's; the runner stops the others at the clock)
        return "converged", f"trained all its planned steps (step {last})"
    # (``rc``: the exit status of a training that ended before the deadline by itself; one the
    # runner stopped at the deadline has none)
    if isinstance(rc, int) and rc > 0:
        return "partial", f"training exited with status {rc} at step {last}"
    if isinstance(rc, int) and rc < 0:
        return "partial", f"training killed by signal {-rc} at step {last} (before the deadline)"
    return "deadline", f"deadline at step {last}"


def eval_checkpoint(model: dict) -> dict | None:
    """step, best_step and criterion of the checkpoint a model is evaluated at (None: none loads)."""
    from headlab.engine.run import checkpoints
    from headlab.engine.selection import read_history

    on_disk = dict(checkpoints(model["save_model"]))
    # a fine-tune's initial checkpoint (the parent's, masked) is its only one: never validated,
    # and no clock chose it
    newest = BY_INITIAL if model.get("evaluate_only") else BY_NEWEST
    history = read_history(Path(model["save_model"] + ".valid.csv"))
    for row in sorted(history, key=lambda r: (r["xent"], r["step"])):
        if row["step"] in on_disk and loadable(on_disk[row["step"]]):
            return {"step": row["step"], "path": str(on_disk[row["step"]]), "valid_xent": row["xent"],
                    "criterion": BY_VALIDATION}
    for step in sorted(on_disk, reverse=True):
        if loadable(on_disk[step]):
            return {"step": step, "path": str(on_disk[step]), "valid_xent": None,
                    "criterion": newest}
    return None


def params_of(path: str) -> int | None:
    import torch
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=False, mmap=True)
    except Exception:
        return None
    return sum(t.numel() for part in ("model", "generator") for t in (checkpoint.get(part) or {}).values()
               if hasattr(t, "numel"))


def translate_until(jobs: dict[str, dict], device: str, deadline: float, max_length: int, logs: Path,
                    failures: dict | None = None) -> dict:
    """Translate every model's source (its own: a syntax model reads the featured one) in
    chunks (:data:`FIRST_CHUNK` sentences, then the rest), the models at once, each chunk a
    ``headlab translate`` of its own: OpenNMT-py 3.5.1 writes a translation only when its
    whole inference bucket (16,384 sentences) is done, so a translation stopped at
    ``deadline`` (monotonic) keeps only its finished chunks. A chunk an earlier call
    finished from the same checkpoint and source is kept, not translated again (a later
    call completing the evaluation: its stamp ``<hyp>.done``). Writes each job's ``hyp``;
    name -> the number of sentences translated. A translation that ended by itself with an
    error (not stopped at the deadline) goes to ``failures``: name -> its exit status."""
    import hashlib
    import threading

    first = FIRST_CHUNK[device]
    done = {name: 0 for name in jobs}

    def chain(name: str, job: dict) -> None:
        source = Path(job["src"]).read_text(encoding="utf-8").splitlines()
        outputs = []
        for index, lines in enumerate([source[:first], source[first:]] if len(source) > first else [source]):
            chunk, hyp = logs / f"{name}.chunk{index}.src", logs / f"{name}.chunk{index}.bpe"
            text = "\n".join(lines) + "\n"
            chunk.write_text(text, encoding="utf-8")
            stamp = hyp.with_name(hyp.name + ".done")
            expected = f"{job['checkpoint']}\n{hashlib.sha256(text.encode()).hexdigest()}\n"
            if not (stamp.is_file() and stamp.read_text() == expected and hyp.is_file()):
                stamp.unlink(missing_ok=True)
                command = translate_command(job, chunk, hyp, device, max_length)
                with open(logs / f"translate.{name}.log", "a") as log:
                    # in the evaluation's process group: the runner stops them with it
                    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
                    while proc.poll() is None and time.monotonic() < deadline:
                        time.sleep(0.5)
                    late = proc.poll() is None
                    if late:
                        proc.kill()
                        proc.wait()
                if proc.returncode != 0 or not hyp.is_file():
                    if not late and failures is not None:
                        failures[name] = proc.returncode
                    break
                stamp.write_text(expected)
            outputs += hyp.read_text(encoding="utf-8").splitlines()
            done[name] = len(outputs)
        Path(job["hyp"]).write_text("".join(line + "\n" for line in outputs), encoding="utf-8")

    threads = [threading.Thread(target=chain, args=(name, job)) for name, job in jobs.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return done


def _scored(row: dict, status: str, reason: str, unscored_why: str | None) -> None:
    """A row's status and stop reason: its training's, or ``partial`` with why where it is not
    scored on the whole test set (a diverged training stays diverged, its reason extended)."""
    if unscored_why is None:
        row.update(status=status, stop_reason=reason)
    else:
        row.update(status="partial" if status in AVERAGED else status,
                   stop_reason=f"{reason}; {unscored_why}".lstrip("; "))


def unscored(name: str, failures: dict, chosen: dict, common: int, sentences: int) -> str | None:
    """Why a model's row is scored on less than the whole test set of ``sentences`` (so it is
    no seed of its model), or None: its translation failed, no checkpoint of it loads, or the
    evaluation's deadline left ``common`` sentences translated by every model."""
    if name in failures:
        return f"not scored: its translation ended with status {failures[name]}"
    if not chosen[name]:
        return "not scored: no checkpoint loads"
    if common == 0:
        return "not scored: no test sentence translated by every model before the deadline"
    if common < sentences:
        return f"scored on the first {common} of {sentences} test sentences (the evaluation's deadline)"
    return None


def translate_command(job: dict, src: Path, hyp: Path, device: str, max_length: int) -> list[str]:
    """``headlab translate`` of one chunk; ``job["args"]``: the model's source-feature options
    as it was trained with them (``headlab.engine.config.feature_args``, in the manifest)."""
    from headlab.engine.config import translate_precision

    command = [sys.executable, "-m", "headlab.cli", "translate", "-model", job["checkpoint"], "-src", str(src),
               "-output", str(hyp), "-beam_size", str(BEAM), "-batch_size", "4096", "-batch_type", "tokens",
               "-max_length", str(max_length), *job.get("args", ())]
    if device == "cuda":
        command += ["-gpu", "0"] + (["-precision", p] if (p := translate_precision(job["dtype"])) else [])
    return command


def paired(systems: dict[str, list[str]], refs: list[str]) -> dict[str, dict]:
    """sacreBLEU's paired bootstrap (1,000 resamples) of each system against the first."""
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    named = list(systems.items())
    if len(named) < 2:
        return {}
    _, scores = PairedTest(named, {"BLEU": BLEU()}, [refs], test_type="bs", n_samples=BOOTSTRAP)()
    return {name: {"p_value": round(float(result.p_value), 4), "bootstrap_mean": round(float(result.mean), 2)}
            for name, result in zip(scores["System"][1:], scores["BLEU"][1:])}


def row_label(manifest: dict, model: dict) -> str:
    """The paper's table row a model fills: its own (a chained fine-tune: its parent's heads,
    another row) or its heads' in the slice."""
    return model.get("row") or manifest["slice"]["rows"].get(model["heads"], "")


def recipes(manifest: dict, device: str, root: Path | str = ".") -> dict[str, dict | None]:
    """Each model's recipe (:mod:`headlab.workflow.recipe`): its config as its training read it
    (with the runner's options, :func:`headlab.workflow.gpu_runner.training_overrides`); a
    chained fine-tune's with its parent's and gated model's recipes in place of what they made
    in this sitting, and its initial checkpoint's (evaluated untrained) with those alone. None
    where a config cannot be read (its rows say no recipe: never pooled apart), for the
    publication never fails on it."""
    import yaml

    from headlab.workflow.gpu_runner import training_overrides

    found: dict[str, dict | None] = {}

    def named(name: str) -> str:
        return recipe.digest(found[name]) if found.get(name) is not None else ""

    for model in manifest["models"]:            # a chain's parents come before their fine-tunes
        chain, links = model.get("chain"), None
        try:
            if chain:
                links = {"parent": named(chain["parent"])}
                if chain.get("mask_from"):
                    links.update(mask_from=named(chain["mask_from"]), mask=chain.get("mask", "mask"))
            if model.get("evaluate_only"):
                found[model["name"]] = recipe.of({}, root, chain={**(links or {}), "untrained": True})
                continue
            options = yaml.safe_load(Path(root, model["config"]).read_text(encoding="utf-8")) or {}
            found[model["name"]] = recipe.of(recipe.with_overrides(options, training_overrides(device)), root,
                                             chain=links)
        except (OSError, KeyError, TypeError, ValueError, AttributeError, yaml.YAMLError) as err:
            print(f"sitting: no recipe for {model['name']}: {err}", file=sys.stderr)
            found[model["name"]] = None
    return found


def split_untrained(manifest: dict) -> tuple[dict, list[str]]:
    """(the manifest with the models that have a config, the names of those that have none:
    chained fine-tunes the sitting never prepared, for want of time or of their parent)."""
    untrained = [m["name"] for m in manifest["models"] if "config" not in m]
    return {**manifest, "models": [m for m in manifest["models"] if "config" in m]}, untrained


#: why a publication lacks something, as its provenance's ``lacks_by_cause`` says it, read by
#: programs (the runner, the rehearsal) where ``lacks`` is written for people: the
#: ``deadline`` cut it (a later evaluation on the same machine can add it), a step ``failed``
#: (it would fail again), or a model was ``not trained`` (nothing to evaluate)
LACK_CAUSES = ("deadline", "failed", "not trained")
#: what the first publication lacks until the translations are scored
NOT_YET_TRANSLATED = "BLEU and chrF: not yet translated"


class Publication:
    """The sitting folder, rewritten whole at each :meth:`write` (files replaced one by one)."""

    def __init__(self, out: Path, manifest: dict, ident: dict, extra: dict):
        self.out, self.manifest, self.ident, self.extra = out, manifest, ident, extra
        self.rows: dict[str, dict] = {}
        self.lacks: list[str] = []
        self.causes: dict[str, str] = {}
        self.models: dict[str, dict] = {}
        out.mkdir(parents=True, exist_ok=True)

    def lack(self, cause: str, what: str) -> None:
        """One more thing the publication lacks (``what``, for people), and why (``cause``)."""
        if cause not in LACK_CAUSES:
            raise ValueError(f"a lack's cause is one of {', '.join(LACK_CAUSES)}, not {cause!r}")
        self.lacks.append(what)
        self.causes[what] = cause

    def lacks_by_cause(self) -> dict[str, list[str]]:
        return {cause: [what for what in self.lacks if self.causes.get(what) == cause] for cause in LACK_CAUSES}

    def row(self, model: dict) -> dict:
        plan = self.manifest["slice"]
        return self.rows.setdefault(model["name"], {
            "slice": plan["name"], "sitting": self.ident["sitting"], "study": plan["study"], "table": plan["table"],
            "row": row_label(self.manifest, model), "heads": model["heads"], "model": model["name"],
            "layers": model["layers"],
            "pair": model["pair"], "seed": int(str(model["seed"]).removeprefix("seed")),
            "test": self.manifest["test"]["split"], "gpu": self.ident["gpu"], "commit": self.manifest["commit"],
            "date": self.ident["date"]})

    def status(self) -> str:
        statuses = {row.get("status") for row in self.rows.values()}
        if self.lacks or "partial" in statuses or not self.rows:
            return "partial"
        for status in ("diverged", "deadline"):
            if status in statuses:
                return status
        return "converged"

    def write(self) -> None:
        sitting_speed.write_rows(self.out / "rows.csv", list(self.rows.values()), ROW_COLUMNS)
        provenance = {**self.extra, "slice": self.manifest["slice"]["name"], "sitting": self.ident["sitting"],
                      "status": self.status(), "lacks": list(self.lacks),
                      "lacks_by_cause": self.lacks_by_cause(), "headlab commit": self.manifest["commit"],
                      "models": self.models, "created": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
        tmp = self.out / ".provenance.json.tmp"
        tmp.write_text(json.dumps(provenance, indent=1, sort_keys=True, default=str) + "\n")
        os.replace(tmp, self.out / "provenance.json")


def evaluate(manifest: dict, out: Path, device: str, state: dict, ident: dict, deadline_s: float, logs: Path,
             sentences: int | None = None, max_length: int = 250, untrained=()) -> Publication:
    from headlab.data.preprocess import postprocessor
    from headlab.eval.bleu import corpus_scores

    began = time.monotonic()
    deadline = began + deadline_s
    test, plan = manifest["test"], manifest["slice"]
    logs.mkdir(parents=True, exist_ok=True)
    extra = {"device": device, "machine": state.get("machine"), "bundle": {k: manifest.get(k) for k in
             ("created", "config_sources", "wheels")}, "stop_rule": plan["stop"], "beam_size": BEAM,
             "phases_s": (state.get("calls") or [{}])[-1].get("phases", {})}
    publication = Publication(out, manifest, ident, extra)
    progress = state.get("models", {})
    made_by = recipes(manifest, device)
    # each model's training: (status, stop_reason); its row is one of its seeds only once scored
    # on the whole test set, so until then (a call stopped in the translations) it is partial
    trained: dict[str, tuple[str, str]] = {}
    # 1. what exists whatever happens next: curves, stops, speed
    for model in manifest["models"]:
        rows = curve(model)
        sitting_speed.write_rows(out / f"learning_curve.{model['name']}.csv", rows,
                                 ("step", "split", "xent", "ppl", "acc", "lr"))
        status, reason = stop_of(model, rows, state.get("exited", {}).get(model["name"]), plan["stop"]["patience"])
        if model.get("evaluate_only"):
            # an initial checkpoint (the parent with a mask, untrained) is as far along as its parent
            parent = model["chain"]["parent"]
            status = trained.get(parent, ("partial", ""))[0]
            reason = (f"not trained: {parent} at step {model.get('parent_step')} with {model['chain']['initial_of']}'s "
                      f"mask (the fine-tune's initial checkpoint)")
        trained[model["name"]] = status, reason
        speed = throughput(Path(model["dir"]) / "train.log")
        made = made_by[model["name"]]
        publication.row(model).update(step=speed["last_logged_step"], src_tok_s=speed["src_tok_s"] or "",
                                      tgt_tok_s=speed["tgt_tok_s"] or "",
                                      recipe=recipe.digest(made) if made is not None else "")
        _scored(publication.row(model), status, reason, "not yet scored")
        publication.models[model["name"]] = {"dir": model["dir"], **speed, "recipe": made,
                                             "checkpoints": progress.get(model["name"], {}).get("checkpoints"),
                                             # a fine-tune of the chain: where it started, its options, its mask
                                             **{key: model[key] for key in ("chain", "tune", "parent_step", "mask")
                                                if key in model}}
    never = [f"{name}: not trained (a fine-tune of the chain never started: "
             f"{(state.get('chain_errors') or {}).get(name, 'no time left for its stage')})" for name in untrained]
    for what in never:
        publication.lack("not trained", what)
    # (until the translations below: a call stopped before them has this to add)
    publication.lack("deadline", NOT_YET_TRANSLATED)
    for model in manifest["models"]:
        # the gate values a pruned model's mask was read from (paper D's Table 2)
        gates = Path((model.get("mask") or {}).get("gates", ""))
        if gates.is_file():
            shutil.copyfile(gates, out / f"gates.{model['chain']['mask_from']}.csv")
    _speed(publication, manifest, logs, {}, state)
    _suite(out, logs)
    if not (out / "provenance.json").is_file():
        # a later call completing this evaluation keeps the earlier publication until it
        # has at least as much (its translations reuse the finished chunks)
        publication.write()
    _figure(publication)
    # 2. each model's best validation checkpoint, translated within the deadline
    chosen = {m["name"]: eval_checkpoint(m) for m in manifest["models"]}
    params = {name: params_of(found["path"]) for name, found in chosen.items() if found}
    _speed(publication, manifest, logs, params, state)
    publication.lacks.remove(NOT_YET_TRANSLATED)       # what the translations leave is said below
    for name in [name for name, found in chosen.items() if found is None]:
        # (no checkpoint saved before the training stopped: no later call can evaluate it)
        publication.lack("not trained", f"{name}: no checkpoint loads, not evaluated")
    for model in manifest["models"]:
        found = chosen[model["name"]]
        publication.models[model["name"]].update(evaluated=found and {k: found[k] for k in
                                                                      ("step", "criterion", "valid_xent")})
        if found:
            publication.row(model).update(best_step=found["step"], selected_by=found["criterion"])
            publication.models[model["name"]]["params"] = params.get(model["name"])
    refs = Path(test["ref"]).read_text(encoding="utf-8").splitlines()[:sentences or None]
    models = [m for m in manifest["models"] if chosen[m["name"]]]
    jobs = {}
    for model in models:
        # the model's own source (a syntax model's is featured by its parser) and options
        lines = Path(model.get("test_src", test["src"])).read_text(encoding="utf-8").splitlines()[:sentences or None]
        src = logs / f"{model['name']}.{test['split']}.src"
        src.write_text("\n".join(lines) + "\n", encoding="utf-8")
        jobs[model["name"]] = {"checkpoint": chosen[model["name"]]["path"], "src": str(src),
                               "dtype": model["model_dtype"], "args": model.get("translate_args", []),
                               "hyp": str(logs / f"{model['name']}.hyp.bpe")}
    failures = {}
    done = translate_until(jobs, device, deadline - SCORING_S[device], max_length, logs, failures) if jobs else {}
    for name, rc in failures.items():
        publication.lack("failed", f"{name}: translation ended with status {rc} (logs/translate.{name}.log)")
    # a model whose translation failed is not scored; the others are, on what all of them translated
    models = [m for m in models if m["name"] not in failures]
    common = min((done[m["name"]] for m in models), default=0)
    translated_s = time.monotonic() - began
    for model in manifest["models"]:
        # a row is a seed of its model only when scored on the whole test set (studies.published)
        _scored(publication.row(model), *trained[model["name"]],
                unscored(model["name"], failures, chosen, common, len(refs)))
    if common == 0:
        publication.lack("deadline", f"BLEU and chrF: no sentence of {test['split']} translated by every model "
                                     f"before the deadline")
    elif common < len(refs):
        publication.lack("deadline", f"BLEU and chrF on test sentences {common + 1}-{len(refs)} of {test['split']}: "
                                     f"not translated before the deadline (scored on the first {common})")
    if common == 0:
        publication.write()
        _atlas_safely(publication, models, chosen, device, deadline, logs)
        publication.write()
        return publication
    # 3. scores of the sentences every model translated
    post = postprocessor(test["pair"].split("-")[1])
    systems = {}
    for model in models:
        lines = Path(jobs[model["name"]]["hyp"]).read_text(encoding="utf-8").splitlines()[:common]
        systems[model["name"]] = [post(line) for line in lines]
        (out / f"{model['name']}.{test['split']}.txt").write_text("\n".join(systems[model["name"]]) + "\n",
                                                                  encoding="utf-8")
    scores = {name: corpus_scores(lines, refs[:common], lang_pair=test["pair"], confidence=BOOTSTRAP)
              for name, lines in systems.items()}
    tests = {}
    for seed in dict.fromkeys(m["seed"] for m in models):
        tests.update(paired({m["name"]: systems[m["name"]] for m in models if m["seed"] == seed}, refs[:common]))
    for model in models:
        score = scores[model["name"]]
        publication.row(model).update(bleu=score["bleu"], bleu_ci_low=score["bleu_ci_low"],
                                      bleu_ci_high=score["bleu_ci_high"], chrf=score["chrf"])
    (out / "scores.json").write_text(json.dumps({"scores": scores, "paired_bootstrap": tests}, indent=1) + "\n")
    publication.extra.update(test={**test, "sentences": len(refs), "scored": common},
                             evaluation_wall_s={"translate": round(translated_s, 1),
                                                "all": round(time.monotonic() - began, 1)},
                             signatures={"bleu": scores[models[0]["name"]]["confidence_signature"],
                                         "chrf": scores[models[0]["name"]]["chrf_signature"]})
    publication.write()
    # 4. the head atlas: after the scores are out, so that it never costs them
    _atlas_safely(publication, models, chosen, device, deadline, logs)
    publication.write()
    return publication


def _atlas_safely(publication: Publication, *args) -> None:
    """:func:`head_atlas`, whose failure is one more line of ``lacks``, never the sitting's."""
    try:
        head_atlas(publication, *args)
    except Exception as err:             # the scores are published: the atlas is extra
        publication.lack("failed", f"head atlas: {type(err).__name__}: {err}")


def valid_pair(model: dict) -> tuple[str, str] | None:
    """The validation source and target a model's training config names (None: none)."""
    import yaml

    try:
        valid = yaml.safe_load(Path(model["config"]).read_text())["data"]["valid"]
        return valid["path_src"], valid["path_tgt"]
    except (KeyError, OSError, TypeError, yaml.YAMLError):
        return None


def atlas_command(checkpoint: str, valid: tuple[str, str], name: str, out: Path, device: str) -> list[str]:
    command = [sys.executable, "-m", "headlab.cli", "atlas-model", "--model", checkpoint, "--src", valid[0],
               "--tgt", valid[1], "--name", name, "--out", str(out),
               "--valid-sentences", str(ATLAS_SENTENCES[device]), "--examples", "3"]
    return command + (["--gpu", "0"] if device == "cuda" else [])


def head_atlas(publication: Publication, models: list[dict], chosen: dict, device: str, deadline: float,
               logs: Path) -> None:
    """``atlas/<model>/`` of each evaluated model: ``headlab atlas-model`` on the checkpoint
    the sitting scored, every model at once, stopped at ``deadline`` (monotonic). Skipped
    when less than :data:`ATLAS_MIN_S` is left; a model that fails or is stopped leaves no
    folder. What is missing goes to ``lacks``; each run's outcome to ``atlas`` in the
    provenance. ΔBLEU stays empty: it needs one more translation per head index."""
    todo = [m for m in models if chosen.get(m["name"])]
    # an earlier call's atlas of the same checkpoint (the trainings are over) is kept
    earlier = {m["name"] for m in todo if (publication.out / "atlas" / m["name"] / "heads.csv").is_file()}
    record = {name: {"step": chosen[name]["step"], "sentences": ATLAS_SENTENCES[device], "rc": 0,
                     "earlier_call": True} for name in earlier}
    todo = [m for m in todo if m["name"] not in earlier]
    publication.extra["atlas"] = {"models": record, "wall_s": 0.0}
    if not todo:
        return
    left = deadline - time.monotonic()
    if left < ATLAS_MIN_S[device]:
        publication.lack("deadline", f"head atlas of {', '.join(m['name'] for m in todo)}: skipped, {left:.0f} s left "
                                 f"of the {ATLAS_MIN_S[device]} s it needs")
        return
    runs, began = {}, time.monotonic()
    logs.mkdir(parents=True, exist_ok=True)
    for model in todo:
        valid = valid_pair(model)
        if valid is None:
            publication.lack("failed", f"head atlas of {model['name']}: no validation data in {model.get('config')}")
            continue
        out = publication.out / "atlas" / model["name"]
        name = f"{publication.manifest['slice']['name']}/{publication.ident['sitting']}/{model['name']}"
        with open(logs / f"atlas.{model['name']}.log", "a") as log:
            runs[model["name"]] = subprocess.Popen(atlas_command(chosen[model["name"]]["path"], valid, name, out, device),
                                                   stdout=log, stderr=subprocess.STDOUT)
    while any(proc.poll() is None for proc in runs.values()) and time.monotonic() < deadline - ATLAS_MARGIN_S:
        time.sleep(0.5)
    for name, proc in runs.items():
        late = proc.poll() is None
        if late:
            proc.kill()
            proc.wait()
        record[name] = {"step": chosen[name]["step"], "sentences": ATLAS_SENTENCES[device], "rc": proc.returncode}
        if proc.returncode != 0:
            shutil.rmtree(publication.out / "atlas" / name, ignore_errors=True)   # no half-written folder
            # time and failure apart: the rehearsal fails a failure, never a deadline
            publication.lack("deadline" if late else "failed", f"head atlas of {name}: " + (
                "stopped at the deadline" if late else f"atlas-model ended with status {proc.returncode}")
                + f" (logs/atlas.{name}.log)")
    publication.extra["atlas"] = {"models": record, "wall_s": round(time.monotonic() - began, 1)}


def _figure(publication: Publication) -> None:
    """The learning-curves figure, where matplotlib is at hand (the CPU side makes it
    otherwise: ``python -m headlab.workflow.sitting_speed``); never the sitting's failure."""
    sitting_speed.figure_or_say(publication.out, f"{publication.manifest['slice']['name']}, sitting "
                                                 f"{publication.ident['sitting']}", "sitting")


def _speed(publication: Publication, manifest: dict, logs: Path, params: dict, state: dict) -> None:
    # the models that trained at once: a chain's stages ran one after another (paper D: the
    # parent alone, its gated fine-tune alone, then the pruned model and the control)
    stages = [(m.get("chain") or {}).get("stage", 0) for m in manifest["models"]]
    models = [{"name": m["name"], "params": params.get(m["name"]),
               "src_tok_s": _tokens_s(publication.rows[m["name"]].get("src_tok_s")),
               "tgt_tok_s": _tokens_s(publication.rows[m["name"]].get("tgt_tok_s")),
               "side_by_side": stages.count(stage)} for m, stage in zip(manifest["models"], stages)]
    extra = _read_json(logs / "speed-extra.json")
    ident = {**publication.ident, "slice": manifest["slice"]["name"], "commit": manifest["commit"],
             "mps": extra.get("mps", ""), "train_compile": extra.get("train_compile", "")}
    for model, stage in zip(models, stages):
        if stage and ident["train_compile"]:
            model["train_compile"] = "off"      # a chain's fine-tunes train eager (gpu_runner.train_args)
    # each training's own clock (headlab.workflow.sitting_clock): where its steps' time went,
    # and the first model's profile side by side; its trace's tables published beside
    clocks = {m["name"]: _read_json(logs / f"clock.{m['name']}.json") for m in manifest["models"]}
    for name, clock in clocks.items():
        if clock.get("profile_tables"):
            (publication.out / f"profile.{name}.txt").write_text(clock["profile_tables"])
    # the probe side by side (a later call's: more models at once than the sitting trained)
    crowd = sitting_speed.crowd_summary(logs / sitting_speed.CROWD_FOLDER)
    if crowd:
        crowd["mps"] = extra.get("crowd_mps", "")
    rows = sitting_speed.speed_rows(models, ident, sitting_speed.smi_summary(logs / "nvidia-smi.csv"),
                                    {k: tuple(v) for k, v in extra.get("alone", {}).items()}, extra.get("profile", {}),
                                    clocks, extra.get("alone_step_ms", {}), sitting_speed.side_track_windows(state),
                                    crowd, extra.get("compiled", {}))
    sitting_speed.write_rows(publication.out / "throughput.csv", rows)


def _tokens_s(value) -> int | None:
    """A row's tokens/s as a number: the evaluation's own rows hold numbers, a later call's
    (read back from ``rows.csv``) their text, which the matrix-rate share cannot multiply."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return round(number) if math.isfinite(number) else None


def refresh_speed(manifest: dict, out: Path, logs: Path, ident: dict, state: dict | None = None) -> None:
    """``throughput.csv`` and ``cuda-suite.csv`` of a published sitting again, with what a
    later call measured (the probe alone, its profile: ``logs/speed-extra.json``; the probe
    side by side: ``logs/crowd/``; the rest of the CUDA suite)."""
    import csv

    publication = Publication(out, manifest, ident, {})
    with open(out / "rows.csv", newline="", encoding="utf-8") as handle:
        published = list(csv.DictReader(handle))
    models = _read_json(out / "provenance.json").get("models", {})
    for model in manifest["models"]:
        seed = str(model["seed"]).removeprefix("seed")
        for row in published:
            if (row["row"], row["heads"], row["seed"]) == (row_label(manifest, model), model["heads"], seed):
                publication.rows[model["name"]] = row
    _speed(publication, manifest, logs, {name: entry.get("params") for name, entry in models.items()}, state or {})
    _suite(out, logs)


def _suite(out: Path, logs: Path) -> None:
    """``cuda-suite.csv``: the CUDA suite's outcome of each test so far (the newest per test:
    a later call reruns what failed), from the runner's report."""
    report = logs / "gpu-tests.jsonl"
    outcomes: dict[str, dict] = {}
    for line in report.read_text(errors="replace").splitlines() if report.is_file() else []:
        try:
            entry = json.loads(line)
        except ValueError:
            continue                 # a line cut short by the stop
        outcomes[entry["nodeid"]] = {"test": entry["nodeid"], "outcome": entry["outcome"], "when": entry.get("when", "")}
    if outcomes:
        sitting_speed.write_rows(out / "cuda-suite.csv", list(outcomes.values()), ("test", "outcome", "when"))


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m headlab.workflow.sitting", description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", required=True, help="the bundle's manifest.json")
    parser.add_argument("--out", required=True, help="the sitting's publication folder")
    parser.add_argument("--state", required=True, help="the runner's state.json (machine, phases, checkpoints)")
    parser.add_argument("--sitting", required=True, help="the sitting's name: <UTC date>-<gpu>-<commit>")
    parser.add_argument("--gpu", required=True, help="the GPU's short name (h100; cpu for a rehearsal)")
    parser.add_argument("--deadline-s", type=float, required=True, help="seconds this evaluation may take")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cuda, or cpu for a rehearsal")
    parser.add_argument("--sentences", type=int, default=None, help="score the first N test sentences only")
    parser.add_argument("--logs", default=".", help="where the translations and their logs go")
    parser.add_argument("--max-length", type=int, default=250, help="translate's -max_length (a rehearsal: short)")
    parser.add_argument("--speed-only", action="store_true", help="rewrite the published sitting's throughput.csv")
    args = parser.parse_args(argv)
    manifest, untrained = split_untrained(json.loads(Path(args.manifest).read_text()))
    state = _read_json(Path(args.state))
    ident = {"sitting": args.sitting, "gpu": args.gpu, "date": args.sitting[:10]}
    if args.speed_only:
        refresh_speed(manifest, Path(args.out), Path(args.logs), ident, state)
        return 0
    try:
        publication = evaluate(manifest, Path(args.out), args.device, state, ident, args.deadline_s,
                               Path(args.logs), args.sentences, args.max_length, untrained)
    except HeadlabError as err:
        print(f"sitting: {err}", file=sys.stderr)
        return 1
    print(f"sitting: published {args.out} ({publication.status()}"
          + (f"; lacks: {'; '.join(publication.lacks)}" if publication.lacks else "") + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
