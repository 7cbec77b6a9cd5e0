"""Paper A (Raganato et al. 2020, fixed encoder self-attention patterns): Tables 1-6 and
Figures 2-3, each beside the paper's own numbers (``paper_A/reference.csv``).

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

Seeds: every model at each of ``seeds``; the headline comparison, Table 1's deep row
(8L, 7Ftoken+1L and Table 5's 8Ftoken) and Table 2's 8L and 7Ftoken+1L (§4.2's claim),
also at ``headline_seeds``. A cell is the mean over its runs (± sd, n); Table 1's ``*``
marks are compare-mt's paired bootstrap on the first seed (the paper's test), the seed-aware
tests are in ``effects.csv``; Table 4's ablations, Table 6 and the figures use ``seeds``
(Figures 2-3: the first seed, with 95% intervals from the test items).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

import pandas as pd

from headlab.errors import ConfigError
from headlab.studies import common
from headlab.studies.common import at_seeds, headline_seeds, load_json, seeds as study_seeds
from headlab.studies.effects import Claim, Judge
from headlab.studies.tables import Table, beside, pivot
from headlab.studies.timing import training_time
from headlab.naming import heads_name, model_path, results_paths, variant_name

OUTDIR = "paper_A"
FIXED = "7Ftoken+1L"                     # the system of Table 4 and Figures 2-3
ABLATED = f"{FIXED} (H8 disabled)"
PAPER_ROLE = {"6+1": "shallow", "6+6": "deep"}


# -- the grid -------------------------------------------------------------------------

def headline(study, part: str | None, layers: str, heads: str) -> bool:
    """Is this model in the paper's headline comparison (trained at ``headline_seeds`` too)?
    Table 1's deep row 8L / 7Ftoken+1L / 8Ftoken (§4.1, §4.4) and Table 2's 8L / 7Ftoken+1L
    (§4.2: fixed beats learned in the low-resource scenario); 7Fword+1L and 1L are not."""
    base, heads = heads_name(study["heads"][0]), heads_name(heads)   # as written or as named
    if part is None:
        return layers == study["deep"] and heads in (base, FIXED, heads_name(_eight(study)))
    return part == "lowres" and heads in (base, FIXED)


def model_seeds(study, part: str | None, layers: str, heads: str) -> list[str]:
    return headline_seeds(study) if headline(study, part, layers, heads) else study_seeds(study)


def _grid(study, part, data: Mapping[str, list], preset: str, layers: list, heads: list,
          overrides: Mapping[str, Any]):
    for corpus, pairs in data.items():
        for pair in pairs:
            for lay in layers:
                for head in heads:
                    for seed in model_seeds(study, part, lay, head):
                        yield dict(corpus=corpus, pair=pair, size=str(study.get("size", "full")), preset=preset,
                                   layers=lay, heads=heads_name(head), seed=seed, variant=variant_name(overrides))


def models(study: Mapping[str, Any], root: str | None = None):
    """(model, OpenNMT overrides) for every model the study trains."""
    heads, deep, eight = study["heads"], study["deep"], _eight(study)
    standard = dict(study.get("overrides", {}))
    for m in _grid(study, None, study["data"], study["preset"], study["layers"], heads, standard):
        yield m, standard
    for m in _grid(study, None, study["data"], study["preset"], [deep], [eight], standard):
        yield m, standard
    for part in ("lowres", "highres"):
        if study.get(part):
            sub = study[part]
            for m in _grid(study, part, sub["data"], sub["preset"], [deep], heads, sub.get("overrides", {})):
                yield m, dict(sub.get("overrides", {}))
    # Table 5 (§4.4) also fixes the eighth head in the low-resource scenario (paper: en<->vi)
    lowres = study.get("lowres") or {}
    for m in _grid(study, "lowres", _eight_fixed_lowres(study), lowres.get("preset"), [deep], [eight],
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
    """One model of the standard scenario, or of ``scenario`` (the lowres/highres block),
    at the study's first seed."""
    scenario = scenario or study
    return dict(corpus=corpus, pair=pair, size=str(study.get("size", "full")),
                preset=scenario["preset"], layers=layers, heads=heads_name(heads),
                seed=common.first_seed(study), variant=variant_name(scenario.get("overrides")))


def _runs(study, m, part: str | None = None) -> list[dict]:
    """The runs of model ``m`` (one per seed it is trained at)."""
    return at_seeds(m, model_seeds(study, part, m["layers"], m["heads"]))


def _pairs(data):
    return [(corpus, pair) for corpus, pairs in data.items() for pair in pairs]


