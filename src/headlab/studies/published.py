"""GPU-scale rows: what the GPU sittings published, read for the papers' tables and claims.

Each sitting trains one *slice* of the GPU plan and publishes into
``results/published/<slice>/<sitting>/`` (``<sitting>`` = ``<UTC date>-<gpu>-<commit>``,
e.g. ``A-T1-deep/2026-11-27-h100-65e2124``); nothing is overwritten, a slice run again adds
seeds. A sitting folder holds:

- ``rows.csv`` (:data:`COLUMNS`): one row per model and test set; ``status`` is
  ``converged`` (its stop rule fired: no lower validation cross-entropy for ``patience``
  validations, or every planned step trained), ``deadline`` (the sitting's clock stopped it),
  ``partial`` (scored on the test sentences translated so far) or ``diverged``;
  ``table``/``row``: the paper's table and row it fills; ``best_step`` the checkpoint
  evaluated and ``selected_by`` how it was chosen (:data:`LATER_COLUMNS`: blank in the
  sittings before it);
- ``provenance.json`` (with ``slice``, ``status`` and ``lacks``: what it could not do);
- ``learning_curve.<model>.csv`` and the hypotheses, ``<model>.<test>.txt`` (``model``: the
  row's column; the sittings before it: ``<heads>.seed<seed>.<test>.txt``, or
  ``<heads>.<test>.txt`` in a sitting of seed 1 alone, as the first two sittings wrote).

This module reads every ``rows.csv`` once (:func:`read`: one clear error naming a file that
lacks a column, or the line and column of a row in another slice's or sitting's folder, a
score that is no number, a seed with no BLEU), groups the rows by slice, model and seed,
and adds them to a study's table (:func:`extend`) beside the toy rows, with a ``scale`` column: ``toy`` for the CPU
rows, ``GPU base: <slice>, seeds …, <status> (<sittings>); 95% interval`` for a published
model (the mean ± sd over its seeds of status converged or deadline, one seed kept per
seed number: a converged run before a deadline one, then the newest), one labelled row per
diverged or partial run, per deadline run evaluated at the clock's step rather than at a
validation's choice (:func:`at_the_clocks_step`) and per run trained by an earlier recipe than
its model's newest (:func:`earlier_recipe`), each shown, never averaged in, and ``not yet
run`` for a slice of the plan with nothing published. The study builders list
:func:`inputs` among theirs, so a new sitting re-renders the tables and claims and nothing
else. The claims on published runs are judged by each study's ``claims.py`` with the toy
claims' tests, in the same family.

**The atlas at GPU scale.** Checkpoints do not come back from a sitting, so the sitting
characterises its models' heads on the GPU machine and publishes
``atlas/<model>/heads.csv`` (:func:`headlab.workflow.sitting.head_atlas`); the atlas reads
those as models of their own (:mod:`headlab.atlas.published`).

Importing the sittings made before this layout (``python -m headlab.studies.published``):
:func:`migrate_folder` writes ``rows.csv`` for a sitting folder of the first layout
(``T1_deep.csv``, ``scores.json``, ``provenance.json``) and adds ``slice``, ``status`` and
``lacks`` to its provenance; :func:`import_tarball` unpacks the small files of a returned
``headlab-sitting.tar.gz`` into a sitting folder (learning curves read from its training
logs, the CUDA suite's report from its test logs).
"""
from __future__ import annotations

import glob
import json
import math
import os
import sys
from typing import Callable

from headlab.errors import DataError, HeadlabError

ROOT = "results/published"
COLUMNS = ("slice", "sitting", "study", "table", "row", "heads", "layers", "pair", "seed", "test", "step",
           "best_step", "stop_reason", "status", "bleu", "bleu_ci_low", "bleu_ci_high", "chrf", "src_tok_s",
           "tgt_tok_s", "gpu", "commit", "date")
#: columns a sitting writes since 2026-12-01, which an earlier one's rows.csv lacks (read
#: blank): ``selected_by``, how its evaluated checkpoint was chosen (:data:`BY_VALIDATION`,
#: :data:`BY_NEWEST` where no validation had run, :data:`BY_INITIAL` for a fine-tune's
#: initial checkpoint, evaluated untrained: paper D's "Non-inverted (initial)"); ``model``,
#: the sitting's name of the model, which names its files (``<model>.<test>.txt``): paper D's
#: fine-tunes share their parent's heads, so the heads alone cannot name their translation;
#: ``recipe``, the digest of what trained it (:mod:`headlab.workflow.recipe`; the sittings
#: before it have it written in since, from their rebuilt bundles): seeds of one model are
#: pooled only under its newest recipe (:func:`earlier_recipe`)
LATER_COLUMNS = ("selected_by", "model", "recipe")
BY_VALIDATION, BY_NEWEST = "lowest validation cross-entropy", "newest checkpoint (no validation reached)"
BY_INITIAL = "a fine-tune's initial checkpoint (its parent's, masked; not trained)"
STATUSES = ("converged", "deadline", "partial", "diverged")
#: the statuses whose runs are a model's seeds (partial and diverged runs are shown apart,
#: and so is a deadline run no validation chose a checkpoint of: :func:`at_the_clocks_step`)
AVERAGED = ("converged", "deadline")
#: the scores of a row: each empty or a finite number (:func:`read`)
SCORES = ("bleu", "bleu_ci_low", "bleu_ci_high", "chrf")
TEXT = ("slice", "sitting", "study", "table", "row", "heads", "layers", "pair", "seed", "test", "best_step",
        "stop_reason", "status", "gpu", "commit", "date", *LATER_COLUMNS)
