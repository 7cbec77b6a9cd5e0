"""Paper C: *Redundant heads enlivening* (RHE) with syntax-enhanced attention (DEA, LPEA),
beside Rel_Pos (Shaw et al. 2018) and Localness (Yang et al. 2018). Tables 1-3, A2, A3
and Figures 4-5, each beside the paper's own numbers (``paper_C/reference.csv``).

Systems (§5.2)
--------------
Every enhancement replaces the heads of the **enhanced encoder layers** (``enhanced``,
default ``1-1``: the first layer, as the paper chose after Table A2) and leaves the other
layers stock: ``+DEA`` = ``8DEA,*(8L)``, ``+LPEA+RHE`` = ``8RHElpea,*(8L)``, and so on (the
head kinds are in :mod:`headlab.heads`). The paper's text says so for DEA/LPEA ("all heads
of the first encoder layer"); **we apply Rel_Pos and Localness to the same layers** so that
Table 2's "+RHE" rows (RHE enlivening redundant heads with Rel_Pos / Localness attention,
``RHErel`` / ``RHEloc``) differ from their rows in one thing only. ``+RHE (Prune)`` is
Table 1's LPEA+RHE model translated with its redundant heads pruned (output zeroed,
``-rhe_prune``): the issue asks for pruning *at test time*; the paper also reports a
training speed for it, which here is the LPEA+RHE model's own.

Every T1 system has the default variant, so the Transformer is the very model paper A
trains (shared, not retrained) and compare-mt's paired bootstrap compares the seven as
one group (⇑ / ↑: better than the Transformer at p < 0.01 / p < 0.05).

Analyses on one pair (``analysis_pair``, the paper's En→De WMT16): Table 2, Table 3 (the
clipping ``k`` of LPEA+RHE), Table A2 (the enhanced layers of LPEA+RHE: the caption says
"without enlivening", but its [1-1] row is Table 1's LPEA+RHE number, 26.28, so we run
LPEA+RHE), Table A3 (parsers: bracketing F1 on the PTB sample and BLEU of LPEA+RHE),
Figure 4 (fixed Syn_gate values vs the dynamic gate) and Figure 5 (one layer-1 head's
attention on the paper's example sentence). Speed (Table 2, A2) is training steps per
second of wall time from each train rule's snakemake benchmark (startup, validation and
checkpoints included).

Seeds: every model at each of ``seeds``; Table 1's headline comparison on the analysis pair
(the Transformer, +DEA+RHE and +LPEA+RHE) also at ``headline_seeds``. Each table's cell is
the mean over its runs (± sd, n); Table 1's ⇑/↑ are compare-mt's paired bootstrap on the
first seed (the paper's test), the seed-aware tests are in ``effects.csv``; the redundant
shares and Figure 5 (one model's attention) use the first seed.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable, Iterator, Mapping

import numpy as np
import pandas as pd

from headlab.errors import ConfigError, DataError
from headlab.studies.tables import beside, pivot
from headlab.studies.timing import training_time
from headlab.studies import common
from headlab.studies.common import at_seeds, first_seed, headline_seeds, load_json, seeds as study_seeds
from headlab.studies.effects import Claim, Judge
from headlab.naming import heads_name, model_path, results_paths, variant_name

OUTDIR = "paper_C"
PARA, BLEU, DELTA, SPEED = "#Para (M)", "BLEU", "Δ", "Speed (steps/s)"
PARA_K = "#Para (K)"   # toy models: thousands, so that the variants differ in print
PRUNE = "rhe-prune"   # the translate rule's ablation: -rhe_prune

#: Table 1's rows: system -> head kind of the enhanced layers (L: stock heads)
T1_SYSTEMS = {"Transformer": "L", "+Rel_Pos": "RelPos", "+Localness": "Local", "+DEA": "DEA",
              "+DEA+RHE": "RHEdea", "+LPEA": "LPEA", "+LPEA+RHE": "RHElpea"}
#: Table 2's rows: system -> (kind, translation ablation or None). "+RHE (Prune)" is
#: Table 1's LPEA+RHE model translated with its redundant heads pruned (``-rhe_prune``).
T2_SYSTEMS = {"Transformer": ("L", None), "+RHE (Prune)": ("RHElpea", PRUNE),
              "Rel_Pos": ("RelPos", None), "Rel_Pos+RHE": ("RHErel", None),
              "Localness": ("Local", None), "Localness+RHE": ("RHEloc", None)}
#: Figure 5's panels: panel -> (system kind, which head of the first enhanced layer): the
#: first head RHE labels redundant (its attention before / after enlivening), the first it
#: labels important (else the Transformer's head 1), and head 1 of Rel_Pos and Localness
F5_PANELS = {"(a) redundant head": ("RHElpea", "redundant-before"), "(b) LPEA+RHE-enlivened": ("RHElpea", "redundant"),
             "(c) Rel_Pos head": ("RelPos", "first"), "(d) Localness head": ("Local", "first"),
             "(e) important head": ("RHElpea", "important")}
F5_SPLIT = "paper_C_F5"


# -- the grid -------------------------------------------------------------------------------

def _pairs(study) -> list[tuple[str, str]]:
    return [(corpus, pair) for corpus, pairs in study["data"].items() for pair in pairs]


def analysis_pair(study) -> tuple[str, str]:
    """The pair of the analyses (paper: En→De WMT16): ``analysis_pair: CORPUS/PAIR`` or the first."""
    if "analysis_pair" not in study:
        return _pairs(study)[0]
    corpus, _, pair = str(study["analysis_pair"]).partition("/")
    if (corpus, pair) not in _pairs(study):
        raise ConfigError(f"analysis_pair {study['analysis_pair']!r} is not one of the study's pairs "
                          f"({', '.join(f'{c}/{p}' for c, p in _pairs(study))})", key="studies.paper_C.analysis_pair")
    return corpus, pair


def _encoder_layers(study) -> int:
    return int(str(study["layers"]).split("+")[0])


def layer_range(text: str, n_enc: int, key: str) -> tuple[int, int]:
    """``"1-2"`` -> (1, 2): encoder layers, 1-based, inclusive, within 1..n_enc."""
    lo, sep, hi = str(text).partition("-")
    try:
        first, last = int(lo), int(hi if sep else lo)
    except ValueError:
        raise ConfigError(f"{text!r} is not a layer range FIRST-LAST (e.g. 1-2)", key=key) from None
    if not 1 <= first <= last <= n_enc:
        raise ConfigError(f"layer range {text!r} is outside the encoder's layers 1-{n_enc}", key=key)
    return first, last


def enhanced_spec(kind: str, layers: tuple[int, int], heads: int = 8) -> str:
    """Encoder head spec with ``kind`` on ``layers`` (1-based, inclusive), stock heads elsewhere:
    ``enhanced_spec("DEA", (1, 1))`` = ``8DEA,*(8L)``; ``("LPEA", (2, 3))`` = ``8L,2*(8LPEA),*(8L)``."""
    if kind == "L":
        return f"{heads}L"
    first, last = layers

    def group(count, k):
        return f"{heads}{k}" if count == 1 else f"{count}*({heads}{k})"
    groups = ([group(first - 1, "L")] if first > 1 else []) + [group(last - first + 1, kind), f"*({heads}L)"]
    return ",".join(groups)


@lru_cache(maxsize=None)
def _option_defaults() -> dict[str, Any]:
    """Defaults of headlab's own options (``lpea_k``, ``rhe_fgate``, ...), from its parser."""
    from onmt.utils.parse import ArgumentParser

    from headlab.engine import opts

    parser = ArgumentParser()
    opts.model_opts(parser)
    opts.train_opts(parser)
    return {a.dest: a.default for a in parser._actions}


