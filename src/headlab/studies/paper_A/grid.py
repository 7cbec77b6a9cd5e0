"""Paper A's models: the grid its config trains, which of them are trained at the headline
seeds, and the models each table reads (no pandas: the DAG is planned from this module)."""
from __future__ import annotations

from typing import Any, Iterator, Mapping

from headlab.errors import ConfigError
from headlab.naming import heads_name, variant_name
from headlab.studies.common import at_seeds, corpus_pairs, first_seed, headline_seeds, seeds as study_seeds

OUTDIR = "paper_A"
FIXED = "7Ftoken+1L"                     # the system of Table 4 and Figures 2-3
ABLATED = f"{FIXED} (H8 disabled)"


def headline(study, part: str | None, layers: str, heads: str) -> bool:
    """Is this model in the paper's headline comparison (trained at ``headline_seeds`` too)?
    Table 1's deep row 8L / 7Ftoken+1L / 8Ftoken (§4.1, §4.4) and Table 2's 8L / 7Ftoken+1L
    (§4.2: fixed beats learned in the low-resource scenario); 7Fword+1L and 1L are not."""
    base, heads = heads_name(study["heads"][0]), heads_name(heads)   # as written or as named
    if part is None:
        return layers == study["deep"] and heads in (base, FIXED, heads_name(eight_fixed(study)))
    return part == "lowres" and heads in (base, FIXED)


def model_seeds(study, part: str | None, layers: str, heads: str) -> list[str]:
    return headline_seeds(study) if headline(study, part, layers, heads) else study_seeds(study)


def scenario(study, part: str) -> dict[str, Any]:
    """The ``lowres`` / ``highres`` block, with no data where it is not configured."""
    return {"data": {}, **(study.get(part) or {})}


def _grid(study, part, data: Mapping[str, list], preset: str, layers: list, heads: list,
          overrides: Mapping[str, Any]) -> Iterator[dict[str, str]]:
    for corpus, pairs in data.items():
        for pair in pairs:
            for depth in layers:
                for head in heads:
                    for seed in model_seeds(study, part, depth, head):
                        yield dict(corpus=corpus, pair=pair, size=str(study.get("size", "full")), preset=preset,
                                   layers=depth, heads=heads_name(head), seed=seed, variant=variant_name(overrides))


def models(study: Mapping[str, Any], root: str | None = None) -> Iterator[tuple[dict, dict]]:
    """(model, OpenNMT overrides) for every model the study trains."""
    heads, deep, eight = study["heads"], study["deep"], eight_fixed(study)
    standard = dict(study.get("overrides", {}))
    for model in _grid(study, None, study["data"], study["preset"], study["layers"], heads, standard):
        yield model, standard
    for model in _grid(study, None, study["data"], study["preset"], [deep], [eight], standard):
        yield model, standard
    for part in ("lowres", "highres"):
        if study.get(part):
            block = study[part]
            for model in _grid(study, part, block["data"], block["preset"], [deep], heads, block.get("overrides", {})):
                yield model, dict(block.get("overrides", {}))
    # Table 5 (§4.4) also fixes the eighth head in the low-resource scenario (paper: en<->vi)
    lowres = study.get("lowres") or {}
    for model in _grid(study, "lowres", eight_fixed_lowres(study), lowres.get("preset"), [deep], [eight],
                       lowres.get("overrides", {})):
        yield model, dict(lowres.get("overrides", {}))


def tests(corpus: Mapping[str, Any]) -> list[str]:
    """The test sets of a corpus this study scores (every table reads the first only)."""
    return list(corpus["tests"][:1])


def eight_fixed(study) -> str:
    """The head spec of Table 5's all-fixed system."""
    return study.get("eight_fixed", "8Ftoken")


def eight_fixed_lowres(study) -> dict[str, list]:
    """corpus -> pairs of the low-resource scenario that also train the eight-fixed system."""
    wanted = list(study.get("eight_fixed_lowres", []))
    lowres_pairs = corpus_pairs(scenario(study, "lowres"))
    known = {pair for _, pair in lowres_pairs}
    unknown = [pair for pair in wanted if pair not in known]
    if unknown:
        raise ConfigError(f"pair(s) {', '.join(unknown)} are not in paper_A.lowres.data "
                          f"(it has: {', '.join(sorted(known)) or 'nothing'})", key="paper_A.eight_fixed_lowres")
    out: dict[str, list] = {}
    for corpus, pair in lowres_pairs:
        if pair in wanted:
            out.setdefault(corpus, []).append(pair)
    return out


def one_model(study, corpus, pair, layers, heads, block=None) -> dict[str, str]:
    """One model of the standard scenario, or of ``block`` (the lowres/highres block), at the
    study's first seed."""
    block = block or study
    return dict(corpus=corpus, pair=pair, size=str(study.get("size", "full")),
                preset=block["preset"], layers=layers, heads=heads_name(heads),
                seed=first_seed(study), variant=variant_name(block.get("overrides")))


def runs(study, model, part: str | None = None) -> list[dict]:
    """The runs of ``model`` (one per seed it is trained at)."""
    return at_seeds(model, model_seeds(study, part, model["layers"], model["heads"]))


def find_pair(study, pair) -> str | None:
    """The corpus of the standard scenario that has ``pair`` (None: none has)."""
    for corpus, known in corpus_pairs(study):
        if known == pair:
            return corpus
    return None


