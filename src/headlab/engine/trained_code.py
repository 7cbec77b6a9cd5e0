"""The code a model was trained by, recorded beside its checkpoint, and the trained models
whose code has changed since.

A model's path names its options, never its code: an edited head kind or trainer retrains
nothing (otherwise every model of every results folder would retrain for any edit of the
engine, a comment's included). But a researcher who edits a kind and runs again must not
read the old code's models as the new code's without a word. So ``headlab train`` records,
before its first step, the files of ``headlab.heads`` and ``headlab.engine`` the training
runs, with a digest of each, in ``code.json`` beside the checkpoints: the trainer's import
closure and the modules of the head kinds and mixers its specs name (a built-in kind's module
is imported by name from its declaration, which no import statement shows). The shared
modules below them (paths, errors, option tables) are followed but not recorded: they make no
number. A resume by other code adds an entry: a model trained in part by other code is not
this code's. A kind registered from outside headlab is not recorded (its code is its
plugin's).

The record is no declared output (declaring it would retrain every existing model). When the
workflow builds its DAG, :func:`report` compares each trained model's record with the files
as they are now and names the models trained by other code, the files that changed, and how
to retrain them: ``--forcerun`` with their configs, which it lists in a file
(``stale-models.txt`` in the results folder). Forcing a config, not the ``model.pt``: a
forced ``train`` job would resume from the training's last checkpoint
(:func:`headlab.engine.run.resume_point`), which is already at the last step, and retrain
nothing; a rewritten config is newer than every checkpoint, and the training starts again.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Callable

from headlab import naming
from headlab.sourcecode import SOURCE, file_digest, imported_modules, module_file, module_files

#: the training command's module: its import closure is the trainer
TRAINER = "headlab.engine.run"
#: the packages whose files a record holds (the model's and the trainer's code)
RECORDED = ("heads", "engine")
#: files of those that compute no number of a model: this record, the training lock, the
#: device checks, and the config writer (a changed config is the ``onmt_config`` job's
#: params, which retrain the model already)
BOOKKEEPING = frozenset({"engine/trained_code.py", "engine/train_lock.py", "engine/devices.py", "engine/config.py"})
#: the record's and the training config's file names in a model's folder (headlab.naming.PATHS)
RECORD = Path(naming.PATHS["trained_code"]).name
CONFIG = Path(naming.PATHS["onmt_config"]).name
CHECKPOINT = Path(naming.PATHS["checkpoint"]).name
#: the list of the configs to force, under the results folder
LIST = naming.PATHS["stale_models"]
#: a checkpoint snapshot's folder (``.../ft_.../step_N``): a link to its parent's file, no training
_SNAPSHOT = re.compile(r"step_[0-9]+")


def head_modules(heads: dict[str, str]) -> set[str]:
    """The modules of the head kinds and mixers that the specs ``heads`` (site -> spec) name."""
    from headlab.heads.spec import HEAD_KINDS, HEAD_MIXERS, parse_spec

    modules = set()
    for site, text in heads.items():
        for layer in parse_spec(text, site=site):
            for registry, names in ((HEAD_KINDS, [term.kind for term in layer.terms]), (HEAD_MIXERS, layer.mixers)):
                for name in names:
                    facts = registry.facts(name)
                    modules.add(getattr(facts, "module", None) or facts.__module__)
    return modules


def run_files(entry: str, heads: dict[str, str], root: Path = SOURCE) -> list[Path]:
    """The headlab files a command (module ``entry``) runs for a model of ``heads`` (site ->
    spec): the command's import closure and the modules of the head kinds and mixers the
    specs name.

    The registry imports a built-in kind's or mixer's module when a spec names it, and the
    executor imports paper C's RHE module inside the functions that only RHE kinds call: the
    declared modules that neither the specs nor the modules they name import are left out,
    so an edited DEA changes nothing of an ``8L`` model's."""
    from headlab.heads import builtin

    declared = {entry.module for entry in [*builtin.KINDS.values(), *builtin.MIXERS.values()]}
    named = {module for module in head_modules(heads) if module.startswith("headlab.")}
    used, todo = set(named), list(named)
    while todo:                       # RHE's module imports DEA's, Rel_Pos's, Localness's
        name = todo.pop()
        path = module_file(name, root)
        for imported in (imported_modules(path, name) if path else ()):
            if imported in declared and imported not in used:
                used.add(imported)
                todo.append(imported)
    return module_files([entry, *sorted(named)], root, skip=declared - used)


def training_files(heads: dict[str, str], root: Path = SOURCE) -> dict[str, str]:
    """Relative path -> digest of the files of :data:`RECORDED` a training of ``heads`` runs
    (:func:`run_files` of the trainer), but for :data:`BOOKKEEPING`."""
    files = (path.relative_to(root) for path in run_files(TRAINER, heads, root))
    return {name.as_posix(): file_digest(root / name) for name in files
            if name.parts[0] in RECORDED and name.as_posix() not in BOOKKEEPING}


