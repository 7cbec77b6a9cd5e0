"""Side inputs of head kinds: the source-feature columns a parse reaches the heads through.

The layout is shared by the data side (:mod:`headlab.syntax.features` writes the columns,
:mod:`headlab.syntax.trees` computes their values) and the model side (``HeadlabEncoder``
hands them to the kinds as ``HeadContext.side``; attention export), so it lives with the
heads, below both, and imports nothing.

A featured token is ``piece￨v1￨v2…`` (``SEPARATOR`` U+FFE8), one value per name of
:data:`FEATURES`; each column's vocabulary lists ``0..VALUES-1`` in numeric order after
OpenNMT-py's ``SPECIALS`` specials, so id = value + SPECIALS.
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


def feature_names() -> tuple[str, ...]:
    return FEATURES