SCALE, TOY, GPU, NOT_YET_RUN = "scale", "toy", "GPU base", "not yet run"
#: the GPU plan: its slices, each with the study and table it fills
PLAN = "config/gpu-plan.yaml"
#: the plan's slices where the plan cannot be read (a workflow run from another folder)
SLICES = {"A-T1-deep": ("paper_A", "T1"), "C-core-base": ("paper_C", "T1"), "B-base-dhicm": ("paper_B", "T3"),
          "D-gates-8L": ("paper_D", "T3"), "A-lowres": ("paper_A", "T2")}


def plan_slices(plan: str = PLAN) -> dict[str, tuple[str, str]]:
    """slice -> (study, table) of the GPU plan, in its order."""
    import yaml

    try:
        with open(plan, encoding="utf-8") as handle:
            slices = (yaml.safe_load(handle) or {}).get("slices") or []
    except OSError:
        return dict(SLICES)
    return {entry["name"]: (entry["study"], entry["table"]) for entry in slices}


def inputs(root: str = ROOT) -> list[str]:
    """Every published ``rows.csv``: a builder's inputs, so a new sitting re-renders it."""
    return sorted(glob.glob(os.path.join(root, "*", "*", "rows.csv")))


def read(root: str = ROOT):
    """Every published row (:data:`COLUMNS`, plus ``folder``: its sitting's folder)."""
    import pandas as pd

    frames = []
    for file in inputs(root):
        frame = pd.read_csv(file, dtype={column: str for column in TEXT}, keep_default_na=False,
                            na_values={column: [""] for column in COLUMNS if column not in TEXT})
        missing = [column for column in COLUMNS if column not in frame.columns]
        if missing:
            raise DataError(f"published rows lack the column(s) {', '.join(missing)}; a rows.csv has "
                            f"{', '.join(COLUMNS)}", path=file)
        frame = frame.assign(**{column: "" for column in LATER_COLUMNS if column not in frame.columns})
        unknown = sorted(set(frame["status"]) - set(STATUSES))
        if unknown:
            raise DataError(f"status {', '.join(map(repr, unknown))} is none of {', '.join(STATUSES)}", path=file)
        _check_rows(file)
        # a seed is its number, as the plan counts them ("seed2" as model paths write it: 2)
        frames.append(frame.assign(folder=os.path.dirname(file), seed=frame["seed"].str.removeprefix("seed")))
    if not frames:
        return pd.DataFrame(columns=[*COLUMNS, *LATER_COLUMNS, "folder"])
    return pd.concat(frames, ignore_index=True)


