"""Paper A's claims (§4.1-§5.3) judged on our runs: ``effects.csv`` (module doc of
:mod:`headlab.studies.effects`), each beside the paper's own difference where it has one."""
from __future__ import annotations

from headlab.studies import published
from headlab.studies.common import at_seeds, corpus_pairs, load_json, seeds as study_seeds
from headlab.studies.effects import Claim, Judge
from headlab.studies.paper_A.grid import (ABLATED, FIXED, eight_fixed, eight_fixed_lowres, one_model, roles, runs,
                                          scenario)
from headlab.studies.paper_A.outputs import Files, reference, three_by_role


def _paper_layers(study, layers: str) -> str | None:
    """The paper's layer setting where ours stands: deep = 6+6, shallow = 6+1, else the same."""
    return {study["deep"]: "6+6", study["shallow"]: "6+1"}.get(layers, layers)


def _paper_delta(table: str, first: str, second: str, pair: str | None = None, layers: str | None = None,
                 metric: str = "bleu", ablation: str = "full") -> float | None:
    """The paper's first - second in ``table`` at ``pair`` (if it has that pair; else the
    mean over its pairs) and ``layers``."""
    ref = reference(table)
    ref = ref[(ref["metric"] == metric) & (ref["ablation"] == ablation)]
    if layers is not None:
        ref = ref[ref["layers"] == layers]
    if pair is not None and pair in set(ref["pair"]):
        ref = ref[ref["pair"] == pair]
    values = ref.pivot_table(index="pair", columns="system", values="value", aggfunc="first")
    if first not in values or second not in values:
        return None
    return float((values[first].astype(float) - values[second].astype(float)).mean())


def _t4_paper(pair: str, layers: str | None) -> float | None:
    """The paper's mean ΔBLEU with heads 2-4 disabled minus that with heads 1, 5-7 disabled."""
    ref = reference("T4")
    ref = ref[(ref["pair"] == pair) & (ref["layers"] == layers)]
    if ref.empty:
        return None
    delta = ref.set_index("ablation")["value"].astype(float)
    return float(delta.reindex([f"no-h{head}" for head in (2, 3, 4)]).mean() - delta.reindex(
        [f"no-h{head}" for head in (1, 5, 6, 7)]).mean())


def _h8_deep_minus_shallow(pair: str) -> float | None:
    """The paper's ΔBLEU with H8 disabled at 6+6 minus at 6+1 (Table 4)."""
    ref = reference("T4")
    ref = ref[(ref["pair"] == pair) & (ref["ablation"] == "no-h8")].set_index("layers")["value"].astype(float)
    return float(ref["6+6"] - ref["6+1"]) if {"6+6", "6+1"} <= set(ref.index) else None


def _paper_t6(layers: str | None) -> float | None:
    """The paper's MuCoW accuracy of 7Ftoken+1L with H8 disabled minus without."""
    ref = reference("T6")
    ref = ref[(ref["metric"] == "accuracy_mucow") & (ref["layers"] == layers) & (ref["system"] == FIXED)]
    if set(ref["ablation"]) < {"full", "no-h8"}:
        return None
    value = ref.set_index("ablation")["value"].astype(float)
    return float(value["no-h8"] - value["full"])


def mucow_stats(details: str, key: str):
    """Per sentence (hit, hit or miss) for TED and for Tatoeba: Table 6's average precision."""
    import numpy as np

    from headlab.eval.mucow import AVERAGE_OF, load_keys
    from headlab.io import read_lines

    outcomes, keys = read_lines(details), load_keys(key)
    stats = np.zeros((len(keys), 2 * len(AVERAGE_OF)))
    for row, (outcome, item) in enumerate(zip(outcomes, keys)):
        if item.corpus in AVERAGE_OF:
            column = 2 * AVERAGE_OF.index(item.corpus)
            stats[row, column], stats[row, column + 1] = outcome == "hit", outcome in ("hit", "miss")
    return stats


def _uncovered(terms, names) -> str:
    """Why precision is undefined for a system of the §5.3 contrast ('' if it is not): in some
    seed, its translations hold neither sense of any TED (or Tatoeba) item."""
    from headlab.eval.mucow import AVERAGE_OF

    for term, name in zip(terms, names):
        for seed, stats in term.runs.items():
            counted = stats.sum(axis=0)[1::2]
            for corpus, covered in zip(AVERAGE_OF, counted):
                if not covered:
                    return (f"{name}'s translations (seed {seed}) hold neither sense of any MuCoW {corpus} item: "
                            f"its precision is undefined")
    return ""


def mean_precision(summed):
    """Table 6's number from summed per-sentence stats: the mean of TED's and Tatoeba's precision.
    A bootstrap resample with no counted item of a corpus scores 0 there (the test needs a
    number per resample); a system with none in the whole sample is not judged
    (:func:`_uncovered`), so this happens only in resamples of a sparsely covered corpus."""
    import numpy as np

    summed = np.atleast_2d(summed)
    return 0.5 * (summed[:, 0] / np.maximum(summed[:, 1], 1) + summed[:, 2] / np.maximum(summed[:, 3], 1))