def _preset(study) -> dict:
    from headlab.engine.config import resolve_preset
    return resolve_preset(study["preset"])


def canonical(study, overrides: Mapping) -> dict:
    """Overrides without the values the preset or the option default already has: T3's k = 6
    and F4's dynamic gate are T1's LPEA+RHE model itself (same path, trained once)."""
    preset, defaults = _preset(study), _option_defaults()
    out = {}
    for k, v in overrides.items():
        same = preset[k] == v if k in preset else (k in defaults and defaults[k] == v)
        if not same:
            out[k] = v
    return out


def _model(study, corpus, pair, kind, layers=None, overrides: Mapping | None = None) -> dict[str, str]:
    """One system at the study's first seed (:func:`runs`: all of its seeds)."""
    n_enc = _encoder_layers(study)
    layers = layers or layer_range(study.get("enhanced", "1-1"), n_enc, "studies.paper_C.enhanced")
    spec = enhanced_spec(kind, layers, int(study.get("heads", 8)))
    return dict(corpus=corpus, pair=pair, size=str(study.get("size", "full")), preset=study["preset"],
                layers=study["layers"], heads=heads_name(spec), seed=first_seed(study),
                variant=variant_name(canonical(study, overrides or {})))


#: Table 1's systems of the headline comparison (on the analysis pair)
HEADLINE = ("Transformer", "+DEA+RHE", "+LPEA+RHE")


def runs(study, m) -> list[dict[str, str]]:
    """The runs of system ``m``: at ``headline_seeds`` if it is one of Table 1's headline
    systems on the analysis pair (the same model wherever a table uses it), else at ``seeds``."""
    c, p = analysis_pair(study)
    headline = {model_path(x) for name, x in t1_models(study, c, p).items() if name in HEADLINE}
    return at_seeds(m, headline_seeds(study) if model_path(m) in headline else study_seeds(study))


def t1_models(study, corpus, pair) -> dict[str, dict]:
    return {name: _model(study, corpus, pair, kind) for name, kind in T1_SYSTEMS.items()}


def t2_models(study) -> dict[str, dict]:
    c, p = analysis_pair(study)
    return {name: _model(study, c, p, kind) for name, (kind, _) in T2_SYSTEMS.items()}


