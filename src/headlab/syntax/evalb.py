"""Bracketing F1 of a parser against gold constituency trees (paper C Table A3).

Gold: the NLTK Penn Treebank WSJ sample (dataset ``ptb-sample``, ``treebank.zip``: 3,914
trees of ``treebank/combined/wsj_*.mrg``, in file order). Each parser parses the gold
words (``-NONE-`` traces removed, ``-LRB-``-style escapes turned back into brackets for the
parser) exactly as :mod:`headlab.syntax.parse` parses Moses tokens, and its tree is
scored against the gold tree by PYEVALB (PyPI ``PYEVALB``, a Python EVALB; the optional
extra ``parsers``). PYEVALB compares labelled spans like EVALB but has no parameter file,
so both trees are normalised first as EVALB's ``COLLINS.prm`` does: function tags and
indices stripped (``NP-SBJ-1`` -> ``NP``), ``-NONE-`` and the constituents left empty by
it removed, punctuation (gold tags ``,`` ``:`` ``` `` ``` ``''`` ``.``) deleted from both trees
at the gold positions, ``PRT`` counted as ``ADVP``, the unlabelled outer bracket dropped.
PYEVALB counts a labelled span once per tree (a set), where EVALB counts repeated unary
spans with the same label twice; these are rare and make the two differ only in the
second decimal. Corpus F1 = 2PR/(P+R) over bracket counts summed over sentences (EVALB's
"Bracketing FMeasure"), preterminals not counted.

``--limit N`` scores the first N trees (the workflow's default run uses a subset, see
``rules/syntax.smk``).
"""
from __future__ import annotations

import argparse
import csv
import io
import re
import time
import zipfile
from pathlib import Path
from typing import Sequence

from nltk import Tree

from headlab.errors import ConfigError, DataError
from headlab.io import atomic_write

PUNCT_TAGS = frozenset({",", ":", "``", "''", "."})
#: PTB escapes -> the characters a parser of raw tokens expects
UNESCAPE = {"-LRB-": "(", "-RRB-": ")", "-LCB-": "{", "-RCB-": "}", "-LSB-": "[", "-RSB-": "]"}
EQUIVALENT = {"PRT": "ADVP"}
_MEMBER = re.compile(r"treebank/combined/wsj_\d+\.mrg$")


def _scorer():
    import importlib
    try:     # importlib: an optional extra, which only the eval env and `.[parsers]` install
        pyevalb_parser = importlib.import_module("PYEVALB.parser")
        Scorer = importlib.import_module("PYEVALB.scorer").Scorer
    except ImportError as err:
        raise ConfigError(f"parser F1 needs PYEVALB (pip install -e '.[parsers]', PYEVALB==0.1.3): {err}",
                          key="parser-eval") from None
    return pyevalb_parser, Scorer()


def read_gold(path: str | Path, limit: int | None = None) -> list[Tree]:
    """The gold trees of ``treebank.zip`` (or a folder/.mrg file of bracketed trees) in order;
    a file that holds no bracketed trees, or a malformed one, is a :class:`DataError` naming
    the file (and the archive's member) and the tree's number."""
    from nltk.corpus.reader.util import read_sexpr_block

    path = Path(path)
    texts = []     # (where, text)
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            texts = [(f"{path}:{n}", archive.read(n)) for n in sorted(archive.namelist()) if _MEMBER.search(n)]
    elif path.is_dir():
        texts = [(str(p), p.read_bytes()) for p in sorted(path.glob("*.mrg"))]
    else:
        texts = [(str(path), path.read_bytes())]
    trees = []
    for where, raw in texts:
        try:
            stream = io.StringIO(raw.decode("utf-8"))
        except UnicodeDecodeError as err:
            raise DataError(f"invalid UTF-8 at byte {err.start}: not a bracketed treebank", path=where) from None
        number = 0
        while True:
            block = read_sexpr_block(stream)
            if not block:
                break
            for sexpr in block:
                number += 1
                try:
                    tree = Tree.fromstring(sexpr, remove_empty_top_bracketing=True)
                except ValueError as err:     # nltk's message spans lines: its first one
                    raise DataError(f"tree {number} is not a bracketed tree ({str(err).splitlines()[0]})",
                                    path=where) from None
                trees.append(tree)
                if limit and len(trees) >= limit:
                    return trees
    if not trees:
        raise DataError("no bracketed trees found", path=str(path))
    return trees


def _base_label(label: str) -> str:
    if label.startswith("-") and label.endswith("-"):
        return label
    base = re.split(r"[-=]", label)[0] or label
    return EQUIVALENT.get(base, base)


