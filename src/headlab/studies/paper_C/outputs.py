"""Paper C's tables (1-3, A2, A3, the redundant shares) and figures (4, 5), each beside the
paper's own numbers (``reference.csv``), from the files the generic rules wrote."""
from __future__ import annotations

import re
from typing import Callable

import numpy as np
import pandas as pd

from headlab.errors import DataError
from headlab.naming import model_path, path
from headlab.studies import common, published
from headlab.studies.common import (UNTESTED, arrows, at_seeds, bootstrap_row, corpus_pairs, first_seed, load_json, pair_label,
                                    seeds as study_seeds)
from headlab.studies.paper_C.grid import (
    F5_SPLIT, OUTDIR, T1_SYSTEMS, T2_SYSTEMS, a2_models, a3_models, analysis_pair, enhanced, f4_models, runs, system_model,
    t1_models, t2_models, t3_models)
from headlab.studies.tables import beside, pivot

BLEU, DELTA, SPEED = "BLEU", "Δ", "Speed (steps/s)"
PARA_K = "#Para (K)"   # toy models: thousands, so that the variants differ in print
#: Figure 5's panels: panel -> (system kind, which head of the first enhanced layer): the
#: first head RHE labels redundant (its attention before / after enlivening), the first it
#: labels important (else the Transformer's head 1), and head 1 of Rel_Pos and Localness
F5_PANELS = {"(a) redundant head": ("RHElpea", "redundant-before"), "(b) LPEA+RHE-enlivened": ("RHElpea", "redundant"),
             "(c) Rel_Pos head": ("RelPos", "first"), "(d) Localness head": ("Local", "first"),
             "(e) important head": ("RHElpea", "important")}


class Files(common.StudyFiles):
    @property
    def ablation(self) -> str:
        """``avgN``: the average of the last N checkpoints (§A.1), else the trained model."""
        last = int(self.study.get("average_last", 1))
        return f"avg{last}" if last > 1 else "full"

    def bleu(self, model, ablation=None):
        return super().bleu(model, ablation or self.ablation)

    def params(self, model):
        return self.model_file("params", model)

    def benchmark(self, model):
        return self.model_file("train_benchmark", model)

    def attention(self, model, split=F5_SPLIT):
        return self.model_file("attention", model, split=split, site="enc")

    def parser_f1(self, parser):
        return path("parser_f1", self.root, outdir=OUTDIR, parser=parser)

    def compare(self, models: list[dict]):
        """compare-mt's bootstrap over a group of systems (they differ in their heads alone)."""
        systems = "--".join(f"{model['heads']}.{self.ablation}" for model in models)
        return self.model_file("compare", models[0], split=self.test(models[0]["corpus"]), systems=systems,
                               part="bootstrap")

    def speed(self, model) -> float:
        """Training steps per second of wall time (the train rule's benchmark)."""
        seconds = float(pd.read_csv(self.benchmark(model), sep="\t")["s"].iloc[-1])
        steps = int(self.options()["train_steps"])
        return steps / seconds


def reference(table: str) -> pd.DataFrame:
    return common.reference("paper_C", table, dtype=str).assign(
        value=lambda rows: pd.to_numeric(rows["value"], errors="coerce"), mark=lambda rows: rows["note"].where(
            rows["note"].isin(["↑", "⇑"]), ""))


def _bleu(files: Files, model) -> float:
    return load_json(files.bleu(model))["bleu"]


# -- tables -----------------------------------------------------------------------------------

