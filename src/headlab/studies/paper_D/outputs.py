"""Paper D's tables (T1, T2, T2values, T3, the lambda sweep, the gate-syntax join, the
fixed-head model's gates) and figures (F1, F2, the gates' heatmap, the BLEU curve), from
the files the workflow's generic rules wrote (:class:`Files`)."""
from __future__ import annotations

from typing import Callable

import pandas as pd

from headlab.errors import DataError
from headlab.naming import model_path, snapshot
from headlab.studies import common, published
from headlab.studies.common import corpus_pairs, first_seed, headline_seeds, load_json, pair_label, seeds as study_seeds
from headlab.studies.paper_D.grid import (OUTDIR, T3_ROWS, baseline, control, curve_steps, gated, lambdas, pruned,
                                         stage_name)
from headlab.studies.tables import Table, beside, pivot

#: columns of the syntactic head profile (``headlab profile-heads``)
PROFILE_COLUMNS = ("layer", "head", "head_kind", "relation", "direction", "accuracy", "count", "best_baseline")


class Files(common.StudyFiles):
    def gates(self, model) -> str:
        return self.model_file("gates", model)

    def profile(self, model, part: str = "csv") -> str:
        """A file of the ``profile_heads`` rule's syntactic head profile of a model
        (:mod:`headlab.syntax`) on the study's ``treebank``: ``csv``, ``baselines.csv``,
        ``attention.npz``."""
        return self.model_file("profile", model, treebank=self.study.get("treebank", "ud-en_ewt"), part=part)

    def profile_prefix(self, model) -> str:
        """The profile's files without their ``.part`` (what the arc figures read)."""
        from headlab.studies.syntax_tables import profile_prefix
        return profile_prefix(self.root, model, self.study.get("treebank", "ud-en_ewt"))

    def pruned(self, corpus, pair, seed=None) -> dict[str, dict]:
        seed = str(seed or first_seed(self.study))
        found = pruned(self.study, self.root, corpus, pair, seed)
        if found is None:
            raise DataError(f"paper_D: the gates stage of {corpus} {pair} seed {seed} has not run "
                            f"({common.stage_file(self.root, OUTDIR, corpus, pair, stage_name(seed))} is missing)")
        return found


def reference(table: str) -> pd.DataFrame:
    return common.reference("paper_D", table, dtype=str)


def bleu_of(files: Files, model) -> float:
    return float(load_json(files.bleu(model))["bleu"])


# -- tables -----------------------------------------------------------------------------

def _gate_tidy(files: Files, model, label: str) -> pd.DataFrame:
    gates = pd.read_csv(files.gates(model))
    gates = gates[gates["site"] == "enc"].copy()
    gates["model"] = label
    gates["row"] = "Layer " + gates["layer"].astype(str)
    gates["column"] = "g" + gates["head"].astype(str)
    return gates


def t2(files: Files):
    """Converged gates, 0/1 by the test-time gate (Table 2), beside the paper's."""
    cells = [(corpus, pair, gated(files.study, corpus, pair)) for corpus, pair in corpus_pairs(files.study)]
    inputs = [files.gates(model) for *_, model in cells]

    def build():
        corpus, pair, _ = cells[0]
        ours = pd.concat([_gate_tidy(files, model, pair_label(c, p)) for c, p, model in cells], ignore_index=True)
        first = ours[ours["model"] == pair_label(corpus, pair)]
        paper = reference("T2").assign(value=lambda rows: rows["value"].astype(float))
        table = beside(pivot(first, index="row", columns="column", values="kept", best=None, decimals=0),
                       pivot(paper, index="row", columns="column", values="value", best=None, decimals=0))
        table.caption = (f"Paper D Table 2: converged encoder gates of the gated fine-tune ({pair_label(corpus, pair)}, "
                         f"lambda_l0 {lambdas(files.study)[0]}): 1 = test-time gate >= 0.5 (kept). Continuous values "
                         f"in T2values and the F_gates heatmap. Paper: 6 layers x 8 heads, WMT en-de.")
        return table, ours
    return inputs, build


