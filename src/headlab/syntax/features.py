"""Per-word syntax as OpenNMT-py source-feature columns (paper C §4: parses reach the encoder).

A featured source line is the BPE'd line with every piece written ``piece￨f1￨f2…`` (the
separator is U+FFE8), one column per name of :func:`headlab.heads.side.feature_names`, in
that order: the word-boundary column (1 where the piece's text ends in ``@@``, the same
values the ``headlab_words`` transform writes), then :data:`headlab.syntax.trees.FEATURES`.
Those values are **word-level** (word indices, depths) and every piece of a word
carries its word's values, so OpenNMT-py's ``inferfeats`` transform (which does not know
``@@``, internals note §3.2) has nothing left to do: the features are pre-expanded.

Word-to-piece alignment (:func:`piece_word_ids`): a piece ending in ``@@`` continues into
the next one; words are the pieces joined with their ``@@`` removed. These words must be
the Moses tokens the parse was made of, line by line; they are compared
case-insensitively because the BPE side is truecased and the parse is of the tokens
before truecasing (truecasing changes only case). A mismatch, a different line count, a
record of another parser, or a value outside the feature vocabulary is a DataError
naming file and line, and nothing is written.

Feature vocabularies: OpenNMT-py reads one per column from ``{src_vocab}_feat{i}``
(internals §3.3); :func:`write_feature_vocabs` writes ``0..values-1`` in numeric order, so
that id = value + 4 (``<unk>`` 0, ``<blank>`` 1, ``<s>`` 2, ``</s>`` 3) and the encoder
reads ``id - 4`` back (:func:`headlab.engine.encoder.side_inputs`).
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Mapping, Sequence

from headlab.errors import DataError
from headlab.io import atomic_write

from headlab.heads.side import (SEPARATOR, SPECIALS, VALUES, WORD_COLUMN, continues,  # noqa: F401  (re-exported)
                                feature_names)


def piece_word_ids(pieces: Sequence[str]) -> list[int]:
    """0-based word index of every BPE piece (``@@`` = the word continues)."""
    ids, word = [], 0
    for k, piece in enumerate(pieces):
        ids.append(word)
        if not piece.endswith("@@"):
            word += 1
    if pieces and pieces[-1].endswith("@@"):
        raise DataError(f"the last piece {pieces[-1]!r} ends in '@@': a word without its end")
    return ids


def join_pieces(pieces: Sequence[str]) -> list[str]:
    """The words of a BPE'd line (pieces joined, ``@@`` removed)."""
    words, current = [], ""
    for piece in pieces:
        if piece.endswith("@@"):
            current += piece[:-2]
        else:
            words.append(current + piece)
            current = ""
    if current:
        raise DataError(f"the line ends inside a word ({current!r}@@)")
    return words


def featurize_line(pieces: Sequence[str], facts: Mapping[str, Sequence[int]], names: Sequence[str]) -> str:
    """``piece￨f1￨…`` for every piece, each piece carrying its word's values (the word-boundary
    column: the piece's own, from its text)."""
    word_ids = piece_word_ids(pieces)
    out = []
    for piece, w in zip(pieces, word_ids):
        if SEPARATOR in piece:
            raise DataError(f"piece {piece!r} contains the feature separator U+FFE8")
        values = []
        for name in names:
            value = continues(piece) if name == WORD_COLUMN else facts[name][w]
            if not 0 <= value < VALUES:
                raise DataError(f"feature {name} of word {w} is {value}, outside 0..{VALUES - 1}")
            values.append(str(value))
        out.append(SEPARATOR.join([piece, *values]))
    return " ".join(out)


def featurize_file(bpe: str | Path, parses: str | Path, out: str | Path, *, parser: str | None = None,
                   names: Sequence[str] | None = None) -> int:
    """Write the featured source of ``bpe`` from the parse cache ``parses``; returns lines."""
    from headlab.syntax.parse import read_parses
    from headlab.syntax.trees import word_facts

    names = tuple(names or feature_names())
    with open(bpe, encoding="utf-8") as handle:
        lines = [line.split() for line in handle]
    words = []
    for number, pieces in enumerate(lines, 1):
        try:
            words.append(join_pieces(pieces))
        except DataError as err:
            raise DataError(str(err), path=str(bpe), line=number) from None
    featured = []
    for (rec, tree), pieces in zip(read_parses(parses, words, parser=parser), lines):
        number = rec["line"]
        try:
            featured.append(featurize_line(pieces, word_facts(tree, rec["heads"]), names))
        except DataError as err:
            raise DataError(f"{err} (parse {parses})", path=str(bpe), line=number) from None
    with atomic_write(out) as handle:
        for line in featured:
            handle.write(line + "\n")
    return len(featured)


def feature_vocab_paths(src_vocab: str | Path, count: int | None = None) -> list[str]:
    count = len(feature_names()) if count is None else count
    return [f"{src_vocab}_feat{i}" for i in range(count)]


def write_feature_vocabs(src_vocab: str | Path, count: int | None = None, values: int = VALUES) -> list[str]:
    """``{src_vocab}_feat{i}``: the values 0..values-1, one a line, in numeric order."""
    paths = feature_vocab_paths(src_vocab, count)
    for path in paths:
        with atomic_write(path) as handle:
            handle.write("".join(f"{v}\n" for v in range(values)))
    return paths


def main_featurize(argv: list[str]) -> int:
    from headlab.syntax.parse import PARSERS

    ap = argparse.ArgumentParser(prog="headlab featurize", description=__doc__.split("\n\n")[0])
    ap.add_argument("--bpe", required=True, help="BPE'd source (pieces joined by '@@ ')")
    ap.add_argument("--parses", required=True, help="the parse cache of the same split (headlab parse)")
    ap.add_argument("--parser", choices=PARSERS, help="the parser the cache must come from")
    ap.add_argument("--out", required=True, help="featured source (token￨feature columns)")
    args = ap.parse_args(argv)
    featurize_file(args.bpe, args.parses, args.out, parser=args.parser)
    return 0


def main_feature_vocab(argv: list[str]) -> int:
    from headlab.options import bounded

    ap = argparse.ArgumentParser(prog="headlab feature-vocab", description="numeric-order feature vocabularies")
    ap.add_argument("--src-vocab", required=True, help="the model's source vocabulary: writes SRC_VOCAB_feat{i}")
    # fewer would map the larger word indices and depths featurize writes to <unk>, silently
    ap.add_argument("--values", type=bounded(int, VALUES, described=f"at least {VALUES}: featurize writes values "
                                                                   f"up to {VALUES - 1}"),
                    default=VALUES, help="values of each feature vocabulary")
    args = ap.parse_args(argv)
    write_feature_vocabs(args.src_vocab, values=args.values)
    return 0
