"""Paper B: Goindani & Shrivastava (2021), *A Dynamic Head Importance Computation Mechanism
for Neural Machine Translation* (DHICM). Tables 2-4 and Figures 1-3, each beside the
paper's own numbers (``paper_B/reference.csv``).

Systems (§4.3)
--------------
* **T-base**: the preset's hyper-parameters ("Default", Table 2), stock heads.
* **DHICM**: DHICM in the last encoder self-attention, decoder self-attention and cross-
  attention layer (``*(HL),HL|dhicm`` at every site, §4.3), KL weight ``lambda_kl``.
* **T-optimal**: the hyper-parameters the grid search chose, stock heads. It has exactly
  DHICM's variant (same options, ``lambda_kl``/``dhicm_dropout`` included, which act only
  on DHICM layers), so the two differ only in their heads and compare-mt's paired
  bootstrap compares them as two systems of one group.

The two-stage grid search (§4.2)
---------------------------------
Stage 1 tunes architecture options (``grid.stage1``: FFN size, number of heads) with
regularisation at the preset's values; stage 2 tunes regularisation (``grid.stage2``:
dropout, attention dropout, DHICM dropout, label smoothing) at stage 1's choice. Both
search with **DHICM models** (the paper's Table 2 tunes DHICM's own dropout, so its search
trained DHICM), one search per language pair, and choose the minimum validation
cross-entropy of each candidate's best checkpoint (``model_selection: valid_loss``,
:mod:`headlab.engine.selection`). Stage 2's candidates and the final models are derived
in the workflow from the stage files (``<results>/paper_B/stages/CORPUS/PAIR/stageN.json``,
written by the generic ``study_stage`` Snakemake checkpoint), never by hand. The final
DHICM model *is* stage 2's winner (same path: not trained twice). OpenNMT-py 3.5.1 has no
separate activation dropout (its FFN applies ``dropout``), so Table 2's "Activation
Dropout" row cannot be tuned here.

Data-size sweep (Table 4): each of ``sizes`` is drawn ``subsamples`` times (seeds 1..k,
size wildcard ``N.sK``: its own BPE and vocabulary), T-base, T-optimal and DHICM trained
on each with the chosen hyper-parameters (§4.3: "we used the optimal hyper-parameters
learned using the full training set"); BLEU mean and standard deviation per size; the
full size is Table 3's models.

Seeds. The grid search runs **once**, at the study's first seed, and the final models are
trained at every seed: the search picks hyper-parameters for the task (paper B searched
once), and a search per seed would make "T-optimal" a different system per seed (a seed
that happened to favour another dropout would change the comparison, not only its noise)
and multiply the search's cost (6 candidates on the embedded default) by the seeds. The
first seed's DHICM final model is the search's winner itself; at the other seeds T-optimal
and DHICM are trained with the chosen options. T3's systems (T-base, T-optimal, DHICM on
the full set) are the headline comparison (``headline_seeds``); the sweep's subsampled
models are trained at ``seeds`` (Table 4 averages over subsamples and seeds).
"""
from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import numpy as np
import pandas as pd

from headlab.errors import ConfigError, DataError
from headlab.studies import common
from headlab.studies.common import first_seed, headline_seeds, load_json, seeds as study_seeds
from headlab.studies.effects import Claim, Judge
from headlab.studies.tables import beside, pivot
from headlab.studies.timing import training_time
from headlab.naming import heads_name, model_path, results_paths, variant_name

OUTDIR = "paper_B"
STAGES = ("stage1", "stage2")
SYSTEMS = ("T-base", "T-optimal", "DHICM")
#: Table 2's rows: OpenNMT-py option -> the paper's name
HYPER = {"transformer_ff": "Feed forward dim.", "heads": "Attention heads", "dropout": "Dropout",
         "attention_dropout": "Attention Dropout", "dhicm_dropout": "Dropout (Section 3.1)",
         "label_smoothing": "Label Smoothing"}


# -- the grid -------------------------------------------------------------------------

