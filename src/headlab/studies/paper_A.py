"""Paper A (Raganato et al. 2020, fixed encoder self-attention patterns): Tables 1-6 and
Figures 2-3, each beside the paper's own numbers (``paper_A_reference.csv``).

The study config names the grid (see config/schema.yaml ``paper_A``)::

    data:    {multi30k: [de-en, en-de]}   # the standard scenario: T1, T4, T5, T6, F2, F3
    layers:  ["1+1", "2+1", "2+2"]         # T1 columns
    shallow: "2+1"                          # stands where the paper has 6+1 (T4, T6, F3)
    deep:    "2+2"                          # stands where the paper has 6+6 (T2-T6, F2, F3)
    heads:   [8L, 7Ftoken+1L, 7Fword+1L, 1L]
    lowres:  {data: ..., preset: ...}       # T2 (§4.2 hyper-parameters)
    eight_fixed_lowres: [en-vi, vi-en]      # T5's low-resource columns (8Ftoken trained there too)
    highres: {data: ..., preset: ...}       # T3 (optional: without it T3 shows the paper only)

Rows are systems (head specs; ``H8 disabled`` = head 8 ablated at test time, §4.3).
Where our grid is smaller than the paper's, columns are labelled by *role* (shallow /
deep decoder) so that our numbers stand beside the paper's 6+1 / 6+6 ones.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

import pandas as pd

from headlab.errors import ConfigError
from headlab.studies import common
from headlab.studies.common import load_json, verdict
from headlab.studies.tables import Table, beside, pivot
from headlab.studies.timing import training_time
from headlab.naming import model_path, results_paths, variant_name

OUTDIR = "paper_A"
FIXED = "7Ftoken+1L"                     # the system of Table 4 and Figures 2-3
ABLATED = f"{FIXED} (H8 disabled)"
PAPER_ROLE = {"6+1": "shallow", "6+6": "deep"}


# -- the grid -------------------------------------------------------------------------

def _grid(data: Mapping[str, list], preset: str, layers: list, heads: list, size: str, seeds: list,
          overrides: Mapping[str, Any]):
    for corpus, pairs in data.items():
        for pair in pairs:
            for lay in layers:
                for head in heads:
                    for seed in seeds:
                        yield dict(corpus=corpus, pair=pair, size=str(size), preset=preset,
                                   layers=lay, heads=head, seed=str(seed), variant=variant_name(overrides))


def models(study: Mapping[str, Any], root: str | None = None):
    """(model, OpenNMT overrides) for every model the study trains."""
    size, seeds = study.get("size", "full"), study.get("seeds", [1])
    heads, deep, eight = study["heads"], study["deep"], _eight(study)
    standard = dict(study.get("overrides", {}))
    for m in _grid(study["data"], study["preset"], study["layers"], heads, size, seeds, standard):
        yield m, standard
    for m in _grid(study["data"], study["preset"], [deep], [eight], size, seeds, standard):
        yield m, standard
    for part in ("lowres", "highres"):
        if study.get(part):
            sub = study[part]
            for m in _grid(sub["data"], sub["preset"], [deep], heads, size, seeds, sub.get("overrides", {})):
                yield m, dict(sub.get("overrides", {}))
    # Table 5 (§4.4) also fixes the eighth head in the low-resource scenario (paper: en<->vi)
    lowres = study.get("lowres") or {}
    for m in _grid(_eight_fixed_lowres(study), lowres.get("preset"), [deep], [eight], size, seeds,
                   lowres.get("overrides", {})):
        yield m, dict(lowres.get("overrides", {}))


def tests(corpus: Mapping[str, Any]) -> list[str]:
    """The test sets of a corpus this study scores (every table reads the first only)."""
    return list(corpus["tests"][:1])


def _eight(study) -> str:
    """The head spec of Table 5's all-fixed system."""
    return study.get("eight_fixed", "8Ftoken")