def t3_models(study) -> dict[int, dict]:
    c, p = analysis_pair(study)
    return {int(k): _model(study, c, p, "RHElpea", overrides={"lpea_k": int(k)}) for k in study.get("k", [])}


def a2_models(study) -> dict[str, dict]:
    c, p = analysis_pair(study)
    n_enc = _encoder_layers(study)
    out = {"[0-0]": _model(study, c, p, "L")}
    for text in study.get("layer_ranges", []):
        first, last = layer_range(text, n_enc, "studies.paper_C.layer_ranges")
        out[f"[{first}-{last}]"] = _model(study, c, p, "RHElpea", layers=(first, last))
    return out


def a3_models(study) -> dict[str, dict]:
    c, p = analysis_pair(study)
    return {parser: _model(study, c, p, "RHElpea", overrides={"syntax_parser": parser})
            for parser in study.get("parsers", [])}


def f4_models(study) -> dict[str, dict]:
    c, p = analysis_pair(study)
    out = {"dynamic": _model(study, c, p, "RHElpea"), "Transformer": _model(study, c, p, "L")}
    for gate in study.get("fixed_gates", []):
        out[f"{float(gate):g}"] = _model(study, c, p, "RHElpea", overrides={"rhe_fgate": float(gate)})
    return out


def models(study: Mapping[str, Any], root: str | None = None) -> Iterator[tuple[dict, dict]]:
    """(model, OpenNMT overrides) of every model the study trains, at each of its seeds."""
    seen = set()

    def emit(m, overrides):
        for run in runs(study, m):
            if model_path(run) not in seen:
                seen.add(model_path(run))
                yield run, canonical(study, overrides)
    for corpus, pair in _pairs(study):
        for m in t1_models(study, corpus, pair).values():
            yield from emit(m, {})
    for m in t2_models(study).values():
        yield from emit(m, {})
    for k, m in t3_models(study).items():
        yield from emit(m, {"lpea_k": k})
    for m in a2_models(study).values():
        yield from emit(m, {})
    for parser, m in a3_models(study).items():
        yield from emit(m, {"syntax_parser": parser})
    for gate in study.get("fixed_gates", []):
        yield from emit(f4_models(study)[f"{float(gate):g}"], {"rhe_fgate": float(gate)})


def varied_options(study) -> set[str]:
    """The options Tables 3, A3 and Figure 4 vary (a global override of one is a config error)."""
    keys = {"k": "lpea_k", "parsers": "syntax_parser", "fixed_gates": "rhe_fgate"}
    return {option for key, option in keys.items() if study.get(key)}


def check(study) -> None:
    """Config errors the schema cannot express, naming the key."""
    n_enc = _encoder_layers(study)
    layer_range(study.get("enhanced", "1-1"), n_enc, "studies.paper_C.enhanced")
    for text in study.get("layer_ranges", []):
        layer_range(text, n_enc, "studies.paper_C.layer_ranges")
    for k in study.get("k", []):
        if int(k) < 0:
            raise ConfigError(f"the clipping distance k must be >= 0, got {k}", key="studies.paper_C.k")
    for gate in study.get("fixed_gates", []):
        if not 0 < float(gate) <= 1:
            raise ConfigError(f"a fixed Syn_gate must be in (0, 1], got {gate}", key="studies.paper_C.fixed_gates")
    analysis_pair(study)
    for corpus, pair in _pairs(study):
        if not pair.startswith("en-"):
            raise ConfigError(f"paper C parses the English source: {corpus} {pair} does not translate from "
                              f"English", key=f"studies.paper_C.data.{corpus}")


def tests(corpus: Mapping[str, Any]) -> list[str]:
    """The test sets of a corpus this study scores: its tables read the first (Multi30k's
    test_2017_flickr has no Czech side)."""
    return list(corpus["tests"][:1])


def sentences(study) -> dict[str, tuple[str, str]]:
    """Extra one-sentence test splits (split -> (source, reference)): Figure 5's sentence."""
    sentence = study.get("figure_sentence") or {}
    return {F5_SPLIT: (sentence["src"], sentence["tgt"])} if sentence else {}


# -- files (as the generic rules write them) ---------------------------------------------------

class Files(common.StudyFiles):
    @property
    def ablation(self) -> str:
        """``avgN``: the average of the last N checkpoints (§A.1), else the trained model."""
        n = int(self.study.get("average_last", 1))
        return f"avg{n}" if n > 1 else "full"

    def bleu(self, m, ablation=None):
        return super().bleu(m, ablation or self.ablation)

    def params(self, m):
        return f"{self._scores(m)}/params.json"

    def benchmark(self, m):
        return f"{results_paths(self.root)['models']}/{model_path(m)}/train.benchmark.tsv"

    def attention(self, m, split=F5_SPLIT):
        return f"{self._scores(m)}/{split}.enc.attention.npz"

    def parser_f1(self, parser):
        return f"{self.root}/{OUTDIR}/parsers/{parser}.f1.csv"

    def compare(self, models: list[dict]):
        m = models[0]
        group = (f"{m['corpus']}/{m['pair']}/{m['size']}/{m['preset']}/{m['variant']}/{m['layers']}/"
                 f"seed{m['seed']}")
        name = "--".join(f"{x['heads']}.{self.ablation}" for x in models)
        return f"{results_paths(self.root)['scores']}/compare/{group}/{self.test(m['corpus'])}/{name}.bootstrap.csv"

    def speed(self, m) -> float:
        """Training steps per second of wall time (the train rule's benchmark)."""
        seconds = float(pd.read_csv(self.benchmark(m), sep="\t")["s"].iloc[-1])
        steps = int(self.options()["train_steps"])
        return steps / seconds