def _pairs(study) -> list[tuple[str, str]]:
    return [(corpus, pair) for corpus, pairs in study["data"].items() for pair in pairs]


def _preset(study) -> dict:
    from headlab.engine.config import resolve_preset
    return resolve_preset(study["preset"])


def _plain(value):
    return value[0] if isinstance(value, list) and len(value) == 1 else value


def _heads(study, overrides: Mapping, dhicm: bool) -> str:
    """Head configuration of a model with ``overrides`` (its number of heads) at all sites."""
    count = int(_plain(overrides.get("heads", _preset(study).get("heads", 8))))
    spec = f"*({count}L),{count}L|dhicm" if dhicm else f"{count}L"
    return heads_name(spec, spec, spec)


def _model(study, corpus, pair, overrides: Mapping, dhicm: bool, size="full", seed=None) -> dict[str, str]:
    """A model at ``seed`` (default: the first seed, where the grid search runs)."""
    return dict(corpus=corpus, pair=pair, size=str(size), preset=study["preset"], layers=study["layers"],
                heads=_heads(study, overrides, dhicm), seed=str(seed or first_seed(study)),
                variant=variant_name(overrides))


def size_seeds(study, size) -> list[str]:
    """Seeds of the final models at ``size``: the full set is Table 3 (the headline
    comparison, ``headline_seeds``), the sweep's subsamples use ``seeds``."""
    return headline_seeds(study) if str(size) == "full" else study_seeds(study)


def _grid(grid: Mapping[str, list]) -> list[dict]:
    keys = sorted(grid)
    return [dict(zip(keys, values)) for values in itertools.product(*(grid[k] for k in keys))]


def _canonical(study, overrides: Mapping) -> dict:
    """Overrides without the values the preset has already: a candidate that repeats the
    preset's value is the same model as one that leaves it out (same path, trained once)."""
    preset = _preset(study)
    out = {}
    for k, v in overrides.items():
        if k in preset and _plain(preset[k]) == _plain(v):
            continue
        # OpenNMT-py's list options (dropout schedules) stay lists
        out[k] = [v] if isinstance(preset.get(k), list) and not isinstance(v, list) else v
    return out


def candidates(study, stage: str, before: Mapping | None = None) -> list[dict]:
    """The overrides of each candidate of ``stage`` (``before``: earlier stages' choice).

    The study-level ``lambda_kl`` is the default: a ``lambda_kl`` listed in a stage's grid
    is tuned like any option (its value is in the candidate's overrides, so its path names
    it), and stage 2 keeps stage 1's choice of it unless its own grid lists it again."""
    lam = {"lambda_kl": study.get("lambda_kl", 0.1)}
    return [_canonical(study, {**lam, **(before or {}), **combo}) for combo in _grid(study["grid"][stage])]


def stage_file(root: str, corpus: str, pair: str, stage: str) -> str:
    return f"{root}/{OUTDIR}/stages/{corpus}/{pair}/{stage}.json"


def read_stage(root: str | None, corpus: str, pair: str, stage: str) -> dict | None:
    if root is None:
        return None
    path = Path(stage_file(root, corpus, pair, stage))
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def chosen(study, root: str | None, corpus: str, pair: str) -> dict | None:
    """The final hyper-parameters (stage 2's choice), or None while the search runs."""
    last = read_stage(root, corpus, pair, STAGES[-1])
    return None if last is None else dict(last["chosen"])


def stage_models(study, root: str | None, corpus: str, pair: str, stage: str) -> list[tuple[dict, dict]] | None:
    """(model, overrides) of a stage's candidates; None while an earlier stage is open."""
    before = {}
    if stage != STAGES[0]:
        earlier = read_stage(root, corpus, pair, STAGES[STAGES.index(stage) - 1])
        if earlier is None:
            return None
        before = earlier["chosen"]
    return [(_model(study, corpus, pair, o, dhicm=True), o) for o in candidates(study, stage, before)]