def _find_pair(study, pair):
    for corpus, p in _pairs(study["data"]):
        if p == pair:
            return corpus
    return None


# -- file names (as the workflow's generic rules write them) ------------------------------

class Files(common.StudyFiles):
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
    return common.reference("paper_A", table, dtype={"layers": str})


def _label(system, ablation):
    return ABLATED if (system, ablation) == (FIXED, "no-h8") else system


# -- tables -----------------------------------------------------------------------------
# Each builder: (files) -> (inputs, build) where build() returns (Table, tidy ours).

def t1(f: Files):
    """BLEU, standard scenario, layers x head specs, * = significantly below 8L (bootstrap on
    the first seed, the paper's test); a cell of several seeds is their mean ± sd."""
    s, heads = f.study, f.study["heads"]
    base, others = heads[0], heads[1:]
    groups = [(_model(s, c, p, lay, base), lay) for c, p in _pairs(s["data"]) for lay in s["layers"]]
    systems = [(base, "full")] + [(h, "full") for h in others]
    inputs = [f.compare(m, systems) + ".bootstrap.csv" for m, _ in groups]
    inputs += [f.bleu(r) for m, _ in groups for h in heads for r in _runs(s, {**m, "heads": h})]

    def build():
        rows = []
        for m, lay in groups:
            boot = pd.read_csv(f.compare(m, systems) + ".bootstrap.csv")
            lower = dict(zip(boot["system"], boot["significantly_lower"]))
            for h in heads:
                for r in _runs(s, {**m, "heads": h}):
                    rows.append(dict(pair=m["pair"], layers=lay, system=h, seed=r["seed"],
                                     bleu=load_json(f.bleu(r))["bleu"],
                                     significantly_lower=bool(lower.get(f"{h}.full", False)),
                                     row=f"{m['pair'].upper()} {h}"))
        ours = pd.DataFrame(rows)
        # the paper's layout: one block of systems per direction, layers as columns
        paper = reference("T1").assign(row=lambda r: r["pair"].str.upper() + " " + r["system"],
                                       value=lambda r: r["value"].astype(float))
        table = beside(pivot(ours, index="row", columns="layers", values="bleu", mark="significantly_lower",
                             best=None, over="seed"),
                       pivot(paper, index="row", columns="layers", values="value", mark="significantly_lower", best=None))
        table.caption = ("Paper A Table 1: BLEU by encoder+decoder layers; several seeds: mean ± sd (n). * significantly "
                         f"lower than 8L (paired bootstrap, compare-mt, p < 0.05; ours: seed {common.first_seed(s)} alone, "
                         "test-set sampling only, the paper's test: not the verdict, which is effects.csv's seed-aware "
                         "test and may disagree).")
        return table, ours
    return inputs, build