def t2values(files: Files):
    """The continuous test-time gate values behind Table 2."""
    inputs, base = t2(files)

    def build():
        _, ours = base()
        first = ours[ours["model"] == ours["model"].iloc[0]]
        table = pivot(first, index="row", columns="column", values="gate", mark="saturated", mark_symbol="",
                      best=None, decimals=3)
        table.marks = None
        table.caption = ("Paper D Table 2, continuous: deterministic test-time gate clamp(sigmoid(log alpha) * 1.2 "
                         "- 0.1, 0, 1) per encoder layer and head.")
        return table, ours
    return inputs, build


def t3_models(files: Files, corpus: str, pair: str, seed) -> dict[str, dict]:
    """Table 3's row -> model, of one pair at one seed."""
    found = files.pruned(corpus, pair, seed)
    return {"Baseline (converged)": baseline(files.study, corpus, pair, seed=seed),
            "Baseline (fine-tuned, no pruning)": control(files.study, corpus, pair, seed),
            "Pruned (converged)": gated(files.study, corpus, pair, seed=seed),
            "Non-inverted (initial)": snapshot(found["Non-inverted"], 0),
            "Non-inverted (fine-tuned)": found["Non-inverted"],
            "Inverted (initial)": snapshot(found["Inverted"], 0), "Inverted (fine-tuned)": found["Inverted"]}


def t3_cells(files: Files) -> list[tuple[str, str, str, dict[str, dict]]]:
    """(corpus, pair, seed, row -> model) of Table 3: every pair at every headline seed."""
    return [(corpus, pair, seed, t3_models(files, corpus, pair, seed))
            for corpus, pair in corpus_pairs(files.study) for seed in headline_seeds(files.study)]


def t3(files: Files):
    """BLEU of the pruning experiments (Table 3), mean ± sd over seeds, beside the paper's."""
    cells = t3_cells(files)
    last = curve_steps(files.study, files.config)[-1]
    inputs = [files.bleu(model) for *_, by_row in cells for model in by_row.values()]
    inputs += [common.stage_file(files.root, OUTDIR, corpus, pair, stage_name(seed)) for corpus, pair, seed, _ in cells]
    inputs += published.inputs(files.published)

    def build():
        rows = []
        for corpus, pair, seed, by_row in cells:
            stage = common.read_stage(files.root, OUTDIR, corpus, pair, stage_name(seed))
            for row, model in by_row.items():
                heads = (stage["kept"] if row.startswith("Non-inverted") or row == "Pruned (converged)"
                         else stage["heads"] - stage["kept"] if row.startswith("Inverted") else stage["heads"])
                steps = last if "fine-tuned" in row else 0
                column = "BLEU" if len(corpus_pairs(files.study)) == 1 else pair_label(corpus, pair)
                rows.append(dict(row=row, column=column, pair=pair_label(corpus, pair), seed=seed,
                                 bleu=bleu_of(files, model), heads_kept=heads, steps=steps, model=model_path(model)))
        ours = pd.DataFrame(rows)
        paper = reference("T3").assign(value=lambda rows: rows["value"].astype(float))
        table = beside(pivot(ours, index="row", columns="column", values="bleu", best=None, row_order=T3_ROWS,
                             over="seed"),
                       pivot(paper, index="row", columns="column", values="value", best=None, row_order=T3_ROWS))
        table.caption = (f"Paper D Table 3: BLEU (sacreBLEU) of the pruning experiments; several seeds: mean ± sd (n), "
                         f"each seed's masks from its own gated model. Fine-tuned = "
                         f"{last} steps here (paper: 16,000 batches non-inverted, 4,000 inverted); initial = "
                         f"the masked baseline, no training. 'Pruned (converged)' is the gated model. 'Baseline "
                         f"(fine-tuned, no pruning)' (not in the paper): the baseline trained like the pruned models "
                         f"without a mask, the reference for what fine-tuning alone adds.")
        table, gpu = published.extend(table, published.read(files.published), "paper_D", "T3",
                                      label=lambda run: run["row"], column=lambda run: "BLEU")
        ours = published.tidy(ours, gpu, "bleu")
        return table, ours
    return inputs, build