def reference(table: str) -> pd.DataFrame:
    return common.reference("paper_C", table, dtype=str).assign(
        value=lambda r: pd.to_numeric(r["value"], errors="coerce"), mark=lambda r: r["note"].where(
            r["note"].isin(["↑", "⇑"]), ""))


def _label(corpus, pair):
    return f"{corpus} {pair}"


def _bleu(f: Files, m) -> float:
    return load_json(f.bleu(m))["bleu"]


# -- tables -----------------------------------------------------------------------------------

def t1(f: Files):
    """BLEU and #params of the seven systems per pair (Table 1), BLEU the mean over seeds;
    ⇑/↑ better than the Transformer by paired bootstrap on the first seed (p < 0.01 / p < 0.05)."""
    cells = [(c, p, t1_models(f.study, c, p)) for c, p in _pairs(f.study)]
    inputs = [f.bleu(r) for _, _, ms in cells for m in ms.values() for r in runs(f.study, m)]
    inputs += [f.params(m) for _, _, ms in cells for m in ms.values()]
    inputs += [f.compare(list(ms.values())) for _, _, ms in cells]

    def build():
        rows = []
        for c, p, ms in cells:
            boot = pd.read_csv(f.compare(list(ms.values()))).set_index("system")
            for system, m in ms.items():
                mark, p_value = "", None
                name = f"{m['heads']}.{f.ablation}"
                if system != "Transformer" and name in boot.index:
                    row = boot.loc[name]
                    p_value = 1.0 - float(row["win_system"])
                    if bool(row["significantly_higher"]):
                        mark = "⇑" if p_value < 0.01 else "↑"
                for r in runs(f.study, m):
                    rows.append(dict(row=f"{_label(c, p)} {BLEU}", column=system, seed=r["seed"], value=_bleu(f, r),
                                     mark=mark, p_value=p_value, model=model_path(r)))
                rows.append(dict(row=f"{_label(c, p)} {PARA_K}", column=system, seed=m["seed"],
                                 value=load_json(f.params(m))["params"] / 1e3, mark="", p_value=None,
                                 model=model_path(m)))
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
                         f"{f.study.get('enhanced', '1-1')}). ⇑ / ↑: better than the Transformer by paired bootstrap "
                         f"(compare-mt, seed {first_seed(f.study)} alone, test-set sampling only: the paper's test, not "
                         "the verdict), p < 0.01 / p < 0.05; the verdicts are effects.csv's seed-aware tests and may "
                         "disagree.")
        return table, ours
    return inputs, build


def _delta_table(f: Files, ours: pd.DataFrame, paper_table: str, caption: str, order):
    """Speed, BLEU and Δ BLEU vs the first row (``order[0]``) of the same seed; several seeds:
    mean ± sd (n) of each."""
    base = ours[ours["row"] == order[0]].set_index("seed")["bleu"]
    ours = ours.assign(delta=ours["bleu"] - ours["seed"].map(base).astype(float))
    tidy = ours.melt(id_vars=["row", "seed"], value_vars=[c for c in ("speed", "bleu", "delta") if c in ours],
                     var_name="column", value_name="value")
    tidy["column"] = tidy["column"].map({"speed": SPEED, "bleu": BLEU, "delta": DELTA})
    paper = reference(paper_table)
    if len(paper):
        pbase = paper[(paper["column"] == BLEU)].set_index("row")["value"]
        deltas = (pbase - pbase.iloc[0]).rename("value").reset_index().assign(column=DELTA)
        paper = pd.concat([paper[["row", "column", "value"]], deltas], ignore_index=True)
    cols = [c for c in (SPEED, BLEU, DELTA) if c in set(tidy["column"])]
    table = beside(pivot(tidy, index="row", columns="column", values="value", best=None, col_order=cols,
                         row_order=order, decimals=2, over="seed"),
                   pivot(paper, index="row", columns="column", values="value", best=None, col_order=cols))
    table.caption = caption
    return table, ours


