"""Paper C's models: the systems of each table as encoder head specs on the enhanced layers,
the analysis pair, and the config checks. No pandas here: planning a run imports this alone."""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable, Iterator, Mapping

from headlab.errors import ConfigError
from headlab.naming import heads_name, model_path, variant_name
from headlab.studies.common import at_seeds, corpus_pairs, first_seed, headline_seeds, seeds as study_seeds

OUTDIR = "paper_C"
PRUNE = "rhe-prune"   # the translate rule's ablation: -rhe_prune

#: Table 1's rows: system -> head kind of the enhanced layers (L: stock heads)
T1_SYSTEMS = {"Transformer": "L", "+Rel_Pos": "RelPos", "+Localness": "Local", "+DEA": "DEA",
              "+DEA+RHE": "RHEdea", "+LPEA": "LPEA", "+LPEA+RHE": "RHElpea"}
#: Table 2's rows: system -> (kind, translation ablation or None). "+RHE (Prune)" is
#: Table 1's LPEA+RHE model translated with its redundant heads pruned (``-rhe_prune``).
T2_SYSTEMS = {"Transformer": ("L", None), "+RHE (Prune)": ("RHElpea", PRUNE),
              "Rel_Pos": ("RelPos", None), "Rel_Pos+RHE": ("RHErel", None),
              "Localness": ("Local", None), "Localness+RHE": ("RHEloc", None)}
#: Table 1's systems of the headline comparison (on the analysis pair)
HEADLINE = ("Transformer", "+DEA+RHE", "+LPEA+RHE")
#: the one-sentence test split of Figure 5
F5_SPLIT = "paper_C_F5"


def analysis_pair(study) -> tuple[str, str]:
    """The pair of the analyses (paper: En→De WMT16): ``analysis_pair: CORPUS/PAIR`` or the first."""
    pairs = corpus_pairs(study)
    if "analysis_pair" not in study:
        return pairs[0]
    corpus, _, pair = str(study["analysis_pair"]).partition("/")
    if (corpus, pair) not in pairs:
        raise ConfigError(f"analysis_pair {study['analysis_pair']!r} is not one of the study's pairs "
                          f"({', '.join(f'{c}/{p}' for c, p in pairs)})", key="studies.paper_C.analysis_pair")
    return corpus, pair


def encoder_layers(study) -> int:
    return int(str(study["layers"]).split("+")[0])


def layer_range(text: str, n_encoder: int, key: str) -> tuple[int, int]:
    """``"1-2"`` -> (1, 2): encoder layers, 1-based, inclusive, within 1..n_encoder."""
    low, dash, high = str(text).partition("-")
    try:
        first, last = int(low), int(high if dash else low)
    except ValueError:
        raise ConfigError(f"{text!r} is not a layer range FIRST-LAST (e.g. 1-2)", key=key) from None
    if not 1 <= first <= last <= n_encoder:
        raise ConfigError(f"layer range {text!r} is outside the encoder's layers 1-{n_encoder}", key=key)
    return first, last


def enhanced(study) -> tuple[int, int]:
    """The enhanced encoder layers (``enhanced``, default ``1-1``)."""
    return layer_range(study.get("enhanced", "1-1"), encoder_layers(study), "studies.paper_C.enhanced")


def layer_ranges(study) -> list[tuple[int, int]]:
    """Table A2's enhanced layers (``layer_ranges``)."""
    return [layer_range(text, encoder_layers(study), "studies.paper_C.layer_ranges")
            for text in study.get("layer_ranges", [])]


def enhanced_spec(kind: str, layers: tuple[int, int], heads: int = 8) -> str:
    """Encoder head spec with ``kind`` on ``layers`` (1-based, inclusive), stock heads elsewhere:
    ``enhanced_spec("DEA", (1, 1))`` = ``8DEA,*(8L)``; ``("LPEA", (2, 3))`` = ``8L,2*(8LPEA),*(8L)``."""
    if kind == "L":
        return f"{heads}L"
    first, last = layers

    def group(count, group_kind):
        return f"{heads}{group_kind}" if count == 1 else f"{count}*({heads}{group_kind})"
    groups = ([group(first - 1, "L")] if first > 1 else []) + [group(last - first + 1, kind), f"*({heads}L)"]
    return ",".join(groups)


@lru_cache(maxsize=None)
def option_defaults() -> dict[str, Any]:
    """Defaults of headlab's own options (``lpea_k``, ``rhe_fgate``, ...), from its parser.
    configargparse's parser, which OpenNMT-py's subclasses: that one's module imports torch,
    and this runs where the DAG is built (every snakemake start)."""
    from configargparse import ArgumentParser

    from headlab.engine import opts

    parser = ArgumentParser()
    opts.model_opts(parser)
    opts.train_opts(parser)
    return {action.dest: action.default for action in parser._actions}


def _preset(study) -> dict:
    from headlab.engine.config import resolve_preset
    return resolve_preset(study["preset"])


def canonical(study, overrides: Mapping) -> dict:
    """Overrides without the values the preset or the option default already has: T3's k = 6
    and F4's dynamic gate are T1's LPEA+RHE model itself (same path, trained once)."""
    preset, defaults = _preset(study), option_defaults()
    out = {}
    for option, value in overrides.items():
        same = preset[option] == value if option in preset else (option in defaults and defaults[option] == value)
        if not same:
            out[option] = value
    return out


