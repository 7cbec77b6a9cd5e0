"""Contrastive evaluation: accuracy of a model's scores on contrastive test suites.

A contrast is won when the model scores the correct translation strictly higher than
the contrastive one (LingEval97 protocol, Sennrich 2017: ``evaluate.py`` uses ``>``, so
ties lose). DistilLingEval's own ``contrastive_evaluation.py`` counts ties as won (``>=``);
``--ties-win`` reproduces that. With float log-probs ties are rare either way. WSD suites
(ContraWSD, MuCoW scoring) count a sentence as correct only if the reference beats
every contrastive. Scores are ``headlab score`` outputs (first column: sum of
log-probabilities, higher is better); ``--lower-is-better`` accepts NLL-style scores.

Subcommands (``headlab contrastive SUB ...``)::

    pairs   --suite-type T --suite PATH --src-out F --tgt-out F
            raw source/target lines to score, in upstream json_to_plaintext order
            (DistilLingEval: use its src.en with tgt.correct.de and tgt.incorrect.de as they are)
    distil  --suite DIR (--correct-scores F --incorrect-scores F | --scores F) --out CSV
            [--system NAME] [--parse-cache JSON] [--no-distance] [--lower-is-better] [--ties-win]
            (--scores: one file, first half correct, second half incorrect, as DistilLingEval)
            DistilLingEval accuracy; by subject-verb distance for subj_verb_agreement
            (paper A Figure 3; distance defined in headlab.eval.sva)
    json    --suite-type {lingeval97,contrawsd,mucow-scoring} --suite JSON --scores F --out CSV
            [--system NAME] [--lower-is-better] [--ties-win]
    mucow   --hyp F --key KEY.txt --lang-pair de-en --out CSV [--system NAME]
            [--lemmas F | --no-lemmatize] [--details TSV]
            MuCoW translation suite (paper A Table 6); matching in headlab.eval.mucow

Accuracy CSVs (``distil``, ``json``) are tidy, one row per group::

    system, suite, category, by, bucket, correct, total, accuracy

``by`` is ``all`` (bucket ``all``), ``distance`` (bucket ``1``..``15``, ``>15``) or
``origin`` (corpus of the sentence: MuCoW scoring, LingEval97). ``category`` is the
phenomenon (LingEval97 error type, DistilLingEval folder name) or ``all``; WSD suites
use ``all`` plus ``by = sense`` rows (``word:sense``) for per-sense accuracy.
``--tag KEY=VALUE`` (distil, json, mucow) adds constant leading columns (e.g. ``config=6+6``).
The ``mucow`` CSV has ``system, pair, corpus, n, hit, miss, other, precision, recall,
f1, coverage, accuracy`` (see :mod:`headlab.eval.mucow`).
"""
from __future__ import annotations

import argparse
import operator
from collections import defaultdict

from headlab.errors import DataError
from headlab.eval import suites
from headlab.eval.common import add_tags, parse_tags, read_scores, write_csv
from headlab.options import bounded

COLUMNS = ["system", "suite", "category", "by", "bucket", "correct", "total", "accuracy"]
JSON_LOADERS = {"lingeval97": suites.load_lingeval97, "contrawsd": suites.load_contrawsd,
                "mucow-scoring": suites.load_mucow_scoring}


def outcomes(items: list[suites.Item], scores: list[float], *, higher_is_better: bool = True,
             ties_win: bool = False, scores_path: str = "scores") -> list[dict]:
    """One dict per contrast: category, origin, distance, correct (bool)."""
    expected = suites.n_scores(items)
    if len(scores) != expected:
        raise DataError(f"{len(scores)} scores for a suite that needs {expected} "
                        f"(correct + contrastives, json_to_plaintext order)", path=scores_path)
    better = {(True, False): operator.gt, (False, False): operator.lt,
              (True, True): operator.ge, (False, True): operator.le}[higher_is_better, ties_win]
    out, k = [], 0
    for item in items:
        good, bad = scores[k], scores[k + 1:k + 1 + len(item.contrastive)]
        k += 1 + len(item.contrastive)
        if item.all_or_nothing:
            out.append({"category": item.categories[0], "origin": item.origin, "distance": None,
                        "correct": all(better(good, b) for b in bad)})
        else:
            distances = item.distances or [None] * len(bad)
            for j, b in enumerate(bad):
                category = item.categories[j] if len(item.categories) > 1 else item.categories[0]
                out.append({"category": category, "origin": item.origin, "distance": distances[j],
                            "correct": better(good, b)})
    return out