def _eight_fixed_lowres(study) -> dict[str, list]:
    """corpus -> pairs of the low-resource scenario that also train the eight-fixed system."""
    wanted = list(study.get("eight_fixed_lowres", []))
    lowres = study.get("lowres") or {}
    known = {p for _, p in _pairs(lowres.get("data", {}))}
    unknown = [p for p in wanted if p not in known]
    if unknown:
        raise ConfigError(f"pair(s) {', '.join(unknown)} are not in paper_A.lowres.data "
                          f"(it has: {', '.join(sorted(known)) or 'nothing'})", key="paper_A.eight_fixed_lowres")
    out: dict[str, list] = {}
    for corpus, pair in _pairs(lowres.get("data", {})):
        if pair in wanted:
            out.setdefault(corpus, []).append(pair)
    return out


def _model(study, corpus, pair, layers, heads, scenario=None):
    """One model of the standard scenario, or of ``scenario`` (the lowres/highres block)."""
    scenario = scenario or study
    return dict(corpus=corpus, pair=pair, size=str(study.get("size", "full")),
                preset=scenario["preset"], layers=layers, heads=heads,
                seed=str(study.get("seeds", [1])[0]), variant=variant_name(scenario.get("overrides")))


def _pairs(data):
    return [(corpus, pair) for corpus, pairs in data.items() for pair in pairs]


def _find_pair(study, pair):
    for corpus, p in _pairs(study["data"]):
        if p == pair:
            return corpus
    return None


# -- file names (as the workflow's generic rules write them) ------------------------------

@dataclass
class Files:
    config: Mapping[str, Any]
    study: Mapping[str, Any]
    root: str

    def test(self, corpus):
        return tests(self.config["corpora"][corpus])[0]

    def bleu(self, m, ablation="full"):
        return f"{results_paths(self.root)['scores']}/{model_path(m)}/{self.test(m['corpus'])}.{ablation}.json"

    def params(self, m):
        return f"{results_paths(self.root)['scores']}/{model_path(m)}/params.json"

    def mucow(self, m, ablation="full"):
        return f"{results_paths(self.root)['scores']}/{model_path(m)}/mucow.{ablation}.mucow.csv"

    def sva(self, m, ablation="full"):
        return (f"{results_paths(self.root)['scores']}/{model_path(m)}/"
                f"distil_subj_verb_agreement.{ablation}.accuracy.csv")

    def compare(self, m, systems: list[tuple[str, str]]):
        group = f"{m['corpus']}/{m['pair']}/{m['size']}/{m['preset']}/{m.get('variant', 'default')}/{m['layers']}/seed{m['seed']}"
        name = "--".join(f"{h}.{a}" for h, a in systems)
        return f"{results_paths(self.root)['scores']}/compare/{group}/{self.test(m['corpus'])}/{name}"



def reference(table: str) -> pd.DataFrame:
    return common.reference("paper_A_reference.csv", table, dtype={"layers": str})


def _label(system, ablation):
    return ABLATED if (system, ablation) == (FIXED, "no-h8") else system


# -- tables -----------------------------------------------------------------------------
# Each builder: (files) -> (inputs, build) where build() returns (Table, tidy ours).

def t1(f: Files):
    """BLEU, standard scenario, layers x head specs, * = significantly below 8L (bootstrap)."""
    s, heads = f.study, f.study["heads"]
    base, others = heads[0], heads[1:]
    groups = [(_model(s, c, p, lay, base), lay) for c, p in _pairs(s["data"]) for lay in s["layers"]]
    systems = [(base, "full")] + [(h, "full") for h in others]
    inputs = [f.compare(m, systems) + ".bootstrap.csv" for m, _ in groups]
    inputs += [f.bleu({**m, "heads": h}) for m, _ in groups for h in heads]

    def build():
        rows = []
        for m, lay in groups:
            boot = pd.read_csv(f.compare(m, systems) + ".bootstrap.csv")
            lower = dict(zip(boot["system"], boot["significantly_lower"]))
            for h in heads:
                bleu = load_json(f.bleu({**m, "heads": h}))["bleu"]
                rows.append(dict(pair=m["pair"], layers=lay, system=h, bleu=bleu,
                                 significantly_lower=bool(lower.get(f"{h}.full", False)),
                                 row=f"{m['pair'].upper()} {h}"))
        ours = pd.DataFrame(rows)
        # the paper's layout: one block of systems per direction, layers as columns
        paper = reference("T1").assign(row=lambda r: r["pair"].str.upper() + " " + r["system"],
                                       value=lambda r: r["value"].astype(float))
        table = beside(pivot(ours, index="row", columns="layers", values="bleu", mark="significantly_lower", best=None),
                       pivot(paper, index="row", columns="layers", values="value", mark="significantly_lower", best=None))
        table.caption = ("Paper A Table 1: BLEU by encoder+decoder layers. * significantly lower than 8L "
                         "(paired bootstrap, compare-mt, p < 0.05).")
        return table, ours
    return inputs, build


