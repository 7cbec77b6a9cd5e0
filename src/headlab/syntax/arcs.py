"""Paper D Figures 1-2: one head's word-to-word attention drawn as arcs (as Clark et al. 2019 draw it).

Each panel is one head on one sentence: the sentence's words in a left column (attending)
and a right column (attended), a line from word i to word j as dark as the word-level
attention α_ij (:func:`headlab.syntax.profile.word_attention`: sum over the attended
word's pieces, mean over the attending word's). Lines from the words of the relations the
figure is about are red (the paper: "All attention from red words is colored red").

* **F1** (paper Fig. 1, "subject and object dependencies"): the best ``nsubj`` head and the
  best ``dobj`` head (highest eq. 4 accuracy in the profile; v1 names), red from the
  nsubj / dobj dependents.
* **F2** (paper Fig. 2, "most functional dependencies", head 2-4): the *most functional*
  head, defined here as the highest mean accuracy, relations weighted equally, over the
  functional relations the paper lists for head 2-4 (:data:`FUNCTIONAL`: case,
  determiners, adjectives and adverbs, marks, auxiliaries, copulas, and its Table 1 rows
  nmod:poss, auxpass); red from the words in those relations.

Example sentences come from the profile's ``.attention.npz`` (the first
``profile_figure_sentences`` treebank sentences): the first ``n`` that hold the
relation, no longer than ``max_words`` words (else the shortest). :func:`figure` returns
(tidy rows, plot keywords) as study figures do; :func:`draw` renders them
(``headlab.report.figures.plot(kind="arcs")``).
"""
from __future__ import annotations

import json

import numpy as np

from headlab.errors import DataError
from headlab.syntax.conllu import v1_label

#: the functional relations paper D §2.3 credits head 2-4 with (v1 names)
FUNCTIONAL = ("case", "det", "amod", "advmod", "mark", "aux", "auxpass", "cop", "nmod:poss")


def load_figure_sentences(path: str) -> list[dict]:
    """The figure sentences of a profile's ``.attention.npz``: per sentence the tree entry
    (forms, heads, deprels, units, word_unit) with ``words`` = (layers, heads, U, U)."""
    with np.load(path) as data:
        entries = [json.loads(str(t)) for t in data["trees"]]
        for i, entry in enumerate(entries):
            entry["words"] = data[f"words_{i:06d}"]
    return entries


def _accuracies(profile_csv, direction: str, scheme: str):
    import pandas as pd
    heads = pd.read_csv(profile_csv)
    heads = heads[(heads["direction"] == direction) & (heads["relation"] != "all")]
    heads = heads.assign(relation=[v1_label(r, scheme) for r in heads["relation"]])
    acc = heads.groupby(["relation", "layer", "head"], as_index=False)[["correct", "count"]].sum()
    acc["accuracy"] = 100.0 * acc["correct"] / acc["count"]
    return acc


def best_head(profile_csv, relation: str, direction: str = "dep->head", scheme: str = "ud2") -> tuple[int, int, float]:
    """(layer, head, accuracy) of the best head for ``relation`` (v1 name); ties: lowest layer, head."""
    acc = _accuracies(profile_csv, direction, scheme)
    group = acc[acc["relation"] == relation]
    if group.empty:
        raise DataError(f"no {relation!r} arc in the profile", path=str(profile_csv))
    row = group.sort_values(["accuracy", "layer", "head"], ascending=[False, True, True]).iloc[0]
    return int(row["layer"]), int(row["head"]), float(row["accuracy"])


def functional_head(profile_csv, relations=FUNCTIONAL, direction: str = "dep->head",
                    scheme: str = "ud2") -> tuple[int, int, float]:
    """(layer, head, mean accuracy over ``relations`` present in the profile)."""
    acc = _accuracies(profile_csv, direction, scheme)
    acc = acc[acc["relation"].isin(relations)]
    if acc.empty:
        raise DataError(f"none of {', '.join(relations)} in the profile", path=str(profile_csv))
    mean = acc.groupby(["layer", "head"], as_index=False)["accuracy"].mean()
    row = mean.sort_values(["accuracy", "layer", "head"], ascending=[False, True, True]).iloc[0]
    return int(row["layer"]), int(row["head"]), float(row["accuracy"])


def _unit_relations(entry) -> list[str | None]:
    """Per unit: the v1 relation of its word (None for a unit of several words)."""
    out = []
    for words in entry["unit_words"]:
        out.append(v1_label(entry["deprels"][words[0]], entry.get("scheme", "ud2")) if len(words) == 1 else None)
    return out