def aggregate(contrasts: list[dict], *, system: str, suite: str, by_sense: bool = False):
    """Tidy accuracy rows (see the module docstring) from :func:`outcomes`."""
    import pandas as pd
    from headlab.eval.sva import bin_order, distance_bin

    counts: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])

    def add(key, ok):
        counts[key][0] += int(ok)
        counts[key][1] += 1

    categories = sorted({c["category"] for c in contrasts})
    for c in contrasts:
        category = "all" if by_sense else c["category"]
        add((category, "all", "all"), c["correct"])
        if not by_sense and len(categories) > 1:
            add(("all", "all", "all"), c["correct"])
        if c["distance"] is not None:
            add((category, "distance", distance_bin(c["distance"])), c["correct"])
        if c["origin"] and by_sense:
            add((category, "origin", c["origin"]), c["correct"])
        if by_sense:
            add(("all", "sense", c["category"]), c["correct"])

    by_rank = {"all": 0, "distance": 1, "origin": 2, "sense": 3}

    def order(key):  # overall rows first, then per category; distance bins numerically
        category, by, bucket = key
        return (category != "all", category, by_rank[by], bin_order(bucket) if by == "distance" else 0, bucket)

    rows = [{"system": system, "suite": suite, "category": cat, "by": by, "bucket": bucket,
             "correct": ok, "total": n, "accuracy": ok / n}
            for (cat, by, bucket), (ok, n) in sorted(counts.items(), key=lambda kv: order(kv[0]))]
    return pd.DataFrame(rows, columns=COLUMNS)


def distil_accuracy(directory, correct_scores: list[float], incorrect_scores: list[float], *,
                    system: str = "system", distance: bool | None = None, parse_cache=None,
                    higher_is_better: bool = True, ties_win: bool = False,
                    paths=("correct scores", "incorrect scores"), limit: int | None = None):
    """DistilLingEval accuracy, with subject-verb distance bins for subj_verb_agreement
    (``distance=None``: only for that phenomenon); ``limit``: the first N pairs only (the
    same cut as ``headlab suite-split --limit``)."""
    category, src, good, bad = suites.load_distil_lingeval(directory)
    src, good, bad = src[:limit], good[:limit], bad[:limit]
    for path, values in zip(paths, (correct_scores, incorrect_scores)):
        if len(values) != len(src):
            raise DataError(f"{len(values)} scores but the suite {directory} has {len(src)} pairs", path=str(path))
    if distance is None:
        distance = category == "subj_verb_agreement"
    dist = [None] * len(src)
    if distance:
        from headlab.eval.sva import distances
        dist = distances(src, good, bad, cache=parse_cache)
    items = [suites.Item(s, g, [b], [category], distances=[d]) for s, g, b, d in zip(src, good, bad, dist)]
    interleaved = [x for pair in zip(correct_scores, incorrect_scores) for x in pair]
    return aggregate(outcomes(items, interleaved, higher_is_better=higher_is_better, ties_win=ties_win),
                     system=system, suite="distil-lingeval")


def json_accuracy(suite_type: str, path, scores: list[float], *, system: str = "system",
                  higher_is_better: bool = True, ties_win: bool = False, scores_path: str = "scores"):
    items = JSON_LOADERS[suite_type](path)
    contrasts = outcomes(items, scores, higher_is_better=higher_is_better, ties_win=ties_win,
                         scores_path=scores_path)
    if suite_type == "lingeval97":
        # per error type and distance; its origin ("newstest2009.1") names a sentence, not a group
        return aggregate(contrasts, system=system, suite=suite_type)
    return aggregate(contrasts, system=system, suite=suite_type, by_sense=True)


