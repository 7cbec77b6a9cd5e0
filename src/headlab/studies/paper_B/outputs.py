"""Paper B's tables (2-4, and DHICM's head importance beyond the paper) and figures (1-3),
each beside the paper's own numbers where it has them."""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import pandas as pd

from headlab.errors import DataError
from headlab.studies import common, published
from headlab.studies.common import UNTESTED, arrows, bootstrap_row, corpus_pairs, first_seed, load_json, pair_label, seeds as study_seeds
from headlab.studies.paper_B.grid import (OUTDIR, STAGES, SYSTEMS, chosen, final_models, plain, preset, size_seeds,
                                          sweep_sizes)
from headlab.studies.tables import beside, pivot

#: Table 2's rows: OpenNMT-py option -> the paper's name
HYPER = {"transformer_ff": "Feed forward dim.", "heads": "Attention heads", "dropout": "Dropout",
         "attention_dropout": "Attention Dropout", "dhicm_dropout": "Dropout (Section 3.1)",
         "label_smoothing": "Label Smoothing"}


class Files(common.StudyFiles):
    def attention(self, model, site: str) -> str:
        """A model's attention (and DHICM importance) export of the test set at one site."""
        return self.model_file("attention", model, split=self.test(model["corpus"]), site=site)

    def compare(self, model, systems: list[str]) -> str:
        """compare-mt's paired bootstrap of the full (unablated) ``systems`` heads of
        ``model``'s group."""
        return self.model_file("compare", model, split=self.test(model["corpus"]),
                               systems="--".join(f"{heads}.full" for heads in systems), part="bootstrap")

    def stage(self, corpus: str, pair: str, stage: str) -> str:
        return common.stage_file(self.root, OUTDIR, corpus, pair, stage)

    def finals(self, corpus, pair, size="full", seed=None):
        found = final_models(self.study, self.root, corpus, pair, size, seed)
        if found is None:
            raise DataError(f"paper_B: the grid search of {corpus} {pair} has not finished "
                            f"({self.stage(corpus, pair, STAGES[-1])} is missing)")
        return found


def reference(table: str) -> pd.DataFrame:
    return common.reference("paper_B", table, dtype=str)


# -- tables -----------------------------------------------------------------------------

def t2(files: Files):
    """Default and chosen hyper-parameters per pair (Table 2), beside the paper's."""
    study = files.study
    inputs = [files.stage(corpus, pair, stage) for corpus, pair in corpus_pairs(study) for stage in STAGES]

    def build():
        defaults = preset(study)
        rows = []
        for option, name in HYPER.items():
            rows.append(dict(row=name, column="Default", value=plain(defaults.get(option, 0.0))))
            for corpus, pair in corpus_pairs(study):
                best = chosen(study, files.root, corpus, pair)
                rows.append(dict(row=name, column=pair_label(corpus, pair),
                                 value=plain(best.get(option, defaults.get(option, 0.0)))))
        ours = pd.DataFrame(rows)
        paper = reference("T2").assign(value=lambda ref: pd.to_numeric(ref["value"], errors="coerce"))
        table = beside(pivot(ours, index="row", columns="column", values="value", best=None),
                       pivot(paper, index="row", columns="column", values="value", best=None))
        table.decimals = 2
        table.integer_rows()                 # heads, feed-forward size: 8, 2048 (not 8.00)
        table.caption = ("Paper B Table 2: default (the preset) and chosen hyper-parameters per language pair "
                         "(two-stage grid search with DHICM models, minimum validation cross-entropy; "
                         "the candidates are in T2grid).")
        return table, ours
    return inputs, build