def _bleu_table(f: Files, part: str | None, name: str, caption: str):
    s = f.study
    sub = s if part is None else (s.get(part) or {})
    models_ = [r for c, p in _pairs(sub.get("data", {})) for h in s["heads"]
               for r in _runs(s, _model(s, c, p, s["deep"], h, sub if part else None), part)]
    inputs = [f.bleu(m) for m in models_]

    def build():
        ours = pd.DataFrame([dict(system=m["heads"], column=m["pair"], seed=m["seed"],
                                  bleu=load_json(f.bleu(m))["bleu"]) for m in models_],
                            columns=["system", "column", "seed", "bleu"])
        paper = reference(name).assign(column=lambda r: r["pair"], value=lambda r: r["value"].astype(float))
        ours_table = pivot(ours, index="system", columns="column", values="bleu", best="max", over="seed") \
            if len(ours) else Table(pd.DataFrame(), None)
        table = beside(ours_table, pivot(paper, index="system", columns="column", values="value", best="max"))
        table.caption = caption + " Several seeds: mean ± sd (n)."
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
    """BLEU change when head k of 7Ftoken+1L is disabled at test time (§4.3), per seed of ``seeds``."""
    s = f.study
    cells = [(c, p, lay, role, r) for c, p in _pairs(s["data"]) for lay, role in _roles(s)
             for r in at_seeds(_model(s, c, p, lay, FIXED), study_seeds(s))]
    heads = range(1, 9)
    inputs = [f.bleu(m, a) for *_, m in cells for a in ["full"] + [f"no-h{k}" for k in heads]]

    def build():
        rows = []
        for c, p, lay, role, m in cells:
            full = load_json(f.bleu(m))["bleu"]
            for k in heads:
                rows.append(dict(system=f"H{k} disabled", column=f"{p} {role}", layers=lay, seed=m["seed"],
                                 bleu_delta=load_json(f.bleu(m, f"no-h{k}"))["bleu"] - full))
        ours = pd.DataFrame(rows)
        paper = reference("T4")
        paper = paper.assign(system=paper["ablation"].str.replace("no-h", "H") + " disabled",
                             column=paper["pair"] + " " + paper["layers"].map(PAPER_ROLE),
                             value=paper["value"].astype(float))
        table = beside(pivot(ours, index="system", columns="column", values="bleu_delta", best="min", over="seed"),
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
    where configured, the low-resource one (mean over seeds); #params of the standard models."""
    s = f.study
    systems = [s["heads"][0], FIXED, _eight(s)]
    standard = [(_model(s, c, p, s["deep"], h), p, None) for c, p in _pairs(s["data"]) for h in systems]
    lowres = [(_model(s, c, p, s["deep"], h, s["lowres"]), f"{p} {LOWRES}", "lowres")
              for c, pairs in _eight_fixed_lowres(s).items() for p in pairs for h in systems]
    runs = [(r, column) for m, column, part in standard + lowres for r in _runs(s, m, part)]
    inputs = [f.bleu(m) for m, _ in runs] + [f.params(m) for m, *_ in standard]

    def build():
        rows = [dict(system=m["heads"], column=column, seed=m["seed"], value=load_json(f.bleu(m))["bleu"])
                for m, column in runs]
        for m, *_ in standard:
            rows.append(dict(system=m["heads"], column=PARAMS, seed=m["seed"],
                             value=load_json(f.params(m))["params"] / 1e6))
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
        table.caption = (f"Paper A Table 5: eight fixed heads ({s['deep']}); '{LOWRES}' columns use the "
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


def _three(s):
    return [(s["heads"][0], "full"), (FIXED, "full"), (FIXED, "no-h8")]


def _three_by_role(f: Files, pair: str, path, which: list[str] | None = None) -> list[tuple[str, str, str, str, str]]:
    """(layers, role, system label, seed, result file) for 8L, 7Ftoken+1L and its H8-disabled
    variant at the shallow and deep settings, at seeds ``which`` (default: the first): the grid
    of Table 6 and Figure 3."""
    s, corpus = f.study, _find_pair(f.study, pair)
    if corpus is None:
        return []
    return [(lay, role, _label(h, a), r["seed"], path(r, a))
            for lay, role in _roles(s) for h, a in _three(s)
            for r in at_seeds(_model(s, corpus, pair, lay, h), which or [common.first_seed(s)])]


def t6(f: Files):
    s = f.study
    pair = s.get("wsd_pair", "de-en")
    cells = _three_by_role(f, pair, f.mucow, study_seeds(s))
    inputs = [path for *_, path in cells]

    def build():
        rows = []
        for lay, role, system, seed, path in cells:
            frame = pd.read_csv(path)
            avg = frame[frame["corpus"] == "ted+tatoeba"].iloc[0]
            rows.append(dict(system=system, column=f"MuCoW {role}", accuracy=avg["precision"],
                             coverage=avg["coverage"], layers=lay, seed=seed))
        ours = pd.DataFrame(rows, columns=["system", "column", "accuracy", "coverage", "layers", "seed"])
        paper = reference("T6")
        paper = paper.assign(system=[_label(x, y) for x, y in zip(paper["system"], paper["ablation"])],
                             column=paper["metric"].map({"accuracy_mucow": "MuCoW", "accuracy_contrawsd": "ContraWSD"})
                             + " " + paper["layers"].map(PAPER_ROLE), value=paper["value"].astype(float))
        table = beside(pivot(ours, index="system", columns="column", values="accuracy", best="max", decimals=3,
                             over="seed")
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
    """BLEU by reference length (first seed) with each bucket's sentence count and sacreBLEU's
    95% bootstrap interval (compare-mt's buckets, :func:`headlab.eval.compare.length_buckets`)."""
    s = f.study
    pair = s.get("wsd_pair", "de-en")
    corpus = _find_pair(s, pair)
    m = _model(s, corpus, pair, s["deep"], s["heads"][0]) if corpus else None
    systems = {_label(h, a): f.hyp({**m, "heads": h}, a) for h, a in _three(s)} if m else {}
    inputs = [*systems.values(), f.ref(m)] if m else []

    def build():
        from headlab.eval.common import read_aligned
        from headlab.eval.compare import length_buckets

        texts = read_aligned(ref=f.ref(m), **{f"sys{i}": path for i, path in enumerate(systems.values())})
        hyps = {name: texts[f"sys{i}"] for i, name in enumerate(systems)}
        tidy = length_buckets(texts["ref"], hyps, confidence=f.samples()).assign(seed=m["seed"])
        return tidy, dict(x="bucket", y="bleu", hue="system", xlabel="reference length (words)", ylabel="BLEU",
                          interval=("ci_low", "ci_high"), counts="count",
                          title=f"Paper A Fig. 2: BLEU by sentence length ({pair}, {s['deep']}, seed {m['seed']})\n"
                                f"bars: 95% bootstrap interval (sacreBLEU, {f.samples()} resamples), "
                                "which need not contain the score")
    return inputs, build


def f3(f: Files):
    """SVA accuracy by subject-verb distance (first seed), each bin's count and 95% Wilson
    interval (binomial: the contrasts of a bin are independent items)."""
    s = f.study
    pair = s.get("sva_pair", "en-de")
    cells = _three_by_role(f, pair, f.sva)
    inputs = [path for *_, path in cells]

    def build():
        from headlab.eval.significance import binomial_interval

        frames = []
        for lay, _, system, seed, path in cells:
            frame = pd.read_csv(path)
            frames.append(frame[frame["by"] == "distance"].assign(system=system, layers=lay, seed=seed))
        tidy = pd.concat(frames, ignore_index=True)
        bounds = [binomial_interval(k, n) for k, n in zip(tidy["correct"], tidy["total"])]
        tidy["ci_low"], tidy["ci_high"] = [b[0] for b in bounds], [b[1] for b in bounds]
        return tidy, dict(x="bucket", y="accuracy", hue="system", col="layers", xlabel="subject-verb distance",
                          ylabel="accuracy", interval=("ci_low", "ci_high"), counts="total",
                          title=f"Paper A Fig. 3: subject-verb agreement by distance ({pair}, DistilLingEval, seed "
                                f"{common.first_seed(s)}; bars: 95% Wilson interval)")
    return inputs, build


TABLES: dict[str, Callable] = {"T1": t1, "T2": t2, "T3": t3, "T4": t4, "T5": t5, "T6": t6}
FIGURES: dict[str, Callable] = {"F2": f2, "F3": f3}


# -- the paper's claims, judged (effects.csv) ----------------------------------------------

def _paper_layers(s, layers: str) -> str | None:
    """The paper's layer setting where ours stands: deep = 6+6, shallow = 6+1, else the same."""
    return {s["deep"]: "6+6", s["shallow"]: "6+1"}.get(layers, layers)


def _paper_delta(table: str, a: str, b: str, pair: str | None = None, layers: str | None = None,
                 metric: str = "bleu", ablation: str = "full") -> float | None:
    """The paper's a - b in ``table`` at ``pair`` (if it has that pair; else the mean over its
    pairs) and ``layers``."""
    ref = reference(table)
    ref = ref[(ref["metric"] == metric) & (ref["ablation"] == ablation)]
    if layers is not None:
        ref = ref[ref["layers"] == layers]
    if pair is not None and pair in set(ref["pair"]):
        ref = ref[ref["pair"] == pair]
    values = ref.pivot_table(index="pair", columns="system", values="value", aggfunc="first")
    if a not in values or b not in values:
        return None
    return float((values[a].astype(float) - values[b].astype(float)).mean())


def _mucow_stats(details: str, key: str):
    """Per sentence (hit, hit or miss) for TED and for Tatoeba: Table 6's average precision."""
    import numpy as np

    from headlab.eval.mucow import AVERAGE_OF, load_keys
    from headlab.io import read_lines

    outcomes, keys = read_lines(details), load_keys(key)
    stats = np.zeros((len(keys), 2 * len(AVERAGE_OF)))
    for i, (o, k) in enumerate(zip(outcomes, keys)):
        if k.corpus in AVERAGE_OF:
            j = 2 * AVERAGE_OF.index(k.corpus)
            stats[i, j], stats[i, j + 1] = o == "hit", o in ("hit", "miss")
    return stats


def _mean_precision(summed):
    """Table 6's number from summed per-sentence stats: the mean of TED's and Tatoeba's precision."""
    import numpy as np

    summed = np.atleast_2d(summed)
    return 0.5 * (summed[:, 0] / np.maximum(summed[:, 1], 1) + summed[:, 2] / np.maximum(summed[:, 3], 1))


def effects(f: Files):
    """(inputs, build) of ``effects.csv``: §4.1-§5.3's claims on our runs (module doc of
    :mod:`headlab.studies.effects`)."""
    s, base, eight = f.study, f.study["heads"][0], _eight(f.study)
    lowres = s.get("lowres") or {}
    claims: list[tuple] = []        # (claim, [(weight, [models], ablation)])

    def add(claim, *terms):
        claims.append((claim, [(w, runs, a) for w, runs, a in terms]))

    for c, p in _pairs(s["data"]):
        deep = {h: _runs(s, _model(s, c, p, s["deep"], h)) for h in (base, FIXED, eight)}
        add(Claim(f"§4.1: with the deep decoder, {FIXED} is within 1 BLEU of {base} (not worse by more)",
                  f"{FIXED} − {base} ({c} {p}, {s['deep']})", ">", -1.0, _paper_delta("T1", FIXED, base, p, "6+6")),
            (1, deep[FIXED], "full"), (-1, deep[base], "full"))
        add(Claim(f"§4.4: the learned head is dispensable: {eight} within 1 BLEU of {FIXED}",
                  f"{eight} − {FIXED} ({c} {p}, {s['deep']})", ">", -1.0, _paper_delta("T5", eight, FIXED, p)),
            (1, deep[eight], "full"), (-1, deep[FIXED], "full"))
        if "1L" in s["heads"]:
            for lay in s["layers"]:
                add(Claim("§4.1 (T1): 1L, a single learned head, is below 8L", f"1L − {base} ({c} {p}, {lay})", "<",
                          0.0, _paper_delta("T1", "1L", base, p, _paper_layers(s, lay))),
                    (1, _runs(s, _model(s, c, p, lay, "1L")), "full"), (-1, _runs(s, _model(s, c, p, lay, base)), "full"))
        for lay, role in _roles(s):
            runs = at_seeds(_model(s, c, p, lay, FIXED), study_seeds(s))
            add(Claim("§4.3: heads 2-4 (previous, next, previous context) matter most among the fixed heads: "
                      "disabling them costs more than disabling heads 1, 5, 6, 7",
                      f"mean ΔBLEU(H2-4 off) − mean ΔBLEU(H1,5-7 off) ({c} {p}, {role} {lay})", "<", 0.0,
                      _t4_paper(p, _paper_layers(s, lay))),
                *[(1 / 3, runs, f"no-h{k}") for k in (2, 3, 4)], *[(-1 / 4, runs, f"no-h{k}") for k in (1, 5, 6, 7)])
    for c, p in _pairs(lowres.get("data", {})):
        runs = {h: _runs(s, _model(s, c, p, s["deep"], h, lowres), "lowres") for h in (base, FIXED)}
        add(Claim(f"§4.2: low-resource, fixed heads ({FIXED}) beat learned ({base})",
                  f"{FIXED} − {base} ({c} {p}, low-resource)", ">", 0.0, _paper_delta("T2", FIXED, base, p)),
            (1, runs[FIXED], "full"), (-1, runs[base], "full"))
    for c, pairs in _eight_fixed_lowres(s).items():
        for p in pairs:
            runs = {h: _runs(s, _model(s, c, p, s["deep"], h, lowres), "lowres") for h in (FIXED, eight)}
            add(Claim(f"§4.4: low-resource, {eight} within 1 BLEU of {FIXED}", f"{eight} − {FIXED} ({c} {p}, "
                      f"low-resource)", ">", -1.0, _paper_delta("T5", eight, FIXED, p)),
                (1, runs[eight], "full"), (-1, runs[FIXED], "full"))
    first_pair = _pairs(s["data"])[0]
    params = {h: _model(s, *first_pair, s["deep"], h) for h in (base, FIXED, eight)}
    wsd = _three_by_role(f, s.get("wsd_pair", "de-en"), lambda m, a: (m, a), study_seeds(s))
    inputs = [path for claim, terms in claims for _, runs, a in terms for m in runs for path in f.scored(m, a)[:2]]
    inputs += [f.params(m) for m in params.values()]
    inputs += [x for *_, (m, a) in wsd for x in (f.mucow(m, a), _details(f, m, a), _mucow_key(f, m))]

    def build():
        judge = Judge("paper_A", f.samples())
        for claim, terms in claims:
            judge.systems(claim, [(w, {m["seed"]: f.scored(m, a) for m in runs}) for w, runs, a in terms])
        count = {h: load_json(f.params(m))["params"] / 1e6 for h, m in params.items()}
        for big, small in ((base, FIXED), (FIXED, eight)):
            judge.exact(Claim(f"§4.4: fixing heads saves parameters: #params {big} > {small}",
                              f"#params {big} − {small} ({' '.join(first_pair)}, {s['deep']})", ">", 0.0,
                              _paper_delta("T5", big, small, "en-de", metric="params_millions"), unit="M params"),
                        count[big] - count[small])
        from headlab.eval.significance import Term
        for lay, role in _roles(s):
            cells = {(system, seed): (m, a) for lay_, _, system, seed, (m, a) in wsd if lay_ == lay}
            if not cells:
                continue
            terms = [Term(w, {seed: _mucow_stats(_details(f, m, a), _mucow_key(f, m))
                              for (system, seed), (m, a) in cells.items() if system == name})
                     for w, name in ((1, ABLATED), (-1, FIXED))]
            judge.items(Claim("§5.3: disabling the learned head H8 lowers MuCoW accuracy",
                              f"{ABLATED} − {FIXED} (MuCoW TED+Tatoeba, {s.get('wsd_pair', 'de-en')}, {role} {lay})",
                              "<", 0.0, _paper_t6(_paper_layers(s, lay)), unit="precision"),
                        terms, _mean_precision)
        return judge.frame()
    return inputs, build


def _details(f: Files, m, ablation) -> str:
    return f.mucow(m, ablation)[:-len(".csv")] + ".details.txt"


def _mucow_key(f: Files, m) -> str:
    from headlab.naming import results_paths
    return f"{results_paths(f.root)['data']}/{m['corpus']}/{m['pair']}/{m['size']}/raw/mucow.key"


def _t4_paper(pair: str, layers: str | None) -> float | None:
    ref = reference("T4")
    ref = ref[(ref["pair"] == pair) & (ref["layers"] == layers)]
    if ref.empty:
        return None
    delta = ref.set_index("ablation")["value"].astype(float)
    return float(delta.reindex([f"no-h{k}" for k in (2, 3, 4)]).mean() - delta.reindex(
        [f"no-h{k}" for k in (1, 5, 6, 7)]).mean())


def _paper_t6(layers: str | None) -> float | None:
    ref = reference("T6")
    ref = ref[(ref["metric"] == "accuracy_mucow") & (ref["layers"] == layers) & (ref["system"] == FIXED)]
    if set(ref["ablation"]) < {"full", "no-h8"}:
        return None
    value = ref.set_index("ablation")["value"].astype(float)
    return float(value["no-h8"] - value["full"])


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
        "- data: " + "; ".join(f"{c} {', '.join(p)} (test: {f.test(c)})" for c, p in s["data"].items()),
        f"- model preset `{s['preset']}`: d={preset.get('hidden_size')}, ff={preset.get('transformer_ff')}, "
        f"{preset.get('heads')} heads, {preset.get('train_steps')} training steps of "
        f"{preset.get('batch_size')} {preset.get('batch_type', 'tokens')}",
        f"- layers: T1 {', '.join(s['layers'])}; shallow decoder {s['shallow']} (paper 6+1), "
        f"deep {s['deep']} (paper 6+6)",
        "- low-resource (T2): " + ("; ".join(f"{c} {', '.join(p)}" for c, p in s["lowres"]["data"].items())
                                    + f", preset `{s['lowres']['preset']}`" if s.get("lowres") else "not configured"),
        f"- eight fixed heads (T5): {_eight(s)} on the standard pairs"
        + (f" and low-resource {', '.join(s['eight_fixed_lowres'])}" if s.get("eight_fixed_lowres") else ""),
        "- high-resource (T3): " + ("configured" if s.get("highres") else "not configured (paper numbers only)"),
        f"- device: {config.get('training', {}).get('device', 'cpu')}; seeds: {study_seeds(s)} (every model), "
        f"{headline_seeds(s)} (the headline comparison: T1's {s['deep']} 8L / {FIXED} / {_eight(s)}, T2's "
        f"8L / {FIXED})",
    ]
    lines.append(f"- training: {training_time([m for m, _ in models(f.study)], f.root)}")
    lines += common.readme_tail(provenance, f"{f.root}/{OUTDIR}/effects.csv",
                                [f"[{n}]({n}.md) ([csv]({n}.csv), [tex]({n}.tex))" for n in TABLES]
                                + [f"[{n}]({n}.png) ([pdf]({n}.pdf), data [{n}.csv]({n}.csv))" for n in FIGURES])
    return "\n".join(lines)