def roles(study) -> list[tuple[str, str]]:
    """(our layers, role) of the two depths that stand where the paper has 6+1 and 6+6."""
    return [(study["shallow"], "shallow"), (study["deep"], "deep")]


def ablation_systems(study) -> list[tuple[str, str]]:
    """(heads, ablation) of Table 6 and Figures 2-3: 8L, 7Ftoken+1L and it with H8 disabled."""
    return [(study["heads"][0], "full"), (FIXED, "full"), (FIXED, "no-h8")]


def system_label(system, ablation) -> str:
    return ABLATED if (system, ablation) == (FIXED, "no-h8") else system


# -- what the atlas asks of the study ----------------------------------------------------

def atlas_headline(study, model: Mapping[str, str]) -> bool:
    """Table 1's systems at the deep layers of the standard scenario, and Table 4's system
    (7Ftoken+1L) at both depths."""
    return model["preset"] == study["preset"] and (
        model["layers"] == study["deep"] or (model["heads"] == FIXED and model["layers"] == study["shallow"]))


def ablates_heads(study, model: Mapping[str, str]) -> bool:
    """Table 4 ablates its 7Ftoken+1L models at the study's seeds (not the headline's)."""
    return model["heads"] == FIXED and model["layers"] in (study["shallow"], study["deep"]) \
        and model["preset"] == study["preset"] and model["pair"] in study["data"].get(model["corpus"], []) \
        and not model.get("tune") and model["seed"] in study_seeds(study)


#: config key -> (suite, the pairs it scores, what reads it)
SUITE_PAIRS = {"wsd_pair": ("MuCoW", "MUCOW_PAIRS", "Table 6 and Figure 2"),
               "sva_pair": ("DistilLingEval", "DISTIL_PAIRS", "Figure 3")}


def check(study) -> None:
    """The pairs of the contrastive suites, named by their key: one the suite has no items
    for fails in a job after training (MuCoW, DistilLingEval: en-de only); one the standard
    scenario does not train leaves the table or figure without a row of ours, which is an
    error when another pair of the study could stand there."""
    from headlab.eval import suite_split

    pairs = [pair for _, pair in corpus_pairs(study)]
    for key, (suite, attribute, readers) in SUITE_PAIRS.items():
        scored = getattr(suite_split, attribute)
        pair = study.get(key)
        if pair is None:
            continue
        if pair not in scored:
            raise ConfigError(f"{suite} has no items for {pair!r} ({readers}); it scores {', '.join(sorted(scored))}",
                              key=f"studies.paper_A.{key}")
        usable = [known for known in pairs if known in scored and (key != "wsd_pair" or averaged(known))]
        if pair not in pairs and usable:
            raise ConfigError(f"{key} {pair!r} is not one of the pairs of studies.paper_A.data ({', '.join(pairs)}): "
                              f"{readers} would show the paper's numbers only; name one {suite} scores: "
                              f"{', '.join(usable)}", key=f"studies.paper_A.{key}")


def averaged(pair: str, roots: tuple[str, ...] = ()) -> bool:
    """Has MuCoW ``pair`` items from both corpora whose average Table 6 reports (TED, Tatoeba)?"""
    from headlab.eval.mucow import AVERAGE_OF, pair_corpora

    return set(AVERAGE_OF) <= set(pair_corpora(pair, roots))


def check_wsd(study, domains: list[str], roots: tuple[str, ...] = ()) -> None:
    """Table 6 (and the §5.3 claim) read the TED+Tatoeba average of MuCoW's scores of the
    ``wsd_pair`` models: scoring no TED or no Tatoeba items (``domains``: the config's
    ``evaluation.mucow_domains``), or a pair without them, leaves no average, and the table
    failed after training. ``roots``: data folders whose fetched key file, where there is
    one, says which corpora the pair has (else :data:`headlab.eval.mucow.CORPORA`)."""
    from headlab.eval.mucow import AVERAGE_OF, CORPORA, pair_corpora

    pair = study.get("wsd_pair", "de-en")      # the schema's default, as the table reads it
    if pair not in CORPORA or find_pair(study, pair) is None:
        return      # check() names a pair MuCoW lacks; an untrained one leaves Table 6 the paper's numbers
    if not set(AVERAGE_OF) <= set(domains):
        raise ConfigError(f"paper A Table 6 reports MuCoW's TED+Tatoeba average: mucow_domains must include "
                          f"{' and '.join(AVERAGE_OF)} (it has: {', '.join(domains)})", key="evaluation.mucow_domains")
    missing = [corpus for corpus in AVERAGE_OF if corpus not in pair_corpora(pair, roots)]
    if not missing:
        return
    trained = [known for _, known in corpus_pairs(study) if known in CORPORA and averaged(known, roots)]
    others = ", ".join(trained) if trained else (
        f"{', '.join(known for known in CORPORA if averaged(known, roots))} (studies.paper_A.data trains none: "
        "Table 6 then shows the paper's numbers only)")
    raise ConfigError(f"MuCoW's {pair} items come from no {' and no '.join(missing)} corpus: Table 6 reports their "
                      f"TED+Tatoeba average; name a pair with both: {others}", key="studies.paper_A.wsd_pair")