def system_model(study, corpus, pair, kind, layers=None, overrides: Mapping | None = None) -> dict[str, str]:
    """One system at the study's first seed (:func:`runs`: all of its seeds)."""
    layers = layers or enhanced(study)
    spec = enhanced_spec(kind, layers, int(study.get("heads", 8)))
    return dict(corpus=corpus, pair=pair, size=str(study.get("size", "full")), preset=study["preset"],
                layers=study["layers"], heads=heads_name(spec), seed=first_seed(study),
                variant=variant_name(canonical(study, overrides or {})))


def runs(study, model) -> list[dict[str, str]]:
    """The runs of system ``model``: at ``headline_seeds`` if it is one of Table 1's headline
    systems on the analysis pair (the same model wherever a table uses it), else at ``seeds``."""
    headline = {model_path(system) for name, system in t1_models(study, *analysis_pair(study)).items()
                if name in HEADLINE}
    return at_seeds(model, headline_seeds(study) if model_path(model) in headline else study_seeds(study))


def t1_models(study, corpus, pair) -> dict[str, dict]:
    return {name: system_model(study, corpus, pair, kind) for name, kind in T1_SYSTEMS.items()}


def t2_models(study) -> dict[str, dict]:
    corpus, pair = analysis_pair(study)
    return {name: system_model(study, corpus, pair, kind) for name, (kind, _) in T2_SYSTEMS.items()}


def t3_models(study) -> dict[int, dict]:
    corpus, pair = analysis_pair(study)
    return {int(k): system_model(study, corpus, pair, "RHElpea", overrides={"lpea_k": int(k)})
            for k in study.get("k", [])}


def a2_models(study) -> dict[str, dict]:
    corpus, pair = analysis_pair(study)
    out = {"[0-0]": system_model(study, corpus, pair, "L")}
    for first, last in layer_ranges(study):
        out[f"[{first}-{last}]"] = system_model(study, corpus, pair, "RHElpea", layers=(first, last))
    return out


def a3_models(study) -> dict[str, dict]:
    corpus, pair = analysis_pair(study)
    return {parser: system_model(study, corpus, pair, "RHElpea", overrides={"syntax_parser": parser})
            for parser in study.get("parsers", [])}


def fixed_gates(study) -> list[float]:
    """Figure 4's fixed Syn_gate values (``fixed_gates``)."""
    return [float(gate) for gate in study.get("fixed_gates", [])]


def f4_models(study) -> dict[str, dict]:
    corpus, pair = analysis_pair(study)
    out = {"dynamic": system_model(study, corpus, pair, "RHElpea"), "Transformer": system_model(study, corpus, pair, "L")}
    for gate in fixed_gates(study):
        out[f"{gate:g}"] = system_model(study, corpus, pair, "RHElpea", overrides={"rhe_fgate": gate})
    return out


def models(study: Mapping[str, Any], root: str | None = None) -> Iterator[tuple[dict, dict]]:
    """(model, OpenNMT overrides) of every model the study trains, at each of its seeds."""
    seen = set()

    # a model several tables share (T1's LPEA+RHE is T3's k=6 …) is trained once
    def emit(model, overrides):
        for run in runs(study, model):
            if model_path(run) not in seen:
                seen.add(model_path(run))
                yield run, canonical(study, overrides)
    for corpus, pair in corpus_pairs(study):
        for model in t1_models(study, corpus, pair).values():
            yield from emit(model, {})
    for model in t2_models(study).values():
        yield from emit(model, {})
    for clipping, model in t3_models(study).items():
        yield from emit(model, {"lpea_k": clipping})
    for model in a2_models(study).values():
        yield from emit(model, {})
    for parser, model in a3_models(study).items():
        yield from emit(model, {"syntax_parser": parser})
    for gate in fixed_gates(study):
        yield from emit(f4_models(study)[f"{gate:g}"], {"rhe_fgate": gate})


def is_headline(study) -> Callable[[Mapping[str, str]], bool]:
    """Whether a model is one of Table 1's seven systems on some pair, at the first seed (the
    atlas characterises those: the other seeds repeat the same kinds)."""
    headline = {model_path(model) for corpus, pair in corpus_pairs(study)
                for model in t1_models(study, corpus, pair).values()}
    return lambda model: model_path(model) in headline


def varied_options(study) -> set[str]:
    """The options Tables 3, A3 and Figure 4 vary (a global override of one is a config error)."""
    keys = {"k": "lpea_k", "parsers": "syntax_parser", "fixed_gates": "rhe_fgate"}
    return {option for key, option in keys.items() if study.get(key)}


def check(study) -> None:
    """Config errors the schema cannot express, naming the key."""
    enhanced(study)
    layer_ranges(study)
    for clipping in study.get("k", []):
        if int(clipping) < 0:
            raise ConfigError(f"the clipping distance k must be >= 0, got {clipping}", key="studies.paper_C.k")
    for gate in study.get("fixed_gates", []):
        if not 0 < float(gate) <= 1:
            raise ConfigError(f"a fixed Syn_gate must be in (0, 1], got {gate}", key="studies.paper_C.fixed_gates")
    analysis_pair(study)
    for corpus, pair in corpus_pairs(study):
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
