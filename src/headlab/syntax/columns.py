"""The source-feature column layout shared by the data side (:mod:`headlab.syntax.features`)
and the model side (``HeadlabEncoder``, attention export), kept free of parser imports.

A featured token is ``piece￨v1￨v2…`` (``SEPARATOR`` U+FFE8), one value per name of
:data:`headlab.syntax.trees.FEATURES`; each column's vocabulary lists ``0..VALUES-1`` in
numeric order after OpenNMT-py's ``SPECIALS`` specials, so id = value + SPECIALS.
"""
from __future__ import annotations

SEPARATOR = "\uffe8"
#: values 0..VALUES-1 per column: word indices and tree depths of sentences up to 1,024 words
VALUES = 1024
#: OpenNMT-py's specials before the values in a feature vocabulary (<unk>, <blank>, <s>, </s>)
SPECIALS = 4


def feature_names() -> tuple[str, ...]:
    from headlab.syntax.trees import FEATURES
    return FEATURES