def t2grid(files: Files):
    """Every grid candidate's validation cross-entropy (the numbers behind Table 2)."""
    study = files.study
    inputs = [files.stage(corpus, pair, stage) for corpus, pair in corpus_pairs(study) for stage in STAGES]

    def build():
        rows = []
        for corpus, pair in corpus_pairs(study):
            defaults = preset(study)
            for stage in STAGES:
                found = common.read_stage(files.root, OUTDIR, corpus, pair, stage)
                for candidate in found["candidates"]:
                    # every grid option, with the preset's value where the candidate keeps it
                    label = ", ".join(f"{option}={plain(candidate['overrides'].get(option, defaults.get(option)))}"
                                      for option in sorted(study["grid"][stage]))
                    rows.append(dict(row=f"{stage}: {label}", column=pair_label(corpus, pair),
                                     value=candidate["valid_xent"], chosen=candidate["model"] == found["chosen_model"],
                                     stage=stage, best_step=candidate["best_step"], model=candidate["model"]))
        ours = pd.DataFrame(rows)
        table = pivot(ours, index="row", columns="column", values="value", mark="chosen", mark_symbol="←",
                      best=None, decimals=4)
        table.caption = ("Paper B grid search: validation cross-entropy (nats/token) of each candidate's best "
                         "checkpoint; ← the chosen one of each stage.")
        return table, ours
    return inputs, build


def t3_cells(files: Files):
    """(corpus, pair, seed -> the finals at that seed) of Table 3 (the full set)."""
    return [(corpus, pair, {seed: files.finals(corpus, pair, seed=seed) for seed in size_seeds(files.study, "full")})
            for corpus, pair in corpus_pairs(files.study)]


def t3(files: Files):
    """BLEU of T-base / T-optimal / DHICM per pair (Table 3), mean ± sd over seeds; ⇑/↑ DHICM
    significantly better than T-optimal (paired bootstrap on the first seed, p < 0.01 / the
    configured level; the seed-aware test is in effects.csv)."""
    cells = t3_cells(files)
    first = first_seed(files.study)
    inputs = [files.bleu(model) for _, _, runs in cells for finals in runs.values() for model, _ in finals.values()]
    inputs += [files.compare(runs[first]["T-optimal"][0], [runs[first]["T-optimal"][0]["heads"],
                                                           runs[first]["DHICM"][0]["heads"]])
               for _, _, runs in cells]
    inputs += published.inputs(files.published)

    def build():
        rows = []
        for corpus, pair, runs in cells:
            optimal, dhicm = runs[first]["T-optimal"][0], runs[first]["DHICM"][0]
            bootstrap = pd.read_csv(files.compare(optimal, [optimal["heads"], dhicm["heads"]]))
            mark, p_value = _better_than_optimal(bootstrap, f"{dhicm['heads']}.full")
            for seed, finals in runs.items():
                for system, (model, _) in finals.items():
                    rows.append(dict(row=pair_label(corpus, pair), column=system, seed=seed,
                                     bleu=load_json(files.bleu(model))["bleu"], mark=mark if system == "DHICM" else "",
                                     p_value=p_value if system == "DHICM" else None))
        ours = pd.DataFrame(rows)
        paper = reference("T3").assign(value=lambda ref: ref["value"].astype(float))
        table = beside(pivot(ours, index="row", columns="column", values="bleu", mark="mark", best=None,
                             col_order=list(SYSTEMS), over="seed"),
                       pivot(paper, index="row", columns="column", values="value", best=None, col_order=list(SYSTEMS)))
        table.caption = ("Paper B Table 3: BLEU (sacreBLEU) of T-base, T-optimal and DHICM; several seeds: mean ± sd (n). "
                         f"{arrows(files.significance())}: DHICM better than T-optimal by paired bootstrap (compare-mt, "
                         f"seed {first} alone, test-set sampling only: the paper's test, not the verdict); the verdict is effects.csv's seed-aware test and may disagree.")
        if (ours["mark"] == UNTESTED).any():
            table.caption += (f" {UNTESTED}: compare-mt's bootstrap has no result for DHICM, not judged (not "
                              "'not significant').")
        # a published run: its pair's row, its system's column (the plan's row names the system)
        table, gpu = published.extend(table, published.read(files.published), "paper_B", "T3",
                                      label=lambda run: published.corpus_pair(run, files.config["corpora"]),
                                      column=lambda run: run["row"])
        ours = published.tidy(ours, gpu, "bleu")
        return table, ours
    return inputs, build


