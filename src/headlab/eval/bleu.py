"""Corpus BLEU and chrF of a detokenised hypothesis file, with the sacreBLEU signature.

Paper A (§4, footnote 3) reports sacreBLEU with its signature; we keep the signature
string next to every score so that a table can always say what was computed.

    headlab bleu --hyp out.detok.en --ref ref.en --out scores.json [--lang-pair de-en] [--lowercase]
                 [--system NAME] [--tag KEY=VALUE ...]

writes ``{"bleu", "chrf", "signature", "chrf_signature", "n", "hyp", "ref"}`` plus
``"system"`` and any ``--tag KEY=VALUE`` as keys (``headlab table`` reads such JSON files
as rows: Table 1 = ``--index system --columns config --values bleu``).
"""
from __future__ import annotations

import argparse
import os

from headlab.errors import DataError
from headlab.eval.common import parse_tags, read_aligned, write_json


def corpus_scores(hyps: list[str], refs: list[str], *, lang_pair: str | None = None,
                  lowercase: bool = False) -> dict:
    """sacreBLEU BLEU (13a, or the target language's default tokeniser) and chrF on raw text."""
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
    bleu_score = bleu.corpus_score(hyps, [refs])
    chrf_score = chrf.corpus_score(hyps, [refs])
    return {
        "bleu": round(bleu_score.score, 4),
        "chrf": round(chrf_score.score, 4),
        "signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
        "n": len(hyps),
    }


def score_files(hyp: str | os.PathLike, ref: str | os.PathLike, **kwargs) -> dict:
    texts = read_aligned(hyp=hyp, ref=ref)
    result = corpus_scores(texts["hyp"], texts["ref"], **kwargs)
    result.update(hyp=str(hyp), ref=str(ref))
    return result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="headlab bleu", description=__doc__.splitlines()[0])
    parser.add_argument("--hyp", required=True, help="detokenised system output, one line per segment")
    parser.add_argument("--ref", required=True, help="detokenised reference, same number of lines")
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--lang-pair", default=None, help="e.g. de-en (target side picks the tokeniser)")
    parser.add_argument("--lowercase", action="store_true", help="case-insensitive BLEU/chrF")
    parser.add_argument("--system", default=None, help="system name stored in the JSON")
    parser.add_argument("--tag", action="append", metavar="KEY=VALUE", help="extra key stored in the JSON")
    args = parser.parse_args(argv)
    tags = parse_tags(args.tag)
    result = score_files(args.hyp, args.ref, lang_pair=args.lang_pair, lowercase=args.lowercase)
    if args.system is not None:
        tags = {"system": args.system, **tags}
    clash = set(tags) & set(result)
    if clash:
        raise DataError(f"--tag would overwrite {sorted(clash)}")
    result = {**tags, **result}
    write_json(args.out, result)
    print(f"BLEU {result['bleu']:.2f}  chrF {result['chrf']:.2f}  ({result['signature']})")
    return 0
