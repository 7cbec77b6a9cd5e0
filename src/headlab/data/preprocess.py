"""Paper A §4.1 preprocessing, and its reverse for scoring.

Forward (training and input text): Moses tokenisation (sacremoses, ``escape=False`` so that
``&`` stays ``&``; aggressive dash splitting off unless asked), Moses truecasing (a
:class:`sacremoses.MosesTruecaser` model trained on the tokenised training corpus), joint
BPE (subword-nmt, learnt on the concatenated tokenised+truecased training source and
target, applied with ``@@ `` continuation markers).

Reverse (system output before sacreBLEU): remove BPE (``@@ ``), detruecase, Moses
detokenise (``unescape=False``, the inverse of ``escape=False``).

Paper B §4.1 tokenises Hindi with the IndicNLP library instead of Moses: ``--tokenizer indic``
(tokenise and postprocess alike, so that detokenisation matches), chosen per language by
``corpora.NAME.tokenizers`` in the workflow config.

    headlab preprocess tokenize       --lang L --in F --out F [--jobs N] [--aggressive-dash-splits]
                                      [--tokenizer moses|indic]
    headlab preprocess truecase-train --in F [F ...] --model M
    headlab preprocess truecase       --model M --in F --out F
    headlab preprocess bpe-learn      --merges N --in F [F ...] --codes C [--min-frequency 2]
    headlab preprocess bpe-apply      --codes C --in F --out F
    headlab preprocess postprocess    --lang L --in F --out F [--no-detruecase] [--tokenizer moses|indic]

Inputs are read as strict UTF-8 (.gz allowed; an invalid byte is reported as file:line),
line by line; every output is written to a temporary file and renamed into place when
complete, so a failed step leaves no partial file. Line count is preserved by every step.
"""
from __future__ import annotations

import argparse
import itertools
import os
import re
from multiprocessing import Pool
from pathlib import Path
from typing import Callable, Iterator

from headlab.data._cli import run
from headlab.errors import DataError
from headlab.io import atomic_write, open_maybe_gz
from headlab.options import bounded

BPE_SEPARATOR = "@@"
_UNBPE = re.compile(r"(@@ )|(@@ ?$)")