def t1(files: Files):
    """BLEU and #params of the seven systems per pair (Table 1), BLEU the mean over seeds;
    ⇑/↑ better than the Transformer by paired bootstrap on the first seed (p < 0.01 / p < the
    configured level: :func:`headlab.studies.common.arrows`)."""
    cells = [(corpus, pair, t1_models(files.study, corpus, pair)) for corpus, pair in corpus_pairs(files.study)]
    inputs = [files.bleu(run) for _, _, systems in cells for model in systems.values() for run in runs(files.study, model)]
    inputs += [files.params(model) for _, _, systems in cells for model in systems.values()]
    inputs += [files.compare(list(systems.values())) for _, _, systems in cells]
    inputs += published.inputs(files.published)

    def build():
        rows = []
        for corpus, pair, systems in cells:
            boot = pd.read_csv(files.compare(list(systems.values())))
            for system, model in systems.items():
                name = f"{model['heads']}.{files.ablation}"
                mark, p_value = ("", None) if system == "Transformer" else _better_than_transformer(boot, name)
                for run in runs(files.study, model):
                    rows.append(dict(row=f"{pair_label(corpus, pair)} {BLEU}", column=system, seed=run["seed"],
                                     value=_bleu(files, run), mark=mark, p_value=p_value, model=model_path(run)))
                rows.append(dict(row=f"{pair_label(corpus, pair)} {PARA_K}", column=system, seed=model["seed"],
                                 value=load_json(files.params(model))["params"] / 1e3, mark="", p_value=None,
                                 model=model_path(model)))
        ours = pd.DataFrame(rows)
        paper = reference("T1")
        paper = paper.assign(row=paper["column"], column=paper["row"])
        order = list(T1_SYSTEMS)
        table = beside(pivot(ours, index="row", columns="column", values="value", mark="mark", best=None,
                             col_order=order, decimals=2, over="seed"),
                       pivot(paper, index="row", columns="column", values="value", mark="mark", best=None,
                             col_order=order))
        table.caption = ("Paper C Table 1: BLEU (sacreBLEU; several seeds: mean ± sd (n)) and trainable parameters "
                         "(ours in thousands, the paper in millions) of the Transformer, "
                         "Rel_Pos, Localness, DEA, DEA+RHE, LPEA and LPEA+RHE (enhanced encoder layers: "
                         f"{files.study.get('enhanced', '1-1')}). {arrows(files.significance())}: better than the Transformer by "
                         f"paired bootstrap (compare-mt, seed {first_seed(files.study)} alone, test-set sampling only: the "
                         "paper's test, not the verdict); the verdicts are effects.csv's seed-aware tests and may "
                         "disagree.")
        if (ours["mark"] == UNTESTED).any():
            table.caption += (f" {UNTESTED}: compare-mt's bootstrap has no result for the system, not judged (not "
                              "'not significant').")
        # a published run: its pair's BLEU row, its system's column (the plan's row names the system)
        table, gpu = published.extend(table, published.read(files.published), "paper_C", "T1",
                                      label=lambda run: f"{published.corpus_pair(run, files.config['corpora'])} {BLEU}",
                                      column=lambda run: run["row"])
        ours = published.tidy(ours, gpu, "value")
        return table, ours
    return inputs, build


def _better_than_transformer(boot: pd.DataFrame, name: str) -> tuple[str, float | None]:
    """(mark, p-value) of system ``name`` in compare-mt's bootstrap against the Transformer:
    ⇑ / ↑ / nothing, or n/a where the CSV has no result for it (not judged)."""
    row = bootstrap_row(boot, name, "win_system", "significantly_higher")
    if row is None:
        return UNTESTED, None
    p_value = 1.0 - float(row["win_system"])
    if not bool(row["significantly_higher"]):
        return "", p_value
    return ("⇑" if p_value < 0.01 else "↑"), p_value


def _delta_table(ours: pd.DataFrame, paper_table: str, caption: str, order):
    """Speed, BLEU and Δ BLEU vs the first row (``order[0]``) of the same seed; several seeds:
    mean ± sd (n) of each."""
    base = ours[ours["row"] == order[0]].set_index("seed")["bleu"]
    ours = ours.assign(delta=ours["bleu"] - ours["seed"].map(base).astype(float))
    tidy = ours.melt(id_vars=["row", "seed"], value_vars=[column for column in ("speed", "bleu", "delta") if column in ours],
                     var_name="column", value_name="value")
    tidy["column"] = tidy["column"].map({"speed": SPEED, "bleu": BLEU, "delta": DELTA})
    paper = reference(paper_table)
    if len(paper):
        paper_base = paper[(paper["column"] == BLEU)].set_index("row")["value"]
        deltas = (paper_base - paper_base.iloc[0]).rename("value").reset_index().assign(column=DELTA)
        paper = pd.concat([paper[["row", "column", "value"]], deltas], ignore_index=True)
    columns = [column for column in (SPEED, BLEU, DELTA) if column in set(tidy["column"])]
    table = beside(pivot(tidy, index="row", columns="column", values="value", best=None, col_order=columns,
                         row_order=order, decimals=2, over="seed"),
                   pivot(paper, index="row", columns="column", values="value", best=None, col_order=columns))
    table.caption = caption
    return table, ours