def strip_traces(tree: Tree) -> Tree | None:
    """The tree without -NONE- preterminals and the constituents they leave empty, labels
    reduced to their base category; None if nothing is left."""
    if isinstance(tree[0], str):
        return None if tree.label() == "-NONE-" else Tree(tree.label(), list(tree))
    kids = [k for k in (strip_traces(c) for c in tree) if k is not None]
    return Tree(_base_label(tree.label()), kids) if kids else None


def _delete_positions(tree: Tree, drop: set[int], start: int = 0) -> tuple[Tree | None, int]:
    if isinstance(tree[0], str):
        return (None if start in drop else tree), start + 1
    kids = []
    for child in tree:
        kept, start = _delete_positions(child, drop, start)
        if kept is not None:
            kids.append(kept)
    return (Tree(tree.label(), kids) if kids else None), start


def _bracketing(tree: Tree) -> str:
    """One line with leaves renamed w0, w1, ... (words cannot break PYEVALB's reader)."""
    tree = tree.copy(deep=True)
    for k, pos in enumerate(tree.treepositions("leaves")):
        tree[pos] = f"w{k}"
    return " ".join(str(tree).split())


def normalise(gold: Tree, test: Tree) -> tuple[str, str]:
    """Both trees as EVALB (COLLINS.prm) would score them (see the module docstring)."""
    gold_tags = [tag for _, tag in gold.pos()]
    drop = {i for i, tag in enumerate(gold_tags) if tag in PUNCT_TAGS}
    kept_gold, _ = _delete_positions(gold, drop)
    kept_test, _ = _delete_positions(_relabel(test), drop)
    if kept_gold is None or kept_test is None:
        return "", ""
    return _bracketing(kept_gold), _bracketing(kept_test)


def _relabel(tree: Tree) -> Tree:
    if isinstance(tree[0], str):
        return tree
    return Tree(_base_label(tree.label()), [_relabel(c) for c in tree])


def parse_words(trees: Sequence[Tree], parser: str) -> list[Tree]:
    """The ``parser``'s trees of the gold sentences' words (as :mod:`parse` parses)."""
    from headlab.syntax import parse

    sentences = [[UNESCAPE.get(w, w) for w in t.leaves()] for t in trees]
    parses = parse.parse_sentences(sentences, parser, source="<ptb-sample>")
    return [p.tree for p in parses]


def score(gold: Sequence[Tree], test: Sequence[Tree]) -> dict[str, float]:
    """Corpus bracketing precision, recall, F1 (percent) and counts."""
    pyevalb_parser, scorer = _scorer()
    matched = n_gold = n_test = sentences = 0
    for number, (g, t) in enumerate(zip(gold, test), 1):
        if len(g.leaves()) != len(t.leaves()):
            raise DataError(f"sentence {number}: the parser's tree has {len(t.leaves())} words, gold "
                            f"{len(g.leaves())}")
        g_text, t_text = normalise(g, t)
        if not g_text:
            continue
        result = scorer.score_trees(pyevalb_parser.create_from_bracket_string(g_text),
                                    pyevalb_parser.create_from_bracket_string(t_text))
        matched += result.matched_brackets
        n_gold += result.gold_brackets
        n_test += result.test_brackets
        sentences += 1
    precision = 100.0 * matched / n_test if n_test else 0.0
    recall = 100.0 * matched / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"sentences": sentences, "f1": f1, "precision": precision, "recall": recall,
            "matched": matched, "gold_brackets": n_gold, "test_brackets": n_test}


def parser_f1(treebank: str | Path, parser: str, limit: int | None = None) -> dict:
    gold = [t for t in (strip_traces(t) for t in read_gold(treebank, limit)) if t is not None]
    started = time.perf_counter()
    test = parse_words(gold, parser)
    result = score(gold, test)
    return {"parser": parser, **result, "parse_seconds": round(time.perf_counter() - started, 1)}


FIELDS = ("parser", "sentences", "f1", "precision", "recall", "matched", "gold_brackets", "test_brackets",
          "parse_seconds")


def main(argv: list[str]) -> int:
    from headlab.options import bounded
    from headlab.syntax.parse import PARSERS

    ap = argparse.ArgumentParser(prog="headlab parser-eval", description=__doc__.split("\n\n")[0])
    ap.add_argument("--treebank", required=True, help="ptb-sample's treebank.zip (or .mrg files)")
    ap.add_argument("--parser", default=PARSERS[0], choices=PARSERS, help="the parser evaluated")
    ap.add_argument("--limit", type=bounded(int, 0), default=0, help="score the first N trees (0: all)")
    ap.add_argument("--out", required=True, help="CSV: " + ", ".join(FIELDS))
    args = ap.parse_args(argv)
    row = parser_f1(args.treebank, args.parser, args.limit or None)
    with atomic_write(args.out) as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerow({k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()})
    print(f"{args.parser}: F1 {row['f1']:.2f} (P {row['precision']:.2f}, R {row['recall']:.2f}) "
          f"on {row['sentences']} sentences")
    return 0
