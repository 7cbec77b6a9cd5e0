"""The default constituency trees: a dependency tree converted into a phrase-structure tree.

Paper C (§4.1.2, Table A3) takes local phrases from a constituency parser (benepar). No
constituency model can be downloaded offline, so the default parser ``depconv`` derives
the phrase-structure tree from the spaCy dependency tree by the *flattest projection* of
Collins (1999) / Xia & Palmer (2001):

Rule (exact)
    Every word ``w`` is a preterminal ``(TAG w)``; a word without dependents projects
    nothing more (no unary phrase over a preterminal). A word with dependents projects a
    phrase labelled from its fine POS tag (``PHRASE_OF``: nouns/pronouns/numbers -> NP,
    verbs -> VP, adjectives -> ADJP, adverbs -> ADVP, prepositions -> PP, wh-words ->
    WHNP/WHADVP, anything else -> X) whose children are, in sentence order, its own
    preterminal and the projections of its dependents (flattest projection), except:

    1. *clauses*: a verb with a subject dependent left of it (``SUBJECTS``) projects
       ``(S outer... (VP ...) final-punct...)``: the subject and the dependents before it
       are children of S, so is the verb's final punctuation; the rest form the VP. The
       root verb without a subject still gets an S when it has final punctuation
       (``(S (VP Go home) (. .))``);
    2. *auxiliary chains*: each ``aux``/``auxpass`` dependent that precedes every other
       VP dependent opens a nested VP, as the PTB writes ``(VP have (VP been (VP
       strained ...)))``;
    3. *noun postmodifiers*: a noun with a right dependent that is itself a phrase (a PP,
       a relative clause) projects ``(NP (NP left-dependents noun) modifiers...)``.

    The root's projection is the tree; a one-word sentence is ``(X (TAG w))``. On the
    PTB sample (3,914 trees) this conversion scores 71.1 bracketing F1 against gold trees (Table A3,
    :mod:`headlab.syntax.evalb`); flat projection alone scored 59 (first 500 trees).

Projectivity
    A phrase must cover a contiguous span. A non-projective arc (spaCy's pseudo-projective
    parser can return some) is *lifted*: the dependent is re-attached to its head's head
    until every arc is projective (Kahane et al. 1998; always terminates at the root).
    Only the tree is built from the lifted heads; the dependency heads themselves (what
    DEA uses) are kept as parsed, and :func:`lift_nonprojective` returns how many arcs
    it lifted.
"""
from __future__ import annotations

from typing import Sequence

from nltk import Tree

from headlab.errors import DataError

#: subject relations that make a verb's phrase a clause (S)
SUBJECTS = frozenset({"nsubj", "nsubjpass", "csubj", "csubjpass", "expl"})

#: relations whose word opens a nested VP before the verb (have been strained)
AUXILIARIES = frozenset({"aux", "auxpass"})

#: Penn fine tag -> label of the phrase its word projects
PHRASE_OF: dict[str, str] = {
    **{t: "NP" for t in ("NN", "NNS", "NNP", "NNPS", "PRP", "CD", "EX", "FW", "NFP", "ADD", "XX")},
    **{t: "VP" for t in ("VB", "VBD", "VBG", "VBN", "VBP", "VBZ", "MD")},
    **{t: "ADJP" for t in ("JJ", "JJR", "JJS", "AFX")},
    **{t: "ADVP" for t in ("RB", "RBR", "RBS", "RP")},
    **{t: "PP" for t in ("IN", "TO")},
    "WP": "WHNP", "WDT": "WHNP", "WP$": "WHNP", "WRB": "WHADVP",
    "DT": "NP", "PDT": "NP", "PRP$": "NP", "POS": "NP", "UH": "INTJ",
}


def phrase_label(tag: str, dependents_labels: Sequence[str] = ()) -> str:
    """The label of the phrase a word with POS ``tag`` projects (see the module rule)."""
    label = PHRASE_OF.get(tag, "X")
    if label == "VP" and SUBJECTS.intersection(dependents_labels):
        return "S"
    return label