def t2(files: Files):
    """RHE on Rel_Pos and Localness, and RHE pruning (Table 2): speed, BLEU, Δ vs Transformer."""
    systems = t2_models(files.study)
    ablations = {name: ablation for name, (_, ablation) in T2_SYSTEMS.items()}
    seeds = study_seeds(files.study)
    inputs = [file for name, model in systems.items() for run in at_seeds(model, seeds)
              for file in (files.bleu(run, ablations[name]), files.benchmark(run))]

    def build():
        ours = pd.DataFrame([dict(row=name, seed=run["seed"], bleu=load_json(files.bleu(run, ablations[name]))["bleu"],
                                  speed=files.speed(run), model=model_path(run))
                             for name, model in systems.items() for run in at_seeds(model, seeds)])
        corpus, pair = analysis_pair(files.study)
        return _delta_table(ours, "T2", (
            f"Paper C Table 2 ({corpus} {pair}): RHE enlivening Rel_Pos / Localness heads, and pruning the redundant "
            "heads at test time (+RHE (Prune): Table 1's LPEA+RHE model translated with -rhe_prune; its speed is "
            "that model's training speed); training speed in steps per second of wall time (the train rule's "
            "benchmark; the paper's on 4 GPUs), BLEU and Δ BLEU vs the Transformer."), list(systems))
    return inputs, build


def t3(files: Files):
    """LPEA+RHE by the clipping distance k (Table 3)."""
    systems = t3_models(files.study)
    base = system_model(files.study, *analysis_pair(files.study), "L")
    seeds = study_seeds(files.study)
    inputs = [files.bleu(run) for model in [base, *systems.values()] for run in at_seeds(model, seeds)]

    def build():
        rows = [dict(row="Transformer", seed=run["seed"], bleu=_bleu(files, run), k=None, model=model_path(run))
                for run in at_seeds(base, seeds)]
        rows += [dict(row=f"k={k}", seed=run["seed"], bleu=_bleu(files, run), k=k, model=model_path(run))
                 for k, model in sorted(systems.items()) for run in at_seeds(model, seeds)]
        ours = pd.DataFrame(rows)
        table, ours = _delta_table(ours, "T3", "", ["Transformer", *[f"k={k}" for k in sorted(systems)]])
        corpus, pair = analysis_pair(files.study)
        table.caption = (f"Paper C Table 3 ({corpus} {pair}): LPEA+RHE by the clipping distance k of the relative "
                         "local-phrasal positions (eq. 7); Δ vs the Transformer (the paper's k=0 row equals its "
                         "Transformer).")
        return table, ours
    return inputs, build


def a2(files: Files):
    """LPEA+RHE on different encoder layers (Table A2): speed, BLEU, Δ vs the Transformer ([0-0])."""
    systems = a2_models(files.study)
    seeds = study_seeds(files.study)
    inputs = [file for model in systems.values() for run in at_seeds(model, seeds)
              for file in (files.bleu(run), files.benchmark(run))]

    def build():
        ours = pd.DataFrame([dict(row=name, seed=run["seed"], bleu=_bleu(files, run), speed=files.speed(run),
                                  model=model_path(run))
                             for name, model in systems.items() for run in at_seeds(model, seeds)])
        corpus, pair = analysis_pair(files.study)
        return _delta_table(ours, "A2", (
            f"Paper C Table A2 ({corpus} {pair}, {files.study['layers']} layers): LPEA+RHE on encoder layers [first-last] "
            "([0-0]: the Transformer). The paper's caption says LPEA without RHE, but its [1-1] row is Table 1's "
            "LPEA+RHE; we run LPEA+RHE."), list(systems))
    return inputs, build