def _better_than_optimal(bootstrap: pd.DataFrame, name: str) -> tuple[str, float | None]:
    """(mark, p-value) of DHICM (system ``name``) against T-optimal in compare-mt's bootstrap:
    ⇑ / ↑ / nothing, or n/a where the CSV has no result for it (not judged: an empty cell
    read as a flag would draw an arrow, a missing row would be no row of the table at all)."""
    row = bootstrap_row(bootstrap, name, "win_system", "significantly_higher", "p_value")
    if row is None:
        return UNTESTED, None
    if not bool(row["significantly_higher"]):
        return "", float(row["p_value"])
    return ("⇑" if 1.0 - float(row["win_system"]) < 0.01 else "↑"), float(row["p_value"])


def sweep(files: Files, seeds: list[str] | None = None):
    """(corpus, pair, size, system, seed, model) of Table 4 (default: every seed of each size)."""
    out = []
    for corpus, pair in corpus_pairs(files.study):
        for size in ["full", *sweep_sizes(files.study, corpus, pair)]:
            for seed in seeds or size_seeds(files.study, size):
                for system, (model, _) in files.finals(corpus, pair, size, seed).items():
                    out.append((corpus, pair, size, system, seed, model))
    return out


def t4(files: Files):
    """BLEU by training-set size, mean (± standard deviation) over the random subsamples and
    seeds (Table 4)."""
    cells = sweep(files)
    inputs = [files.bleu(model) for *_, model in cells]

    def build():
        rows = [dict(pair=pair_label(corpus, pair), size=str(size).split(".s")[0], subsample=size, seed=seed,
                     system=system, run=f"{size}/seed{seed}", bleu=load_json(files.bleu(model))["bleu"])
                for corpus, pair, size, system, seed, model in cells]
        ours = pd.DataFrame(rows)
        ours["row"] = ours["pair"] + " " + ours["size"]
        table = pivot(ours, index="row", columns="system", values="bleu", best=None, col_order=list(SYSTEMS),
                      over="run")
        paper = reference("T4").assign(value=lambda ref: ref["value"].astype(float))
        table = beside(table, pivot(paper, index="row", columns="column", values="value", best=None,
                                    col_order=list(SYSTEMS)))
        table.caption = (f"Paper B Table 4: BLEU by training-set size, mean ± standard deviation (n runs) over "
                         f"{files.study.get('subsamples', 3)} random subsamples x seeds {study_seeds(files.study)} "
                         f"(full size: Table 3's seeds). The paper: IWSLT14 10K-160K, ours: "
                         f"{', '.join(sorted(set(ours['pair'])))}.")
        stats = ours.groupby(["pair", "size", "system"], sort=False)["bleu"].agg(["mean", "std"]).reset_index()
        return table, ours.merge(stats, on=["pair", "size", "system"])
    return inputs, build


def importance(files: Files):
    """Beyond the paper: DHICM's importance G per head over the test set, every DHICM model:
    mean importance and mean entropy (nats; ln H = uniform) per site and head."""
    dhicm_models = [(corpus, pair, size, model)
                    for corpus, pair, size, system, _, model in sweep(files, [first_seed(files.study)])
                    if system == "DHICM"]
    inputs = [files.attention(model, site) for *_, model in dhicm_models for site in ("enc", "cross")]
    inputs += [files.attention(model, "dec") for *_, model in dhicm_models]

    def build():
        from headlab.engine.export import load_importance
        rows = []
        for corpus, pair, size, model in dhicm_models:
            for site in ("enc", "dec", "cross"):
                export = files.attention(model, site)
                data = load_importance(export)
                if not data:
                    # a DHICM model's every site ends in a DHICM layer (grid._heads), whose
                    # export always holds importance: without it the file is stale or wrong,
                    # and skipping it would drop the site's row without a word
                    raise DataError("no DHICM importance (imp_* arrays) in the attention export of a DHICM model: "
                                    "not an export of this model; delete it to export again", path=export)
                weights = np.concatenate([layers[-1] for _, layers in data])    # last layer: (tokens, H)
                entropy = -(weights * np.log(np.clip(weights, 1e-12, None))).sum(-1)
                for head in range(weights.shape[1]):
                    rows.append(dict(model=f"{pair_label(corpus, pair)} {size}", site=site, head=head + 1,
                                     mean_importance=float(weights[:, head].mean()), entropy=float(entropy.mean()),
                                     uniform_entropy=math.log(weights.shape[1]), tokens=len(weights)))
        ours = pd.DataFrame(rows)
        ours["row"] = ours["model"] + " " + ours["site"]
        ours["column"] = "head " + ours["head"].astype(str)
        table = pivot(ours, index="row", columns="column", values="mean_importance", best=None, decimals=3)
        by_row = ours.drop_duplicates("row").set_index("row")
        table.values["entropy"] = by_row["entropy"].reindex(table.values.index)
        table.values["ln H"] = by_row["uniform_entropy"].reindex(table.values.index)
        table.marks = None
        table.caption = ("DHICM importance G (eq. 1) of the last layer of each site over the test set: mean "
                         "per head, and the mean entropy of G per token (ln H = all heads equal); first seed "
                         f"({first_seed(files.study)}).")
        return table, ours
    return inputs, build