def lambda_sweep(files: Files):
    """Beyond the paper: heads kept vs BLEU for each lambda (the trade-off §4 asks for), mean
    over ``seeds``."""
    seeds = study_seeds(files.study)
    pairs = corpus_pairs(files.study)
    cells = [(corpus, pair, lam, seed, gated(files.study, corpus, pair, lam, seed=seed))
             for corpus, pair in pairs for lam in lambdas(files.study) for seed in seeds]
    inputs = [file for *_, model in cells for file in (files.gates(model), files.bleu(model))]
    inputs += [files.bleu(baseline(files.study, corpus, pair, seed=seed)) for corpus, pair in pairs for seed in seeds]

    def build():
        rows = []
        for corpus, pair in pairs:
            for seed in seeds:
                rows.append(dict(row="baseline (no gates)", column=pair_label(corpus, pair), seed=seed, lambda_l0=0.0,
                                 bleu=bleu_of(files, baseline(files.study, corpus, pair, seed=seed)), heads_kept=None,
                                 saturated=None))
        for corpus, pair, lam, seed, model in cells:
            gates = pd.read_csv(files.gates(model))
            gates = gates[gates["site"] == "enc"]
            rows.append(dict(row=f"lambda {lam:g}", column=pair_label(corpus, pair), seed=seed, lambda_l0=lam,
                             bleu=bleu_of(files, model), heads_kept=int(gates["kept"].sum()), heads=len(gates),
                             saturated=float(gates["saturated"].mean())))
        ours = pd.DataFrame(rows).sort_values("lambda_l0", kind="stable", ignore_index=True)
        table = pivot(ours, index="row", columns="column", values="bleu", best=None, over="seed")
        kept = ours.groupby("row", sort=False)["heads_kept"].mean()
        table.values["heads kept"] = kept.reindex(table.values.index)
        table.column_decimals = {"heads kept": 0 if len(seeds) == 1 else 1}
        table.marks = None
        table.caption = ("Beyond paper D: the lambda_l0 sweep, BLEU of the gated fine-tune and encoder heads kept "
                         "(test-time gate >= 0.5); several seeds: mean (BLEU ± sd, n).")
        return table, ours
    return inputs, build


#: paper D's bold rule: a head is syntactic when it beats the best offset baseline by this many points
SYNTACTIC_MARGIN = 20.0


def join_profile(gates: pd.DataFrame, profile: pd.DataFrame | None, *, min_count: int = 20,
                 threshold: float = SYNTACTIC_MARGIN) -> pd.DataFrame:
    """Per encoder layer-head: its gate and kept flag beside its most syntactic relation.

    ``profile``: tidy per-head rows with the columns of the syntactic profile
    (:data:`PROFILE_COLUMNS`, ``best_baseline`` or ``baseline``: the relation's best
    offset baseline; ``layer``/``head`` 1-based like the gates), e.g.
    :func:`headlab.syntax.profile.syntactic_heads` with no threshold. A head's relation is the
    one it beats the best baseline by most (margin = accuracy - baseline, relations with at
    least ``min_count`` arcs; ``all`` and ``root`` left out); ``syntactic``: margin >=
    ``threshold`` (paper D's bold rule, 20 points). Heads missing from the profile get empty
    syntax columns."""
    out = gates[gates["site"] == "enc"][["layer", "head", "gate", "kept"]].copy()
    columns = ["head_kind", "best_relation", "direction", "accuracy", "best_baseline", "margin", "count"]
    if profile is None or profile.empty:
        for column in columns + ["syntactic"]:
            out[column] = None
        return out.reset_index(drop=True)
    profile = profile.rename(columns={"baseline": "best_baseline"})
    missing = [column for column in PROFILE_COLUMNS if column not in profile.columns]
    if missing:
        raise DataError(f"the syntactic profile lacks columns {missing} (have {list(profile.columns)})")
    rows = profile[~profile["relation"].isin(("all", "root")) & (profile["count"] >= min_count)]
    rows = rows.assign(margin=rows["accuracy"] - rows["best_baseline"])
    best = (rows.sort_values(["margin", "accuracy"], ascending=False, kind="stable")
            .drop_duplicates(["layer", "head"]).rename(columns={"relation": "best_relation"}))
    out = out.merge(best[["layer", "head", *columns]], on=["layer", "head"], how="left")
    out["syntactic"] = out["margin"].ge(threshold)
    return out.sort_values(["layer", "head"], ignore_index=True)