def t2(f: Files):
    """RHE on Rel_Pos and Localness, and RHE pruning (Table 2): speed, BLEU, Δ vs Transformer."""
    ms = t2_models(f.study)
    ablations = {name: ablation for name, (_, ablation) in T2_SYSTEMS.items()}
    seeds = study_seeds(f.study)
    inputs = [x for name, m in ms.items() for r in at_seeds(m, seeds)
              for x in (f.bleu(r, ablations[name]), f.benchmark(r))]

    def build():
        ours = pd.DataFrame([dict(row=name, seed=r["seed"], bleu=load_json(f.bleu(r, ablations[name]))["bleu"],
                                  speed=f.speed(r), model=model_path(r))
                             for name, m in ms.items() for r in at_seeds(m, seeds)])
        c, p = analysis_pair(f.study)
        return _delta_table(f, ours, "T2", (
            f"Paper C Table 2 ({c} {p}): RHE enlivening Rel_Pos / Localness heads, and pruning the redundant "
            "heads at test time (+RHE (Prune): Table 1's LPEA+RHE model translated with -rhe_prune; its speed is "
            "that model's training speed); training speed in steps per second of wall time (the train rule's "
            "benchmark; the paper's on 4 GPUs), BLEU and Δ BLEU vs the Transformer."), list(ms))
    return inputs, build


def t3(f: Files):
    """LPEA+RHE by the clipping distance k (Table 3)."""
    ms = t3_models(f.study)
    base = _model(f.study, *analysis_pair(f.study), "L")
    seeds = study_seeds(f.study)
    inputs = [f.bleu(r) for m in [base, *ms.values()] for r in at_seeds(m, seeds)]

    def build():
        rows = [dict(row="Transformer", seed=r["seed"], bleu=_bleu(f, r), k=None, model=model_path(r))
                for r in at_seeds(base, seeds)]
        rows += [dict(row=f"k={k}", seed=r["seed"], bleu=_bleu(f, r), k=k, model=model_path(r))
                 for k, m in sorted(ms.items()) for r in at_seeds(m, seeds)]
        ours = pd.DataFrame(rows)
        table, ours = _delta_table(f, ours, "T3", "", ["Transformer", *[f"k={k}" for k in sorted(ms)]])
        c, p = analysis_pair(f.study)
        table.caption = (f"Paper C Table 3 ({c} {p}): LPEA+RHE by the clipping distance k of the relative "
                         "local-phrasal positions (eq. 7); Δ vs the Transformer (the paper's k=0 row equals its "
                         "Transformer).")
        return table, ours
    return inputs, build


def a2(f: Files):
    """LPEA+RHE on different encoder layers (Table A2): speed, BLEU, Δ vs the Transformer ([0-0])."""
    ms = a2_models(f.study)
    seeds = study_seeds(f.study)
    inputs = [x for m in ms.values() for r in at_seeds(m, seeds) for x in (f.bleu(r), f.benchmark(r))]

    def build():
        ours = pd.DataFrame([dict(row=name, seed=r["seed"], bleu=_bleu(f, r), speed=f.speed(r), model=model_path(r))
                             for name, m in ms.items() for r in at_seeds(m, seeds)])
        c, p = analysis_pair(f.study)
        return _delta_table(f, ours, "A2", (
            f"Paper C Table A2 ({c} {p}, {f.study['layers']} layers): LPEA+RHE on encoder layers [first-last] "
            "([0-0]: the Transformer). The paper's caption says LPEA without RHE, but its [1-1] row is Table 1's "
            "LPEA+RHE; we run LPEA+RHE."), list(ms))
    return inputs, build


def a3(f: Files):
    """Parsers (Table A3): bracketing F1 on the PTB sample, and BLEU of LPEA+RHE with each."""
    ms = a3_models(f.study)
    c, p = analysis_pair(f.study)
    seeds = study_seeds(f.study)
    inputs = [f.bleu(r) for m in ms.values() for r in at_seeds(m, seeds)] + [f.parser_f1(parser) for parser in ms]

    def build():
        rows = []
        for parser, m in ms.items():
            score = pd.read_csv(f.parser_f1(parser)).iloc[0]
            rows.append(dict(row=parser, column="WSJ F1", seed=seeds[0], value=float(score["f1"]), model=None))
            rows += [dict(row=parser, column=f"{_label(c, p)} {BLEU}", seed=r["seed"], value=_bleu(f, r),
                          model=model_path(r)) for r in at_seeds(m, seeds)]
        ours = pd.DataFrame(rows)
        table = beside(pivot(ours, index="row", columns="column", values="value", best=None, decimals=2, over="seed"),
                       pivot(reference("A3"), index="row", columns="column", values="value", best=None))
        table.caption = ("Paper C Table A3: constituency parsers, bracketing F1 (evalb) on the NLTK Penn "
                         "Treebank WSJ sample (ours) / the WSJ test set (paper), and BLEU of LPEA+RHE with each "
                         "parser's trees.")
        return table, ours
    return inputs, build


def _redundant_shares(log_path: str) -> dict[int, float]:
    """step -> share of RHE heads labelled redundant, from the training log's zero-weight
    ``Step N aux: ... rhe_share=X`` lines (the mean over that reporting interval)."""
    import re

    shares = {}
    with open(log_path, encoding="utf-8") as handle:
        for line in handle:
            found = re.search(r"Step (\d+)\b.* aux: .*\brhe_share=([0-9.]+)", line)
            if found:
                shares[int(found[1])] = float(found[2])
    return shares