def a3(files: Files):
    """Parsers (Table A3): bracketing F1 on the PTB sample, and BLEU of LPEA+RHE with each."""
    systems = a3_models(files.study)
    corpus, pair = analysis_pair(files.study)
    seeds = study_seeds(files.study)
    inputs = ([files.bleu(run) for model in systems.values() for run in at_seeds(model, seeds)]
              + [files.parser_f1(parser) for parser in systems])

    def build():
        rows = []
        for parser, model in systems.items():
            score = pd.read_csv(files.parser_f1(parser)).iloc[0]
            rows.append(dict(row=parser, column="WSJ F1", seed=seeds[0], value=float(score["f1"]), model=None))
            rows += [dict(row=parser, column=f"{pair_label(corpus, pair)} {BLEU}", seed=run["seed"],
                          value=_bleu(files, run), model=model_path(run)) for run in at_seeds(model, seeds)]
        ours = pd.DataFrame(rows)
        table = beside(pivot(ours, index="row", columns="column", values="value", best=None, decimals=2, over="seed"),
                       pivot(reference("A3"), index="row", columns="column", values="value", best=None))
        table.caption = ("Paper C Table A3: constituency parsers, bracketing F1 (evalb) on the NLTK Penn "
                         "Treebank WSJ sample (ours) / the WSJ test set (paper), and BLEU of LPEA+RHE with each "
                         "parser's trees.")
        return table, ours
    return inputs, build


def redundant_shares(log_path: str) -> dict[int, float]:
    """step -> share of RHE heads labelled redundant, from the training log's zero-weight
    ``Step N aux: ... rhe_share=X`` lines (the mean over that reporting interval)."""
    shares = {}
    with open(log_path, encoding="utf-8") as handle:
        for line in handle:
            found = re.search(r"Step (\d+)\b.* aux: .*\brhe_share=([0-9.]+)", line)
            if found:
                shares[int(found[1])] = float(found[2])
    return shares


def redundant(files: Files):
    """Beyond the paper's tables (§4.2 logs it): the share of heads RHE labels redundant, by
    training step, for every RHE model of Tables 1-2 and Figure 4."""
    systems = {}
    for corpus, pair in corpus_pairs(files.study):
        for system, model in t1_models(files.study, corpus, pair).items():
            if "RHE" in system:
                systems[f"{pair_label(corpus, pair)} {system}"] = model
    for system, model in t2_models(files.study).items():
        if system.endswith("+RHE"):
            systems[f"{pair_label(*analysis_pair(files.study))} {system}"] = model
    for gate, model in f4_models(files.study).items():
        if gate not in ("dynamic", "Transformer"):
            systems[f"{pair_label(*analysis_pair(files.study))} +LPEA+RHE fixed gate {gate}"] = model
    logs = {name: files.model_file("train_log", model) for name, model in systems.items()}

    def build():
        rows = [dict(row=name, column=f"step {step}", value=share, model=model_path(systems[name]))
                for name, log in logs.items() for step, share in sorted(redundant_shares(log).items())]
        ours = pd.DataFrame(rows)
        if ours.empty:
            raise DataError("no 'rhe_share' lines in the RHE models' training logs")
        silent = [log for name, log in logs.items() if name not in set(ours["row"])]
        if silent:     # its row would just be missing from the table
            raise DataError(f"no 'rhe_share' lines in {', '.join(silent)} (the other RHE models' logs have them)")
        table = pivot(ours, index="row", columns="column", values="value", best=None, decimals=3)
        table.caption = ("Share of heads RHE labels redundant (Syn_attn <= Syn_gate, eq. 10), mean over each "
                         "training report interval.")
        return table, ours
    # headlab train writes train.log beside the checkpoints (no declared output: a resume
    # appends to it); it is complete once model.pt exists
    return [files.model_file("checkpoint", model) for model in systems.values()], build


# -- figures ----------------------------------------------------------------------------------

