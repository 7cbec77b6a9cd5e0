"""Paper A's tables (1-6) and figures (2-3), each beside the paper's own numbers.

Each builder: (files) -> (inputs, build); build() returns (Table, tidy ours) for a table,
(tidy, plot keywords) for a figure."""
from __future__ import annotations

from typing import Callable

import pandas as pd

from headlab.studies import common, published
from headlab.studies.common import at_seeds, corpus_pairs, load_json, seeds as study_seeds
from headlab.studies.paper_A.grid import (FIXED, ablation_systems, eight_fixed, eight_fixed_lowres, find_pair,
                                          one_model, roles, runs, scenario, system_label)
from headlab.studies.tables import Table, beside, pivot

PAPER_ROLE = {"6+1": "shallow", "6+6": "deep"}
LOWRES = "low-res"
PARAMS = "#params (M)"


class Files(common.StudyFiles):
    """Where the generic rules wrote what paper A reads (the BLEU, translation and reference
    of the first test set are :class:`~headlab.studies.common.StudyFiles`')."""

    def params(self, model) -> str:
        return self.model_file("params", model)

    def mucow(self, model, ablation="full") -> str:
        return self.model_file("mucow_accuracy", model, ablation=ablation)

    def mucow_details(self, model, ablation="full") -> str:
        """MuCoW's outcome of each sentence (hit, miss…), in the order of its key file."""
        return self.model_file("mucow_details", model, ablation=ablation)

    def mucow_key(self, model) -> str:
        return self.model_file("mucow_key", model)

    def sva(self, model, ablation="full") -> str:
        return self.model_file("distil_accuracy", model, suite="subj_verb_agreement", ablation=ablation)

    def compare(self, model, systems: list[tuple[str, str]], part: str) -> str:
        """compare-mt's ``part`` of the group of ``systems`` (heads, ablation) that differ
        from ``model`` in their heads alone."""
        return self.model_file("compare", model, split=self.test(model["corpus"]),
                               systems="--".join(f"{heads}.{ablation}" for heads, ablation in systems), part=part)


def reference(table: str) -> pd.DataFrame:
    return common.reference("paper_A", table, dtype={"layers": str})


# -- tables -----------------------------------------------------------------------------

def t1(files: Files):
    """BLEU, standard scenario, layers x head specs, * = significantly below 8L (bootstrap on
    the first seed, the paper's test); a cell of several seeds is their mean ± sd."""
    study, heads = files.study, files.study["heads"]
    base, others = heads[0], heads[1:]
    groups = [(one_model(study, corpus, pair, layers, base), layers)
              for corpus, pair in corpus_pairs(study) for layers in study["layers"]]
    systems = [(base, "full")] + [(system, "full") for system in others]
    inputs = [files.compare(model, systems, "bootstrap") for model, _ in groups]
    inputs += [files.bleu(run) for model, _ in groups for system in heads
               for run in runs(study, {**model, "heads": system})]
    inputs += published.inputs(files.published)

    def build():
        rows = []
        for model, layers in groups:
            boot = pd.read_csv(files.compare(model, systems, "bootstrap"))
            for system in heads:
                lower = _lower_than_base(boot, system, base)
                for run in runs(study, {**model, "heads": system}):
                    rows.append(dict(pair=model["pair"], layers=layers, system=system, seed=run["seed"],
                                     bleu=load_json(files.bleu(run))["bleu"], significantly_lower=lower,
                                     mark=common.UNTESTED if lower is None else "*" if lower else "",
                                     row=f"{model['pair'].upper()} {system}"))
        ours = pd.DataFrame(rows)
        # the paper's layout: one block of systems per direction, layers as columns
        paper = reference("T1").assign(row=lambda ref: ref["pair"].str.upper() + " " + ref["system"],
                                       value=lambda ref: ref["value"].astype(float))
        table = beside(pivot(ours, index="row", columns="layers", values="bleu", mark="mark", best=None,
                             over="seed"),
                       pivot(paper, index="row", columns="layers", values="value", mark="significantly_lower", best=None))
        table.caption = ("Paper A Table 1: BLEU by encoder+decoder layers; several seeds: mean ± sd (n). * significantly "
                         f"lower than 8L (paired bootstrap, compare-mt, p < {files.significance():g}; the paper's: p < 0.05; ours: "
                         f"seed {common.first_seed(study)} "
                         "alone, test-set sampling only, the paper's test: not the verdict, which is effects.csv's "
                         "seed-aware test and may disagree).")
        if (ours["mark"] == common.UNTESTED).any():
            table.caption += (f" {common.UNTESTED}: compare-mt's bootstrap has no result for the system, not "
                              "judged (not 'not significant').")
        table, gpu = published.extend(table, published.read(files.published), "paper_A", "T1",
                                      label=lambda run: f"{run['pair'].upper()} {run['heads']}",
                                      column=lambda run: run["layers"])
        gpu = gpu.assign(system=gpu["heads"], row=gpu["label"], significantly_lower=False, mark="")
        ours = pd.concat([ours.assign(scale=published.TOY), gpu[[*ours.columns, "scale", "status", "sitting"]]],
                         ignore_index=True)
        return table, ours
    return inputs, build