def final_models(study, root: str | None, corpus: str, pair: str, size="full",
                 seed=None) -> dict[str, tuple[dict, dict]] | None:
    """system -> (model, overrides) at ``size`` and ``seed`` (default the first); None while
    the search runs."""
    best = chosen(study, root, corpus, pair)
    if best is None:
        return None
    return {"T-base": (_model(study, corpus, pair, {}, dhicm=False, size=size, seed=seed), {}),
            "T-optimal": (_model(study, corpus, pair, best, dhicm=False, size=size, seed=seed), best),
            "DHICM": (_model(study, corpus, pair, best, dhicm=True, size=size, seed=seed), best)}


def sweep_sizes(study, corpus: str, pair: str) -> list[str]:
    """Table 4's size wildcards (``N.sK``) for a corpus pair (all of ``data`` unless ``sweep_data``)."""
    if pair not in study.get("sweep_data", study["data"]).get(corpus, []):
        return []
    return [f"{n}.s{k}" for n in study.get("sizes", []) for k in range(1, study.get("subsamples", 3) + 1)]


def models(study: Mapping[str, Any], root: str | None = None) -> Iterator[tuple[dict, dict]]:
    """(model, OpenNMT overrides) of every model the study trains. Without ``root``, or
    before the stage files exist, only what is known without the search: T-base and the
    stage-1 candidates."""
    for corpus, pair in _pairs(study):
        for size in ["full", *sweep_sizes(study, corpus, pair)]:
            for seed in size_seeds(study, size):
                yield _model(study, corpus, pair, {}, dhicm=False, size=size, seed=seed), {}
        for stage in STAGES:
            for m, o in stage_models(study, root, corpus, pair, stage) or []:
                yield m, o
        for size in ["full", *sweep_sizes(study, corpus, pair)]:
            for seed in size_seeds(study, size):
                for m, o in (final_models(study, root, corpus, pair, size, seed) or {}).values():
                    yield m, o


def varied_options(study) -> set[str]:
    """The OpenNMT-py options the grid search varies (a global override of one is a config error)."""
    return {option for stage in STAGES for option in (study["grid"].get(stage) or {})}


def stage_keys(study) -> list[dict[str, str]]:
    """One search per language pair: its stages in order."""
    return [dict(corpus=c, pair=p, stage=s) for c, p in _pairs(study) for s in STAGES]


def check(study) -> None:
    """Config errors the schema cannot express, naming the key. Every grid value is checked
    as the option's value (headlab's range checks: ``lambda_kl`` and the dropouts >= 0, ...),
    since a grid value becomes a candidate's training option."""
    from headlab.engine.config import check_values

    for stage in STAGES:
        grid = study["grid"].get(stage) or {}
        if not grid:
            raise ConfigError(f"the {stage} grid is empty: give at least one option with values",
                              key=f"studies.paper_B.grid.{stage}")
        for option, values in grid.items():
            key = f"studies.paper_B.grid.{stage}.{option}"
            if not values:
                raise ConfigError(f"no values for {option!r}", key=key)
            for value in values:
                try:
                    check_values({option: value}, source="paper_B grid")
                except ConfigError as err:
                    raise ConfigError(f"grid value {value!r}: {str(err).split('] ', 1)[-1]}", key=key) from None
    if study.get("lambda_kl", 0.1) < 0:
        raise ConfigError("lambda_kl must be >= 0 (eq. 5 subtracts lambda * KL)", key="studies.paper_B.lambda_kl")


# -- file names (as the workflow's generic rules write them) ------------------------------

class Files(common.StudyFiles):
    def model(self, m):
        return f"{results_paths(self.root)['models']}/{model_path(m)}/model.pt"

    def best(self, m):
        return f"{results_paths(self.root)['models']}/{model_path(m)}/model.best.json"

    def attention(self, m, site):
        return f"{self._scores(m)}/{self.test(m['corpus'])}.{site}.attention.npz"

    def compare(self, m, systems: list[str]):
        group = (f"{m['corpus']}/{m['pair']}/{m['size']}/{m['preset']}/{m['variant']}/{m['layers']}/"
                 f"seed{m['seed']}")
        name = "--".join(f"{h}.full" for h in systems)
        return f"{results_paths(self.root)['scores']}/compare/{group}/{self.test(m['corpus'])}/{name}.bootstrap.csv"

    def finals(self, corpus, pair, size="full", seed=None):
        found = final_models(self.study, self.root, corpus, pair, size, seed)
        if found is None:
            raise DataError(f"paper_B: the grid search of {corpus} {pair} has not finished "
                            f"({stage_file(self.root, corpus, pair, STAGES[-1])} is missing)")
        return found