def redundant(f: Files):
    """Beyond the paper's tables (§4.2 logs it): the share of heads RHE labels redundant, by
    training step, for every RHE model of Tables 1-2 and Figure 4."""
    ms = {}
    for c, p in _pairs(f.study):
        for system, m in t1_models(f.study, c, p).items():
            if "RHE" in system:
                ms[f"{_label(c, p)} {system}"] = m
    for system, m in t2_models(f.study).items():
        if system.endswith("+RHE"):
            ms[f"{_label(*analysis_pair(f.study))} {system}"] = m
    for gate, m in f4_models(f.study).items():
        if gate not in ("dynamic", "Transformer"):
            ms[f"{_label(*analysis_pair(f.study))} +LPEA+RHE fixed gate {gate}"] = m
    logs = {name: f"{results_paths(f.root)['models']}/{model_path(m)}/train.log" for name, m in ms.items()}

    def build():
        rows = [dict(row=name, column=f"step {step}", value=share, model=model_path(ms[name]))
                for name, path in logs.items() for step, share in sorted(_redundant_shares(path).items())]
        ours = pd.DataFrame(rows)
        if ours.empty:
            raise DataError("no 'rhe_share' lines in the RHE models' training logs")
        table = pivot(ours, index="row", columns="column", values="value", best=None, decimals=3)
        table.caption = ("Share of heads RHE labels redundant (Syn_attn <= Syn_gate, eq. 10), mean over each "
                         "training report interval.")
        return table, ours
    # headlab train writes train.log beside the checkpoints (no declared output: a resume
    # appends to it); it is complete once model.pt exists
    return [f"{results_paths(f.root)['models']}/{model_path(m)}/model.pt" for m in ms.values()], build


# -- figures ----------------------------------------------------------------------------------

def f4(f: Files):
    """Fixed Syn_gate values vs the dynamic gate (Figure 4), the Transformer as a reference line;
    several seeds: the mean with a ± sd band."""
    ms = f4_models(f.study)
    seeds = study_seeds(f.study)
    inputs = [f.bleu(r) for m in ms.values() for r in at_seeds(m, seeds)]

    def build():
        gates = [g for g in ms if g not in ("dynamic", "Transformer")]
        rows = []
        for g in gates:
            for seed in seeds:
                at = {name: {**m, "seed": seed} for name, m in ms.items()}
                rows.append(dict(gate=g, seed=seed, system="fixed Syn_gate", bleu=_bleu(f, at[g])))
                rows.append(dict(gate=g, seed=seed, system="dynamic Syn_gate", bleu=_bleu(f, at["dynamic"])))
                rows.append(dict(gate=g, seed=seed, system="Transformer", bleu=_bleu(f, at["Transformer"])))
        c, p = analysis_pair(f.study)
        return pd.DataFrame(rows), dict(kind="line", x="gate", y="bleu", hue="system", errorbar="sd",
                                        title=f"Paper C Fig. 4: fixed vs dynamic Syn_gate, LPEA+RHE ({c} {p})")
    return inputs, build


def _panel_head(labels: np.ndarray | None, which: str) -> int | None:
    """Figure 5's head (0-based) in one layer's RHE labels (1 important, 0 redundant, NaN:
    not an RHE head): the first redundant / important one; None if the sentence has none."""
    if which == "first" or labels is None:
        return 0
    wanted = 1.0 if which == "important" else 0.0
    found = np.flatnonzero(labels == wanted)
    return int(found[0]) if len(found) else None


def _words(pieces: list[str]) -> tuple[list[str], list[list[int]]]:
    """(words, the piece positions of each word) of a BPE'd sentence (``@@`` = continues)."""
    words, units, current = [], [], []
    for k, piece in enumerate(pieces):
        current.append(k)
        if not piece.endswith("@@") or k == len(pieces) - 1:
            words.append("".join(pieces[i][:-2] if pieces[i].endswith("@@") else pieces[i] for i in current))
            units.append(current)
            current = []
    return words, units


