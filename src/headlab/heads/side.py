"""Side inputs of head kinds: the source-feature columns a parse reaches the heads through.

The layout is shared by the data side (:mod:`headlab.syntax.features` writes the columns,
:mod:`headlab.syntax.trees` computes their values) and the model side (``HeadlabEncoder``
hands them to the kinds as ``HeadContext.side``; attention export), so it lives with the
heads, below both, and imports nothing.

A featured token is ``piece￨v1￨v2…`` (``SEPARATOR`` U+FFE8), one value per name of
:data:`FEATURES`; each column's vocabulary lists ``0..VALUES-1`` in numeric order after
OpenNMT-py's ``SPECIALS`` specials, so id = value + SPECIALS.

**Word boundaries come from the text, never from the vocabulary.** A model whose heads read
words (``needs_words``: Fword, DEA, LPEA, RHE*) gets the column :data:`WORD_COLUMN` first:
1 where the piece's text ends in ``@@`` (its word continues into the next piece), else 0.
Numbering words from ``@@`` marks of *vocabulary entries* shifted every later word of a
sentence by one after an out-of-vocabulary piece (it becomes ``<unk>``, which has no
``@@``) against its parse (issue 24). The column is written from the pieces' text by the
``headlab_words`` OpenNMT-py transform (:mod:`headlab.engine.words`; training, validation and
translation alike, and it travels with the batch through bucketing and beam tiling) and by
``headlab featurize``; files without feature columns hold :data:`UNFILLED` there
(``-src_feats_defaults``) until the transform fills it, and the encoder rejects an unfilled
column, so a forgotten transform is an error, not a silent shift.
"""
from __future__ import annotations

SEPARATOR = "\uffe8"
#: values 0..VALUES-1 per column: word indices and tree depths of sentences up to 1,024 words
VALUES = 1024
#: OpenNMT-py's specials before the values in a feature vocabulary (<unk>, <blank>, <s>, </s>)
SPECIALS = 4


#: one column per name, in this order: the dependency head's word index, the local phrase's
#: first and last word, the word's depth in the tree and its local phrase's depth (paper C)
FEATURES: tuple[str, ...] = ("dep_head", "lp_lo", "lp_hi", "word_depth", "lp_depth")


#: 1: the piece's word continues into the next piece (its text ends in "@@"); 0: it ends the word
WORD_COLUMN = "continues"
#: what a source without feature columns holds in WORD_COLUMN until the transform fills it
#: (not a value: its vocabulary id is <unk>)
UNFILLED = "_"


def feature_names() -> tuple[str, ...]:
    """The columns of a featured source file (``headlab featurize``): the word boundaries,
    then the syntax columns."""
    return (WORD_COLUMN, *FEATURES)


def model_columns(words: bool, syntax: bool) -> tuple[str, ...]:
    """The feature columns a model reads, in order: none, the word boundaries alone (a model
    whose heads read words but no parse: stock BPE files, the column filled by the
    transform), or a featured file's columns (syntax models)."""
    if syntax:
        return feature_names()
    return (WORD_COLUMN,) if words else ()


def continues(piece: str) -> int:
    """WORD_COLUMN's value for one BPE piece (subword-nmt's ``@@ `` joiner)."""
    return int(piece.endswith("@@"))


def word_ids(continued):
    """0-based word index of every piece from WORD_COLUMN's values; continued: (B, N) tensor
    of 0/1 (padding: any). Tensor methods only: this module imports nothing."""
    starts = continued.new_ones(continued.shape, dtype=continued.dtype)
    starts[:, 1:] = 1 - continued[:, :-1].clamp(0, 1)
    return starts.long().cumsum(1) - 1