def _bleu_table(f: Files, part: str | None, name: str, caption: str):
    s = f.study
    sub = s if part is None else (s.get(part) or {})
    models_ = [_model(s, c, p, s["deep"], h, sub if part else None)
               for c, p in _pairs(sub.get("data", {})) for h in s["heads"]]
    inputs = [f.bleu(m) for m in models_]

    def build():
        ours = pd.DataFrame([dict(system=m["heads"], column=m["pair"], bleu=load_json(f.bleu(m))["bleu"])
                             for m in models_], columns=["system", "column", "bleu"])
        paper = reference(name).assign(column=lambda r: r["pair"], value=lambda r: r["value"].astype(float))
        ours_table = pivot(ours, index="system", columns="column", values="bleu", best="max") if len(ours) else \
            Table(pd.DataFrame(), None)
        table = beside(ours_table, pivot(paper, index="system", columns="column", values="value", best="max"))
        table.caption = caption
        return table, ours
    return inputs, build


def t2(f):
    return _bleu_table(f, "lowres", "T2", "Paper A Table 2: low-resource scenarios (6+6; §4.2 hyper-parameters: "
                                          "1k-token batches, dropout 0.3, tied embeddings). Paper: IWSLT/KO-EN data.")


def t3(f):
    return _bleu_table(f, "highres", "T3", "Paper A Table 3: high-resource scenario (6+6). Empty 'ours' "
                                           "columns: not configured in this run (no such data offline).")


def _roles(s):
    return [(s["shallow"], "shallow"), (s["deep"], "deep")]


def t4(f: Files):
    """BLEU change when head k of 7Ftoken+1L is disabled at test time (§4.3)."""
    s = f.study
    cells = [(c, p, lay, role) for c, p in _pairs(s["data"]) for lay, role in _roles(s)]
    heads = range(1, 9)
    inputs = [f.bleu(_model(s, c, p, lay, FIXED), a) for c, p, lay, _ in cells
              for a in ["full"] + [f"no-h{k}" for k in heads]]

    def build():
        rows = []
        for c, p, lay, role in cells:
            m = _model(s, c, p, lay, FIXED)
            full = load_json(f.bleu(m))["bleu"]
            for k in heads:
                rows.append(dict(system=f"H{k} disabled", column=f"{p} {role}", layers=lay,
                                 bleu_delta=load_json(f.bleu(m, f"no-h{k}"))["bleu"] - full))
        ours = pd.DataFrame(rows)
        paper = reference("T4")
        paper = paper.assign(system=paper["ablation"].str.replace("no-h", "H") + " disabled",
                             column=paper["pair"] + " " + paper["layers"].map(PAPER_ROLE),
                             value=paper["value"].astype(float))
        table = beside(pivot(ours, index="system", columns="column", values="bleu_delta", best="min"),
                       pivot(paper, index="system", columns="column", values="value", best="min"))
        table.caption = (f"Paper A Table 4: BLEU difference when one head of {FIXED} is disabled in every "
                         f"encoder layer at test time. shallow = ours {s['shallow']} / paper 6+1; "
                         f"deep = ours {s['deep']} / paper 6+6. Heads 6/7 follow §3.2 (end/start).")
        return table, ours
    return inputs, build