def f5(f: Files):
    """One first-layer head's attention on the paper's sentence (Figure 5)."""
    c, p = analysis_pair(f.study)
    ms = {kind: _model(f.study, c, p, kind) for kind in ("RHElpea", "RelPos", "Local", "L")}
    inputs = [f.attention(m) for m in ms.values()]
    first = layer_range(f.study.get("enhanced", "1-1"), _encoder_layers(f.study), "studies.paper_C.enhanced")[0] - 1

    def build():
        from headlab.syntax.profile import word_attention

        rows = []
        for panel, (kind, which) in F5_PANELS.items():
            with np.load(f.attention(ms[kind]), allow_pickle=False) as npz:
                labels = npz["rhe_000000"][first] if "rhe_000000" in npz else None
                h = _panel_head(labels, which)
                source, note = ms[kind], ""
                if h is None:   # no head labelled important on this sentence: the Transformer's
                    source, h, note = ms["L"], 0, " (none labelled important: Transformer)"
            with np.load(f.attention(source), allow_pickle=False) as npz:
                tokens = str(npz["tokens"][0]).split()
                # RHE exports keep the attention before enlivening (raw_*) beside the used one (att_*)
                key = "raw_000000" if which == "redundant-before" and "raw_000000" in npz else "att_000000"
                att = npz[key][first]                                   # (heads, n, n)
            # word level, as the paper shows it: pieces summed over the attended word, averaged
            # over the attending word's pieces (paper D's profile does the same)
            words, units = _words(tokens)
            word_att = word_attention(att[h], units)
            for i, q in enumerate(words):
                for j, k in enumerate(words):
                    rows.append(dict(panel=f"{panel}: head {h + 1}{note}", query=f"{i + 1} {q}", key=f"{j + 1} {k}",
                                     attention=float(word_att[i, j])))
        return pd.DataFrame(rows), dict(kind="heatmap", x="key", y="query", value="attention", col="panel",
                                        col_wrap=2, xlabel="attended word", ylabel="attending word",
                                        title=f"Paper C Fig. 5: encoder layer {first + 1} attention ({c} {p})")
    return inputs, build


TABLES: dict[str, Callable] = {"T1": t1, "T2": t2, "T3": t3, "A2": a2, "A3": a3, "redundant": redundant}
FIGURES: dict[str, Callable] = {"F4": f4, "F5": f5}


# -- the generated README ---------------------------------------------------------------------

def _paper_value(table: str, row: str, column: str) -> float | None:
    ref = reference(table)
    found = ref[(ref["table"] == table) & (ref["row"] == row) & (ref["column"] == column)]["value"]
    return float(found.iloc[0]) if len(found) else None


def _paper_t1(a: str, b: str, pair: str, weights=None) -> float | None:
    """The paper's Table 1 a - b (BLEU) on its WMT16 column of ``pair`` (en-de, en-cs), else
    the mean over its columns; ``a``/``b`` may be lists (their mean)."""
    ref = reference("T1")
    ref = ref[ref["column"].str.endswith("BLEU")].pivot(index="column", columns="row", values="value")
    wanted = {"en-de": "En-De (WMT16) BLEU", "en-cs": "En-Cs (WMT16) BLEU"}.get(pair)
    if wanted in ref.index:
        ref = ref.loc[[wanted]]
    mean = lambda names: ref[[names] if isinstance(names, str) else list(names)].mean(axis=1)  # noqa: E731
    return float((mean(a) - mean(b)).mean())


def _paper_delta(table: str, a: str, b: str) -> float | None:
    x, y = _paper_value(table, a, BLEU), _paper_value(table, b, BLEU)
    return None if x is None or y is None else x - y


