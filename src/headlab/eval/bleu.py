"""Corpus BLEU and chrF of a detokenised hypothesis file, with the sacreBLEU signature.

Paper A (§4, footnote 3) reports sacreBLEU with its signature; we keep the signature
string next to every score so that a table can always say what was computed.

    headlab bleu --hyp out.detok.en --ref ref.en --out scores.json [--lang-pair de-en] [--lowercase]
                 [--confidence 1000] [--system NAME] [--tag KEY=VALUE ...]

writes ``{"bleu", "chrf", "signature", "chrf_signature", "n", "hyp", "ref"}`` plus
``"system"`` and any ``--tag KEY=VALUE`` as keys (``headlab table`` reads such JSON files
as rows: Table 1 = ``--index system --columns config --values bleu``).

``--confidence N`` (N > 1; the workflow passes ``evaluation.bootstrap_samples``) adds
sacreBLEU 2.x's own 95% confidence interval, as ``sacrebleu --confidence`` prints it
("μ = 43.59 ± 1.45"): N bootstrap resamples of the test sentences (sacreBLEU's fixed
resampling seed 12345), ``bleu_mu`` the mean over the resamples and ``bleu_ci`` half the
width of their 2.5-97.5 percentile range, the interval being ``bleu_mu ± bleu_ci``;
``bleu_ci_low`` / ``bleu_ci_high`` are its ends (likewise ``chrf_*``), and
``confidence_signature`` the signature with ``bs:N|seed:12345``. ``signature`` stays the
plain one (the score itself does not depend on the resampling). About 0.35 s of CPU per
1,000 sentences for both metrics. (:func:`corpus_score` works around a sacreBLEU 2.6.0 bug
that makes ``--confidence`` fail on some chrF inputs.)
"""
from __future__ import annotations

import argparse
import os

from headlab.errors import DataError
from headlab.eval.common import parse_tags, read_aligned, write_json
from headlab.options import bounded


def corpus_scores(hyps: list[str], refs: list[str], *, lang_pair: str | None = None,
                  lowercase: bool = False, confidence: int = 0) -> dict:
    """sacreBLEU BLEU (13a, or the target language's default tokeniser) and chrF on raw text;
    with ``confidence`` > 1, their 95% bootstrap intervals (see the module doc)."""
    from sacrebleu.metrics import BLEU, CHRF

    if len(hyps) != len(refs):
        raise DataError(f"{len(hyps)} hypotheses but {len(refs)} references")
    if not hyps:
        raise DataError("no sentences to score")
    trg_lang = ""
    if lang_pair:
        src, sep, trg_lang = lang_pair.partition("-")
        if not sep or not src or not trg_lang:
            raise DataError(f"--lang-pair must look like de-en, got {lang_pair!r}")
    # trg_lang only changes the tokeniser for zh/ja/ko; it is recorded in the signature.
    bleu = BLEU(lowercase=lowercase, trg_lang=trg_lang)
    chrf = CHRF(lowercase=lowercase)
    n_bootstrap = confidence if confidence > 1 else 1
    bleu_score = corpus_score(bleu, hyps, refs, n_bootstrap)
    chrf_score = corpus_score(chrf, hyps, refs, n_bootstrap)
    result = {"bleu": round(bleu_score.score, 4), "chrf": round(chrf_score.score, 4),
              "signature": _plain_signature(bleu), "chrf_signature": _plain_signature(chrf), "n": len(hyps)}
    if n_bootstrap > 1:
        for name, score in (("bleu", bleu_score), ("chrf", chrf_score)):
            mu, ci = float(score._mean), float(score._ci)
            result.update({f"{name}_mu": round(mu, 4), f"{name}_ci": round(ci, 4),
                           f"{name}_ci_low": round(mu - ci, 4), f"{name}_ci_high": round(mu + ci, 4)})
        result["confidence_signature"] = str(bleu.get_signature())
    return result


def corpus_score(metric, hyps: list[str], refs: list[str], n_bootstrap: int):
    """``metric.corpus_score(hyps, [refs], n_bootstrap=N)``, step by step as sacreBLEU 2.6.0
    does it, with one fix: its ``Score.estimate_ci`` averages the resampled scores with
    ``statistics.mean``, which raises ``TypeError`` when chrF returns a Python float for some
    resamples and a numpy float32 for others (all-empty hypotheses in a resample, e.g. a
    model whose pruned heads make it emit nothing); the scores are made floats first."""
    stats = metric._extract_corpus_statistics(hyps, [refs])
    score = metric._aggregate_and_compute(stats)
    if n_bootstrap > 1:
        from sacrebleu.significance import _bootstrap_resample

        metric.n_bootstrap = n_bootstrap
        metric.seed, samples = _bootstrap_resample(stats, metric, n_bootstrap)
        for sample in samples:
            sample.score = float(sample.score)
        score.estimate_ci(samples)
    return score


def _plain_signature(metric) -> str:
    """The metric's signature without the bootstrap fields (``bs``, ``seed``)."""
    signature = metric.get_signature()
    signature.info.update(bs=None, seed=None)
    return str(signature)


def score_files(hyp: str | os.PathLike, ref: str | os.PathLike, **kwargs) -> dict:
    texts = read_aligned(hyp=hyp, ref=ref)
    result = corpus_scores(texts["hyp"], texts["ref"], **kwargs)
    result.update(hyp=str(hyp), ref=str(ref))
    return result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="headlab bleu", description=__doc__.split("\n\n")[0])
    parser.add_argument("--hyp", required=True, help="detokenised system output, one line per segment")
    parser.add_argument("--ref", required=True, help="detokenised reference, same number of lines")
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--lang-pair", default=None, help="e.g. de-en (target side picks the tokeniser)")
    parser.add_argument("--lowercase", action="store_true", help="case-insensitive BLEU/chrF")
    # N 1 or below would write scores with no interval and say nothing
    parser.add_argument("--confidence", type=bounded(int, 2, also=(0,), described="at least 2 resamples (sacreBLEU's "
                                                                           "default is 1000), or 0 for none"),
                        default=0, metavar="N",
                        help="95%% confidence intervals from N > 1 bootstrap resamples (sacreBLEU --confidence)")
    parser.add_argument("--system", default=None, help="system name stored in the JSON")
    parser.add_argument("--tag", action="append", metavar="KEY=VALUE", help="extra key stored in the JSON")
    args = parser.parse_args(argv)
    tags = parse_tags(args.tag)
    result = score_files(args.hyp, args.ref, lang_pair=args.lang_pair, lowercase=args.lowercase,
                         confidence=args.confidence)
    if args.system is not None:
        tags = {"system": args.system, **tags}
    clash = set(tags) & set(result)
    if clash:
        raise DataError(f"--tag would overwrite {sorted(clash)}")
    result = {**tags, **result}
    write_json(args.out, result)
    interval = f" (95% CI ± {result['bleu_ci']:.2f})" if "bleu_ci" in result else ""
    print(f"BLEU {result['bleu']:.2f}{interval}  chrF {result['chrf']:.2f}  ({result['signature']})")
    return 0