def _read(path: Path) -> list[dict] | None:
    """The trainings of a record; None where there is none, or it is not one (cut short,
    edited by hand): the code is then unknown, never taken for this checkout's."""
    try:
        trainings = json.loads(path.read_text(encoding="utf-8"))["trainings"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    shaped = isinstance(trainings, list) and trainings and all(
        isinstance(entry, dict) and isinstance(entry.get("from_step"), int) and "files" in entry
        and (entry["files"] is None or isinstance(entry["files"], dict)) for entry in trainings)
    return trainings if shaped else None


def record(model_dir: Path, heads: dict[str, str], from_step: int, root: Path = SOURCE) -> None:
    """Record the code of a training of ``heads`` in ``model_dir`` that starts at ``from_step``:
    from scratch (0), a new record; a resume, an entry more where the code differs from the
    last one's. A resume with no record (its start predates records, or the record is
    broken) keeps an unknown start (``files`` null) before its own entry."""
    path = Path(model_dir) / RECORD
    files = training_files(heads, root)
    trainings = []
    if from_step:
        trainings = _read(path) or [{"from_step": 0, "files": None}]
        if trainings[-1]["files"] == files:
            return
    trainings.append({"from_step": from_step, "files": files})
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"trainings": trainings}, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _trained_models(results: Path):
    """The folders of the trained models under ``results`` (those with a final checkpoint;
    no snapshot of a fine-tune's step)."""
    models = results / naming.PATHS["model_dir"].partition("{model}")[0]
    for folder, _, names in os.walk(models):
        if CHECKPOINT in names and not _SNAPSHOT.fullmatch(os.path.basename(folder)):
            yield Path(folder)


def stale_models(results: str | Path, root: Path = SOURCE) -> tuple[dict[Path, list[str]], list[Path]]:
    """The trained models under ``results`` whose record names a file that differs now (model
    folder -> those files, sorted), and those whose code is not (wholly) known: no record
    (trained before headlab kept one), a broken one, or a resume of a training without one."""
    current: dict[str, str | None] = {}

    def now(name: str) -> str | None:
        if name not in current:
            path = root / name
            current[name] = file_digest(path) if path.is_file() else None
        return current[name]

    stale, unrecorded = {}, []
    for folder in sorted(_trained_models(Path(results))):
        trainings = _read(folder / RECORD)
        if trainings is None or any(training["files"] is None for training in trainings):
            unrecorded.append(folder)
            continue
        changed = sorted({name for training in trainings for name, digest in training["files"].items()
                          if now(name) != digest})
        if changed:
            stale[folder] = changed
    return stale, unrecorded


def report(results: str | Path, built: Callable[[], set[Path]], root: Path = SOURCE, shown: int = 6) -> list[str]:
    """What the workflow says when it builds its DAG: the trained models of this config
    (``built()``: their folders) whose code changed, grouped by file, and how to retrain them;
    how many others did, and how many record no code. Writes the training configs of this
    config's to :data:`LIST` under ``results`` for ``--forcerun`` (removes it when there are
    none): forcing a model outside the DAG would fail or rewrite its config alone."""
    stale, unrecorded = stale_models(results, root)
    listed = Path(results) / LIST
    ours = set(built()) & set(stale) if stale else set()
    lines = []
    if ours:
        by_file: dict[str, list[Path]] = {}
        for folder in sorted(ours):
            for name in stale[folder]:
                by_file.setdefault(name, []).append(folder)
        lines.append(f"{_count(len(ours), 'trained model')} of this config ran other code than this checkout's and "
                     f"{'are' if len(ours) > 1 else 'is'} not retrained (a model's path names its options, not its "
                     f"code); changed since:")
        for name, folders in sorted(by_file.items(), key=lambda item: (-len(item[1]), item[0]))[:shown]:
            lines.append(f"  {name}: {folders[0]}" + (f" and {len(folders) - 1} more" if len(folders) > 1 else ""))
        if len(by_file) > shown:
            lines.append(f"  and {len(by_file) - shown} more files")
        lines.append(f"retrain them: add  --forcerun $(cat {listed})  at the end of the snakemake command (or leave "
                     f"them, if the change makes no difference to them)")
        tmp = listed.with_name(listed.name + ".tmp")
        tmp.write_text("".join(f"{folder / CONFIG}\n" for folder in sorted(ours)), encoding="utf-8")
        os.replace(tmp, listed)
    elif listed.is_file():
        listed.unlink()
    if len(stale) > len(ours):
        lines.append(f"{_count(len(stale) - len(ours), 'more trained model')} that this config does not train ran "
                     f"other code (their own config's run names them)")
    if unrecorded:
        lines.append(f"{_count(len(unrecorded), 'trained model')} record{'s' if len(unrecorded) == 1 else ''} no "
                     f"code, or not all of it (trained before headlab recorded it, or by other means): not checked")
    return lines


def _count(number: int, what: str) -> str:
    return f"{number} {what}{'s' if number != 1 else ''}"
