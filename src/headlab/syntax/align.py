"""Explicit alignment of three tokenisations of one sentence (paper D §2.2; Clark et al. 2019 §3).

A gold tree's *words* (:class:`headlab.syntax.conllu.Tree`), the *Moses tokens* the
model's preprocessing made of the same text (``escape=False``, truecased) and the
*BPE pieces* the model attends over (``@@`` = the token goes on) are three segmentations
of one character string. They are aligned through characters:

1. Pieces -> Moses tokens: consecutive pieces, joined while a piece ends in ``@@``
   (:func:`pieces_to_tokens`); a sentence ending inside a token is an error.
2. Words <-> pieces (hence Moses tokens): each side's characters with whitespace removed
   and case folded (truecasing changes case, nothing else) must spell the same string; a
   difference is a :class:`DataError` naming the sentence and the first differing
   character. A word is linked to every piece whose characters overlap its own (pieces
   are the finer segmentation: where BPE splits Moses' ``search-engine`` into
   ``search@@ -@@ engine``, UD's three words still get one piece each). A multi-word
   token whose word forms do not spell its surface form gives all its words the surface
   token's characters.
3. *Units* are the connected components of those links: the smallest groups of words and
   pieces with the same characters. A unit with exactly one word is that word's (the word
   is **aligned**); the words of a unit with several words (UD's ``do`` + ``n't`` against
   Moses' ``don 't``; ``gon`` + ``na`` against ``gonna``) are **unaligned**: the profile
   counts and reports them, and skips every arc that starts or ends at one. Every piece
   belongs to exactly one unit, so word-level attention (:mod:`headlab.syntax.profile`) is
   defined over units and no attention mass is dropped.

Moses splitting a word into several tokens (``e-mail`` -> ``e @-@ mail`` with aggressive
dash splitting, URLs) is not a failure: that word's unit has several tokens.
"""
from __future__ import annotations

from dataclasses import dataclass

from headlab.errors import DataError
from headlab.syntax.conllu import Tree

BPE_SEPARATOR = "@@"


def _key(text: str) -> str:
    return "".join(text.split()).casefold()


def _spans(keys: list[str]) -> list[tuple[int, int]]:
    out, pos = [], 0
    for key in keys:
        out.append((pos, pos + len(key)))
        pos += len(key)
    return out


def pieces_to_tokens(pieces: list[str], name: str = "sentence") -> tuple[list[str], list[list[int]]]:
    """(Moses tokens, piece indices of each token) from BPE pieces with ``@@`` markers."""
    tokens, groups, current, members = [], [], "", []
    for k, piece in enumerate(pieces):
        if piece.endswith(BPE_SEPARATOR):
            current += piece[:-len(BPE_SEPARATOR)]
            members.append(k)
            continue
        tokens.append(current + piece)
        groups.append(members + [k])
        current, members = "", []
    if members:
        raise DataError(f"{name}: the last BPE piece {pieces[-1]!r} ends in '@@' (a token without its end)")
    return tokens, groups


def word_keys(tree: Tree) -> tuple[list[str], list[tuple[int, int]]]:
    """(casefolded surface-token strings, each word's character span in their concatenation)."""
    keys = [_key(t.form) for t in tree.tokens]
    token_spans = _spans(keys)
    spans: list[tuple[int, int] | None] = [None] * len(tree)
    for token, key, (start, end) in zip(tree.tokens, keys, token_spans):
        parts = [_key(tree.forms[w]) for w in token.words]
        if len(token.words) > 1 and "".join(parts) == key:
            for w, (a, b) in zip(token.words, _spans(parts)):
                spans[w] = (start + a, start + b)
        else:                           # one word, or an MWT whose words do not spell it
            for w in token.words:
                spans[w] = (start, end)
    return keys, spans


def link(a_spans, b_spans) -> list[list[int]]:
    """For each span of ``a``, the indices of the ``b`` spans that overlap it."""
    return [[k for k, (s, e) in enumerate(b_spans) if s < end and e > start] for start, end in a_spans]


def _first_difference(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


@dataclass
class Alignment:
    """Words, Moses tokens and pieces of one sentence grouped into units (module doc)."""
    unit_words: list[list[int]]       # tree words (0-based) of each unit, in text order
    unit_pieces: list[list[int]]      # BPE pieces of each unit
    word_unit: list[int]              # each word's unit
    tokens: list[str]                 # the Moses tokens (truecased, from the pieces)

    @property
    def aligned(self) -> list[bool]:
        """Per word: its unit holds it alone."""
        return [len(self.unit_words[u]) == 1 for u in self.word_unit]

    @property
    def unaligned_words(self) -> list[int]:
        return [w for w, ok in enumerate(self.aligned) if not ok]


def align(tree: Tree, pieces: list[str]) -> Alignment:
    """Align ``tree``'s words with the BPE ``pieces`` of its text (see the module doc)."""
    tokens, _ = pieces_to_tokens(pieces, tree.name)
    keys, word_spans = word_keys(tree)
    piece_keys = [_key(p[:-len(BPE_SEPARATOR)] if p.endswith(BPE_SEPARATOR) else p) for p in pieces]
    text, moses = "".join(keys), "".join(piece_keys)
    if text != moses:
        at = _first_difference(text, moses)
        raise DataError(f"{tree.name}: the Moses tokens do not spell the treebank text (whitespace and case "
                        f"ignored): from character {at}, treebank {text[at:at + 20]!r}, model input "
                        f"{moses[at:at + 20]!r}; is the source file in the treebank's sentence order?")
    links = link(word_spans, _spans(piece_keys))
    # union-find over words (0..W-1) and pieces (W..W+P-1)
    parent = list(range(len(tree) + len(pieces)))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for w, found in enumerate(links):
        for p in found:
            parent[find(w)] = find(len(tree) + p)
    roots: dict[int, int] = {}
    unit_words: list[list[int]] = []
    unit_pieces: list[list[int]] = []
    for p in range(len(pieces)):        # units in text order of their first piece
        r = find(len(tree) + p)
        if r not in roots:
            roots[r] = len(unit_words)
            unit_words.append([])
            unit_pieces.append([])
        unit_pieces[roots[r]].append(p)
    word_unit = []
    for w in range(len(tree)):
        r = find(w)
        if r not in roots:              # a word without characters: a unit without pieces
            raise DataError(f"{tree.name}: word {w + 1} ({tree.forms[w]!r}) has no characters to align")
        word_unit.append(roots[r])
        unit_words[roots[r]].append(w)
    return Alignment(unit_words, unit_pieces, word_unit, tokens)