def _lower_than_base(boot: pd.DataFrame, system: str, base: str) -> bool | None:
    """Whether compare-mt's bootstrap finds ``system`` significantly below ``base``; None
    where its CSV has no result for the system (not judged). The base is never below itself."""
    if system == base:
        return False
    row = common.bootstrap_row(boot, f"{system}.full", "significantly_lower")
    return None if row is None else bool(row["significantly_lower"])


def _bleu_table(files: Files, part: str | None, name: str, caption: str, gpu_rows: bool = False):
    """A table of the deep models' BLEU by pair; ``gpu_rows``: with the published GPU rows
    of the table (:mod:`headlab.studies.published`)."""
    study = files.study
    block = study if part is None else scenario(study, part)
    models = [run for corpus, pair in corpus_pairs(block) for system in study["heads"]
              for run in runs(study, one_model(study, corpus, pair, study["deep"], system, block if part else None),
                              part)]
    inputs = [files.bleu(model) for model in models] + (published.inputs(files.published) if gpu_rows else [])

    def build():
        ours = pd.DataFrame([dict(system=model["heads"], column=model["pair"], seed=model["seed"],
                                  bleu=load_json(files.bleu(model))["bleu"]) for model in models],
                            columns=["system", "column", "seed", "bleu"])
        paper = reference(name).assign(column=lambda ref: ref["pair"], value=lambda ref: ref["value"].astype(float))
        ours_table = pivot(ours, index="system", columns="column", values="bleu", best="max", over="seed") \
            if len(ours) else Table(pd.DataFrame(), None)
        table = beside(ours_table, pivot(paper, index="system", columns="column", values="value", best="max"))
        table.caption = caption + " Several seeds: mean ± sd (n)."
        if gpu_rows:
            table, gpu = published.extend(table, published.read(files.published), "paper_A", name,
                                          label=lambda run: run["heads"], column=lambda run: run["pair"])
            gpu = gpu.assign(system=gpu["label"])
            ours = pd.concat([ours.assign(scale=published.TOY), gpu[[*ours.columns, "scale", "status", "sitting"]]],
                             ignore_index=True)
        return table, ours
    return inputs, build


def t2(files: Files):
    return _bleu_table(files, "lowres", "T2", "Paper A Table 2: low-resource scenarios (6+6; §4.2 hyper-parameters: "
                                              "1k-token batches, dropout 0.3, tied embeddings). Paper: IWSLT/KO-EN data.",
                       gpu_rows=True)


def t3(files: Files):
    return _bleu_table(files, "highres", "T3", "Paper A Table 3: high-resource scenario (6+6). Empty 'ours' "
                                               "columns: not configured in this run (no such data offline).")


def t4(files: Files):
    """BLEU change when head k of 7Ftoken+1L is disabled at test time (§4.3), per seed of ``seeds``."""
    study = files.study
    cells = [(pair, layers, role, run) for corpus, pair in corpus_pairs(study) for layers, role in roles(study)
             for run in at_seeds(one_model(study, corpus, pair, layers, FIXED), study_seeds(study))]
    heads = range(1, 9)
    inputs = [files.bleu(model, ablation) for *_, model in cells
              for ablation in ["full"] + [f"no-h{head}" for head in heads]]

    def build():
        rows = []
        for pair, layers, role, model in cells:
            full = load_json(files.bleu(model))["bleu"]
            for head in heads:
                rows.append(dict(system=f"H{head} disabled", column=f"{pair} {role}", layers=layers, seed=model["seed"],
                                 bleu_delta=load_json(files.bleu(model, f"no-h{head}"))["bleu"] - full))
        ours = pd.DataFrame(rows)
        paper = reference("T4")
        paper = paper.assign(system=paper["ablation"].str.replace("no-h", "H") + " disabled",
                             column=paper["pair"] + " " + paper["layers"].map(PAPER_ROLE),
                             value=paper["value"].astype(float))
        table = beside(pivot(ours, index="system", columns="column", values="bleu_delta", best="min", over="seed"),
                       pivot(paper, index="system", columns="column", values="value", best="min"))
        table.caption = (f"Paper A Table 4: BLEU difference when one head of {FIXED} is disabled in every "
                         f"encoder layer at test time. shallow = ours {study['shallow']} / paper 6+1; "
                         f"deep = ours {study['deep']} / paper 6+6. Heads 6/7 follow §3.2 (end/start).")
        return table, ours
    return inputs, build