def _write_lines(path, lines):
    from headlab.io import atomic_write

    with atomic_write(path) as handle:
        for line in lines:
            handle.write(line + "\n")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="headlab contrastive", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("pairs", help="write the source/target lines to score")
    p.add_argument("--suite-type", required=True, choices=["distil", *JSON_LOADERS], help="which suite's format")
    p.add_argument("--suite", required=True, help="the suite's file or folder")
    p.add_argument("--src-out", required=True, help="source lines to score")
    p.add_argument("--tgt-out", required=True, help="target lines to score")

    d = sub.add_parser("distil", help="DistilLingEval accuracy (+ by subject-verb distance)")
    d.add_argument("--suite", required=True, help="a DistilLingEval *.mt folder")
    d.add_argument("--correct-scores", help="scores of tgt.correct.de (headlab score output)")
    d.add_argument("--incorrect-scores", help="scores of tgt.incorrect.de")
    d.add_argument("--scores", help="instead: one file, correct scores then incorrect scores")
    d.add_argument("--out", required=True, help="accuracy CSV")
    d.add_argument("--system", default="system", help="system name in the CSV")
    d.add_argument("--parse-cache", default=None, help="JSON cache of spaCy parses of src.en")
    d.add_argument("--no-distance", action="store_true", help="no breakdown by subject-verb distance")
    # a slice's end: -1 would keep all but the last pair, 0 none
    d.add_argument("--limit", type=bounded(int, 1), default=None, help="first N pairs only (smoke tests)")
    d.add_argument("--lower-is-better", action="store_true", help="scores are costs (lower means more likely)")

    c = sub.add_parser("distil-parse", help="spaCy parses of a DistilLingEval suite's sources (the --parse-cache "
                                            "of distil), once, before any model is scored")
    c.add_argument("--suite", required=True, help="a DistilLingEval *.mt folder")
    c.add_argument("--limit", type=bounded(int, 1), default=None,
                   help="first N pairs only (the same cut as distil --limit)")
    c.add_argument("--out", required=True, help="the parse cache (JSON)")

    j = sub.add_parser("json", help="LingEval97 / ContraWSD / MuCoW scoring accuracy")
    j.add_argument("--suite-type", required=True, choices=list(JSON_LOADERS), help="which suite's format")
    j.add_argument("--suite", required=True, help="the suite's JSON")
    j.add_argument("--scores", required=True, help="headlab score output for the pairs")
    j.add_argument("--out", required=True, help="accuracy CSV")
    j.add_argument("--system", default="system", help="system name in the CSV")
    j.add_argument("--lower-is-better", action="store_true", help="scores are costs (lower means more likely)")

    m = sub.add_parser("mucow", help="MuCoW translation suite (hit/miss/other per corpus)")
    m.add_argument("--hyp", required=True, help="detokenised translation of {pair}.text.txt")
    m.add_argument("--key", required=True, help="{pair}.key.txt")
    m.add_argument("--lang-pair", required=True, help="SRC-TGT of the suite")
    m.add_argument("--out", required=True, help="result CSV")
    m.add_argument("--system", default="system", help="system name in the CSV")
    m.add_argument("--lemmas", default=None, help="lemmatised hypothesis, one line per sentence")
    m.add_argument("--no-lemmatize", action="store_true", help="token matching only")
    m.add_argument("--details", default=None, help="TSV of per-sentence outcomes")

    for p_ in (d, j, m):
        p_.add_argument("--tag", action="append", metavar="KEY=VALUE", help="constant column for every row")
    for p_ in (d, j):
        p_.add_argument("--ties-win", action="store_true", help="count equal scores as won (DistilLingEval)")
    args = parser.parse_args(argv)
    tags = parse_tags(getattr(args, "tag", None))
    if args.command == "pairs":
        if args.suite_type == "distil":
            _, src, good, bad = suites.load_distil_lingeval(args.suite)
            items = [suites.Item(s, g, [b], ["x"]) for s, g, b in zip(src, good, bad)]
        else:
            items = JSON_LOADERS[args.suite_type](args.suite)
        src, tgt = suites.scoring_lines(items)
        _write_lines(args.src_out, src)
        _write_lines(args.tgt_out, tgt)
    elif args.command == "distil":
        if args.scores and not (args.correct_scores or args.incorrect_scores):
            both = read_scores(args.scores)
            if len(both) % 2:
                raise DataError(f"{len(both)} scores: --scores needs correct then incorrect halves",
                                path=args.scores)
            good, bad = both[:len(both) // 2], both[len(both) // 2:]
            paths = (args.scores, args.scores)
        elif args.correct_scores and args.incorrect_scores and not args.scores:
            good, bad = read_scores(args.correct_scores), read_scores(args.incorrect_scores)
            paths = (args.correct_scores, args.incorrect_scores)
        else:
            parser.error("give --correct-scores and --incorrect-scores, or --scores")
        frame = distil_accuracy(args.suite, good, bad, system=args.system, limit=args.limit,
                                distance=False if args.no_distance else None, parse_cache=args.parse_cache,
                                higher_is_better=not args.lower_is_better, ties_win=args.ties_win, paths=paths)
        write_csv(args.out, add_tags(frame, tags))
    elif args.command == "distil-parse":
        from headlab.eval.sva import parse_sources

        _, src, _, _ = suites.load_distil_lingeval(args.suite)
        parse_sources(src[:args.limit], cache=args.out)
    elif args.command == "json":
        frame = json_accuracy(args.suite_type, args.suite, read_scores(args.scores), system=args.system,
                              higher_is_better=not args.lower_is_better, ties_win=args.ties_win,
                              scores_path=args.scores)
        write_csv(args.out, add_tags(frame, tags))
    elif args.command == "mucow":
        from headlab.eval import mucow

        out, frame = mucow.evaluate_files(args.hyp, args.key, lang_pair=args.lang_pair,
                                          lemma_path=args.lemmas, lemmatize=not args.no_lemmatize)
        frame.insert(0, "pair", args.lang_pair)
        frame.insert(0, "system", args.system)
        if args.details:
            _write_lines(args.details, out)
        write_csv(args.out, add_tags(frame, tags))
    return 0