def reference(table: str) -> pd.DataFrame:
    return common.reference("paper_B", table, dtype=str)


def _label(corpus, pair):
    return f"{corpus} {pair}"


# -- the grid search: stage selection (the study_stage checkpoint) -------------------------

def stage_inputs(f: Files, corpus: str, pair: str, stage: str) -> list[str]:
    found = stage_models(f.study, f.root, corpus, pair, stage)
    if found is None:
        raise DataError(f"stage {stage} of {corpus} {pair} needs the earlier stage first")
    return [f.model(m) for m, _ in found]


def select(f: Files, corpus: str, pair: str, stage: str) -> dict:
    """The stage file: every candidate's best validation cross-entropy, and the choice."""
    rows = []
    for m, o in stage_models(f.study, f.root, corpus, pair, stage):
        best = load_json(f.best(m))
        rows.append({"options": {k: v for k, v in o.items() if k in f.study["grid"][stage]},
                     "overrides": o, "model": model_path(m), "valid_xent": best["xent"],
                     "valid_ppl": best["ppl"], "best_step": best["step"]})
    winner = min(rows, key=lambda r: (r["valid_xent"], r["model"]))
    return {"study": "paper_B", "corpus": corpus, "pair": pair, "stage": stage,
            "chosen": winner["overrides"], "chosen_model": winner["model"], "candidates": rows}


# -- tables -----------------------------------------------------------------------------

def t2(f: Files):
    """Default and chosen hyper-parameters per pair (Table 2), beside the paper's."""
    s = f.study
    inputs = [stage_file(f.root, c, p, st) for c, p in _pairs(s) for st in STAGES]

    def build():
        preset = _preset(s)
        rows = []
        for option, name in HYPER.items():
            rows.append(dict(row=name, column="Default", value=_plain(preset.get(option, 0.0))))
            for c, p in _pairs(s):
                best = chosen(s, f.root, c, p)
                rows.append(dict(row=name, column=_label(c, p), value=_plain(best.get(option, preset.get(option, 0.0)))))
        ours = pd.DataFrame(rows)
        paper = reference("T2").assign(value=lambda r: pd.to_numeric(r["value"], errors="coerce"))
        table = beside(pivot(ours, index="row", columns="column", values="value", best=None),
                       pivot(paper, index="row", columns="column", values="value", best=None))
        table.decimals = 2
        table.integer_rows()                 # heads, feed-forward size: 8, 2048 (not 8.00)
        table.caption = ("Paper B Table 2: default (the preset) and chosen hyper-parameters per language pair "
                         "(two-stage grid search with DHICM models, minimum validation cross-entropy; "
                         "the candidates are in T2grid).")
        return table, ours
    return inputs, build


def t2grid(f: Files):
    """Every grid candidate's validation cross-entropy (the numbers behind Table 2)."""
    s = f.study
    inputs = [stage_file(f.root, c, p, st) for c, p in _pairs(s) for st in STAGES]

    def build():
        rows = []
        for c, p in _pairs(s):
            preset = _preset(s)
            for st in STAGES:
                stage = read_stage(f.root, c, p, st)
                for cand in stage["candidates"]:
                    # every grid option, with the preset's value where the candidate keeps it
                    label = ", ".join(f"{k}={_plain(cand['overrides'].get(k, preset.get(k)))}"
                                      for k in sorted(s["grid"][st]))
                    rows.append(dict(row=f"{st}: {label}", column=_label(c, p), value=cand["valid_xent"],
                                     chosen=cand["model"] == stage["chosen_model"], stage=st,
                                     best_step=cand["best_step"], model=cand["model"]))
        ours = pd.DataFrame(rows)
        table = pivot(ours, index="row", columns="column", values="value", mark="chosen", mark_symbol="←",
                      best=None, decimals=4)
        table.caption = ("Paper B grid search: validation cross-entropy (nats/token) of each candidate's best "
                         "checkpoint; ← the chosen one of each stage.")
        return table, ours
    return inputs, build


