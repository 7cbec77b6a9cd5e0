"""Per-word facts of a constituency tree and a dependency tree (paper C §4.1, Fig. 3).

:func:`word_facts` turns one sentence's parses into per-word integers, the feature
columns (:data:`FEATURES`) that reach the encoder as OpenNMT-py source features, one value
per word copied onto each of its BPE pieces (``ctx.side[name]``, (B, N) long):

=============  ==========================================================================
column         value of word i (0-based word indices, all >= 0)
=============  ==========================================================================
``dep_head``   index of i's dependency head; the root points to itself (DEA, eq. 5, and
               Syn_attn, eq. 9: i and j are related iff one is the other's head)
``lp_lo``      first word of i's local phrase under paper C's **Rule 1**: the yield of
``lp_hi``      the lowest ancestor of i covering >= 2 words (inclusive span). A
               one-word sentence has no such ancestor: its span is the word itself.
``word_depth`` depth of i's *leaf* in the constituency tree, root = 0 (a leaf is one
               layer below its preterminal): paper C's ``layer(x_i)``
``lp_depth``   depth of that Rule-1 ancestor (root = 0)
=============  ==========================================================================

Why leaf depth. Rule 1 writes the ancestors of x_i as ast_{layer(x_i)-1}, ..., ast_0, so
the parent (preterminal) of x_i is on layer ``layer(x_i) - 1`` and the root on layer 0:
``layer(x_i)`` is the depth of the leaf itself. In Fig. 3 ("Bush held a talk with Sharon",
``(S (NP (NNP Bush)) (VP (VBD held) (NP (DT a) (NN talk)) (PP (IN with) (NP (NNP
Sharon)))))``) that gives held on Layer 3 and talk on Layer 4, the text's
"Layer3 - Layer4 = -1". Only differences of depths enter RP (eq. 7), so leaf and
preterminal depth give the same model; leaf depth is the paper's numbering.

Rule 2 (symmetry: j in LP(i) => i in LP(j)) and the relative phrasal positions RP are
pairwise, so they are computed from these columns at piece level by the LPEA head kind
(:func:`headlab.heads.sea.rp_matrix`); spans suffice because a constituent's yield is a
contiguous run of words.
"""
from __future__ import annotations

from headlab.errors import DataError
from headlab.heads.side import FEATURES  # the feature columns, in the order they follow the word


def word_facts(tree, heads: list[int]) -> dict[str, list[int]]:
    """Per-word facts (keys exactly :data:`FEATURES`) of one sentence.

    tree:  an ``nltk.Tree`` whose leaves are the sentence's words in order.
    heads: 0-based dependency head of each word, the root pointing to itself.
    Raises :class:`DataError` if the two parses do not describe the same words.
    """
    from nltk import Tree

    if not isinstance(tree, Tree):
        raise DataError(f"word_facts needs an nltk.Tree, got {type(tree).__name__}")
    positions = tree.treepositions("leaves")
    n = len(heads)
    if len(positions) != n:
        raise DataError(f"the constituency tree has {len(positions)} leaves but the dependency "
                        f"parse has {n} words: {' '.join(map(str, tree.leaves()))!r}")
    if n == 0:
        raise DataError("empty sentence: nothing to parse")
    for i, head in enumerate(heads):
        if not isinstance(head, int) or not 0 <= head < n:
            raise DataError(f"word {i}: dependency head {head!r} is not a word index 0..{n - 1}")
    # yield span (first, last word) of every node, keyed by its tree position
    span: dict[tuple, list[int]] = {}
    for i, pos in enumerate(positions):
        for cut in range(len(pos)):
            lo_hi = span.setdefault(pos[:cut], [i, i])
            lo_hi[1] = i
    facts: dict[str, list[int]] = {name: [] for name in FEATURES}
    for i, pos in enumerate(positions):
        # Rule 1: walk up from the preterminal to the first ancestor with >= 2 words
        anc = next((pos[:cut] for cut in range(len(pos) - 1, -1, -1)
                    if span[pos[:cut]][1] > span[pos[:cut]][0]), ())
        lo, hi = span[anc] if anc in span else (i, i)
        facts["dep_head"].append(heads[i])
        facts["lp_lo"].append(lo)
        facts["lp_hi"].append(hi)
        facts["word_depth"].append(len(pos))
        facts["lp_depth"].append(len(anc))
    return facts


def local_phrase_related(facts: dict[str, list[int]]) -> list[list[bool]]:
    """Word-level n x n relation "i and j share a local phrase" (Rules 1 and 2), from the
    columns of :func:`word_facts`; for tests and analysis (the model works per piece)."""
    lo, hi = facts["lp_lo"], facts["lp_hi"]
    n = len(lo)
    return [[lo[i] <= j <= hi[i] or lo[j] <= i <= hi[j] for j in range(n)] for i in range(n)]


__all__ = ["FEATURES", "word_facts", "local_phrase_related"]