def f4(files: Files):
    """Fixed Syn_gate values vs the dynamic gate (Figure 4), the Transformer as a reference line;
    several seeds: the mean with a ± sd band."""
    systems = f4_models(files.study)
    seeds = study_seeds(files.study)
    inputs = [files.bleu(run) for model in systems.values() for run in at_seeds(model, seeds)]

    def build():
        gates = [gate for gate in systems if gate not in ("dynamic", "Transformer")]
        rows = []
        for gate in gates:
            for seed in seeds:
                at_seed = {name: {**model, "seed": seed} for name, model in systems.items()}
                rows.append(dict(gate=gate, seed=seed, system="fixed Syn_gate", bleu=_bleu(files, at_seed[gate])))
                rows.append(dict(gate=gate, seed=seed, system="dynamic Syn_gate",
                                 bleu=_bleu(files, at_seed["dynamic"])))
                rows.append(dict(gate=gate, seed=seed, system="Transformer", bleu=_bleu(files, at_seed["Transformer"])))
        corpus, pair = analysis_pair(files.study)
        return pd.DataFrame(rows), dict(kind="line", x="gate", y="bleu", hue="system", errorbar="sd",
                                        title=f"Paper C Fig. 4: fixed vs dynamic Syn_gate, LPEA+RHE ({corpus} {pair})")
    return inputs, build


def _panel_head(labels: np.ndarray | None, which: str) -> int | None:
    """Figure 5's head (0-based) in one layer's RHE labels (1 important, 0 redundant, NaN:
    not an RHE head): the first redundant / important one; None if the sentence has none."""
    if which == "first":
        return 0
    wanted = 1.0 if which == "important" else 0.0
    found = np.flatnonzero(labels == wanted)
    return int(found[0]) if len(found) else None


def words(pieces: list[str]) -> tuple[list[str], list[list[int]]]:
    """(words, the piece positions of each word) of a BPE'd sentence (``@@`` = continues)."""
    out, units, current = [], [], []
    for position, piece in enumerate(pieces):
        current.append(position)
        if not piece.endswith("@@") or position == len(pieces) - 1:
            out.append("".join(pieces[i][:-2] if pieces[i].endswith("@@") else pieces[i] for i in current))
            units.append(current)
            current = []
    return out, units


def f5(files: Files):
    """One first-layer head's attention on the paper's sentence (Figure 5)."""
    corpus, pair = analysis_pair(files.study)
    systems = {kind: system_model(files.study, corpus, pair, kind) for kind in ("RHElpea", "RelPos", "Local", "L")}
    inputs = [files.attention(model) for model in systems.values()]
    first = enhanced(files.study)[0] - 1

    def build():
        from headlab.syntax.profile import word_attention

        rows = []
        for panel, (kind, which) in F5_PANELS.items():
            with np.load(files.attention(systems[kind]), allow_pickle=False) as npz:
                labels = npz["rhe_000000"][first] if "rhe_000000" in npz else None
            if labels is None and which != "first":   # head 1 would be drawn as if it had the label
                raise DataError(f"{files.attention(systems[kind])} holds no RHE head labels (rhe_000000): "
                                f"Figure 5's panel {panel} needs them")
            head = _panel_head(labels, which)
            source, note = systems[kind], ""
            if head is None:   # no head with the panel's label on this sentence: the Transformer's
                label = "important" if which == "important" else "redundant"
                source, head, note = systems["L"], 0, f" (none labelled {label}: Transformer)"
            with np.load(files.attention(source), allow_pickle=False) as npz:
                tokens = str(npz["tokens"][0]).split()
                # RHE exports keep the attention before enlivening (raw_*) beside the used one (att_*)
                key = "raw_000000" if which == "redundant-before" and "raw_000000" in npz else "att_000000"
                attention = npz[key][first]                                   # (heads, n, n)
            # word level, as the paper shows it: pieces summed over the attended word, averaged
            # over the attending word's pieces (paper D's profile does the same)
            sentence, units = words(tokens)
            word_att = word_attention(attention[head], units)
            for query_index, query in enumerate(sentence):
                for key_index, attended in enumerate(sentence):
                    rows.append(dict(panel=f"{panel}: head {head + 1}{note}", query=f"{query_index + 1} {query}",
                                     key=f"{key_index + 1} {attended}",
                                     attention=float(word_att[query_index, key_index])))
        return pd.DataFrame(rows), dict(kind="heatmap", x="key", y="query", value="attention", col="panel",
                                        col_wrap=2, xlabel="attended word", ylabel="attending word",
                                        title=f"Paper C Fig. 5: encoder layer {first + 1} attention ({corpus} {pair})")
    return inputs, build


TABLES: dict[str, Callable] = {"T1": t1, "T2": t2, "T3": t3, "A2": a2, "A3": a3, "redundant": redundant}
FIGURES: dict[str, Callable] = {"F4": f4, "F5": f5}