def t5(files: Files):
    """Eight fixed heads (§4.4): BLEU of 8L / 7Ftoken+1L / 8Ftoken in the standard scenario and,
    where configured, the low-resource one (mean over seeds); #params of the standard models."""
    study = files.study
    systems = [study["heads"][0], FIXED, eight_fixed(study)]
    standard = [(one_model(study, corpus, pair, study["deep"], system), pair, None)
                for corpus, pair in corpus_pairs(study) for system in systems]
    lowres = [(one_model(study, corpus, pair, study["deep"], system, study["lowres"]), f"{pair} {LOWRES}", "lowres")
              for corpus, pairs in eight_fixed_lowres(study).items() for pair in pairs for system in systems]
    cells = [(run, column) for model, column, part in standard + lowres for run in runs(study, model, part)]
    inputs = [files.bleu(model) for model, _ in cells] + [files.params(model) for model, *_ in standard]

    def build():
        rows = [dict(system=model["heads"], column=column, seed=model["seed"], value=load_json(files.bleu(model))["bleu"])
                for model, column in cells]
        for model, *_ in standard:
            rows.append(dict(system=model["heads"], column=PARAMS, seed=model["seed"],
                             value=load_json(files.params(model))["params"] / 1e6))
        ours = pd.DataFrame(rows).drop_duplicates(["system", "column", "seed"])
        paper = reference("T5")
        standard_pairs = set(reference("T1")["pair"])   # en-de, de-en; the others are §4.2's en-vi, vi-en
        paper = paper.assign(column=[(PARAMS if metric == "params_millions" else
                                      pair if pair in standard_pairs else f"{pair} {LOWRES}")
                                     for metric, pair in zip(paper["metric"], paper["pair"])],
                             value=paper["value"].astype(float))
        ours_table = pivot(ours, index="system", columns="column", values="value", best=None, decimals=2, over="seed")
        ours_table.column_decimals[PARAMS] = _distinct_places(ours_table.values[PARAMS])
        table = beside(ours_table, pivot(paper, index="system", columns="column", values="value", best=None))
        table.caption = (f"Paper A Table 5: eight fixed heads ({study['deep']}); '{LOWRES}' columns use the "
                         "low-resource hyper-parameters of Table 2. #params counted from our standard-scenario "
                         "checkpoints (tied embeddings counted once; first seed), the paper's for its EN-DE model. "
                         "Several seeds: mean ± sd (n).")
        return table, ours
    return inputs, build


def _distinct_places(values, most: int = 6) -> int:
    """Fewest decimals (at least 2) at which different counts print differently: the three
    T5 models differ by a few thousand parameters, 0.002 M at the embedded default's size."""
    values = values.dropna()
    for places in range(2, most + 1):
        if values.round(places).nunique() == values.nunique():
            return places
    return most


def three_by_role(files: Files, pair: str, result: Callable, which: list[str] | None = None) -> list[tuple]:
    """(layers, role, system label, seed, ``result(run, ablation)``) for 8L, 7Ftoken+1L and
    its H8-disabled variant at the shallow and deep settings, at seeds ``which`` (default: the
    first): the grid of Table 6 and Figure 3."""
    study, corpus = files.study, find_pair(files.study, pair)
    if corpus is None:
        return []
    return [(layers, role, system_label(system, ablation), run["seed"], result(run, ablation))
            for layers, role in roles(study) for system, ablation in ablation_systems(study)
            for run in at_seeds(one_model(study, corpus, pair, layers, system), which or [common.first_seed(study)])]