def check_heads(heads: Sequence[int]) -> int:
    """The root of a 0-based head list (the root points to itself); DataError unless it is
    one tree (exactly one root, no cycle, every index in range)."""
    n = len(heads)
    roots = [i for i, h in enumerate(heads) if h == i]
    if len(roots) != 1:
        raise DataError(f"a dependency tree needs exactly one root, got {len(roots)} in heads {list(heads)}")
    for i, h in enumerate(heads):
        if not 0 <= h < n:
            raise DataError(f"head {h} of word {i} is outside 0..{n - 1}")
    for i in range(n):
        seen, j = set(), i
        while heads[j] != j:
            if j in seen:
                raise DataError(f"heads {list(heads)} contain a cycle through word {j}")
            seen.add(j)
            j = heads[j]
    return roots[0]


def _projective(heads: Sequence[int], dep: int) -> bool:
    """Arc head(dep) -> dep is projective: every word between them descends from the head."""
    head = heads[dep]
    lo, hi = min(head, dep), max(head, dep)
    for k in range(lo + 1, hi):
        j = k
        while j != head and heads[j] != j:
            j = heads[j]
        if j != head:
            return False
    return True


def lift_nonprojective(heads: Sequence[int]) -> tuple[list[int], int]:
    """(projective heads, number of lifts): each non-projective dependent is re-attached
    to its head's head until every arc is projective (the shortest arcs first)."""
    heads = list(heads)
    check_heads(heads)
    lifts = 0
    while True:
        bad = [d for d in range(len(heads)) if heads[d] != d and not _projective(heads, d)]
        if not bad:
            return heads, lifts
        d = min(bad, key=lambda i: abs(heads[i] - i))
        heads[d] = heads[heads[d]]
        lifts += 1


def dependency_to_tree(words: Sequence[str], tags: Sequence[str], heads: Sequence[int],
                       labels: Sequence[str]) -> Tree:
    """The phrase-structure tree of a dependency tree by the module's rule.

    ``heads`` 0-based, the root pointing to itself; ``labels`` the dependency relations.
    Leaves of the result are ``words`` in order.
    """
    n = len(words)
    if not (len(tags) == len(heads) == len(labels) == n) or n == 0:
        raise DataError(f"words/tags/heads/labels must have one entry per word (got {n}, {len(tags)}, "
                        f"{len(heads)}, {len(labels)}), at least one word")
    proj, _ = lift_nonprojective(heads)
    root = check_heads(proj)
    children: list[list[int]] = [[] for _ in range(n)]
    for d, h in enumerate(proj):
        if d != h:
            children[h].append(d)

    def kids(items: list[int], head: int = -1) -> list:
        """Subtrees of ``items`` in order; the phrase's own head is its bare preterminal."""
        return [Tree(tags[j], [words[j]]) if j == head else build(j) for j in sorted(items)]

    def build(i: int):
        leaf = Tree(tags[i], [words[i]])
        deps = children[i]
        if not deps:
            return leaf
        label = phrase_label(tags[i])
        if label == "VP":
            return verb_phrase(i, deps)
        phrasal = [d for d in deps if d > i and children[d]]
        if label == "NP" and phrasal:
            # (NP (NP det adj noun) (PP ...)): the noun with its left dependents, then
            # the phrasal right modifiers from the first one on
            first = min(phrasal)
            core = [d for d in deps if d < first]
            return Tree("NP", [Tree("NP", kids(core + [i], i))] + kids([d for d in deps if d >= first]))
        return Tree(label, kids(deps + [i], i))

    def verb_phrase(i: int, deps: list[int]):
        subjects = [d for d in deps if d < i and labels[d] in SUBJECTS]
        cut = max(subjects) if subjects else -1
        outer = [d for d in deps if d <= cut]
        rights = sorted(d for d in deps if d > i)
        trailing = []
        while rights and labels[rights[-1]] == "punct" and (subjects or i == root):
            trailing.insert(0, rights.pop())
        inner = [d for d in deps if d not in outer and d not in trailing]
        # auxiliaries left of everything else of the VP each open a VP (PTB's VP chains)
        aux = []
        for d in sorted(inner):
            if d < i and labels[d] in AUXILIARIES and not [e for e in inner if e < d and e not in aux]:
                aux.append(d)
            elif d < i and labels[d] in AUXILIARIES:
                break
        phrase = Tree("VP", kids([d for d in inner if d not in aux] + [i], i))
        for a in reversed(aux):
            phrase = Tree("VP", kids([a]) + [phrase])
        if not (subjects or trailing):
            return phrase
        return Tree("S", kids(outer) + [phrase] + kids(trailing))

    tree = build(root)
    return tree if isinstance(tree[0], Tree) else Tree("X", [tree])