def _t3_cells(f: Files):
    """(corpus, pair, seed -> the finals at that seed) of Table 3 (the full set)."""
    return [(c, p, {seed: f.finals(c, p, seed=seed) for seed in size_seeds(f.study, "full")})
            for c, p in _pairs(f.study)]


def t3(f: Files):
    """BLEU of T-base / T-optimal / DHICM per pair (Table 3), mean ± sd over seeds; ⇑/↑ DHICM
    significantly better than T-optimal (paired bootstrap on the first seed, p < 0.01 / the
    configured level; the seed-aware test is in effects.csv)."""
    cells = _t3_cells(f)
    first = first_seed(f.study)
    inputs = [f.bleu(m) for _, _, runs in cells for finals in runs.values() for m, _ in finals.values()]
    inputs += [f.compare(runs[first]["T-optimal"][0], [runs[first]["T-optimal"][0]["heads"],
                                                       runs[first]["DHICM"][0]["heads"]])
               for _, _, runs in cells]

    def build():
        rows = []
        for c, p, runs in cells:
            opt, dh = runs[first]["T-optimal"][0], runs[first]["DHICM"][0]
            boot = pd.read_csv(f.compare(opt, [opt["heads"], dh["heads"]]))
            row = boot[boot["system"] == f"{dh['heads']}.full"].iloc[0]
            for seed, finals in runs.items():
                for system, (m, _) in finals.items():
                    mark = ""
                    if system == "DHICM" and bool(row["significantly_higher"]):
                        mark = "⇑" if 1.0 - float(row["win_system"]) < 0.01 else "↑"
                    rows.append(dict(row=_label(c, p), column=system, seed=seed, bleu=load_json(f.bleu(m))["bleu"],
                                     mark=mark, p_value=float(row["p_value"]) if system == "DHICM" else None))
        ours = pd.DataFrame(rows)
        paper = reference("T3").assign(value=lambda r: r["value"].astype(float))
        table = beside(pivot(ours, index="row", columns="column", values="bleu", mark="mark", best=None,
                             col_order=list(SYSTEMS), over="seed"),
                       pivot(paper, index="row", columns="column", values="value", best=None, col_order=list(SYSTEMS)))
        table.caption = ("Paper B Table 3: BLEU (sacreBLEU) of T-base, T-optimal and DHICM; several seeds: mean ± sd (n). "
                         "⇑ / ↑: DHICM better than T-optimal by paired bootstrap (compare-mt, seed "
                         f"{first} alone, test-set sampling only: the paper's test, not the verdict), p < 0.01 / p < the configured "
                         "level; the verdict is effects.csv's seed-aware test and may disagree.")
        return table, ours
    return inputs, build


def _sweep(f: Files, seeds: list[str] | None = None):
    """(corpus, pair, size, system, seed, model) of Table 4 (default: every seed of each size)."""
    out = []
    for c, p in _pairs(f.study):
        for size in ["full", *sweep_sizes(f.study, c, p)]:
            for seed in seeds or size_seeds(f.study, size):
                for system, (m, _) in f.finals(c, p, size, seed).items():
                    out.append((c, p, size, system, seed, m))
    return out