def t6(files: Files):
    study = files.study
    pair = study.get("wsd_pair", "de-en")
    cells = three_by_role(files, pair, files.mucow, study_seeds(study))
    inputs = [file for *_, file in cells]

    def build():
        rows = []
        for layers, role, system, seed, file in cells:
            frame = pd.read_csv(file)
            average = frame[frame["corpus"] == "ted+tatoeba"].iloc[0]
            rows.append(dict(system=system, column=f"MuCoW {role}", accuracy=average["precision"],
                             coverage=average["coverage"], layers=layers, seed=seed))
        ours = pd.DataFrame(rows, columns=["system", "column", "accuracy", "coverage", "layers", "seed"])
        paper = reference("T6")
        paper = paper.assign(system=[system_label(system, ablation)
                                     for system, ablation in zip(paper["system"], paper["ablation"])],
                             column=paper["metric"].map({"accuracy_mucow": "MuCoW", "accuracy_contrawsd": "ContraWSD"})
                             + " " + paper["layers"].map(PAPER_ROLE), value=paper["value"].astype(float))
        table = beside(pivot(ours, index="system", columns="column", values="accuracy", best="max", decimals=3,
                             over="seed")
                       if len(ours) else Table(pd.DataFrame(), None),
                       pivot(paper, index="system", columns="column", values="value", best="max", decimals=3))
        table.decimals = 3
        table.caption = (f"Paper A Table 6: WSD accuracy of {pair} models, MuCoW TED+Tatoeba average "
                         "(ours: precision = hit / (hit + miss), MuCoW's scoring; a seed whose translations hold "
                         "neither sense of any TED or Tatoeba item is n/a and left out of the mean, blank if every "
                         "seed is). ContraWSD is not "
                         "available offline: paper numbers only.")
        return table, ours
    return inputs, build


# -- figures ----------------------------------------------------------------------------

def f2(files: Files):
    """BLEU by reference length (first seed) with each bucket's sentence count and sacreBLEU's
    95% bootstrap interval (compare-mt's buckets, :func:`headlab.eval.compare.length_buckets`)."""
    study = files.study
    pair = study.get("wsd_pair", "de-en")
    corpus = find_pair(study, pair)
    model = one_model(study, corpus, pair, study["deep"], study["heads"][0]) if corpus else None
    systems = {system_label(system, ablation): files.hyp({**model, "heads": system}, ablation)
               for system, ablation in ablation_systems(study)} if model else {}
    inputs = [*systems.values(), files.ref(model)] if model else []

    def build():
        from headlab.eval.common import read_aligned
        from headlab.eval.compare import length_buckets

        texts = read_aligned(ref=files.ref(model), **{f"sys{i}": hyp for i, hyp in enumerate(systems.values())})
        hyps = {name: texts[f"sys{i}"] for i, name in enumerate(systems)}
        tidy = length_buckets(texts["ref"], hyps, confidence=files.samples()).assign(seed=model["seed"])
        return tidy, dict(x="bucket", y="bleu", hue="system", xlabel="reference length (words)", ylabel="BLEU",
                          interval=("ci_low", "ci_high"), counts="count",
                          title=f"Paper A Fig. 2: BLEU by sentence length ({pair}, {study['deep']}, seed {model['seed']})\n"
                                f"bars: 95% bootstrap interval (sacreBLEU, {files.samples()} resamples), "
                                "which need not contain the score")
    return inputs, build


def f3(files: Files):
    """SVA accuracy by subject-verb distance (first seed), each bin's count and 95% Wilson
    interval (binomial: the contrasts of a bin are independent items)."""
    study = files.study
    pair = study.get("sva_pair", "en-de")
    cells = three_by_role(files, pair, files.sva)
    inputs = [file for *_, file in cells]

    def build():
        from headlab.eval.significance import binomial_interval

        frames = []
        for layers, _, system, seed, file in cells:
            frame = pd.read_csv(file)
            frames.append(frame[frame["by"] == "distance"].assign(system=system, layers=layers, seed=seed))
        tidy = pd.concat(frames, ignore_index=True)
        bounds = [binomial_interval(correct, total) for correct, total in zip(tidy["correct"], tidy["total"])]
        tidy["ci_low"], tidy["ci_high"] = [low for low, _ in bounds], [high for _, high in bounds]
        return tidy, dict(x="bucket", y="accuracy", hue="system", col="layers", xlabel="subject-verb distance",
                          ylabel="accuracy", interval=("ci_low", "ci_high"), counts="total",
                          title=f"Paper A Fig. 3: subject-verb agreement by distance ({pair}, DistilLingEval, seed "
                                f"{common.first_seed(study)}; bars: 95% Wilson interval)")
    return inputs, build


TABLES: dict[str, Callable] = {"T1": t1, "T2": t2, "T3": t3, "T4": t4, "T5": t5, "T6": t6}
FIGURES: dict[str, Callable] = {"F2": f2, "F3": f3}