def join(files: Files):
    """Beyond the paper: are the syntactic heads the ones the gates keep? (§3.4's claim)."""
    cells = [(corpus, pair, gated(files.study, corpus, pair), baseline(files.study, corpus, pair))
             for corpus, pair in corpus_pairs(files.study)]
    inputs = [files.gates(gated_model) for _, _, gated_model, _ in cells]
    inputs += [files.profile(base_model) for *_, base_model in cells]
    inputs += [files.profile(base_model, "baselines.csv") for *_, base_model in cells]

    def build():
        from headlab.syntax.profile import syntactic_heads
        frames = []
        for corpus, pair, gated_model, base_model in cells:
            # every (head, relation) with its margin over the best baseline: no threshold here
            relations = syntactic_heads(files.profile(base_model), threshold=float("-inf"))
            frames.append(join_profile(pd.read_csv(files.gates(gated_model)), relations)
                          .assign(model=pair_label(corpus, pair)))
        ours = pd.concat(frames, ignore_index=True)
        ours["row"] = ours["model"] + " " + ours["layer"].astype(str) + "-" + ours["head"].astype(str)
        shown = ours.set_index("row")
        columns = ["gate", "kept", "accuracy", "best_baseline", "margin", "syntactic"]
        values = shown[columns].copy()
        values["syntactic"] = values["syntactic"].map({True: 1.0, False: 0.0})
        values = values.apply(pd.to_numeric, errors="coerce")
        marks = pd.DataFrame("", index=values.index, columns=values.columns)
        marks["accuracy"] = [f" ({relation})" if isinstance(relation, str) else "" for relation in shown["best_relation"]]
        table = Table(values, marks, decimals=2, column_decimals={"kept": 0, "syntactic": 0}, best=None,
                      index_name="layer-head")
        table.caption = ("Beyond paper D: each encoder head's converged gate beside its best syntactic relation "
                         "(the relation it beats its best offset baseline by most, dependent -> head, v1 names, at "
                         "least 20 arcs: accuracy %, the relation's best baseline, the margin); syntactic = 1: a "
                         "margin of 20 points or more (paper D's bold rule).")
        return table, ours
    return inputs, build


def fixed(files: Files):
    """Beyond the paper: gates on paper A's fixed-head model: which heads, fixed or learned, are kept."""
    spec = files.study.get("fixed_heads")
    cells = [(corpus, pair, gated(files.study, corpus, pair, heads=spec), baseline(files.study, corpus, pair, spec))
             for corpus, pair in corpus_pairs(files.study)] if spec else []
    inputs = [file for _, _, gated_model, base_model in cells
              for file in (files.gates(gated_model), files.bleu(gated_model), files.bleu(base_model))]

    def build():
        from headlab.heads.spec import parse_spec
        from headlab.engine.config import parse_layers
        rows = []
        for corpus, pair, gated_model, base_model in cells:
            layers = parse_spec(spec, parse_layers(files.study["layers"])[0])
            kinds = {(i + 1): [f"{term.kind}" for term in layer.terms for _ in range(term.count)]
                     for i, layer in enumerate(layers)}
            gates = pd.read_csv(files.gates(gated_model))
            for _, gate in gates[gates["site"] == "enc"].iterrows():
                kind = kinds[int(gate["layer"])][int(gate["head"]) - 1]
                rows.append(dict(row=f"{pair_label(corpus, pair)} layer {int(gate['layer'])}",
                                 column=f"h{int(gate['head'])} {kind}", gate=gate["gate"], kept=int(gate["kept"]),
                                 kind=kind, bleu_gated=bleu_of(files, gated_model),
                                 bleu_base=bleu_of(files, base_model)))
        ours = pd.DataFrame(rows, columns=["row", "column", "gate", "kept", "kind", "bleu_gated", "bleu_base"])
        table = pivot(ours, index="row", columns="column", values="gate", best=None, decimals=2) if len(ours) else \
            Table(pd.DataFrame(), best=None)
        if len(ours):
            table.values["BLEU base"] = ours.groupby("row")["bleu_base"].first().reindex(table.values.index)
            table.values["BLEU gated"] = ours.groupby("row")["bleu_gated"].first().reindex(table.values.index)
        table.caption = (f"Beyond paper D: converged test-time gates on paper A's {spec} model (head kind in the "
                         f"column name: Ftoken = fixed pattern, L = learned), and its BLEU before / after gating.")
        return table, ours
    return inputs, build


