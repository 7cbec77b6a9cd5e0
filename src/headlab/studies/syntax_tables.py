"""Paper D Table 1 from a head profile: the best head per relation beside the best offset baseline.

Reads the CSVs of ``headlab profile-heads`` (:mod:`headlab.syntax.profile`) and returns
what a study table builder returns: a :class:`headlab.studies.tables.Table` (ours beside
the paper's ``paper_D/reference.csv`` T1 numbers) and the tidy rows.
"""
from __future__ import annotations

from headlab.errors import DataError
from headlab.syntax.profile import ALL, DIRECTIONS, _v1, best_baselines, syntactic_heads  # noqa: F401 (syntactic_heads re-exported)

#: the treebanks of rules/analyse.smk's profile_heads: UD test sets, or a split parsed with spaCy
UD_TREEBANKS = ("ud-en_ewt", "ud-en_pud")


def profile_prefix(root: str, model: dict, treebank: str = "ud-en_ewt") -> str:
    """Where the ``profile_heads`` rule writes a model's profile (``PREFIX.csv``,
    ``.baselines.csv``, ``.alignment.json``, ``.attention.npz``); ``treebank``: ``ud-en_ewt``,
    ``ud-en_pud`` or ``spacy-<split>``."""
    from headlab.naming import path
    # the path table names each file of the profile; the prefix is the CSV's minus its part
    return path("profile", root, model, treebank=treebank, part="csv").removesuffix(".csv")


#: relations left out of Table 1's "ten most frequent": the paper's ten omit them although
#: they are among the most frequent in any English text (Clark et al.'s figures omit
#: punct, conj and cc too); root has no head word to attend to
TABLE1_EXCLUDE = ("root", "punct", "conj", "cc")
TABLE1_COLUMNS = ["Head", "Accuracy", "Baseline", "Offset"]


def table1(profile_csv, reference: "pd.DataFrame | None" = None, *, baselines_csv=None,  # noqa: F821
           direction: str = "dep->head", top: int = 10, exclude=TABLE1_EXCLUDE, threshold: float = 20.0,
           scheme: str = "ud2"):
    """Paper D Table 1 from a profile: (Table, tidy DataFrame) as study tables return them.

    Rows: ``All``, the ``top`` most frequent relations (v1 names, ``exclude`` left out), then
    the paper's other rows. Columns: the best head (``layer-head``; ``direction`` =
    ``dep->head`` is eq. 4, ``both`` takes the better of the two directions and names it),
    its accuracy, the best offset baseline over every non-root arc and its offset, each
    beside the paper's (``reference``: the T1 rows of ``paper_D/reference.csv`` by
    default); bold: the head beats the baseline by ``threshold`` points or more. Counts
    are summed over the v2 relations that share a v1 name before dividing. Ties: the
    lowest layer, then head; relations of equal frequency by name."""
    import pandas as pd
    from headlab.studies.tables import Table, beside

    heads = pd.read_csv(profile_csv)
    bpath = baselines_csv or str(profile_csv)[:-len(".csv")] + ".baselines.csv"
    base = pd.read_csv(bpath)
    if direction != "both":
        if direction not in DIRECTIONS:
            raise DataError(f"unknown direction {direction!r}; known: {', '.join(DIRECTIONS)}, both")
        heads = heads[heads["direction"] == direction]
    heads, base = _v1(heads, scheme), _v1(base, scheme)
    acc = heads.groupby(["relation", "layer", "head", "direction"], as_index=False)[["correct", "count"]].sum()
    acc["accuracy"] = 100.0 * acc["correct"] / acc["count"]
    b = base.groupby(["relation", "offset"], as_index=False)[["correct", "count"]].sum()
    b["accuracy"] = 100.0 * b["correct"] / b["count"]
    best_b = best_baselines(b)
    freq = b.drop_duplicates("relation").set_index("relation")["count"]
    ranked = sorted((r for r in freq.index if r != ALL and r not in exclude), key=lambda r: (-freq[r], r))
    paper = reference if reference is not None else _reference("T1")
    rows = [ALL] + ranked[:top] + [r for r in dict.fromkeys(paper["row"]) if r not in ranked[:top] and r != "All"]
    tidy, no_arcs = [], []
    for rel in rows:
        group = acc[acc["relation"] == rel]
        if group.empty:         # a paper row the treebank (or the alignment) leaves without an arc
            no_arcs.append("All" if rel == ALL else rel)
            continue
        best = group.sort_values(["accuracy", "layer", "head"], ascending=[False, True, True]).iloc[0]
        b_acc, b_off = best_b.get(rel, (float("nan"), 0))
        name = f"{int(best['layer'])}-{int(best['head'])}" + (f" {best['direction']}" if direction == "both" else "")
        tidy.append(dict(relation="All" if rel == ALL else rel, head=name, layer=int(best["layer"]),
                         head_number=int(best["head"]), direction=best["direction"], accuracy=float(best["accuracy"]),
                         count=int(best["count"]), baseline=b_acc, offset=b_off,
                         bold=bool(best["accuracy"] - b_acc >= threshold)))
    ours = pd.DataFrame(tidy)
    index = list(ours["relation"]) + [r for r in dict.fromkeys(paper["row"]) if r not in set(ours["relation"])]

    def grid(frame, bold, missing=None):
        """``missing``: the head cell of a row without numbers (blank: None)."""
        cells = {rel: (head, accuracy, baseline, offset, b) for rel, head, accuracy, baseline, offset, b in frame}
        empty = (missing, float("nan"), float("nan"), float("nan"), False)
        got = [cells.get(rel, empty) for rel in index]
        values = pd.DataFrame({"Head": pd.Series([g[0] for g in got], index=index, dtype=object),
                               **{c: pd.Series([float(g[k]) for g in got], index=index)
                                  for k, c in enumerate(TABLE1_COLUMNS[1:], start=1)}})
        flags = pd.DataFrame(False, index=index, columns=TABLE1_COLUMNS)
        flags["Accuracy"] = [bool(g[4]) for g in got]
        return Table(values, decimals=1, column_decimals={"Offset": 0}, best=None, index_name="Relation",
                     bold=flags if bold else None)

    # n/a, not blank: a relation without arcs has no best head, which a blank cell would hide
    mine = grid(ours[["relation", "head", "accuracy", "baseline", "offset", "bold"]].itertuples(index=False), True,
                missing="n/a")
    wide = paper.pivot(index="row", columns="column", values="value")
    theirs = grid([(r, str(w["Head"]), float(w["Accuracy"]), float(w["Baseline"]), int(float(w["Offset"])),
                    str(w["bold"]) in ("1", "1.0", "True")) for r, w in wide.iterrows()], True)
    table = beside(mine, theirs)
    table.caption = (f"Paper D Table 1: the best encoder head per relation ({'eq. 4, dependent -> head' if direction == 'dep->head' else direction}), "
                     f"its accuracy, and the best offset baseline (offset in words); bold: {threshold:g}+ points above "
                     f"the baseline. Ours: the {top} most frequent relations (without {', '.join(exclude)}) and the "
                     f"paper's other rows; UD labels mapped to the paper's v1 names.")
    if no_arcs:
        table.caption += f" n/a: no scored arc in our profile ({', '.join(no_arcs)})."
    return table, ours


def _reference(table: str):
    from headlab.studies.common import reference
    return reference("paper_D", table, dtype=str)