def iter_lines(path: str | os.PathLike) -> Iterator[str]:
    """Stream a text file (.gz ok) as strict UTF-8 lines without their newline."""
    with open_maybe_gz(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                yield raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as err:
                raise DataError(f"invalid UTF-8 at byte {err.start} ({raw[err.start:err.start + 4]!r})",
                                path=str(path), line=number) from None


def _require(path: str | os.PathLike) -> None:
    if not Path(path).is_file():
        raise DataError("input file not found", path=str(path))


def map_lines(fn: Callable[[str], str], src: str | os.PathLike, out: str | os.PathLike) -> int:
    """Write ``fn(line)`` for every line of ``src`` to ``out`` (atomically); the line count."""
    _require(src)
    count = 0
    with atomic_write(out) as handle:
        for line in iter_lines(src):
            handle.write(fn(line) + "\n")
            count += 1
    return count


# --- tokenisation: Moses, or IndicNLP for Indian languages ---------------------------

#: per-language tokeniser choices (``corpora.NAME.tokenizers`` in the workflow config, e.g.
#: ``{hi: indic}`` for paper B's Hindi); the detokeniser of the same name undoes each for BLEU
TOKENIZERS = ("moses", "indic")
INDIC_MISSING = ("the 'indic' tokeniser needs indic-nlp-library (pip install -c requirements/constraints.txt "
                 "'.[indic]')")


def _indic():
    try:
        from indicnlp.tokenize import indic_detokenize, indic_tokenize
    except ImportError:
        raise DataError(INDIC_MISSING, key="tokenizer") from None
    return indic_tokenize, indic_detokenize


def _check(tokenizer: str) -> None:
    if tokenizer not in TOKENIZERS:
        raise DataError(f"unknown tokenizer {tokenizer!r}; known: {', '.join(TOKENIZERS)}", key="tokenizer")


def tokenizer_function(lang: str, tokenizer: str = "moses", aggressive_dash_splits: bool = False
                       ) -> Callable[[str], str]:
    """line -> tokenised line. Moses: sacremoses, ``escape=False``; indic: IndicNLP's
    ``trivial_tokenize`` (splits at ASCII and Indic punctuation, keeps numbers together)."""
    _check(tokenizer)
    if tokenizer == "indic":
        indic_tokenize = _indic()[0]
        return lambda line: " ".join(indic_tokenize.trivial_tokenize(line, lang)).strip()
    from sacremoses import MosesTokenizer
    moses = MosesTokenizer(lang=lang)
    return lambda line: moses.tokenize(line, aggressive_dash_splits=aggressive_dash_splits, return_str=True,
                                       escape=False)


def detokenizer(lang: str, tokenizer: str = "moses") -> Callable[[str], str]:
    """tokenised line -> plain text, the inverse of :func:`tokenizer_function`'s tokeniser."""
    _check(tokenizer)
    if tokenizer == "indic":
        indic_detokenize = _indic()[1]
        return lambda line: indic_detokenize.trivial_detokenize(" ".join(line.split()), lang)
    from sacremoses import MosesDetokenizer
    moses = MosesDetokenizer(lang=lang)
    return lambda line: moses.detokenize(line.split(), return_str=True, unescape=False)


_tokenize: Callable[[str], str] | None = None


def _init_tokenizer(lang: str, tokenizer: str, aggressive: bool) -> None:
    global _tokenize
    _tokenize = tokenizer_function(lang, tokenizer, aggressive)


def _tokenize_line(line: str) -> str:
    return _tokenize(line)


def tokenize_file(lang: str, src, out, *, jobs: int = 1, aggressive_dash_splits: bool = False,
                  tokenizer: str = "moses") -> int:
    """Tokenise ``src`` into ``out``; ``jobs`` > 1 uses a process pool (order kept)."""
    _require(src)
    _init_tokenizer(lang, tokenizer, aggressive_dash_splits)  # fails early on a bad/missing tokeniser
    count = 0
    with atomic_write(out) as handle:
        if jobs > 1:
            with Pool(jobs, _init_tokenizer, (lang, tokenizer, aggressive_dash_splits)) as pool:
                for line in pool.imap(_tokenize_line, iter_lines(src), chunksize=256):
                    handle.write(line + "\n")
                    count += 1
        else:
            for line in map(_tokenize, iter_lines(src)):
                handle.write(line + "\n")
                count += 1
    return count


# --- truecasing -----------------------------------------------------------------------

def truecase_train(inputs: list, model: str | os.PathLike) -> None:
    """Train a Moses truecaser on tokenised text and save it (atomically) at ``model``."""
    from sacremoses import MosesTruecaser
    for path in inputs:
        _require(path)
    documents = [line.split() for line in itertools.chain.from_iterable(map(iter_lines, inputs))]
    if not any(documents):
        raise DataError("cannot train a truecaser on empty input", path=", ".join(map(str, inputs)))
    truecaser = MosesTruecaser()
    truecaser.train(documents)
    with atomic_write(model) as handle:  # save_model opens the file itself: give it the temp name
        tmp = handle.name
        handle.close()
        truecaser.save_model(tmp)


def load_truecaser(model: str | os.PathLike):
    from sacremoses import MosesTruecaser
    _require(model)
    return MosesTruecaser(load_from=str(model))


def truecase_file(model, src, out) -> int:
    truecaser = load_truecaser(model)
    # use_known=True is Moses truecase.perl's behaviour: a word seen in this casing in training
    # is kept; only sentence-initial and unknown-cased words get their most frequent casing.
    # (sacremoses' default recases every word, e.g. "zwei junge" -> "zwei Junge".)
    return map_lines(lambda line: truecaser.truecase(line, return_str=True, use_known=True), src, out)


# --- BPE (subword-nmt) ----------------------------------------------------------------

def bpe_learn(inputs: list, codes: str | os.PathLike, merges: int, min_frequency: int = 2) -> None:
    """Learn ``merges`` joint BPE merge operations on the concatenation of ``inputs``."""
    from subword_nmt import learn_bpe as module
    from subword_nmt.learn_bpe import learn_bpe
    module.tqdm = lambda iterable, *args, **kwargs: iterable  # no progress bar in workflow logs
    if merges <= 0:
        raise DataError(f"--merges must be positive, got {merges}", key="merges")
    for path in inputs:
        _require(path)
    mergeable = False   # a word of two or more characters: the first merge has a pair to count

    def lines():
        nonlocal mergeable
        for line in itertools.chain.from_iterable(map(iter_lines, inputs)):
            mergeable = mergeable or any(len(word) > 1 for word in line.split())
            yield line + "\n"

    with atomic_write(codes) as handle:
        try:
            learn_bpe(lines(), handle, merges, min_frequency=min_frequency)
        except ValueError:
            # subword-nmt takes max() of the pair counts, of which such a text has none
            if mergeable:
                raise
            raise DataError("no word of two or more characters: no BPE merge to learn "
                            "(an empty training corpus?)", path=", ".join(map(str, inputs))) from None


def load_bpe(codes: str | os.PathLike):
    from subword_nmt.apply_bpe import BPE
    _require(codes)
    with open(codes, encoding="utf-8") as handle:
        return BPE(handle, separator=BPE_SEPARATOR)


def bpe_apply_file(codes, src, out) -> int:
    bpe = load_bpe(codes)
    return map_lines(bpe.process_line, src, out)


def remove_bpe(line: str) -> str:
    return _UNBPE.sub("", line)


# --- the reverse, for scoring ---------------------------------------------------------

def postprocessor(lang: str, detruecase: bool = True, tokenizer: str = "moses") -> Callable[[str], str]:
    """un-BPE, detruecase, detokenise (with the tokeniser's own detokeniser): system output ->
    plain text for sacreBLEU."""
    from sacremoses import MosesDetruecaser
    detok, detrue = detokenizer(lang, tokenizer), MosesDetruecaser()

    def post(line: str) -> str:
        text = remove_bpe(line)
        if detruecase:
            text = detrue.detruecase(text, return_str=True)
        return detok(text)

    return post


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="headlab preprocess", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("tokenize", help="Moses-tokenise (escape=False), or IndicNLP (--tokenizer indic)")
    p.add_argument("--lang", required=True, help="language code (en, de, ...)")
    p.add_argument("--tokenizer", choices=TOKENIZERS, default="moses", help="moses, or indic (IndicNLP, Hindi)")
    p.add_argument("--in", dest="inp", required=True, help="raw text, one sentence a line")
    p.add_argument("--out", required=True, help="tokenised text")
    p.add_argument("--jobs", type=bounded(int, 1), default=1, help="worker processes (default 1)")
    p.add_argument("--aggressive-dash-splits", action="store_true", help="Moses -a: split hyphenated words")
    p = sub.add_parser("truecase-train", help="train a Moses truecaser on tokenised text")
    p.add_argument("--in", dest="inp", nargs="+", required=True, help="tokenised training text")
    p.add_argument("--model", required=True, help="the truecaser model to write")
    p = sub.add_parser("truecase", help="apply a truecaser model")
    p.add_argument("--model", required=True, help="a truecaser model (truecase-train)")
    p.add_argument("--in", dest="inp", required=True, help="tokenised text")
    p.add_argument("--out", required=True, help="truecased text")
    p = sub.add_parser("bpe-learn", help="learn joint BPE on the concatenated inputs")
    p.add_argument("--merges", type=bounded(int, 1), required=True, help="number of BPE merge operations")
    p.add_argument("--in", dest="inp", nargs="+", required=True, help="training text of both sides (joint BPE)")
    p.add_argument("--codes", required=True, help="the BPE codes to write")
    p.add_argument("--min-frequency", type=bounded(int, 1), default=2, help="least frequency of a pair to merge")
    p = sub.add_parser("bpe-apply", help="apply BPE codes with '@@ ' markers")
    p.add_argument("--codes", required=True, help="BPE codes (bpe-learn)")
    p.add_argument("--in", dest="inp", required=True, help="truecased text")
    p.add_argument("--out", required=True, help="BPE-segmented text")
    p = sub.add_parser("postprocess", help="remove BPE, detruecase, detokenise")
    p.add_argument("--lang", required=True, help="language code of the detokeniser")
    p.add_argument("--tokenizer", choices=TOKENIZERS, default="moses", help="whose detokeniser (as tokenize)")
    p.add_argument("--in", dest="inp", required=True, help="system output (BPE, truecased, tokenised)")
    p.add_argument("--out", required=True, help="plain text")
    p.add_argument("--no-detruecase", action="store_true", help="keep the truecased first letters")
    args = parser.parse_args(argv)

    def go() -> int:
        if args.step == "tokenize":
            tokenize_file(args.lang, args.inp, args.out, jobs=args.jobs,
                          aggressive_dash_splits=args.aggressive_dash_splits, tokenizer=args.tokenizer)
        elif args.step == "truecase-train":
            truecase_train(args.inp, args.model)
        elif args.step == "truecase":
            truecase_file(args.model, args.inp, args.out)
        elif args.step == "bpe-learn":
            bpe_learn(args.inp, args.codes, args.merges, args.min_frequency)
        elif args.step == "bpe-apply":
            bpe_apply_file(args.codes, args.inp, args.out)
        elif args.step == "postprocess":
            map_lines(postprocessor(args.lang, not args.no_detruecase, args.tokenizer), args.inp, args.out)
        return 0

    return run(go, "preprocess")