def judge_published(judge: Judge, files: Files, frame, reference: str | None = None) -> dict[str, str]:
    """§4.1 and §4.4 on the published GPU runs of Table 1's deep row (the toy claims' tests,
    in the same family); ``reference``: the test set's reference file (default: this
    workflow's, where it trains that pair). Returns compared -> scale."""
    base, eight = files.study["heads"][0], eight_fixed(files.study)

    def within(text, first, second):
        return lambda slice_, layers, pair: Claim(
            text, f"{first} − {second} (GPU base {slice_}, {pair}, {layers})", ">", -1.0,
            _paper_delta("T5" if eight in (first, second) else "T1", first, second, pair,
                         None if eight in (first, second) else layers))
    contrasts = [(within(f"§4.1: with the deep decoder, {FIXED} is within 1 BLEU of {base} (not worse by more)",
                         FIXED, base), [(1, FIXED), (-1, base)]),
                 (within(f"§4.4: the learned head is dispensable: {eight} within 1 BLEU of {FIXED}", eight, FIXED),
                  [(1, eight), (-1, FIXED)])]
    deep = published.reference_of(files, lambda corpus, pair: one_model(files.study, corpus, pair, files.study["deep"],
                                                                       files.study["heads"][0]))
    return published.judge(judge, frame, "paper_A", "T1", contrasts, lambda pair, test: reference or deep(pair, test))