def _check_rows(file: str) -> None:
    """Each row of ``rows.csv`` (its line named, as a reader counts them): its ``slice`` and
    ``sitting`` its folder's (``<root>/<slice>/<sitting>/rows.csv``: the tables group rows by
    the column, the GPU plan counts them by the folder), each of :data:`SCORES` empty or a
    finite number, and ``bleu`` written in a row of an :data:`AVERAGED` status (a seed of its
    model; a sitting writes a row it has not scored on the whole test set as partial)."""
    import csv

    folder = os.path.dirname(file)
    expected = {"slice": os.path.basename(os.path.dirname(folder)), "sitting": os.path.basename(folder)}
    with open(file, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        for row in reader:
            line = reader.line_num
            for column, name in expected.items():
                if (row[column] or "") != name:
                    raise DataError(f"{column} {row[column]!r}, where the folder's {column} is {name!r} "
                                    f"(<slice>/<sitting>/rows.csv holds that slice's and sitting's rows only)",
                                    path=file, line=line, key=column)
            for column in SCORES:
                text = (row[column] or "").strip()
                try:
                    finite = not text or math.isfinite(float(text))
                except ValueError:
                    finite = False
                if not finite:
                    raise DataError(f"{column} {text!r} is not a number (a score is empty or a finite number, "
                                    f"written with a decimal point)", path=file, line=line, key=column)
            if row["status"] in AVERAGED and not (row["bleu"] or "").strip():
                raise DataError(f"bleu is empty in a row of status {row['status']}, a seed of its model: a row not "
                                f"scored on the whole test set is partial", path=file, line=line, key="bleu")


def hypothesis(row) -> str:
    """The published translation of one row's model and test set: ``<model>.<test>.txt``
    where the row names its model, else (the sittings before the column) by its heads."""
    if str(row.get("model") or "").strip():
        return os.path.join(row["folder"], f"{row['model']}.{row['test']}.txt")
    seeded = os.path.join(row["folder"], f"{row['heads']}.seed{row['seed']}.{row['test']}.txt")
    return seeded if os.path.isfile(seeded) else os.path.join(row["folder"], f"{row['heads']}.{row['test']}.txt")


def at_the_clocks_step(frame):
    """The runs (a boolean mask) that were evaluated at the step the sitting's clock left,
    not at a checkpoint their stop rule chose: status deadline and either no ``best_step``
    (the sittings before the stop rule: paper A's seed 1 at 1,000 steps, before the learning
    rate's peak) or ``selected_by`` :data:`BY_NEWEST` (a ``best_step``, but the newest
    checkpoint's: the training stopped before its first validation, or its history was
    lost). A comparison is at each model's best validation checkpoint,
    never at a step the clock chose, so such a run is shown apart and never averaged with
    (or tested against) the seeds that were; a rerun of its seed replaces it. A converged
    run without one (a fine-tune of fixed length, trained to its last step) is what the
    paper did, and counts."""
    best = frame["best_step"].astype(str).str.strip()
    newest = frame["selected_by"] == BY_NEWEST if "selected_by" in frame else False
    return (frame["status"] == "deadline") & (best.isin(["", "nan", "None"]) | newest)


#: what names one model of a slice across its sittings (its runs are its seeds)
MODEL_KEYS = ["slice", "table", "row", "heads", "layers", "pair", "test"]


def published_at(folder: str) -> str:
    """When a sitting published, as text that sorts in time: its provenance's ``created``
    (two sittings of one day: a folder name orders them by commit), else its folder's date."""
    try:
        with open(os.path.join(folder, "provenance.json"), encoding="utf-8") as handle:
            created = json.load(handle).get("created")
    except (OSError, ValueError):
        created = None
    return str(created or os.path.basename(folder)[:10])


def earlier_recipe(frame):
    """The runs (a boolean mask) trained by another recipe than their model's newest run
    (``recipe``: :mod:`headlab.workflow.recipe`; the newest by when its sitting published).
    A session that changes what trains a slice (a learning rate, the stop rule, the BPE)
    makes its next seeds another model under the same name: the older runs are shown apart,
    never averaged with (or tested against) the newest recipe's seeds, and the GPU plan
    counts their seeds as not yet run. A run with no recipe recorded (a row written without
    one) cannot be told apart: it is never an earlier one, and never sets the newest."""
    import pandas as pd

    if frame.empty or "recipe" not in frame:
        return pd.Series(False, index=frame.index, dtype=bool)
    made_by = frame["recipe"].fillna("").astype(str).str.strip()
    when = (frame["folder"].map({folder: published_at(folder) for folder in set(frame["folder"])})
            if "folder" in frame else frame["date"])
    ordered = frame.assign(_when=when, _made_by=made_by.where(made_by != "")).sort_values(["_when", "sitting"],
                                                                                          kind="stable")
    newest = ordered.groupby(MODEL_KEYS, sort=False, dropna=False)["_made_by"].transform("last")
    newest = newest.reindex(frame.index)
    return (made_by != "") & newest.notna() & (made_by != newest.fillna(""))


def seeds_of(frame):
    """The runs a model's GPU row averages: status converged or deadline, one per seed
    (converged first, then the newest sitting); never one at the clock's step
    (:func:`at_the_clocks_step`) or by an earlier recipe (:func:`earlier_recipe`)."""
    kept = frame[frame["status"].isin(AVERAGED) & ~at_the_clocks_step(frame) & ~earlier_recipe(frame)]
    rank = kept["status"].map({"converged": 0, "deadline": 1})
    kept = kept.assign(_rank=rank).sort_values(["_rank", "date"], ascending=[True, False], kind="stable")
    # row too: a slice's fine-tunes (paper D's chain) share their parent's heads
    keys = ["slice", "table", "row", "heads", "layers", "pair", "test", "seed"]
    return kept.drop_duplicates(keys).drop(columns="_rank").sort_values(["slice", "heads", "seed"], kind="stable")


def interval(bleus, lows, highs) -> tuple[float, float]:
    """One seed: its test-set bootstrap interval; several: the t interval of their mean."""
    if len(bleus) == 1:
        return float(lows[0]), float(highs[0])
    import numpy as np
    from scipy import stats

    mean, sd = float(np.mean(bleus)), float(np.std(bleus, ddof=1))
    half = stats.t.ppf(0.975, len(bleus) - 1) * sd / math.sqrt(len(bleus))
    return mean - half, mean + half


def _scale_text(runs) -> str:
    low, high = interval(list(runs["bleu"]), list(runs["bleu_ci_low"]), list(runs["bleu_ci_high"]))
    seeds = ", ".join(sorted(set(runs["seed"]), key=lambda seed: (len(seed), seed)))
    statuses = ", ".join(f"{status} ×{count}" if count > 1 else status
                         for status, count in runs["status"].value_counts(sort=False).items())
    what = "95% interval" if len(runs) == 1 else "95% t interval of the mean"
    why = "one seed, no bootstrap interval published"
    # the step each seed was evaluated at (its best validation, else its last checkpoint):
    # seeds stopped at different points are averaged only where the reader can see it
    steps = [_step(best, last) for best, last in zip(runs["best_step"], runs["step"])]
    at = f" at step{'s' if len(steps) > 1 else ''} {', '.join(steps)}" if all(steps) else ""
    return (f"{GPU}: {runs['slice'].iloc[0]}, seed{'s' if len(runs) > 1 else ''} {seeds}, {statuses}{at} "
            f"({', '.join(dict.fromkeys(runs['sitting']))}); {_interval_text(what, low, high, why)}")


def _interval_text(what: str, low, high, why: str) -> str:
    """``95% interval [low, high]``, or what is missing where a bound is not a number (a
    seed written before its sitting scored intervals, a partial run with no BLEU)."""
    bounds = [float(bound) if str(bound).strip() not in ("", "None") else math.nan for bound in (low, high)]
    if any(math.isnan(bound) for bound in bounds):
        return f"no {what} ({why})"
    return f"{what} [{bounds[0]:.2f}, {bounds[1]:.2f}]"


def _step(best, last) -> str:
    for value in (best, last):
        if value is not None and str(value).strip() not in ("", "nan"):
            return f"{int(float(value)):,}"
    return ""


def _scored(value) -> bool:
    return str(value).strip() not in ("", "nan", "None")


def _short(reason: str) -> str:
    """A stop reason's first clause (the sitting's README and rows.csv keep it whole)."""
    return reason.split(" (")[0].split(";")[0]


def gpu_tidy(frame, study: str, table: str, label: Callable, column: Callable):
    """The published runs of one study table as tidy rows (``label``: the table row,
    ``column``: the table column, ``seed``, ``bleu``, ``scale``, ``status``, ``sitting``):
    a model's averaged seeds share one label, each diverged or partial run has its own."""
    import pandas as pd

    mine = frame[(frame["study"] == study) & (frame["table"] == table)]
    out = []
    averaged = seeds_of(mine)
    for _, runs in averaged.groupby(["slice", "row", "heads", "layers", "pair", "test"], sort=False):
        text = _scale_text(runs)
        out += [dict(run, label=f"{label(run)} (GPU {run['slice']})", column=column(run), scale=text)
                for _, run in runs.iterrows()]
    earlier, clocked_runs = earlier_recipe(mine), at_the_clocks_step(mine)
    for index, run in mine[~mine["status"].isin(AVERAGED) | clocked_runs | earlier].iterrows():
        clocked = run["status"] == "deadline" and clocked_runs[index]
        # (the step it was evaluated at: its newest checkpoint's where it has one)
        status = f"deadline at the clock's step {_step(run['best_step'], run['step'])}" if clocked else run["status"]
        why = "no validation chose it" if clocked else _short(run["stop_reason"])
        named = status
        if earlier[index] and run["status"] in AVERAGED and not clocked:
            status, why = f"{run['status']}, an earlier recipe", "trained otherwise than the newest sitting's run"
            # a row a run: one sitting may have published several seeds by that recipe
            named = f"{status}, seed {run['seed']}"
        out.append(dict(run, label=f"{label(run)} (GPU {run['slice']}, {named}, {run['sitting']})",
                        column=column(run),
                        scale=f"{GPU}: {run['slice']}, seed {run['seed']}, {status}, not averaged "
                              f"({run['sitting']}: {why}); "
                              + _interval_text("95% interval", run["bleu_ci_low"], run["bleu_ci_high"],
                                               "no bootstrap interval published" if _scored(run["bleu"])
                                               else "no BLEU published")))
    return pd.DataFrame(out, columns=[*COLUMNS, *LATER_COLUMNS, "folder", "label", "column", "scale"])


def corpus_pair(run, corpora) -> str:
    """A published run's corpus and pair as the study tables name a toy row's
    (:func:`headlab.studies.common.pair_label`): the corpus of ``corpora`` (the config's)
    that has the run's test set (a published row names its pair and test set, not its
    corpus), else the test set in its place."""
    from headlab.studies.common import pair_label

    for corpus, entry in corpora.items():
        if run["test"] in ((entry or {}).get("tests") or []):
            return pair_label(corpus, run["pair"])
    return pair_label(run["test"], run["pair"])


def not_run(frame, study: str, table: str, plan: str = PLAN) -> list[str]:
    """The plan's slices of this table with nothing published."""
    done = set(frame.loc[(frame["study"] == study) & (frame["table"] == table), "slice"])
    return [name for name, where in plan_slices(plan).items() if where == (study, table) and name not in done]


def extend(table, frame, study: str, name: str, *, label: Callable, column: Callable, sub: str = "ours",
           plan: str = PLAN):
    """``table`` (ours beside the paper's) with a ``scale`` column first and the published
    GPU rows of (study, table) below the toy rows; returns (table, the GPU rows' tidy frame)."""
    import pandas as pd

    from headlab.studies import STUDIES
    from headlab.studies.tables import Table, pivot

    # the plan's check reads the same list: a slice fills only a table that shows its rows
    assert name in STUDIES[study].gpu_tables, f"{study}.gpu_tables lacks {name}, which shows published GPU rows"

    tidy = gpu_tidy(frame, study, name, label, column)
    planned = not_run(frame, study, name, plan)
    missing = [f"{slice_} (GPU)" for slice_ in planned]
    if tidy.empty and not missing:
        return table, tidy      # no slice fills this table: it stays as it was
    cells = tidy.assign(column=[f"{col} {sub}" if sub else col for col in tidy["column"]])
    gpu = pivot(cells, index="label", columns="column", values="bleu", over="seed") if len(tidy) else None
    rows = list(table.values.index) + (list(gpu.values.index) if gpu is not None else []) + missing
    columns = list(table.values.columns) + [col for col in (gpu.values.columns if gpu is not None else []) if col not in
                                            table.values.columns]

    def grid(part, gpu_part):
        base = (part.reindex(index=rows, columns=columns) if part is not None
                else pd.DataFrame(math.nan, index=rows, columns=columns))
        if gpu_part is not None:
            base.update(gpu_part)
        return base

    values = grid(table.values, gpu.values if gpu is not None else None)
    order = [col.removesuffix(f" {sub}") if sub else col for col in columns]
    texts = {**{row: TOY for row in table.values.index}, **_row_scales(tidy, order),
             **{f"{slice_} (GPU)": f"{GPU}: {slice_}: {NOT_YET_RUN}" for slice_ in planned}}
    values.insert(0, SCALE, [texts[row] for row in rows])
    has_runs = table.count is not None or (gpu is not None and gpu.count is not None)
    sd = count = None
    if has_runs:
        sd = grid(table.sd, gpu.sd if gpu is not None else None)
        count = grid(table.count, gpu.count if gpu is not None else None)
        sd.insert(0, SCALE, math.nan)
        count.insert(0, SCALE, math.nan)
    marks = (table.marks.reindex(index=rows, columns=columns) if table.marks is not None
             else pd.DataFrame("", index=rows, columns=columns)).fillna("")
    marks.insert(0, SCALE, "")
    bold = None
    if table.bold is not None:
        bold = table.bold.reindex(index=rows, columns=columns).fillna(False).astype(bool)
        bold.insert(0, SCALE, False)
    groups = ([(SCALE, "")] + list(table.groups) + [tuple(col.rsplit(" ", 1)) for col in columns[len(table.groups):]]
              if table.groups else [])
    extended = Table(values, marks, decimals=table.decimals, column_decimals=table.column_decimals, best=table.best,
                     index_name=table.index_name, caption=table.caption, label=table.label, groups=groups, bold=bold,
                     row_decimals=table.row_decimals, sd=sd, count=count)
    if extended.caption is not None:
        extended.caption += (f" Rows '(GPU …)': base-size models trained on a GPU sitting (results/published/; "
                             f"scale: slice, seeds, status, sittings, 95% interval); '{NOT_YET_RUN}': a slice of "
                             "the GPU plan with nothing published.")
    return extended, tidy



def _row_scales(tidy, order: list[str]) -> dict[str, str]:
    """A GPU row's ``scale`` cell: its run's scale, or where the row holds several systems (a
    column each: papers B's and C's systems beside one pair's row), each system's seeds and
    interval in the table's column ``order``, ``GPU base: <slice>; <system>: seeds … / <system>: …``."""
    cells = {}
    for label, group in tidy.groupby("label", sort=False):
        scales = sorted(dict.fromkeys(zip(group["column"], group["scale"])),
                        key=lambda cell: order.index(cell[0]) if cell[0] in order else len(order))
        if len({column for column, _ in scales}) == 1:
            cells[label] = scales[-1][1]
            continue
        prefix = f"{GPU}: {group['slice'].iloc[0]}, "
        cells[label] = f"{prefix.removesuffix(', ')}; " + " / ".join(
            f"{column}: {text.removeprefix(prefix)}" for column, text in scales)
    return cells


def tidy(ours, gpu, value: str = "bleu"):
    """A table's tidy rows (one per run) with the GPU runs below the toy ones and a ``scale``
    column: the GPU rows named as in the table (``row``, ``column``)."""
    import pandas as pd

    runs = gpu.drop(columns="row").rename(columns={"label": "row", "bleu": value})[
        ["row", "column", "seed", value, SCALE, "status", "sitting"]]
    return pd.concat([ours.assign(**{SCALE: TOY}), runs], ignore_index=True)


def summary(frame, study: str) -> str:
    """A README line: each slice of the study, its sittings and their status, or not yet run."""
    mine = frame[frame["study"] == study]
    planned = (name for name, (owner, _) in plan_slices().items() if owner == study)
    slices = list(dict.fromkeys([*mine["slice"], *planned]))
    parts = []
    for slice_ in slices:
        runs = mine[mine["slice"] == slice_].drop_duplicates("sitting")
        # every sitting's learning curves in one figure (headlab.workflow.sitting_speed.slice_figure)
        figure = os.path.join(os.path.dirname(runs["folder"].iloc[0]), "learning_curves.png") if len(runs) else ""
        parts.append(f"{slice_}: " + (", ".join(f"{sitting} ({status})" for sitting, status in
                                                zip(runs["sitting"], runs["status"])) or NOT_YET_RUN)
                     + (f"; curves: {figure}" if figure and os.path.isfile(figure) else ""))
    return f"- {GPU} (results/published/, the `(GPU)` rows of the tables): " + "; ".join(parts)


def _lines(file: str) -> int:
    with open(file, encoding="utf-8") as handle:
        return sum(1 for _ in handle)


#: what names a system of a published contrast: its heads (paper A: one row, several head
#: configurations) or its table row (papers B-D: paper D's fine-tunes share their parent's heads)
SYSTEM_KEYS = ("heads", "row")


def _claim_groups(frame, study: str, table: str, by: str = "heads"):
    """(slice, layers, pair, test) -> system (its ``by``) -> the averaged runs, of one study table."""
    runs = seeds_of(frame[(frame["study"] == study) & (frame["table"] == table)])
    return {key: {system: rows for system, rows in group.groupby(by, sort=False)}
            for key, group in runs.groupby(["slice", "layers", "pair", "test"], sort=False)}


def claim_inputs(frame, study: str, table: str, by: str = "heads") -> list[str]:
    """The hypotheses the claims on published runs read."""
    return [hypothesis(run) for systems in _claim_groups(frame, study, table, by).values()
            for rows in systems.values() for _, run in rows.iterrows()]


def judge(judge, frame, study: str, table: str, contrasts, reference: Callable, by: str = "heads") -> dict[str, str]:
    """Add the claims on the published runs of (study, table) to ``judge`` (the study's
    :class:`headlab.studies.effects.Judge`: one family, Holm over the toy and GPU claims).

    ``contrasts``: ``(claim_of, [(weight, system), ...])``, a system named by its ``by``
    column (:data:`SYSTEM_KEYS`), ``claim_of(slice, layers, pair)`` the
    :class:`~headlab.studies.effects.Claim`; ``reference(pair, test)``: the reference
    file this workflow has for that test set (None, or one of another length: no test). A
    one-seed system takes the seed variance of the published systems with several seeds on
    the same slice (the toy models' is another scale's), else no test is made. A contrast a
    published slice trains but cannot be judged here (no reference of its test set in this
    workflow, a shortened one, a system with no run scored on the whole test set yet) is a
    ``not judged`` row saying why, not a row missing beside the table's GPU rows. Returns
    compared -> scale, for ``effects.csv``'s ``scale`` column."""
    import pandas as pd

    from headlab.eval.significance import Term, scorer, seed_pool

    assert by in SYSTEM_KEYS, f"a published system is named by one of {SYSTEM_KEYS}, not {by!r}"
    score, scales = scorer("bleu"), {}
    averaged = _claim_groups(frame, study, table, by)
    published = frame[(frame["study"] == study) & (frame["table"] == table)]
    for key, runs in published.groupby(["slice", "layers", "pair", "test"], sort=False):
        (slice_, layers, pair, test), systems = key, averaged.get(key, {})
        ref, stats, pool = reference(pair, test), None, None
        for claim_of, weights in contrasts:
            names = [system for _, system in weights]
            if not set(names) <= set(runs[by]):
                continue                # the slice does not train these systems
            claim = claim_of(slice_, layers, pair)
            why = _not_judged(systems, names, runs, ref, test, by)
            averaged_all = all(system in systems for system in names)    # else: every published run, labelled
            shown = (pd.concat([systems[system] for system in names]) if averaged_all
                     else runs[runs[by].isin(names)])
            statuses = ", ".join(sorted(set(shown["status"])))
            seeds = ", ".join(sorted(set(shown["seed"]), key=lambda seed: (len(seed), seed)))
            scales[claim.compared] = f"{GPU}: {slice_}, seed{'s' if ',' in seeds else ''} {seeds}, {statuses}"
            if why is not None:
                judge.unjudged(claim, why)
                continue
            if stats is None:           # every whole-test system of the slice: the seed pool's too
                stats = {system: {run["seed"]: judge.stats(hypothesis(run), ref, pair.split("-")[1])
                                  for _, run in rows.iterrows()} for system, rows in systems.items()
                         if _not_judged(systems, [system], runs, ref, test, by) is None}
                pool = seed_pool(list(stats.values()), score, samples=judge.samples)
            judge.items(claim, [Term(weight, stats[system]) for weight, system in weights], score, pool)
    return scales


def reference_of(files, model_of: Callable) -> Callable:
    """``(pair, test)`` -> this workflow's reference of ``test`` for a corpus pair the study
    trains and scores that test set of (``files``: the study's ``Files``; ``model_of(corpus,
    pair)``: one of its models there, whose reference it is), or None: :func:`judge`'s
    ``reference``."""
    from headlab.studies.common import corpus_pairs

    def find(pair: str, test: str) -> str | None:
        for corpus, trained in corpus_pairs(files.study):
            if trained == pair and files.test(corpus) == test:
                return files.ref(model_of(corpus, pair))
        return None
    return find


def with_scale(frame, scales: dict[str, str]):
    """``effects.csv``'s rows with a ``scale`` column after ``compared``: a published
    contrast's (:func:`judge`'s ``scales``), else ``toy``."""
    frame = frame.copy()
    frame.insert(frame.columns.get_loc("compared") + 1, SCALE,
                 [scales.get(compared, TOY) for compared in frame["compared"]])
    return frame


def _not_judged(systems, names, runs, ref: str | None, test: str, by: str = "heads") -> str | None:
    """Why a published contrast cannot be judged in this workflow, or None."""
    lacking = [system for system in names if system not in systems]
    if lacking:
        left = runs[runs[by].isin(lacking)]
        statuses = sorted(set(left["status"].where(~at_the_clocks_step(left), "deadline at the clock's step")))
        return (f"{' and '.join(lacking)} {'has' if len(lacking) == 1 else 'have'} no published run to average "
                f"yet (published: {', '.join(statuses)})")
    if ref is None:
        return f"this workflow has no reference of {test} to score the published hypotheses on"
    lengths = {_lines(hypothesis(run)) for system in names for _, run in systems[system].iterrows()}
    expected = _lines(ref)
    if lengths != {expected}:
        shortened = " (test_limit shortens it)" if len(lengths) == 1 and expected < min(lengths) else ""
        return (f"the published hypotheses have {', '.join(map(str, sorted(lengths)))} lines, this workflow's "
                f"{test} reference {expected}{shortened}")
    return None


# -- the sittings made before this layout -----------------------------------------------------

#: slice, status, stop reason and what each lacks, of the two sittings of the first layout
FIRST_SITTINGS = {
    "2026-11-26-h200-e327191": dict(
        slice="A-T1-deep", status="diverged",
        stop_reason=("diverged near the learning rate's peak (noam factor 2.0: 0.0028 at step 1,000; training "
                     "cross-entropy up from 2.3-2.5 at step 900 to 3.3-3.9 by 1,150, 8L first); compared at step "
                     "1,000, the newest common checkpoint"),
        lacks=["a converged or smooth model: all three diverged near the learning rate's peak",
               "validation scores (none ran: best_step unknown)", "seeds other than 1"]),
    "2026-11-27-h100-65e2124": dict(
        slice="A-T1-deep", status="deadline",
        stop_reason="deadline at step 1000 of ~1,050; learning curves still falling",
        lacks=["convergence: the deadline stopped the trainings with the learning curves still falling",
               "validation scores (none ran: best_step unknown)", "seeds other than 1"]),
}


def first_layout_rows(folder: str, sitting: str, slice_: str, status: str, stop_reason: str) -> list[dict]:
    """``rows.csv``'s rows of a sitting folder of the first layout (``T1_deep.csv`` +
    ``provenance.json``: paper A's T1 deep row, one seed; ``row`` as the GPU plan names it:
    8Ftoken's is Table 5's deep row)."""
    import csv

    with open(os.path.join(folder, "provenance.json"), encoding="utf-8") as handle:
        provenance = json.load(handle)
    with open(os.path.join(folder, "T1_deep.csv"), encoding="utf-8", newline="") as handle:
        models = list(csv.DictReader(handle))
    return [{"slice": slice_, "sitting": sitting, "study": "paper_A", "table": "T1", "row": f"{model['paper_table']} deep",
             "heads": model["heads"], "layers": model["layers"], "pair": provenance["test"]["pair"],
             "seed": model["seed"].removeprefix("seed"), "test": provenance["test"]["split"], "step": model["step"],
             "best_step": "", "stop_reason": stop_reason, "status": status, "bleu": model["bleu"],
             "bleu_ci_low": model["bleu_ci_low"], "bleu_ci_high": model["bleu_ci_high"], "chrf": model["chrf"],
             "src_tok_s": model["src_tok_s"], "tgt_tok_s": model["tgt_tok_s"], "gpu": provenance["machine"]["gpu"],
             "commit": provenance["headlab commit"], "date": sitting[:10]} for model in models]


def migrate_folder(folder: str) -> None:
    """Write ``rows.csv`` of a first-layout sitting folder named as in :data:`FIRST_SITTINGS`
    and add ``slice``, ``status`` and ``lacks`` to its provenance (its other files stay)."""
    import csv

    sitting = os.path.basename(os.path.normpath(folder))
    facts = FIRST_SITTINGS[sitting]
    rows = first_layout_rows(folder, sitting, facts["slice"], facts["status"], facts["stop_reason"])
    with open(os.path.join(folder, "rows.csv"), "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    file = os.path.join(folder, "provenance.json")
    with open(file, encoding="utf-8") as handle:
        provenance = json.load(handle)
    provenance.update(slice=facts["slice"], status=facts["status"], lacks=facts["lacks"])
    with open(file, "w", encoding="utf-8") as handle:
        json.dump(provenance, handle, indent=1, sort_keys=True)
        handle.write("\n")


def _suite_report(sitting_tests: list[dict], remainder_tests: list[dict]) -> str:
    """The CUDA suite's report: each test's outcome in the sitting and in the second call
    (whose log continues the sitting's: its new lines are the tests it ran again)."""
    import csv
    import io

    again = remainder_tests[len(sitting_tests):] if remainder_tests[:len(sitting_tests)] == sitting_tests \
        else remainder_tests
    first = {row["nodeid"]: row for row in sitting_tests if row["when"] == "call"}
    second = {row["nodeid"]: row for row in again if row["when"] == "call"}
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["test", "sitting_outcome", "remainder_outcome", "seconds"])
    for test in dict.fromkeys([*first, *second]):
        writer.writerow([test, first.get(test, {}).get("outcome", ""), second.get(test, {}).get("outcome", ""),
                         (second.get(test) or first[test])["seconds"]])
    return out.getvalue()


def import_tarball(tarball: str, dest: str, remainder: str | None = None, beside: tuple[str, ...] = ()) -> None:
    """The small files of a returned ``headlab-sitting.tar.gz`` (and of the second call's,
    ``remainder``) as a sitting folder: the publication (tables, scores, provenance,
    hypotheses), learning curves read from the training logs, the machine's packages, the CUDA
    suite's report, the idle attention bench; ``beside``: files copied as they are (the
    sitting's README, its status.json files). Then :func:`migrate_folder`."""
    import shutil
    import tarfile

    from headlab.engine.logs import read_curve
    from headlab.io import ARCHIVE_ERRORS, archive_problem, read_to_the_end

    gpu = os.path.basename(os.path.normpath(dest)).split("-")[3]

    def members(path):
        # read to gzip's trailer, so that its CRC-32 checks what was unpacked: tarfile alone
        # stops before it, and a byte changed inside a stored block would be imported as it is
        try:
            with tarfile.open(path) as tar:
                files = {os.path.normpath(member.name): tar.extractfile(member).read()
                         for member in tar.getmembers() if member.isfile()}
                read_to_the_end(tar)
        except ARCHIVE_ERRORS as err:
            raise DataError(f"cannot import this sitting: {archive_problem(err)}", path=path) from None
        return files

    def tests(files):
        return [json.loads(line) for line in files.get("logs/gpu-tests.jsonl", b"").decode().splitlines() if line]

    sitting = members(tarball)                   # both read whole before the folder is made:
    later = members(remainder) if remainder else {}  # a damaged tarball leaves no partial folder
    os.makedirs(dest, exist_ok=True)
    wanted = {name: name.rsplit("/", 1)[1] for name in sitting if name.startswith("results/published/gpu-sitting/")}
    wanted["logs/machine-packages.txt"] = "machine-packages.txt"
    for name, target in wanted.items():
        with open(os.path.join(dest, target), "wb") as handle:
            handle.write(sitting[name])
    for name, data in sitting.items():
        if name.startswith("train-logs/") and name.endswith(".log") and not name.endswith(".console.log"):
            heads = name.rsplit("/", 1)[1].removesuffix(".log")
            log = os.path.join(dest, f".{heads}.train.log")
            with open(log, "wb") as handle:
                handle.write(data)
            read_curve(log).to_csv(os.path.join(dest, f"learning_curve.{heads}.csv"), index=False)
            os.remove(log)
    with open(os.path.join(dest, "cuda-suite.csv"), "w", encoding="utf-8") as handle:
        handle.write(_suite_report(tests(sitting), tests(later)))
    extra = {"logs/gpu-tests-rest.log": "cuda-suite-failure.txt",
             "bench/bench-idle/attention.csv": f"bench-attention-idle-{gpu}.csv"}
    for name, target in extra.items():
        if name in later:
            with open(os.path.join(dest, target), "wb") as handle:
                handle.write(later[name])
    for file in beside:
        shutil.copyfile(file, os.path.join(dest, os.path.basename(file)))
    migrate_folder(dest)


def main(argv: list[str] | None = None) -> int:
    """``python -m headlab.studies.published [--root results/published] [--shared ../shared/gpu-sittings]``:
    write ``rows.csv`` of the first-layout sittings (moved to their slice folder first:
    ``git mv``) and import those still only in the shared folder."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m headlab.studies.published", description=main.__doc__)
    parser.add_argument("--root", default=ROOT, help="the published tree the first sittings are written into")
    parser.add_argument("--shared", default="../shared/gpu-sittings",
                        help="the folder of the sittings' returned tarballs")
    args = parser.parse_args(argv)
    try:
        _import_first_sittings(args.root, args.shared)
    except HeadlabError as err:  # a missing or damaged sitting: one line, no traceback
        print(f"{parser.prog}: {err}", file=sys.stderr)
        return 1
    return 0


def _import_first_sittings(root: str, shared: str) -> None:
    """Each of :data:`FIRST_SITTINGS` under ``root``: migrated where it is there, else
    imported from its returned tarballs in ``shared``."""
    for sitting, facts in FIRST_SITTINGS.items():
        dest = os.path.join(root, facts["slice"], sitting)
        source = os.path.join(shared, sitting)
        if os.path.isfile(os.path.join(dest, "T1_deep.csv")):
            migrate_folder(dest)
        elif os.path.isfile(os.path.join(source, "sitting.tar.gz")):
            beside = tuple(os.path.join(source, name) for name in ("README.md", "status-sitting.json",
                                                                   "status-remainder.json")
                           if os.path.isfile(os.path.join(source, name)))
            remainder = os.path.join(source, "remainder.tar.gz")
            import_tarball(os.path.join(source, "sitting.tar.gz"), dest,
                           remainder if os.path.isfile(remainder) else None, beside)
        else:
            raise DataError(f"sitting {sitting}: neither {dest}/T1_deep.csv nor {source}/sitting.tar.gz")
        print(f"{dest}: rows.csv")


if __name__ == "__main__":
    raise SystemExit(main())