LOWRES = "low-res"
PARAMS = "#params (M)"


def t5(f: Files):
    """Eight fixed heads (§4.4): BLEU of 8L / 7Ftoken+1L / 8Ftoken in the standard scenario and,
    where configured, the low-resource one; #params of the standard models."""
    s = f.study
    systems = [s["heads"][0], FIXED, _eight(s)]
    standard = [(_model(s, c, p, s["deep"], h), p) for c, p in _pairs(s["data"]) for h in systems]
    lowres = [(_model(s, c, p, s["deep"], h, s["lowres"]), f"{p} {LOWRES}")
              for c, pairs in _eight_fixed_lowres(s).items() for p in pairs for h in systems]
    inputs = [f.bleu(m) for m, _ in standard + lowres] + [f.params(m) for m, _ in standard]

    def build():
        rows = []
        for m, column in standard + lowres:
            rows.append(dict(system=m["heads"], column=column, value=load_json(f.bleu(m))["bleu"]))
        for m, _ in standard:
            rows.append(dict(system=m["heads"], column=PARAMS, value=load_json(f.params(m))["params"] / 1e6))
        ours = pd.DataFrame(rows).drop_duplicates(["system", "column"])
        paper = reference("T5")
        standard_pairs = set(reference("T1")["pair"])   # en-de, de-en; the others are §4.2's en-vi, vi-en
        paper = paper.assign(column=[(PARAMS if metric == "params_millions" else
                                      pair if pair in standard_pairs else f"{pair} {LOWRES}")
                                     for metric, pair in zip(paper["metric"], paper["pair"])],
                             value=paper["value"].astype(float))
        ours_table = pivot(ours, index="system", columns="column", values="value", best=None, decimals=2)
        ours_table.column_decimals[PARAMS] = _distinct_places(ours_table.values[PARAMS])
        table = beside(ours_table, pivot(paper, index="system", columns="column", values="value", best=None))
        table.caption = (f"Paper A Table 5: eight fixed heads ({s['deep']}); '{LOWRES}' columns use the "
                         "low-resource hyper-parameters of Table 2. #params counted from our standard-scenario "
                         "checkpoints (tied embeddings counted once), the paper's for its EN-DE model.")
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


def _three(s):
    return [(s["heads"][0], "full"), (FIXED, "full"), (FIXED, "no-h8")]


def _three_by_role(f: Files, pair: str, path) -> list[tuple[str, str, str, str]]:
    """(layers, role, system label, result file) for 8L, 7Ftoken+1L and its H8-disabled
    variant at the shallow and deep settings: the grid of Table 6 and Figure 3."""
    s, corpus = f.study, _find_pair(f.study, pair)
    if corpus is None:
        return []
    return [(lay, role, _label(h, a), path(_model(s, corpus, pair, lay, h), a))
            for lay, role in _roles(s) for h, a in _three(s)]


def t6(f: Files):
    s = f.study
    pair = s.get("wsd_pair", "de-en")
    cells = _three_by_role(f, pair, f.mucow)
    inputs = [path for *_, path in cells]

    def build():
        rows = []
        for lay, role, system, path in cells:
            frame = pd.read_csv(path)
            avg = frame[frame["corpus"] == "ted+tatoeba"].iloc[0]
            rows.append(dict(system=system, column=f"MuCoW {role}", accuracy=avg["precision"],
                             coverage=avg["coverage"], layers=lay))
        ours = pd.DataFrame(rows, columns=["system", "column", "accuracy", "coverage", "layers"])
        paper = reference("T6")
        paper = paper.assign(system=[_label(x, y) for x, y in zip(paper["system"], paper["ablation"])],
                             column=paper["metric"].map({"accuracy_mucow": "MuCoW", "accuracy_contrawsd": "ContraWSD"})
                             + " " + paper["layers"].map(PAPER_ROLE), value=paper["value"].astype(float))
        table = beside(pivot(ours, index="system", columns="column", values="accuracy", best="max", decimals=3)
                       if len(ours) else Table(pd.DataFrame(), None),
                       pivot(paper, index="system", columns="column", values="value", best="max", decimals=3))
        table.decimals = 3
        table.caption = (f"Paper A Table 6: WSD accuracy of {pair} models, MuCoW TED+Tatoeba average "
                         "(ours: precision = hit / (hit + miss), MuCoW's scoring). ContraWSD is not "
                         "available offline: paper numbers only.")
        return table, ours
    return inputs, build