def t4(f: Files):
    """BLEU by training-set size, mean (± standard deviation) over the random subsamples and
    seeds (Table 4)."""
    cells = _sweep(f)
    inputs = [f.bleu(m) for *_, m in cells]

    def build():
        rows = [dict(pair=_label(c, p), size=str(size).split(".s")[0], subsample=size, seed=seed, system=system,
                     run=f"{size}/seed{seed}", bleu=load_json(f.bleu(m))["bleu"])
                for c, p, size, system, seed, m in cells]
        ours = pd.DataFrame(rows)
        ours["row"] = ours["pair"] + " " + ours["size"]
        table = pivot(ours, index="row", columns="system", values="bleu", best=None, col_order=list(SYSTEMS),
                      over="run")
        paper = reference("T4").assign(value=lambda r: r["value"].astype(float))
        table = beside(table, pivot(paper, index="row", columns="column", values="value", best=None,
                                    col_order=list(SYSTEMS)))
        table.caption = (f"Paper B Table 4: BLEU by training-set size, mean ± standard deviation (n runs) over "
                         f"{f.study.get('subsamples', 3)} random subsamples x seeds {study_seeds(f.study)} (full size: "
                         f"Table 3's seeds). The paper: IWSLT14 10K-160K, ours: {', '.join(sorted(set(ours['pair'])))}.")
        stats = ours.groupby(["pair", "size", "system"], sort=False)["bleu"].agg(["mean", "std"]).reset_index()
        return table, ours.merge(stats, on=["pair", "size", "system"])
    return inputs, build


def importance(f: Files):
    """Beyond the paper: DHICM's importance G per head over the test set, every DHICM model:
    mean importance and mean entropy (nats; ln H = uniform) per site and head."""
    models_ = [(c, p, size, m) for c, p, size, system, _, m in _sweep(f, [first_seed(f.study)]) if system == "DHICM"]
    inputs = [f.attention(m, site) for *_, m in models_ for site in ("enc", "cross")]
    inputs += [f.attention(m, "dec") for *_, m in models_]

    def build():
        from headlab.engine.export import load_importance
        rows = []
        for c, p, size, m in models_:
            for site in ("enc", "dec", "cross"):
                data = load_importance(f.attention(m, site))
                if not data:
                    continue
                g = np.concatenate([imp[-1] for _, imp in data])           # last layer: (tokens, H)
                entropy = -(g * np.log(np.clip(g, 1e-12, None))).sum(-1)
                for h in range(g.shape[1]):
                    rows.append(dict(model=f"{_label(c, p)} {size}", site=site, head=h + 1,
                                     mean_importance=float(g[:, h].mean()), entropy=float(entropy.mean()),
                                     uniform_entropy=math.log(g.shape[1]), tokens=len(g)))
        ours = pd.DataFrame(rows)
        ours["row"] = ours["model"] + " " + ours["site"]
        ours["column"] = "head " + ours["head"].astype(str)
        table = pivot(ours, index="row", columns="column", values="mean_importance", best=None, decimals=3)
        ent = ours.drop_duplicates("row").set_index("row")
        table.values["entropy"] = ent["entropy"].reindex(table.values.index)
        table.values["ln H"] = ent["uniform_entropy"].reindex(table.values.index)
        table.marks = None
        table.caption = ("DHICM importance G (eq. 1) of the last layer of each site over the test set: mean "
                         "per head, and the mean entropy of G per token (ln H = all heads equal); first seed "
                         f"({first_seed(f.study)}).")
        return table, ours
    return inputs, build


# -- figures ----------------------------------------------------------------------------

def _cross_maps(f: Files, corpus, pair, size):
    finals = f.finals(corpus, pair, size)
    return [(system, finals[system][0]) for system in ("T-base", "DHICM")]