# -- figures ----------------------------------------------------------------------------

def _cross_maps(files: Files, corpus, pair, size):
    finals = files.finals(corpus, pair, size)
    return [(system, finals[system][0]) for system in ("T-base", "DHICM")]


def _attention_figure(files: Files, small: bool):
    study = files.study
    corpus, pair = corpus_pairs(study)[0]
    size = sweep_sizes(study, corpus, pair)[0] if small and sweep_sizes(study, corpus, pair) else "full"
    systems = _cross_maps(files, corpus, pair, size)
    inputs = [files.attention(model, "cross") for _, model in systems]
    number = study.get("figure_sentence", 0)

    def build():
        from headlab.engine.export import load_attention
        rows = []
        for system, model in systems:
            data = load_attention(files.attention(model, "cross"))
            if number >= len(data):
                raise DataError(f"figure_sentence {number}: the export has {len(data)} sentences",
                                key="studies.paper_B.figure_sentence")
            with np.load(files.attention(model, "cross")) as npz:
                source = str(npz["src_tokens"][number]).split()
            target, attention = data[number]
            heads_mean = attention[-1].mean(0)                             # last layer, mean over heads
            for target_index, target_token in enumerate(target):
                for source_index, source_token in enumerate(source):
                    rows.append(dict(system=system, target=f"{target_index}:{target_token}",
                                     source=f"{source_index}:{source_token}",
                                     attention=float(heads_mean[target_index, source_index])))
        tidy = pd.DataFrame(rows)
        which = f"{size} training pairs" if small else "full training set"
        return tidy, dict(kind="heatmap", x="source", y="target", value="attention", col="system",
                          title=f"Paper B Fig. {1 if small else 2}: cross-attention, last decoder layer, mean over "
                                f"heads ({corpus} {pair}, {which}, test sentence {number})")
    return inputs, build


def f1(files: Files):
    return _attention_figure(files, small=True)


def f2(files: Files):
    return _attention_figure(files, small=False)


def f3(files: Files):
    """Importance of each head for each source token, last encoder layer (Figure 3)."""
    study = files.study
    corpus, pair = corpus_pairs(study)[0]
    model = files.finals(corpus, pair)["DHICM"][0]
    inputs = [files.attention(model, "enc")]
    number = study.get("figure_sentence", 0)

    def build():
        from headlab.engine.export import load_importance
        data = load_importance(files.attention(model, "enc"))
        tokens, weights = data[number]
        rows = [dict(token=f"{index}:{token}", head=f"head {head + 1}", importance=float(weights[-1][index, head]))
                for index, token in enumerate(tokens) for head in range(weights.shape[-1])]
        return pd.DataFrame(rows), dict(kind="heatmap", x="head", y="token", value="importance",
                                        title=f"Paper B Fig. 3: DHICM importance per source token and head, "
                                              f"last encoder layer ({corpus} {pair}, test sentence {number})")
    return inputs, build


TABLES: dict[str, Callable] = {"T2": t2, "T2grid": t2grid, "T3": t3, "T4": t4, "importance": importance}
FIGURES: dict[str, Callable] = {"F1": f1, "F2": f2, "F3": f3}