def effects(files: Files):
    """(inputs, build) of ``effects.csv``: §4.1-§5.3's claims on our runs (module doc of
    :mod:`headlab.studies.effects`)."""
    study, base, eight = files.study, files.study["heads"][0], eight_fixed(files.study)
    lowres = scenario(study, "lowres")
    claims: list[tuple] = []        # (claim, [(weight, [models], ablation)])

    def add(claim, *terms):
        claims.append((claim, [(weight, models, ablation) for weight, models, ablation in terms]))

    for corpus, pair in corpus_pairs(study):
        deep = {system: runs(study, one_model(study, corpus, pair, study["deep"], system))
                for system in (base, FIXED, eight)}
        add(Claim(f"§4.1: with the deep decoder, {FIXED} is within 1 BLEU of {base} (not worse by more)",
                  f"{FIXED} − {base} ({corpus} {pair}, {study['deep']})", ">", -1.0,
                  _paper_delta("T1", FIXED, base, pair, "6+6")),
            (1, deep[FIXED], "full"), (-1, deep[base], "full"))
        add(Claim(f"§4.4: the learned head is dispensable: {eight} within 1 BLEU of {FIXED}",
                  f"{eight} − {FIXED} ({corpus} {pair}, {study['deep']})", ">", -1.0,
                  _paper_delta("T5", eight, FIXED, pair)),
            (1, deep[eight], "full"), (-1, deep[FIXED], "full"))
        if "1L" in study["heads"]:
            for layers in study["layers"]:
                add(Claim("§4.1 (T1): 1L, a single learned head, is below 8L", f"1L − {base} ({corpus} {pair}, {layers})",
                          "<", 0.0, _paper_delta("T1", "1L", base, pair, _paper_layers(study, layers))),
                    (1, runs(study, one_model(study, corpus, pair, layers, "1L")), "full"),
                    (-1, runs(study, one_model(study, corpus, pair, layers, base)), "full"))
                # "the fixed attention models" together (their mean): one alone is below 1L in a
                # cell of the paper's own Table 1 (7Ftoken+1L at de-en 3+1, -0.12)
                fixed = [system for system in (FIXED, "7Fword+1L") if system in study["heads"]]
                paper = [_paper_delta("T1", system, "1L", pair, _paper_layers(study, layers)) for system in fixed]
                add(Claim("§4.1 (T1): the fixed attention models always outperform the single learnable head",
                          f"mean of {', '.join(fixed)} − 1L ({corpus} {pair}, {layers})", ">", 0.0,
                          None if None in paper else sum(paper) / len(paper)),
                    *[(1 / len(fixed), runs(study, one_model(study, corpus, pair, layers, system)), "full")
                      for system in fixed],
                    (-1, runs(study, one_model(study, corpus, pair, layers, "1L")), "full"))
        if study["shallow"] != study["deep"]:
            by_layers = {layers: at_seeds(one_model(study, corpus, pair, layers, FIXED), study_seeds(study))
                         for layers in (study["shallow"], study["deep"])}
            add(Claim("§4.3: the learned head H8 matters less with the deep decoder: disabling it costs less BLEU "
                      "at the deep setting than at the shallow one",
                      f"ΔBLEU(H8 off, {study['deep']}) − ΔBLEU(H8 off, {study['shallow']}) ({corpus} {pair})",
                      ">", 0.0, _h8_deep_minus_shallow(pair)),
                (1, by_layers[study["deep"]], "no-h8"), (-1, by_layers[study["deep"]], "full"),
                (-1, by_layers[study["shallow"]], "no-h8"), (1, by_layers[study["shallow"]], "full"))
        for layers, role in roles(study):
            ablated = at_seeds(one_model(study, corpus, pair, layers, FIXED), study_seeds(study))
            add(Claim("§4.3: heads 2-4 (previous, next, previous context) matter most among the fixed heads: "
                      "disabling them costs more than disabling heads 1, 5, 6, 7",
                      f"mean ΔBLEU(H2-4 off) − mean ΔBLEU(H1,5-7 off) ({corpus} {pair}, {role} {layers})", "<", 0.0,
                      _t4_paper(pair, _paper_layers(study, layers))),
                *[(1 / 3, ablated, f"no-h{head}") for head in (2, 3, 4)],
                *[(-1 / 4, ablated, f"no-h{head}") for head in (1, 5, 6, 7)])
    for corpus, pair in corpus_pairs(lowres):
        lowres_runs = {system: runs(study, one_model(study, corpus, pair, study["deep"], system, lowres), "lowres")
                       for system in (base, FIXED)}
        add(Claim(f"§4.2: low-resource, fixed heads ({FIXED}) beat learned ({base})",
                  f"{FIXED} − {base} ({corpus} {pair}, low-resource)", ">", 0.0, _paper_delta("T2", FIXED, base, pair)),
            (1, lowres_runs[FIXED], "full"), (-1, lowres_runs[base], "full"))
    for corpus, pairs in eight_fixed_lowres(study).items():
        for pair in pairs:
            lowres_runs = {system: runs(study, one_model(study, corpus, pair, study["deep"], system, lowres), "lowres")
                           for system in (FIXED, eight)}
            add(Claim(f"§4.4: low-resource, {eight} within 1 BLEU of {FIXED}", f"{eight} − {FIXED} ({corpus} {pair}, "
                      f"low-resource)", ">", -1.0, _paper_delta("T5", eight, FIXED, pair)),
                (1, lowres_runs[eight], "full"), (-1, lowres_runs[FIXED], "full"))
    first_pair = corpus_pairs(study)[0]
    params = {system: one_model(study, *first_pair, study["deep"], system) for system in (base, FIXED, eight)}
    wsd = three_by_role(files, study.get("wsd_pair", "de-en"), lambda model, ablation: (model, ablation),
                        study_seeds(study))
    inputs = [file for claim, terms in claims for _, models, ablation in terms for model in models
              for file in files.scored(model, ablation)[:2]]
    inputs += [files.params(model) for model in params.values()]
    inputs += [file for *_, (model, ablation) in wsd
               for file in (files.mucow(model, ablation), files.mucow_details(model, ablation), files.mucow_key(model))]
    gpu = published.read(files.published)
    inputs += published.inputs(files.published) + published.claim_inputs(gpu, "paper_A", "T1")
    inputs += [files.ref(one_model(study, corpus, pair, study["deep"], base)) for corpus, pair in corpus_pairs(study)]

    def build():
        judge = Judge("paper_A", files.samples())
        for claim, terms in claims:
            judge.systems(claim, [(weight, {model["seed"]: files.scored(model, ablation) for model in models})
                                  for weight, models, ablation in terms])
        count = {system: load_json(files.params(model))["params"] / 1e6 for system, model in params.items()}
        for big, small in ((base, FIXED), (FIXED, eight)):
            judge.exact(Claim(f"§4.4: fixing heads saves parameters: #params {big} > {small}",
                              f"#params {big} − {small} ({' '.join(first_pair)}, {study['deep']})", ">", 0.0,
                              _paper_delta("T5", big, small, "en-de", metric="params_millions"), unit="M params"),
                        count[big] - count[small])
        from headlab.eval.significance import Term
        for layers, role in roles(study):
            cells = {(system, seed): (model, ablation)
                     for cell_layers, _, system, seed, (model, ablation) in wsd if cell_layers == layers}
            if not cells:
                continue
            terms = [Term(weight, {seed: mucow_stats(files.mucow_details(model, ablation), files.mucow_key(model))
                                   for (system, seed), (model, ablation) in cells.items() if system == name})
                     for weight, name in ((1, ABLATED), (-1, FIXED))]
            claim = Claim("§5.3: disabling the learned head H8 lowers MuCoW's WSD score (ours: precision of "
                          "the translation suite)",
                          f"{ABLATED} − {FIXED} (MuCoW TED+Tatoeba, {study.get('wsd_pair', 'de-en')}, {role} {layers})",
                          "<", 0.0, _paper_t6(_paper_layers(study, layers)), unit="precision",
                          paper_note="the paper's number is the accuracy of MuCoW's contrastive scoring suite, "
                                     "whose de-en file is not available offline")
            uncovered = _uncovered(terms, (ABLATED, FIXED))
            if uncovered:
                judge.unjudged(claim, uncovered)
            else:
                judge.items(claim, terms, mean_precision)
        scales = judge_published(judge, files, gpu)
        return published.with_scale(judge.frame(), scales)
    return inputs, build
