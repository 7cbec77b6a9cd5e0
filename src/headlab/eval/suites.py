"""Loaders for contrastive test suites, all into one shape: :class:`Item`.

An item is one source with its correct translation and one or more contrastive
(wrong) translations. Scoring files follow each suite's upstream ``json_to_plaintext.py``:
for every item the correct target, then each contrastive, each line paired with the
source (:func:`scoring_lines`). Formats:

* **DistilLingEval** (``data/<phenomenon>.mt/{src.en,tgt.correct.de,tgt.incorrect.de}[.gz]``):
  line-aligned files, one contrastive per source; the category is the folder name
  without ``.mt``. Its own protocol scores the two target files separately, so
  :func:`load_distil_lingeval` also returns them line-aligned.
* **LingEval97** (``lingeval97.json``): a JSON list of ``{"source", "reference", "origin",
  "errors": [{"contrastive", "type", "distance"?, "frequency"?}]}``; every error is its
  own contrast (``evaluate.py`` counts errors, not sentences) with its own category.
* **ContraWSD** (``de-en.final.json``) and **MuCoW scoring** (``cs-en.mucow.scoring.json[.gz]``):
  a JSON list of ``{"source", "reference", "ambig word", "sense", "original translation",
  "origin"?, "errors": [{"contrastive", "replacement"?, "type"?}]}``; an item is correct
  only if the reference beats *every* contrastive (ContraWSD/MuCoW ``evaluate*.py``).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from headlab.errors import DataError
from headlab.io import open_maybe_gz, read_lines


@dataclass
class Item:
    source: str
    correct: str
    contrastive: list[str]
    #: per-contrastive category (LingEval97 error type) or one shared (WSD: "word:sense")
    categories: list[str]
    origin: str = ""
    #: per-contrastive distance where the suite annotates one (LingEval97)
    distances: list[int | None] = field(default_factory=list)
    #: True: all contrastives must lose together (WSD); False: each is its own contrast
    all_or_nothing: bool = False


def _suite_file(directory: Path, name: str) -> Path:
    for candidate in (directory / name, directory / f"{name}.gz"):
        if candidate.exists():
            return candidate
    raise DataError(f"missing {name}[.gz]", path=str(directory))


def load_distil_lingeval(directory: str | os.PathLike) -> tuple[str, list[str], list[str], list[str]]:
    """(category, sources, correct, incorrect) of one DistilLingEval ``*.mt`` folder."""
    directory = Path(directory)
    paths = [_suite_file(directory, n) for n in ("src.en", "tgt.correct.de", "tgt.incorrect.de")]
    texts = [read_lines(p) for p in paths]
    if len({len(t) for t in texts}) != 1:
        detail = ", ".join(f"{p} has {len(t)}" for p, t in zip(paths, texts))
        raise DataError(f"line counts differ: {detail}")
    category = directory.name[:-3] if directory.name.endswith(".mt") else directory.name
    return category, texts[0], texts[1], texts[2]


def distil_items(directory) -> list[Item]:
    category, src, good, bad = load_distil_lingeval(directory)
    return [Item(s, g, [b], [category]) for s, g, b in zip(src, good, bad)]


def _load_json(path) -> list[dict]:
    try:
        with open_maybe_gz(path, "rb") as handle:
            data = json.loads(handle.read().decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise DataError(f"not valid JSON: {err}", path=str(path)) from None
    if not isinstance(data, list):
        raise DataError("expected a JSON list of sentences", path=str(path))
    return data


def _require(entry: dict, keys, path, index: int) -> None:
    for key in keys:
        if key not in entry:
            raise DataError(f"entry {index} has no {key!r}", path=str(path), key=key)
    if not isinstance(entry["errors"], list) or not entry["errors"]:
        raise DataError(f"entry {index} has no contrastive translations", path=str(path), key="errors")
    for e in entry["errors"]:
        if "contrastive" not in e:
            raise DataError(f"entry {index}: an error has no 'contrastive'", path=str(path), key="contrastive")


def load_lingeval97(path) -> list[Item]:
    items = []
    for i, entry in enumerate(_load_json(path)):
        _require(entry, ("source", "reference", "errors"), path, i)
        for e in entry["errors"]:
            if "type" not in e:
                raise DataError(f"entry {i}: an error has no 'type'", path=str(path), key="type")
        items.append(Item(entry["source"], entry["reference"], [e["contrastive"] for e in entry["errors"]],
                          [e["type"] for e in entry["errors"]], origin=entry.get("origin", ""),
                          distances=[e.get("distance") for e in entry["errors"]]))
    return items


def load_wsd_json(path) -> list[Item]:
    """ContraWSD or MuCoW scoring json (same layout; MuCoW adds ``origin``)."""
    items = []
    for i, entry in enumerate(_load_json(path)):
        _require(entry, ("source", "reference", "ambig word", "sense", "errors"), path, i)
        category = f"{entry['ambig word']}:{entry['sense']}"
        items.append(Item(entry["source"], entry["reference"], [e["contrastive"] for e in entry["errors"]],
                          [category], origin=entry.get("origin", ""), all_or_nothing=True))
    return items


load_contrawsd = load_mucow_scoring = load_wsd_json


def scoring_lines(items: list[Item]) -> tuple[list[str], list[str]]:
    """Source and target lines to score, in upstream json_to_plaintext order."""
    src, tgt = [], []
    for item in items:
        for target in [item.correct, *item.contrastive]:
            src.append(item.source)
            tgt.append(target)
    return src, tgt


def n_scores(items: list[Item]) -> int:
    return sum(1 + len(item.contrastive) for item in items)
