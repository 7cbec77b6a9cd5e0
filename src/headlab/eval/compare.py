"""System comparison through compare-mt: paired bootstrap resampling and length bins.

Paper A Table 1 marks a score with ``*`` when it is significantly lower than the 8L
baseline "using the compare-mt tool with paired bootstrap resampling with 1000
resamples (Koehn, 2004)" at p < 0.05; Figure 2 plots "BLEU score by reference sentence
length" from compare-mt. Both are computed here with compare-mt's own code
(``sign_utils.eval_with_paired_bootstrap``, ``bucketers.LengthSentenceBucketer``), on
whitespace tokens of the detokenised files, as compare-mt reads its inputs.

    headlab compare --ref ref.en --sys 8L=a.en --sys 7F=b.en --baseline 8L \\
        [--bootstrap-out sig.csv] [--length-out bins.csv] [--scorer sacrebleu|bleu]
        [--samples 1000] [--sample-ratio 0.5] [--p 0.05] [--seed 1234] [--cutoffs 10:20:30:40:50:60]
        [--tag KEY=VALUE ...]

``--bootstrap-out`` columns: system, baseline, scorer, score, baseline_score,
win_system, win_baseline, ties, p_value, significantly_higher, significantly_lower,
samples, sample_ratio, seed; one row per system, the baseline included (its win ratios
empty, flags false), so the CSV alone gives paper A Table 1's numbers and marks.
``--tag KEY=VALUE`` adds constant leading columns (e.g. ``config=6+1``).
``--length-out`` columns: system, bucket, bleu, count (one row per system and bucket,
buckets in compare-mt order: ``<10``, ``[10,20)`` ..., ``>=60``); with ``confidence=N``
(:func:`length_buckets`, paper A Figure 2) also ``ci_low, ci_high``: sacreBLEU's own 95%
bootstrap interval of the bucket's BLEU (``corpus_score(n_bootstrap=N)``, mu ± ci, on the
bucket's sentences joined as compare-mt's SacreBleuScorer joins them).

``--scorer sacrebleu`` (default) is compare-mt's SacreBleuScorer: sacreBLEU's BLEU
(13a) on the re-joined line, i.e. the same metric as ``headlab bleu``; ``bleu`` is
compare-mt's own BLEU on whitespace tokens (its CLI default).
"""
from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass

from headlab.errors import DataError
from headlab.eval.common import add_tags, parse_named, parse_tags, read_aligned, write_csv
from headlab.options import bounded

#: compare-mt's defaults (compare_mt_main: generate_score_report / eval_with_paired_bootstrap)
DEFAULT_SAMPLES = 1000
DEFAULT_SAMPLE_RATIO = 0.5
DEFAULT_P = 0.05
DEFAULT_SEED = 1234
#: compare-mt's LengthSentenceBucketer default cutoffs
DEFAULT_CUTOFFS = (10, 20, 30, 40, 50, 60)


@dataclass
class BootstrapResult:
    system: str
    baseline: str
    scorer: str
    score: float
    baseline_score: float
    win_system: float
    win_baseline: float
    ties: float
    p_value: float
    significantly_higher: bool
    significantly_lower: bool
    samples: int
    sample_ratio: float
    seed: int


def _tokens(lines: list[str]) -> list[list[str]]:
    # exactly compare-mt's corpus_utils.iterate_tokens, so that buckets and scores match its CLI
    return [line.strip().split(" ") for line in lines]


def _scorer(name: str):
    from compare_mt import scorers

    if name not in ("sacrebleu", "bleu", "chrf"):
        raise DataError(f"unknown scorer {name!r} (sacrebleu, bleu or chrf)")
    return scorers.create_scorer_from_profile(name)


class _StatsArray(list):
    """compare-mt's per-sentence statistics (a list, as it expects) that hand numpy a
    ready array: ``SacreBleuScorer.score_cached_corpus`` converts the whole list with
    ``np.array(cached_stats)`` in each of its 1,000 samples per system, ~60% of a
    comparison's time; with ``__array__`` that is one copy. Same draws, same numbers."""

    def __init__(self, rows):
        super().__init__(rows)
        import numpy as np
        self._array = np.asarray(rows)

    def __array__(self, dtype=None, copy=None):
        return self._array if dtype is None else self._array.astype(dtype)


def _cached_stats(score_fn, ref_t, out_t):
    """The scorer's sufficient statistics of ``out_t``, computed once (as compare-mt would)."""
    from compare_mt import scorers

    rows = score_fn.cache_stats(ref_t, out_t)
    # only sacreBLEU's rows are uniform numeric vectors; other scorers keep their lists
    return _StatsArray(rows) if isinstance(score_fn, scorers.SacreBleuScorer) and rows else rows