def _attention_figure(f: Files, small: bool):
    s = f.study
    corpus, pair = _pairs(s)[0]
    size = sweep_sizes(s, corpus, pair)[0] if small and sweep_sizes(s, corpus, pair) else "full"
    systems = _cross_maps(f, corpus, pair, size)
    inputs = [f.attention(m, "cross") for _, m in systems]
    number = s.get("figure_sentence", 0)

    def build():
        from headlab.engine.export import load_attention
        rows = []
        for system, m in systems:
            data = load_attention(f.attention(m, "cross"))
            if number >= len(data):
                raise DataError(f"figure_sentence {number}: the export has {len(data)} sentences",
                                key="studies.paper_B.figure_sentence")
            with np.load(f.attention(m, "cross")) as npz:
                source = str(npz["src_tokens"][number]).split()
            target, att = data[number]
            heads_mean = att[-1].mean(0)                                   # last layer, mean over heads
            for i, t in enumerate(target):
                for j, w in enumerate(source):
                    rows.append(dict(system=system, target=f"{i}:{t}", source=f"{j}:{w}", attention=float(heads_mean[i, j])))
        tidy = pd.DataFrame(rows)
        which = f"{size} training pairs" if small else "full training set"
        return tidy, dict(kind="heatmap", x="source", y="target", value="attention", col="system",
                          title=f"Paper B Fig. {1 if small else 2}: cross-attention, last decoder layer, mean over "
                                f"heads ({corpus} {pair}, {which}, test sentence {number})")
    return inputs, build


def f1(f: Files):
    return _attention_figure(f, small=True)


def f2(f: Files):
    return _attention_figure(f, small=False)


def f3(f: Files):
    """Importance of each head for each source token, last encoder layer (Figure 3)."""
    s = f.study
    corpus, pair = _pairs(s)[0]
    m = f.finals(corpus, pair)["DHICM"][0]
    inputs = [f.attention(m, "enc")]
    number = s.get("figure_sentence", 0)

    def build():
        from headlab.engine.export import load_importance
        data = load_importance(f.attention(m, "enc"))
        tokens, g = data[number]
        rows = [dict(token=f"{i}:{t}", head=f"head {h + 1}", importance=float(g[-1][i, h]))
                for i, t in enumerate(tokens) for h in range(g.shape[-1])]
        return pd.DataFrame(rows), dict(kind="heatmap", x="head", y="token", value="importance",
                                        title=f"Paper B Fig. 3: DHICM importance per source token and head, "
                                              f"last encoder layer ({corpus} {pair}, test sentence {number})")
    return inputs, build


TABLES: dict[str, Callable] = {"T2": t2, "T2grid": t2grid, "T3": t3, "T4": t4, "importance": importance}
FIGURES: dict[str, Callable] = {"F1": f1, "F2": f2, "F3": f3}


# -- the paper's claims, judged (effects.csv) ----------------------------------------------

def _paper_gap(a: str, b: str) -> float:
    """The paper's mean of a - b over its Table 3 corpora."""
    ref = reference("T3").assign(value=lambda r: r["value"].astype(float)).pivot(index="row", columns="column",
                                                                                 values="value")
    return float((ref[a] - ref[b]).mean())


def _paper_t4_gain() -> float:
    """The paper's DHICM - T-optimal at its smallest size minus at its full size (Table 4)."""
    ref = reference("T4").assign(value=lambda r: r["value"].astype(float)).pivot(index="row", columns="column",
                                                                                 values="value")
    gap = ref["DHICM"] - ref["T-optimal"]
    sizes = sorted(gap.index, key=lambda r: int(r.split()[-1].rstrip("K")))
    return float(gap[sizes[0]] - gap[sizes[-1]])


