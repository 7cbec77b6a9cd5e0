"""Syntactic profile of attention heads against gold trees (paper D §2.2, eq. 4; Clark et al. 2019).

Each head is a parser without training: the predicted head word of word ``i`` is

    ŷ_i = argmax_{j ≠ i} α_ij                                   (paper D eq. 4)

over the sentence's word-level attention ``α``; its accuracy is counted per dependency
relation against gold trees, beside six *offset baselines* that always predict the word
at a fixed offset (−3, −2, −1, +1, +2, +3: "6 baselines spanning [−3, 3]"; offset 0, the
word itself, is excluded as it is for the heads).

Choices where the papers leave room (each tested in ``tests/test_syntax_profile.py``):

* **Word-level attention from BPE pieces** (Clark et al. §4.1, as the paper says it):
  attention *to* a word is the **sum** over its pieces, attention *from* a word the
  **mean** over its pieces. (Clark et al.'s public code keeps the first piece's row
  instead; we do not.) Words are the alignment's units (:mod:`headlab.syntax.align`).
* **j ≠ i**: attention to the word itself is ignored, as in Clark et al.'s code (a head
  attending to itself predicts nothing). Ties go to the leftmost word (numpy's argmax).
  The NMT encoder has no [CLS]/[SEP]; every piece belongs to a word.
* **Direction** (Clark et al. report both): ``dep->head`` is eq. 4, the row of the
  dependent: ŷ_i = argmax_j α_ij (the dependent attends to its head). ``head->dep`` is the
  column: ŷ_i = argmax_j α_ji, the word that attends most to i (the head attends to its
  dependent). Both predict the head of each dependent, so their accuracies are over the
  same arcs. Paper D's Table 1 uses eq. 4 (``dep->head``);
  :func:`headlab.studies.syntax_tables.table1` can take the best of both.
* **Arcs**: every arc of the basic tree except the root's (no word to attend to; Clark's
  code counts it, always wrong for a head and right for a baseline pointing past the
  sentence end). Arcs with an unaligned end are skipped by the heads and counted
  (``skipped``); the baselines are a property of the treebank alone: word offsets over
  every non-root arc (``accuracy``), and over the heads' arcs too (``accuracy_scored``).
* **Relations**: the tree's own labels (UD v2 for treebanks, spaCy's for parses) plus
  ``all``; Table 1 (:mod:`headlab.studies.syntax_tables`) maps them to the paper's v1 names by
  summing counts (:func:`headlab.syntax.conllu.v1_label`). Clark's special case for ``poss`` (scoring
  the ``'s`` instead) is not applied: paper D does not mention it.
* Layers and heads are numbered from 1 (the paper's "2-4" is layer 2, head 4);
  accuracies are percentages, as in the paper.

Outputs (:meth:`Profile.heads`, :meth:`Profile.baselines`, :meth:`Profile.summary`):
the tidy head CSV has ``layer, head, head_kind, relation, direction, accuracy, count,
correct, skipped, best_baseline, baseline_offset``.
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from headlab.errors import DataError
from headlab.syntax.align import Alignment
from headlab.syntax.conllu import Tree

DIRECTIONS = ("dep->head", "head->dep")
OFFSETS = (-3, -2, -1, 1, 2, 3)
ALL = "all"
HEAD_COLUMNS = ["layer", "head", "head_kind", "relation", "direction", "accuracy", "count", "correct",
                "skipped", "best_baseline", "baseline_offset"]


def word_attention(att: np.ndarray, unit_pieces: list[list[int]]) -> np.ndarray:
    """(..., n, n) piece attention -> (..., U, U) unit attention: sum over the attended
    unit's pieces (columns), mean over the attending unit's pieces (rows)."""
    n = att.shape[-1]
    member = np.zeros((len(unit_pieces), n), dtype=np.float64)
    for u, pieces in enumerate(unit_pieces):
        member[u, pieces] = 1.0
    if not np.array_equal(member.sum(0), np.ones(n)):
        raise ValueError("every piece must belong to exactly one unit")
    to_units = att.astype(np.float64) @ member.T                          # (..., n, U): sum over keys
    return (member / member.sum(1, keepdims=True)) @ to_units             # (..., U, U): mean over queries


def predict(word_att: np.ndarray, direction: str = "dep->head") -> np.ndarray:
    """(..., U, U) word attention -> (..., U) predicted head unit of each unit (j ≠ i)."""
    a = np.array(word_att, dtype=np.float64, copy=True)
    if direction == "head->dep":
        a = np.swapaxes(a, -1, -2)
    elif direction != "dep->head":
        raise ValueError(f"unknown direction {direction!r}; known: {DIRECTIONS}")
    u = a.shape[-1]
    a[..., np.arange(u), np.arange(u)] = -np.inf
    return a.argmax(-1)


def baseline_hits(tree: Tree, words: list[int], offset: int) -> np.ndarray:
    """For the given (0-based) words: does the word at ``offset`` hold the gold head?"""
    return np.array([tree.heads[w] == w + offset + 1 for w in words], dtype=bool)


class Profile:
    """Accumulates head and baseline accuracy per relation over sentences."""

    def __init__(self, layers: int, heads: int, head_kinds: list[list[str]] | None = None):
        self.layers, self.n_heads = layers, heads
        self.head_kinds = head_kinds or [["L"] * heads for _ in range(layers)]
        self.relations: dict[str, int] = {ALL: 0}
        self.correct = {d: np.zeros((layers, heads, 1), dtype=np.int64) for d in DIRECTIONS}
        self.count = Counter()           # relation -> arcs scored by the heads
        self.skipped = Counter()         # relation -> arcs skipped (an unaligned end)
        self.base_all = Counter()        # (offset, relation) -> correct over all non-root arcs
        self.base_scored = Counter()     # (offset, relation) -> correct over the heads' arcs
        self.arcs = Counter()            # relation -> all non-root arcs
        self.sentences = self.words = self.unaligned = self.roots = 0
        self.unaligned_examples: list[str] = []

    def _rel(self, name: str) -> int:
        if name not in self.relations:
            self.relations[name] = len(self.relations)
            for d in DIRECTIONS:
                self.correct[d] = np.concatenate([self.correct[d], np.zeros((self.layers, self.n_heads, 1),
                                                                            dtype=np.int64)], axis=-1)
        return self.relations[name]

    def add(self, tree: Tree, alignment: Alignment, att: np.ndarray) -> None:
        """One sentence: its tree, the alignment of its words to the pieces, and the piece
        attention (layers, heads, n, n) of the encoder."""
        if att.shape[:2] != (self.layers, self.n_heads):
            raise DataError(f"{tree.name}: attention of shape {att.shape}, expected "
                            f"({self.layers}, {self.n_heads}, n, n)")
        if att.shape[-1] != sum(map(len, alignment.unit_pieces)):
            raise DataError(f"{tree.name}: {att.shape[-1]} attention columns for "
                            f"{sum(map(len, alignment.unit_pieces))} BPE pieces")
        self.sentences += 1
        self.words += len(tree)
        aligned = alignment.aligned
        bad = alignment.unaligned_words
        self.unaligned += len(bad)
        if bad and len(self.unaligned_examples) < 50:
            self.unaligned_examples.append(f"{tree.sent_id}: " + " ".join(tree.forms[w] for w in bad))
        scored, deps, golds, rels = [], [], [], []
        for w, (head, rel) in enumerate(zip(tree.heads, tree.deprels)):
            if head == 0:
                self.roots += 1
                continue
            self.arcs[rel] += 1
            self.arcs[ALL] += 1
            if aligned[w] and aligned[head - 1]:
                scored.append(w)
                deps.append(alignment.word_unit[w])
                golds.append(alignment.word_unit[head - 1])
                rels.append(self._rel(rel))
                self.count[rel] += 1
                self.count[ALL] += 1
            else:
                self.skipped[rel] += 1
                self.skipped[ALL] += 1
        arcs = [w for w, h in enumerate(tree.heads) if h != 0]
        for offset in OFFSETS:
            for words, store in ((arcs, self.base_all), (scored, self.base_scored)):
                for w, hit in zip(words, baseline_hits(tree, words, offset)):
                    store[offset, tree.deprels[w]] += int(hit)
                    store[offset, ALL] += int(hit)
        if not scored:
            return
        units = word_attention(att, alignment.unit_pieces)
        deps, golds, rels = np.array(deps), np.array(golds), np.array(rels)
        for d in DIRECTIONS:
            hits = (predict(units, d)[:, :, deps] == golds).astype(np.int64)        # (L, H, arcs)
            np.add.at(np.moveaxis(self.correct[d], -1, 0), rels, np.moveaxis(hits, -1, 0))
            self.correct[d][:, :, 0] += hits.sum(-1)

    # -- results ----------------------------------------------------------------------

    def baselines(self):
        """Tidy baselines: relation, offset, accuracy (all non-root arcs), count, correct,
        accuracy_scored (the heads' arcs), count_scored."""
        import pandas as pd
        rows = []
        for rel in self._order():
            for offset in OFFSETS:
                n, n_scored = self.arcs[rel], self.count[rel]
                rows.append(dict(relation=rel, offset=offset, count=n, correct=self.base_all[offset, rel],
                                 accuracy=100.0 * self.base_all[offset, rel] / n if n else float("nan"),
                                 count_scored=n_scored,
                                 accuracy_scored=(100.0 * self.base_scored[offset, rel] / n_scored
                                                  if n_scored else float("nan"))))
        return pd.DataFrame(rows)

    def _order(self) -> list[str]:
        """``all`` first, then relations by frequency (ties by name)."""
        rels = sorted((r for r in self.arcs if r != ALL), key=lambda r: (-self.arcs[r], r))
        return [ALL] + rels

    def heads(self):
        """The tidy head CSV (module doc); relations with no scored arc are left out."""
        import pandas as pd
        best = best_baselines(self.baselines())
        rows = []
        for rel in self._order():
            n = self.count[rel]
            if not n:
                continue
            r = self.relations[rel]
            b_acc, b_off = best.get(rel, (float("nan"), 0))
            for d in DIRECTIONS:
                for layer in range(self.layers):
                    for head in range(self.n_heads):
                        c = int(self.correct[d][layer, head, r])
                        rows.append(dict(layer=layer + 1, head=head + 1, head_kind=self.head_kinds[layer][head],
                                         relation=rel, direction=d, accuracy=100.0 * c / n, count=n, correct=c,
                                         skipped=self.skipped[rel], best_baseline=b_acc, baseline_offset=b_off))
        return pd.DataFrame(rows, columns=HEAD_COLUMNS)

    def summary(self) -> dict:
        return {"sentences": self.sentences, "words": self.words, "aligned_words": self.words - self.unaligned,
                "unaligned_words": self.unaligned, "root_arcs": self.roots, "arcs": self.arcs[ALL],
                "arcs_scored": self.count[ALL], "arcs_skipped_unaligned": self.skipped[ALL],
                "skipped_by_relation": {r: self.skipped[r] for r in self._order() if self.skipped[r]},
                "unaligned_examples": self.unaligned_examples,
                "word_attention": "to a word: sum over its pieces; from a word: mean over its pieces",
                "prediction": "argmax over the other words (j != i), ties to the leftmost",
                "offsets": list(OFFSETS)}


def best_baselines(baselines, column: str = "accuracy") -> dict[str, tuple[float, int]]:
    """relation -> (best baseline accuracy, its offset); ties go to the smaller |offset|,
    then the right (+) side."""
    out = {}
    for rel, group in baselines.groupby("relation", sort=False):
        group = group.dropna(subset=[column])
        if group.empty:
            continue
        ranked = sorted(group.itertuples(), key=lambda r: (-getattr(r, column), abs(r.offset), -r.offset))
        out[rel] = (float(getattr(ranked[0], column)), int(ranked[0].offset))
    return out


def _v1(frame, scheme: str):
    """Relations renamed to their v1 (paper D) names; ``all`` kept."""
    from headlab.syntax.conllu import v1_label
    return frame.assign(relation=[r if r == ALL else v1_label(r, scheme) for r in frame["relation"]])


def syntactic_heads(profile_csv, *, threshold: float = 20.0, min_count: int = 20, direction: str = "dep->head",
                    baselines_csv=None, scheme: str = "ud2", exclude=("root",)):
    """Which heads are *syntactic*: per (layer, head), every relation (v1 name, at least
    ``min_count`` scored arcs, ``all`` and ``exclude`` left out) where its accuracy beats the
    best offset baseline by ``threshold`` points or more (paper D's bold rule, 20; Voita et
    al.'s is 10). Tidy rows: layer, head, head_kind, relation, direction, accuracy,
    baseline, offset, margin, count; sorted by layer, head, margin (largest first). For the
    join with the gates ("do the gates keep the syntactic heads"): a head is syntactic if
    it has a row here."""
    import pandas as pd

    heads = pd.read_csv(profile_csv)
    base = pd.read_csv(baselines_csv or str(profile_csv)[:-len(".csv")] + ".baselines.csv")
    if direction != "both":
        heads = heads[heads["direction"] == direction]
    heads, base = _v1(heads, scheme), _v1(base, scheme)
    kinds = heads.drop_duplicates(["layer", "head"]).set_index(["layer", "head"])["head_kind"]
    acc = heads.groupby(["relation", "layer", "head", "direction"], as_index=False)[["correct", "count"]].sum()
    acc["accuracy"] = 100.0 * acc["correct"] / acc["count"]
    b = base.groupby(["relation", "offset"], as_index=False)[["correct", "count"]].sum()
    b["accuracy"] = 100.0 * b["correct"] / b["count"]
    best = best_baselines(b)
    acc = acc[(acc["relation"] != ALL) & ~acc["relation"].isin(exclude) & (acc["count"] >= min_count)]
    acc = acc.assign(baseline=[best.get(r, (float("nan"), 0))[0] for r in acc["relation"]],
                     offset=[best.get(r, (float("nan"), 0))[1] for r in acc["relation"]])
    acc["margin"] = acc["accuracy"] - acc["baseline"]
    out = acc[acc["margin"] >= threshold].copy()
    out["head_kind"] = [kinds[(layer, head)] for layer, head in zip(out["layer"], out["head"])]
    out = out.sort_values(["layer", "head", "margin"], ascending=[True, True, False])
    return out[["layer", "head", "head_kind", "relation", "direction", "accuracy", "baseline", "offset", "margin",
                "count"]].reset_index(drop=True)