def paired_bootstrap(ref: list[str], system: list[str], baseline: list[str], *,
                     system_name: str = "system", baseline_name: str = "baseline",
                     scorer: str = "sacrebleu", samples: int = DEFAULT_SAMPLES,
                     sample_ratio: float = DEFAULT_SAMPLE_RATIO, p: float = DEFAULT_P,
                     seed: int = DEFAULT_SEED) -> BootstrapResult:
    """Paired bootstrap resampling (Koehn 2004) of ``system`` against ``baseline``.

    compare-mt draws ``sample_ratio * n`` sentence ids with replacement ``samples`` times
    and counts how often each system scores higher. As in compare-mt's ScoreReport,
    a system is significantly better when it wins in more than ``1 - p`` of the samples;
    the p-value is ``1 - max(win ratios)``. compare-mt's third "tie" ratio also counts
    the system's wins (its ``if/else`` chain), so ``ties`` here is ``1 - wins - losses``.
    compare-mt samples with numpy's global generator: we seed it and restore its state.
    """
    import numpy as np
    from compare_mt import sign_utils

    if not (len(ref) == len(system) == len(baseline)):
        raise DataError(f"line counts differ: reference {len(ref)}, {system_name} {len(system)}, "
                        f"{baseline_name} {len(baseline)}")
    if not ref:
        raise DataError("no sentences to compare")
    score_fn = _scorer(scorer)
    ref_t, outs = _tokens(ref), [_tokens(system), _tokens(baseline)]
    stats = [_cached_stats(score_fn, ref_t, out) for out in outs]
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        wins, _ = sign_utils.eval_with_paired_bootstrap(
            ref_t, outs, [None] * len(ref_t), score_fn, compare_directions=[(0, 1)],
            num_samples=samples, sample_ratio=sample_ratio, cache_stats=stats)
    finally:
        np.random.set_state(state)
    win_system, win_baseline = float(wins[0][0]), float(wins[0][1])
    score = float(score_fn.score_corpus(ref_t, outs[0])[0])
    baseline_score = float(score_fn.score_corpus(ref_t, outs[1])[0])
    return BootstrapResult(
        system=system_name, baseline=baseline_name, scorer=scorer,
        score=round(score, 4), baseline_score=round(baseline_score, 4),
        win_system=win_system, win_baseline=win_baseline,
        ties=round(1.0 - win_system - win_baseline, 6),
        p_value=round(1.0 - max(win_system, win_baseline), 6),
        significantly_higher=(1.0 - win_system) < p,
        significantly_lower=(1.0 - win_baseline) < p,
        samples=samples, sample_ratio=sample_ratio, seed=seed)


def baseline_row(ref: list[str], hyp: list[str], name: str, **settings) -> dict:
    """The baseline's own row in the bootstrap CSV: its score, nothing to compare."""
    score = float(_scorer(settings["scorer"]).score_corpus(_tokens(ref), _tokens(hyp))[0])
    nan = float("nan")
    return {"system": name, "baseline": name, "scorer": settings["scorer"], "score": round(score, 4),
            "baseline_score": round(score, 4), "win_system": nan, "win_baseline": nan, "ties": nan,
            "p_value": nan, "significantly_higher": False, "significantly_lower": False,
            "samples": settings["samples"], "sample_ratio": settings["sample_ratio"], "seed": settings["seed"]}


def length_buckets(ref: list[str], systems: dict[str, list[str]], *,
                   cutoffs=DEFAULT_CUTOFFS, scorer: str = "sacrebleu", confidence: int = 0):
    """BLEU by reference length (paper A Figure 2) as a tidy DataFrame.

    Columns ``system, bucket, bleu, count``; the bucket of a sentence is the number of
    whitespace tokens of its reference, cut by compare-mt's LengthSentenceBucketer
    (``<10, [10,20), ..., >=60`` by default). Empty buckets get ``bleu`` NaN, count 0.
    ``confidence`` > 1 (scorer ``sacrebleu``): also ``ci_low``, ``ci_high`` (module doc).
    """
    import pandas as pd
    from compare_mt import bucketers

    bucketer = bucketers.LengthSentenceBucketer(bucket_cutoffs=list(cutoffs))
    score_fn = _scorer(scorer)
    ref_t = _tokens(ref)
    rows = []
    for name, hyp in systems.items():
        if len(hyp) != len(ref):
            raise DataError(f"line counts differ: reference {len(ref)}, {name} {len(hyp)}")
        corpus = bucketer.create_bucketed_corpus(_tokens(hyp), ref=ref_t)
        for label, (outs, refs, _) in zip(bucketer.bucket_strs, corpus):
            bleu = float(score_fn.score_corpus(refs, outs)[0]) if outs else float("nan")
            row = {"system": name, "bucket": label, "bleu": round(bleu, 4), "count": len(outs)}
            if confidence > 1:
                row.update(_bucket_interval(refs, outs, confidence))
            rows.append(row)
    columns = ["system", "bucket", "bleu", "count"] + (["ci_low", "ci_high"] if confidence > 1 else [])
    return pd.DataFrame(rows, columns=columns)


