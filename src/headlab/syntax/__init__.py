"""Syntax for attention-head experiments: parses as data, gold trees, head profiles.

Paper C feeds per-sentence syntax of the English source to the encoder; paper D measures
how well each head's attention follows gold dependency trees. Both work on the same three
tokenisations of a sentence: the parser's or treebank's words, the Moses tokens the
model's data pipeline produces (``escape=False``), and the BPE pieces (``@@`` joined).

Layout
------
Paper C (parses as model inputs):
``parse``     spaCy dependency parsing of Moses-tokenised text, benepar constituency
              parsing when its model is installed; the cached parse files.
``convert``   the default constituency trees: a documented conversion of a dependency
              tree into a phrase-structure tree (no constituency model offline).
``trees``     constituency-tree helpers and the per-word facts LPEA needs (local-phrase
              span under paper C's Rule 1, depths).
``features``  per-word syntax as OpenNMT-py source-feature columns (``word￨f1￨f2``),
              the numeric feature vocabularies, and the check that a parse belongs to its
              sentence. The column layout is :mod:`headlab.heads.side` (the heads read
              it); ``headlab.heads.spec.needs_syntax(heads)``: does a model read them.
``evalb``     bracketing F1 of a parser against gold trees (paper C Table A3).

Paper D (profiles of trained heads against gold trees):
``conllu``    CoNLL-U gold trees (multi-word tokens, empty nodes), UD v2 -> v1 labels.
``align``     character-level alignment of two tokenisations of one sentence (treebank
              words <-> Moses tokens), with unaligned words counted, never dropped.
``profile``   per-head dependency accuracy (Clark et al. 2019) and offset baselines.
``run``       ``headlab profile-heads`` (any headlab encoder against gold trees) and
              ``headlab treebank`` (a treebank's raw text; spaCy parses as CoNLL-U).
``arcs``      paper D Figures 1-2: one head's word-to-word attention as arcs.

Paper D's Table 1 from a profile is a study table (:mod:`headlab.studies.syntax_tables`).
"""