def effects(f: Files):
    """(inputs, build) of ``effects.csv``: §5.2-§A.2's claims. Table 1's on every pair (the
    analysis pair's headline systems with all their seeds), the analyses on the analysis pair."""
    s = f.study
    seeds = study_seeds(s)
    claims = []      # (claim, [(weight, [runs], ablation)])
    sea = ["+DEA", "+DEA+RHE", "+LPEA", "+LPEA+RHE"]
    for c, p in _pairs(s):
        ms = {name: runs(s, m) for name, m in t1_models(s, c, p).items()}
        where = f"{c} {p}"
        for a, b, text in (("+LPEA+RHE", "Transformer", "§5.2: LPEA+RHE beats the Transformer"),
                           ("+DEA+RHE", "+DEA", "§5.2: RHE lifts DEA (DEA+RHE > DEA)"),
                           ("+LPEA+RHE", "+LPEA", "§5.2: RHE lifts LPEA (LPEA+RHE > LPEA)")):
            claims.append((Claim(text, f"{a} − {b} ({where})", ">", 0.0, _paper_t1(a, b, p)),
                           [(1, ms[a], "full"), (-1, ms[b], "full")]))
        claims.append((Claim("§5.2: the syntax-enhanced systems beat Rel_Pos and Localness (their means)",
                             f"mean(DEA, DEA+RHE, LPEA, LPEA+RHE) − mean(Rel_Pos, Localness) ({where})", ">", 0.0,
                             _paper_t1(sea, ["+Rel_Pos", "+Localness"], p)),
                       [(1 / 4, ms[x], "full") for x in sea] + [(-1 / 2, ms[x], "full") for x in ("+Rel_Pos", "+Localness")]))
    c, p = analysis_pair(s)
    where = f"{c} {p}"
    t2 = {name: at_seeds(m, seeds) for name, m in t2_models(s).items()}
    for a, b in (("Rel_Pos+RHE", "Rel_Pos"), ("Localness+RHE", "Localness")):
        claims.append((Claim(f"§5.3.1: RHE lifts {b}", f"{a} − {b} ({where})", ">", 0.0, _paper_delta("T2", a, b)),
                       [(1, t2[a], "full"), (-1, t2[b], "full")]))
    claims.append((Claim("§5.3.1: pruning the redundant heads costs at most 0.5 BLEU against the Transformer",
                         f"+RHE (Prune) − Transformer ({where})", ">", -0.5, _paper_delta("T2", "+RHE (Prune)", "Transformer")),
                   [(1, t2["+RHE (Prune)"], PRUNE), (-1, t2["Transformer"], "full")]))
    ks = sorted(t3_models(s))
    if len(ks) > 1:
        best = 6 if 6 in ks else ks[-1]
        t3 = t3_models(s)
        claims.append((Claim(f"§5.3.3: local-phrase clipping matters: k={best} (the paper's best) beats k={ks[0]}",
                             f"LPEA+RHE k={best} − k={ks[0]} ({where})", ">", 0.0,
                             _paper_delta("T3", f"k={best}", f"k={ks[0]}")),
                       [(1, at_seeds(t3[best], seeds), "full"), (-1, at_seeds(t3[ks[0]], seeds), "full")]))
    a2 = a2_models(s)
    for name, m in a2.items():
        if name not in ("[0-0]", "[1-1]") and "[1-1]" in a2:
            claims.append((Claim("§A.2: enhancing the first encoder layer only is best",
                                 f"LPEA+RHE [1-1] − {name} ({where})", ">", 0.0, _paper_delta("A2", "[1-1]", name)),
                           [(1, at_seeds(a2["[1-1]"], seeds), "full"), (-1, at_seeds(m, seeds), "full")]))
    f4 = f4_models(s)
    fixed = [g for g in f4 if g not in ("dynamic", "Transformer")]
    if fixed:
        claims.append((Claim("§5.3.2: the dynamic Syn_gate beats fixed gates", f"dynamic − mean(fixed gates "
                             f"{', '.join(fixed)}) ({where})", ">", 0.0,
                             paper_note="the paper shows it in Figure 4 only, without numbers"),
                       [(1, at_seeds(f4["dynamic"], seeds), "full")]
                       + [(-1 / len(fixed), at_seeds(f4[g], seeds), "full") for g in fixed]))
    ablation = {"full": f.ablation}
    inputs = [x for _, terms in claims for _, ms, a in terms for m in ms
              for x in f.scored(m, ablation.get(a, a))[:2]]

    def build():
        judge = Judge("paper_C", f.samples())
        for claim, terms in claims:
            judge.systems(claim, [(w, {m["seed"]: f.scored(m, ablation.get(a, a)) for m in ms})
                                  for w, ms, a in terms])
        return judge.frame()
    return inputs, build


def readme(f: Files, provenance: Mapping[str, Any]) -> str:
    s = f.study
    preset = f.options()
    every = [m for m, _ in models(s, f.root)]
    lines = [
        "# Paper C reproduction (generated)",
        "",
        "Redundant heads enlivening (RHE) with syntax-enhanced attention: DEA (dependency mask, eqs. 4-5) and "
        "LPEA (local-phrase bias, eqs. 7-8), against Rel_Pos (Shaw et al. 2018) and Localness (Yang et al. 2018). "
        "Every table shows our number beside the paper's (`ours` / `paper`). This file is written by the "
        "workflow; do not edit it.",
        "",
        "## Scale of this run",
        "",
        "- data: " + "; ".join(f"{c} {p} (test: {f.test(c)})" for c, p in _pairs(s))
        + f"; analyses on {' '.join(analysis_pair(s))}",
        f"- model preset `{s['preset']}`: d={preset.get('hidden_size')}, layers {s['layers']}, "
        f"{preset.get('train_steps')} steps of {preset.get('batch_size')} {preset.get('batch_type', 'tokens')}",
        f"- enhanced encoder layers: {s.get('enhanced', '1-1')}; LPEA clipping k (T1): the option default "
        f"{_option_defaults().get('lpea_k')}; T3 k in {s.get('k', [])}; A2 layers {s.get('layer_ranges', [])}; "
        f"F4 fixed gates {s.get('fixed_gates', [])}; parsers {s.get('parsers', [])}",
        f"- translation: {'average of the last %d checkpoints' % int(s.get('average_last', 1)) if f.ablation != 'full' else 'the trained model (no checkpoint averaging)'}",
        f"- seeds: {study_seeds(s)} (every model), {headline_seeds(s)} (T1's Transformer, +DEA+RHE and +LPEA+RHE "
        f"on {' '.join(analysis_pair(s))})",
        f"- training: {training_time(every, f.root)}",
        *common.readme_tail(provenance, f"{f.root}/{OUTDIR}/effects.csv", [
            "`T1`: BLEU and #params of the seven systems, per pair, with paired-bootstrap marks vs the Transformer",
            "`T2`: RHE on Rel_Pos / Localness, and pruning; `T3`: LPEA+RHE by k; `A2`: by enhanced layers; "
            "`A3`: parsers (F1, BLEU); `redundant`: share of heads labelled redundant by training step",
            "`F4`: fixed vs dynamic Syn_gate; `F5`: one first-layer head's attention on the paper's sentence"]),
    ]
    return "\n".join(lines)