def _bucket_interval(refs: list[list[str]], outs: list[list[str]], samples: int) -> dict:
    """sacreBLEU's 95% bootstrap interval (mu ± ci) of one bucket's BLEU."""
    from sacrebleu.metrics import BLEU

    from headlab.eval.bleu import corpus_score

    if len(outs) < 2:
        return {"ci_low": float("nan"), "ci_high": float("nan")}
    score = corpus_score(BLEU(), [" ".join(o) for o in outs], [" ".join(r) for r in refs], samples)
    return {"ci_low": round(float(score._mean - score._ci), 4), "ci_high": round(float(score._mean + score._ci), 4)}


def _cutoffs(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(":"))
    except ValueError:
        raise DataError(f"--cutoffs must be integers separated by ':', got {text!r}") from None
    if list(values) != sorted(set(values)):
        raise DataError(f"--cutoffs must increase strictly, got {text!r}")
    return values


def main(argv: list[str]) -> int:
    import pandas as pd

    parser = argparse.ArgumentParser(prog="headlab compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref", required=True, help="detokenised reference")
    parser.add_argument("--sys", action="append", required=True, metavar="NAME=HYP",
                        help="a system output (repeatable)")
    parser.add_argument("--baseline", help="NAME of the --sys to test the others against")
    parser.add_argument("--bootstrap-out", help="CSV of paired bootstrap results")
    parser.add_argument("--length-out", help="CSV of BLEU by reference length bucket")
    parser.add_argument("--scorer", default="sacrebleu", choices=["sacrebleu", "bleu", "chrf"],
                        help="compare-mt scorer profile (default sacrebleu: 13a tokens, as the tables)")
    # the bounds of the config keys (config/schema.yaml's evaluation): below them compare-mt
    # divides by zero or indexes an empty list, and a level of 2 would mark everything
    parser.add_argument("--samples", type=bounded(int, 10), default=DEFAULT_SAMPLES,
                        help="bootstrap resamples (10 or more)")
    parser.add_argument("--sample-ratio", type=bounded(float, 0, 1, open_low=True), default=DEFAULT_SAMPLE_RATIO,
                        help="share of the sentences in each resample, in (0, 1]")
    parser.add_argument("--p", type=bounded(float, 0, 1, open_low=True, open_high=True), default=DEFAULT_P,
                        help="significance level of the marks, in (0, 1)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed of the resampling")
    parser.add_argument("--cutoffs", default=":".join(map(str, DEFAULT_CUTOFFS)), help="sentence-length buckets, colon-separated upper bounds")
    parser.add_argument("--tag", action="append", metavar="KEY=VALUE", help="constant column for every row")
    args = parser.parse_args(argv)
    tags = parse_tags(args.tag)
    if not (args.bootstrap_out or args.length_out):
        parser.error("give --bootstrap-out and/or --length-out")
    named = parse_named(args.sys, "--sys")
    texts = read_aligned(ref=args.ref, **{f"sys:{k}": v for k, v in named.items()})
    ref = texts.pop("ref")
    systems = {k[len("sys:"):]: v for k, v in texts.items()}
    # compute everything first, write after: no partial outputs
    boot = length = None
    if args.bootstrap_out:
        if args.baseline not in systems:
            raise DataError(f"--baseline {args.baseline!r} is not one of the --sys names {list(systems)}")
        rows = []
        for name, hyp in systems.items():
            if name == args.baseline:
                rows.append(baseline_row(ref, hyp, name, scorer=args.scorer, samples=args.samples,
                                         sample_ratio=args.sample_ratio, seed=args.seed))
            else:
                rows.append(asdict(paired_bootstrap(
                    ref, hyp, systems[args.baseline], system_name=name, baseline_name=args.baseline,
                    scorer=args.scorer, samples=args.samples, sample_ratio=args.sample_ratio,
                    p=args.p, seed=args.seed)))
        boot = add_tags(pd.DataFrame(rows, columns=list(BootstrapResult.__dataclass_fields__)), tags)
    if args.length_out:
        length = add_tags(length_buckets(ref, systems, cutoffs=_cutoffs(args.cutoffs), scorer=args.scorer), tags)
    if boot is not None:
        write_csv(args.bootstrap_out, boot)
    if length is not None:
        write_csv(args.length_out, length)
    return 0