# -- figures ----------------------------------------------------------------------------

def f2(f: Files):
    s = f.study
    pair = s.get("wsd_pair", "de-en")
    corpus = _find_pair(s, pair)
    m = _model(s, corpus, pair, s["deep"], s["heads"][0]) if corpus else None
    inputs = [f.compare(m, _three(s)) + ".length.csv"] if m else []

    def build():
        tidy = pd.read_csv(inputs[0])
        tidy["system"] = [_label(*x.rsplit(".", 1)) for x in tidy["system"]]
        return tidy, dict(x="bucket", y="bleu", hue="system", xlabel="reference length (words)",
                          ylabel="BLEU", title=f"Paper A Fig. 2: BLEU by sentence length ({pair}, {s['deep']})")
    return inputs, build


def f3(f: Files):
    s = f.study
    pair = s.get("sva_pair", "en-de")
    cells = _three_by_role(f, pair, f.sva)
    inputs = [path for *_, path in cells]

    def build():
        frames = []
        for lay, _, system, path in cells:
            frame = pd.read_csv(path)
            frames.append(frame[frame["by"] == "distance"].assign(system=system, layers=lay))
        tidy = pd.concat(frames, ignore_index=True)
        return tidy, dict(x="bucket", y="accuracy", hue="system", col="layers", xlabel="subject-verb distance",
                          ylabel="accuracy",
                          title=f"Paper A Fig. 3: subject-verb agreement by distance ({pair}, DistilLingEval)")
    return inputs, build


TABLES: dict[str, Callable] = {"T1": t1, "T2": t2, "T3": t3, "T4": t4, "T5": t5, "T6": t6}
FIGURES: dict[str, Callable] = {"F2": f2, "F3": f3}


# -- the generated README -----------------------------------------------------------------



def effects(f: Files) -> list[tuple[str, str]]:
    """The paper's claims, checked on our numbers: (claim, verdict)."""
    s, out = f.study, []
    base = s["heads"][0]
    _, build = t1(f)
    t1_ours = build()[1]
    deep = t1_ours[t1_ours["layers"] == s["deep"]]
    cells = deep.groupby("pair")
    close = [abs(g.set_index("system").loc[FIXED, "bleu"] - g.set_index("system").loc[base, "bleu"]) <= 1.0
             for _, g in cells]
    out.append((f"§4.1: with the deep decoder, {FIXED} is within 1 BLEU of {base}", verdict(sum(close), len(close))))
    if "1L" in s["heads"]:
        lowest = [g.set_index("system")["bleu"].idxmin() == "1L" for _, g in t1_ours.groupby(["pair", "layers"])]
        out.append(("§4.1: 1L is the weakest encoder (every layer configuration)", verdict(sum(lowest), len(lowest))))
    if s.get("lowres"):
        t2_ours = t2(f)[1]()[1]
        wins = [g.set_index("system").loc[FIXED, "bleu"] >= g.set_index("system").loc[base, "bleu"]
                for _, g in t2_ours.groupby("column")]
        out.append((f"§4.2: low-resource, fixed heads ({FIXED}) >= learned ({base})", verdict(sum(wins), len(wins))))
    t4_ours = t4(f)[1]()[1]
    top = [set(g[g["system"] != "H8 disabled"].nsmallest(3, "bleu_delta")["system"]) ==
           {"H2 disabled", "H3 disabled", "H4 disabled"} for _, g in t4_ours.groupby("column")]
    out.append(("§4.3: heads 2, 3, 4 (previous, next, previous context) matter most among the fixed heads",
                verdict(sum(top), len(top))))
    t5_ours = t5(f)[1]()[1]
    params = t5_ours[t5_ours["column"] == PARAMS].set_index("system")["value"]
    eight = _eight(s)
    order = list(params.reindex([base, FIXED, eight]))
    out.append(("§4.4: #params 8L > 7Ftoken+1L > 8Ftoken", verdict(int(order[0] > order[1] > order[2]), 1)))
    bleu5 = t5_ours[t5_ours["column"] != PARAMS].pivot(index="column", columns="system", values="value")
    same = [abs(row[eight] - row[FIXED]) <= 1.0 for _, row in bleu5.iterrows()]
    out.append((f"§4.4: the learned head is dispensable: {eight} within 1 BLEU of {FIXED}",
                verdict(sum(same), len(same))))
    t6_ours = t6(f)[1]()[1]
    drops = [g.set_index("system").loc[ABLATED, "accuracy"] < g.set_index("system").loc[FIXED, "accuracy"]
             for _, g in t6_ours.groupby("column")]
    out.append(("§5.3: disabling the learned head H8 lowers MuCoW accuracy", verdict(sum(drops), len(drops))))
    return out