def effects(f: Files):
    """(inputs, build) of ``effects.csv``: §5's claims, Table 3 at every seed and Table 4's
    gain at small sizes (the subsamples and seeds as runs)."""
    s = f.study
    claims = []
    for c, p, runs in _t3_cells(f):
        by = {system: [finals[system][0] for finals in runs.values()] for system in SYSTEMS}
        claims.append((Claim("§5 (T3): the grid search's hyper-parameters beat the default: T-optimal > T-base",
                             f"T-optimal − T-base ({c} {p})", ">", 0.0, _paper_gap("T-optimal", "T-base")),
                       [(1, by["T-optimal"]), (-1, by["T-base"])]))
        claims.append((Claim("§5 (T3): DHICM > T-optimal (DHICM >= T-optimal in every pair)",
                             f"DHICM − T-optimal ({c} {p})", ">", 0.0, _paper_gap("DHICM", "T-optimal")),
                       [(1, by["DHICM"]), (-1, by["T-optimal"])]))
        small = sweep_sizes(s, c, p)
        if small:
            sweep = [(size, system, m) for c_, p_, size, system, _, m in _sweep(f) if (c_, p_) == (c, p)]
            # (DHICM - T-optimal) over every small run (sizes x subsamples x seeds) minus on the full set
            terms = [(sign * (1 if small_size else -1), [m for size, sys_, m in sweep
                                                         if sys_ == system and (size != "full") == small_size])
                     for system, sign in (("DHICM", 1), ("T-optimal", -1)) for small_size in (True, False)]
            claims.append((Claim("§5 (T4): DHICM's gain over T-optimal is larger at small training sizes",
                                 f"(DHICM − T-optimal) at {', '.join(map(str, s.get('sizes', [])))} pairs − at the "
                                 f"full set ({c} {p})", ">", 0.0, _paper_t4_gain()), terms))
    inputs = [path for _, terms in claims for _, ms in terms for m in ms for path in f.scored(m)[:2]]

    def run_id(m):
        return m["seed"] if m["size"] == "full" else f"{m['size']}/{m['seed']}"

    def build():
        judge = Judge("paper_B", f.samples())
        for claim, terms in claims:
            # the sweep's runs of a system span sizes and subsamples: not seed replicates for the pool
            judge.systems(claim, [(w, {run_id(m): f.scored(m) for m in ms}) for w, ms in terms],
                          pooled=all(m["size"] == "full" for _, ms in terms for m in ms))
        return judge.frame()
    return inputs, build


def readme(f: Files, provenance: Mapping[str, Any]) -> str:
    s = f.study
    preset = f.options()
    lines = [
        "# Paper B reproduction (generated)",
        "",
        "Goindani & Shrivastava (2021). *A Dynamic Head Importance Computation Mechanism for Neural Machine "
        "Translation*. Every table shows our number beside the paper's (`ours` / `paper`).",
        "This file is written by the workflow; do not edit it.",
        "",
        "## Scale of this run",
        "",
        "- data: " + "; ".join(f"{c} {p} (test: {f.test(c)})" for c, p in _pairs(s)),
        f"- model preset `{s['preset']}`: d={preset.get('hidden_size')}, layers {s['layers']}, "
        f"{preset.get('train_steps')} steps of {preset.get('batch_size')} {preset.get('batch_type', 'tokens')}, "
        f"validation every {preset.get('valid_steps')} steps, the best checkpoint by validation cross-entropy",
        f"- DHICM: last layer of encoder self-, decoder self- and cross-attention, lambda_kl = {s.get('lambda_kl', 0.1)}"
        + (" (tuned by the grid)" if any("lambda_kl" in (s["grid"].get(st) or {}) for st in STAGES) else ""),
        "- grid: " + "; ".join(f"{st}: " + ", ".join(f"{k} {v}" for k, v in s['grid'][st].items()) for st in STAGES),
        f"- data-size sweep: {', '.join(map(str, s.get('sizes', [])))} x {s.get('subsamples', 3)} subsamples, and the full set",
        f"- seeds: the grid search at seed {first_seed(s)}; T3's systems at {headline_seeds(s)}, the sweep at "
        f"{study_seeds(s)}",
        f"- training: {training_time([m for m, _ in models(s, f.root)], f.root)}",
        *common.readme_tail(provenance, f"{f.root}/{OUTDIR}/effects.csv", [
            "`T2`: default and chosen hyper-parameters; `T2grid`: every candidate's validation cross-entropy",
            "`T3`: T-base / T-optimal / DHICM BLEU with paired-bootstrap marks (DHICM vs T-optimal)",
            "`T4`: BLEU by training size (mean ± sd over subsamples)",
            "`importance`: DHICM importance per head (mean) and its entropy, every DHICM model",
            "`F1`, `F2`: cross-attention of T-base vs DHICM (small / full training set); `F3`: importance per "
            "token and head, last encoder layer"]),
    ]
    return "\n".join(lines)