def pick_sentences(entries, relations, n: int = 2, max_words: int = 16) -> list[int]:
    """The first ``n`` sentences holding one of ``relations`` with at most ``max_words``
    units; the shortest holding one where too few are that short."""
    holding = [i for i, e in enumerate(entries) if set(_unit_relations(e)) & set(relations)]
    short = [i for i in holding if len(entries[i]["units"]) <= max_words]
    chosen = short[:n]
    rest = sorted((i for i in holding if i not in chosen), key=lambda i: len(entries[i]["units"]))
    chosen += rest[:n - len(chosen)]
    if not chosen:
        raise DataError(f"no figure sentence holds {', '.join(relations)}: raise "
                        f"evaluation.profile_figure_sentences", key="evaluation.profile_figure_sentences")
    return sorted(chosen)


def arc_rows(entry, layer: int, head: int, relations, panel: str, sentence: int):
    """Tidy rows of one panel: every (i, j) with its attention, red where i is in ``relations``."""
    att = entry["words"][layer - 1, head - 1]
    rels = _unit_relations(entry)
    units = entry["units"]
    return [dict(panel=panel, sentence=sentence, i=i, source=units[i], j=j, target=units[j],
                 weight=float(att[i, j]), red=rels[i] in relations)
            for i in range(len(units)) for j in range(len(units))]


def figure(profile_prefix: str, which: str = "F1", n_sentences: int = 1, direction: str = "dep->head",
           scheme: str = "ud2", title_extra: str = ""):
    """(tidy DataFrame, plot keywords) of F1 or F2 from a profile (``PREFIX.csv`` and
    ``PREFIX.attention.npz`` of ``headlab profile-heads``)."""
    import pandas as pd

    csv, npz = f"{profile_prefix}.csv", f"{profile_prefix}.attention.npz"
    entries = load_figure_sentences(npz)
    if not entries:
        raise DataError("the profile kept no figure sentences (evaluation.profile_figure_sentences: 0)", path=npz)
    if which == "F1":
        panels = [(rel, (rel,), best_head(csv, rel, direction, scheme)) for rel in ("nsubj", "dobj")]
        title = "Paper D Fig. 1: the best nsubj and dobj heads"
    elif which == "F2":
        panels = [("functional", FUNCTIONAL, functional_head(csv, FUNCTIONAL, direction, scheme))]
        title = "Paper D Fig. 2: the most functional head (mean accuracy over " + ", ".join(FUNCTIONAL) + ")"
    else:
        raise DataError(f"unknown arc figure {which!r}; known: F1, F2")
    rows = []
    for name, relations, (layer, head, accuracy) in panels:
        for s in pick_sentences(entries, relations, n_sentences):
            label = f"{name}: head {layer}-{head} ({accuracy:.1f}%), sentence {s + 1}"
            rows += arc_rows(entries[s], layer, head, relations, label, s)
    return pd.DataFrame(rows), dict(kind="arcs", title=title + (f" {title_extra}" if title_extra else ""))


def draw(tidy, title: str | None = None, min_weight: float = 0.02):
    """A matplotlib Figure: one arc panel per ``panel`` value of ``tidy`` (see :func:`arc_rows`)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for column in ("panel", "i", "source", "j", "target", "weight", "red"):
        if column not in tidy.columns:
            raise DataError(f"no column {column!r} in the arc rows (have {list(tidy.columns)})")
    panels = list(dict.fromkeys(tidy["panel"]))
    longest = max(int(tidy["i"].max()) + 1, 1)
    figure, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 0.8 + 0.28 * longest), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        part = tidy[tidy["panel"] == panel]
        words = part.drop_duplicates("i").sort_values("i")
        for _, w in words.iterrows():
            ax.text(-0.05, -w["i"], w["source"], ha="right", va="center", fontsize=8,
                    color="red" if w["red"] else "black")
            ax.text(1.05, -w["i"], w["source"], ha="left", va="center", fontsize=8)
        peak = float(part["weight"].max()) or 1.0
        for _, a in part[part["weight"] >= min_weight].iterrows():
            ax.plot([0, 1], [-a["i"], -a["j"]], color="red" if a["red"] else "tab:blue",
                    alpha=float(np.clip(a["weight"] / peak, 0, 1)), linewidth=1.5)
        ax.set_xlim(-0.9, 1.9)
        ax.set_ylim(-len(words) + 0.5, 0.5)
        ax.axis("off")
        ax.set_title(str(panel), fontsize=8)
    if title:
        figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    return figure