def readme(f: Files, provenance: Mapping[str, Any]) -> str:
    s, config = f.study, f.config
    from headlab.engine.config import resolve_preset

    preset = {**resolve_preset(s["preset"]), **config.get("training", {}).get("overrides", {}), **s.get("overrides", {})}
    lines = [
        "# Paper A reproduction (generated)",
        "",
        "Raganato, Scherrer, Tiedemann (2020). *Fixed Encoder Self-Attention Patterns in Transformer-Based "
        "Machine Translation*. Every table shows our number beside the paper's (`ours` / `paper`).",
        "This file is written by the workflow (`headlab study-table --readme`); do not edit it.",
        "",
        "## Scale of this run",
        "",
        f"- data: " + "; ".join(f"{c} {', '.join(p)} (test: {f.test(c)})" for c, p in s["data"].items()),
        f"- model preset `{s['preset']}`: d={preset.get('hidden_size')}, ff={preset.get('transformer_ff')}, "
        f"{preset.get('heads')} heads, {preset.get('train_steps')} training steps of "
        f"{preset.get('batch_size')} {preset.get('batch_type', 'tokens')}",
        f"- layers: T1 {', '.join(s['layers'])}; shallow decoder {s['shallow']} (paper 6+1), "
        f"deep {s['deep']} (paper 6+6)",
        f"- low-resource (T2): " + ("; ".join(f"{c} {', '.join(p)}" for c, p in s["lowres"]["data"].items())
                                    + f", preset `{s['lowres']['preset']}`" if s.get("lowres") else "not configured"),
        f"- eight fixed heads (T5): {_eight(s)} on the standard pairs"
        + (f" and low-resource {', '.join(s['eight_fixed_lowres'])}" if s.get("eight_fixed_lowres") else ""),
        f"- high-resource (T3): " + ("configured" if s.get("highres") else "not configured (paper numbers only)"),
        f"- device: {config.get('training', {}).get('device', 'cpu')}; seeds: {s.get('seeds', [1])}",
    ]
    lines.append(f"- training: {training_time([m for m, _ in models(f.study)], f.root)}")
    lines += [f"- {k}: {v}" for k, v in provenance.items()]
    lines += ["", "## Which effects of the paper hold here", "", "| claim | here |", "|---|---|"]
    lines += [f"| {claim} | {verdict} |" for claim, verdict in effects(f)]
    lines += ["", "## Outputs", ""]
    lines += [f"- [{n}]({n}.md) ([csv]({n}.csv), [tex]({n}.tex))" for n in TABLES]
    lines += [f"- [{n}]({n}.png) ([pdf]({n}.pdf), data [{n}.csv]({n}.csv))" for n in FIGURES]
    return "\n".join(lines) + "\n"