def t1(files: Files):
    """Table 1: the best head per relation beside the best offset baseline, the converged
    baseline's profile (:func:`headlab.studies.syntax_tables.table1`; the paper's numbers beside)."""
    corpus, pair = corpus_pairs(files.study)[0]
    model = baseline(files.study, corpus, pair)
    inputs = [files.profile(model), files.profile(model, "baselines.csv")]

    def build():
        from headlab.studies.syntax_tables import table1
        return table1(files.profile(model))
    return inputs, build


# -- figures ----------------------------------------------------------------------------

def f_gates(files: Files):
    """Heatmap of the continuous test-time gates (Table 2)."""
    inputs, base = t2(files)

    def build():
        _, ours = base()
        ours = ours.assign(layer_label="L" + ours["layer"].astype(str), head_label=ours["head"].astype(str))
        return ours, dict(kind="heatmap", x="head_label", y="layer_label", value="gate", col="model",
                          xlabel="head", ylabel="encoder layer",
                          title="Paper D Table 2: converged encoder gates (test-time gate)")
    return inputs, build


def curve(files: Files):
    """BLEU over the pruned / inverse-pruned fine-tuning (Table 3 rows 3-6 as curves); several
    seeds: the mean with a ± sd band."""
    steps = curve_steps(files.study, files.config)
    cells = []
    for corpus, pair in corpus_pairs(files.study):
        for seed in headline_seeds(files.study):
            for name, model in files.pruned(corpus, pair, seed).items():
                for step in steps:
                    cells.append((corpus, pair, name, seed, step, snapshot(model, step) if step < steps[-1] else model))

    inputs = [files.bleu(model) for *_, model in cells]

    def build():
        rows = [dict(pair=pair_label(corpus, pair), model=name, seed=seed, step=step, bleu=bleu_of(files, model))
                for corpus, pair, name, seed, step, model in cells]
        tidy = pd.DataFrame(rows)
        return tidy, dict(x="step", y="bleu", hue="model", x_numeric=True, xlabel="fine-tuning step",
                          ylabel="BLEU", errorbar="sd",
                          title="Paper D: BLEU over pruned (non-inverted) and inverted fine-tuning (band: ± sd over seeds)",
                          col="pair" if tidy["pair"].nunique() > 1 else None)
    return inputs, build


def _arcs(which: str):
    def build_figure(files: Files):
        """Figures 1-2 (:func:`headlab.syntax.arcs.figure`): the converged baseline's heads as arcs."""
        corpus, pair = corpus_pairs(files.study)[0]
        model = baseline(files.study, corpus, pair)

        def build():
            from headlab.syntax.arcs import figure
            return figure(files.profile_prefix(model), which,
                          title_extra=f"({pair_label(corpus, pair)}, {files.study.get('treebank', 'ud-en_ewt')})")
        return [files.profile(model), files.profile(model, "attention.npz")], build
    return build_figure


TABLES: dict[str, Callable] = {"T1": t1, "T2": t2, "T2values": t2values, "T3": t3, "lambda_sweep": lambda_sweep,
                               "join": join, "fixed": fixed}
FIGURES: dict[str, Callable] = {"F1": _arcs("F1"), "F2": _arcs("F2"), "F_gates": f_gates, "curve": curve}
