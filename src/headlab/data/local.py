"""Your own parallel corpus: local files named in the config (``dataset: local``).

    corpora:
      mine:
        dataset: local
        files:                                   # split -> one file per language (.gz ok)
          train: {de: /data/train.de.gz, en: /data/train.en.gz}
          valid: {de: /data/valid.de, en: /data/valid.en}
          test:  {tsv: /data/test.tsv, langs: [de, en]}   # or one TSV: source<TAB>target
        train: train
        valid: valid
        tests: [test]
        bpe_merges: 2000
        clean: {max_tokens: 250, max_ratio: 9}   # the defaults

The corpus's languages are those its files name; a study may use either direction
(``de-en`` or ``en-de``). Relative paths are relative to the workflow's working directory.
``headlab prepare-local`` reads one split of one pair, writes the line-aligned ``.src`` /
``.tgt`` files and a JSON report (sha256 and line count of every file read, lines removed
and normalised), which the study README and ``publish``'s provenance include.

What happens to bad input (the same on every split unless said otherwise). Every error
below is found when the workflow builds its DAG (:func:`check_contents`, called by the
config check), before any job, as one line naming the file, the line where one applies,
and the split's config key; ``prepare-local`` run by hand reports the same:

=============================  ==================================================================
input                          result
=============================  ==================================================================
invalid UTF-8                  error naming file and line, and what the file looks like instead
                               (binary, gzip data without .gz, Latin-1, UTF-16)
a ``.gz`` file cut short       error naming the file
a split without lines          error naming the file
source/target line counts      error naming both files and their line counts (a config error
differ                         naming the split's key when the DAG is built)
TSV line without exactly one   error naming file and line (never a guess that would shift sides)
tab
UTF-8 BOM at the file start    removed (counted)
CRLF line endings              normalised to LF (counted)
control characters (C0, C1,    each replaced by a space (lines counted); a lone CR inside a line
DEL, U+2028/9, inner BOM, TAB  is one of them, so one line stays one sentence
in plain files)
empty / whitespace-only side   train/valid: the pair is removed (counted); tests: error
more than ``max_tokens``       train/valid: the pair is removed (counted); tests: error
whitespace tokens on a side
length ratio (tokens) above    train/valid: the pair is removed (counted); tests: error
``max_ratio``
every pair of a train/valid    error naming the file (nothing would be left to train on)
split removed
=============================  ==================================================================

Removal is Moses ``clean-corpus-n.perl``'s (min 1 token, max ``max_tokens``, ratio
``max_ratio``, 250 and 9 by default) applied to both sides at once, so sides never shift.
A test set is never altered: it is the reference the scores are computed against. Both
outputs and the report are written atomically; on any error nothing is written.
"""
from __future__ import annotations

import argparse
import codecs
import contextlib
import itertools
import json
import os
import re
import sys
from pathlib import Path
from typing import IO, Any, Iterator, Mapping

from headlab.data._cli import run
from headlab.data.fetch import file_digest
from headlab.data.prepare import subsample_indices, write_pair
from headlab.errors import ConfigError, DataError
from headlab.io import GZIP_ERRORS, atomic_write, gzip_problem, open_maybe_gz

KIND = "local"
MAX_TOKENS, MAX_RATIO = 250, 9.0
_LANG = re.compile(r"^[a-z]{2,3}$")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff]")
_CONTROL_TSV = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\ufeff]")  # TAB separates fields
BOM = "\ufeff"
#: the ``corpus`` wildcard of every data and model path (rules/common.smk's wildcard_constraints)
CORPUS_NAME = re.compile(r"[A-Za-z0-9_.-]+")
#: two tabs on one line (a line without a tab shows in the count of tabs)
_TWO_TABS = re.compile(rb"\t[^\t\n]*\t")


def is_local(corpus: Mapping[str, Any]) -> bool:
    return corpus.get("dataset") == KIND


def _entry(corpus: Mapping[str, Any], split: str) -> Mapping[str, Any]:
    return corpus.get("files", {}).get(split, {})


def split_languages(entry: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(entry["langs"]) if "tsv" in entry else tuple(entry)


def languages(corpus: Mapping[str, Any]) -> set[str]:
    return {lang for entry in corpus.get("files", {}).values() for lang in split_languages(entry)}


def input_files(corpus: Mapping[str, Any], split: str) -> list[str]:
    """The files one split reads (the prepare-local job's inputs)."""
    entry = _entry(corpus, split)
    return [entry["tsv"]] if "tsv" in entry else [entry[lang] for lang in sorted(entry)]


def split_config(corpus: Mapping[str, Any], split: str) -> dict[str, Any]:
    """What ``prepare-local`` reads of the corpus config for one split (the job's params:
    another split's files or the BPE settings changing reruns nothing here)."""
    return {"files": {split: dict(_entry(corpus, split))}, "train": corpus["train"], "valid": corpus["valid"],
            "clean": dict(corpus.get("clean", {}))}


def check_name(name: str, key: str) -> None:
    """A corpus name is a folder in every path of its data and models, matched by the
    ``corpus`` wildcard (rules/common.smk): a name outside it matches no rule, and snakemake
    would say so in a MissingInputException of some thirty lines."""
    if not CORPUS_NAME.fullmatch(name):
        raise ConfigError(f"corpus name {name!r} is a folder name in every path of its data and models: "
                          f"use ASCII letters, digits, '_', '.' and '-' only", key=key)


def check_corpus(corpus: Mapping[str, Any], key: str) -> None:
    """ConfigError naming the key of a missing split, a bad language set or a missing file;
    then, reading each split once, every defect its prepare-local job would fail on
    (:func:`check_contents`), so that none is found inside a job."""
    files = corpus.get("files")
    if not files:
        raise ConfigError("a local corpus names its files: files: {SPLIT: {LANG: FILE, LANG: FILE}}",
                          key=f"{key}.files")
    for field, split in [("train", corpus["train"]), ("valid", corpus["valid"]),
                         *((f"tests[{i}]", t) for i, t in enumerate(corpus["tests"]))]:
        if split not in files:
            raise ConfigError(f"split {split!r} has no files; files: has {', '.join(files)}", key=f"{key}.{field}")
    first = None
    for split, entry in files.items():
        langs = split_languages(entry)
        where = f"{key}.files.{split}"
        if len(langs) != 2 or len(set(langs)) != 2 or not all(_LANG.match(lang) for lang in langs):
            raise ConfigError(f"expected two languages (ISO codes such as de, en), got {', '.join(langs) or 'none'}",
                              key=where)
        if first is not None and set(langs) != first:
            raise ConfigError(f"languages {', '.join(sorted(langs))} differ from the other splits' "
                              f"{', '.join(sorted(first))}", key=where)
        first = set(langs)
        for path in input_files(corpus, split):
            if not Path(path).is_file():
                raise ConfigError(f"no such file: {path} (relative paths are relative to the working "
                                  f"directory, {os.getcwd()})", key=where)
    check_contents(corpus, key)


def _line_count(path: str, key: str | None = None) -> int:
    """Lines as read_file counts them (a last line without a newline counts); counted once
    per process for each state of the file (the size check asks once per model)."""
    identity = _identity(path)
    if identity not in _LINE_COUNTS:
        _LINE_COUNTS[identity] = sum(1 for _ in _byte_lines(path, key))
    return _LINE_COUNTS[identity]


def _identity(path: str) -> tuple:
    """A file's state: a file rewritten in place changes its ctime even when its mtime is set back."""
    stat = os.stat(path)
    return os.path.abspath(path), stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns


#: identity -> lines, for the files read so far
_LINE_COUNTS: dict[tuple, int] = {}


def check_pair(corpus: Mapping[str, Any], pair: str, key: str) -> None:
    src, _, tgt = pair.partition("-")
    have = languages(corpus)
    if {src, tgt} != have:
        raise ConfigError(f"pair {pair!r} is not in this local corpus: its files are in "
                          f"{' and '.join(sorted(have))}, so {'-'.join(sorted(have))} or "
                          f"{'-'.join(sorted(have, reverse=True))}", key=key)


def count_lines(corpus: Mapping[str, Any], split: str) -> int:
    """Lines of a split's (first) file: what a subsample may take at most, before cleaning."""
    return _line_count(input_files(corpus, split)[0])


# -- the files' contents, checked when the DAG is built ----------------------------------

def check_contents(corpus: Mapping[str, Any], key: str) -> None:
    """Each split read once, as its prepare-local job will read it; the first defect the job
    would fail on is one :class:`DataError` naming the file, the line where one applies, and
    the split's key: invalid UTF-8 (saying what the file looks like instead: binary, gzip,
    Latin-1, UTF-16), a gzip file cut short, sides of different lengths, a TSV line without
    exactly one tab, a split without lines, a training or validation split that cleaning
    would empty, and a test line that cleaning would remove (a test set is never cleaned).
    Splits no study reads are only counted, for the alignment of their sides."""
    tests = set(corpus["tests"])
    read = {corpus["train"], corpus["valid"], *tests}
    limits = {**{"max_tokens": MAX_TOKENS, "max_ratio": MAX_RATIO}, **corpus.get("clean", {})}
    for split, entry in corpus["files"].items():
        where = f"{key}.files.{split}"
        if split in read:
            _check_split(entry, strict=split in tests - {corpus["train"], corpus["valid"]}, limits=limits, key=where)
        elif "tsv" not in entry:
            _check_aligned(*entry.values(), key=where)


def _check_aligned(src_path: str, tgt_path: str, key: str) -> None:
    lines = {path: _line_count(path, key) for path in (src_path, tgt_path)}
    if lines[src_path] != lines[tgt_path]:
        raise ConfigError(f"the sides differ in length: {src_path} has {lines[src_path]} lines, {tgt_path} has "
                          f"{lines[tgt_path]}; the files must be line-aligned", key=key)


def _check_split(entry: Mapping[str, Any], *, strict: bool, limits: Mapping[str, Any], key: str) -> None:
    """One split's pairs, normalised as read_file does, against what prepare would stop on.
    A training or validation split is only cleaned until one pair is kept: what the job
    would fail on there is a split that cleaning empties, so the rest is only decoded."""
    labels = [entry["tsv"]] * 2 if "tsv" in entry else list(entry.values())
    # a training or validation split whose files decode (and whose TSV lines have one tab
    # each) fails only if cleaning empties it: read it line by line until one pair is kept
    fast = False
    if not strict:
        lines = {path: _scan(path, "tsv" in entry, key) for path in dict.fromkeys(labels)}
        fast = None not in lines.values()
        if fast and len(set(lines.values())) > 1:
            _check_aligned(*labels, key=key)
    removed, pairs, kept = Counts(), 0, False
    for pairs, src, tgt in _pairs(entry, key):
        if kept and fast:
            break
        if kept and not strict:
            continue                    # some line further on does not decode: find it
        problem = _problem(src, tgt, limits["max_tokens"], limits["max_ratio"])
        if problem is None:
            kept = True
        elif strict:
            raise _test_line_error(problem, labels, pairs, key)
        else:
            removed.add(problem[0], pairs)
    if not pairs:
        raise DataError("empty corpus: the file has no lines", path=labels[0], key=key)
    if not kept:
        reasons = ", ".join(f"{n} {reason}, first: line {line}" for reason, (n, line) in removed.items())
        raise DataError(f"nothing left after cleaning {pairs} pairs ({reasons})", path=labels[0], key=key)


def _pairs(entry: Mapping[str, Any], key: str) -> Iterator[tuple[int, str, str]]:
    """(line number, side, side) of a split in the order its config names the sides, each
    normalised as :func:`read_file` normalises it; a TSV line that is not two fields, or
    sides of different lengths, as the job would report them."""
    if "tsv" in entry:
        path = entry["tsv"]
        for number, text in _text_lines(path, key):
            fields = _normalised(number, text, _CONTROL_TSV)[0].split("\t")
            if len(fields) != 2:
                raise DataError(_fields_message(len(fields)), path=path, line=number, key=key)
            yield number, fields[0], fields[1]
        return
    src_path, tgt_path = entry.values()
    for number, (src, tgt) in enumerate(itertools.zip_longest(_text_lines(src_path, key),
                                                               _text_lines(tgt_path, key)), start=1):
        if src is None or tgt is None:
            _check_aligned(src_path, tgt_path, key)
        yield number, _normalised(number, src[1], _CONTROL)[0], _normalised(number, tgt[1], _CONTROL)[0]


@contextlib.contextmanager
def _reading(path: str, key: str | None = None) -> Iterator[IO[bytes]]:
    """A file opened for bytes, .gz read through; a gzip file cut short or corrupt, or a
    file that cannot be read, one DataError naming it (not a traceback from gzip)."""
    try:
        with open_maybe_gz(path, "rb") as handle:
            yield handle
    except GZIP_ERRORS as err:
        raise DataError(gzip_problem(err), path=path, key=key) from None
    except OSError as err:
        raise DataError(f"cannot read the file: {err.strerror or err}", path=path, key=key) from None


def _byte_lines(path: str, key: str | None = None) -> Iterator[bytes]:
    with _reading(path, key) as handle:
        yield from handle


def _scan(path: str, tsv: bool, key: str) -> int | None:
    """Lines of a file that is UTF-8 throughout (and, ``tsv``, has one tab on every line),
    found in blocks at about the speed of reading it; None when some line is not, for the
    line-by-line reading to name."""
    decoder, lines, tabs, tail = codecs.getincrementaldecoder("utf-8")(), 0, 0, b""
    with _reading(path, key) as handle:
        while block := handle.read(1 << 20):
            try:
                decoder.decode(block)
            except UnicodeDecodeError:
                return None
            data = tail + block
            cut = data.rfind(b"\n") + 1        # whole lines; the rest waits for the next block
            whole, tail = data[:cut], data[cut:]
            lines += whole.count(b"\n")
            if tsv:
                tabs += whole.count(b"\t")
                if _TWO_TABS.search(whole):
                    return None
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return None
    if tail:
        lines += 1
        tabs += tail.count(b"\t")
        if tsv and _TWO_TABS.search(tail):
            return None
    if tsv and tabs != lines:                  # no line has two: so some line has none
        return None
    _LINE_COUNTS[_identity(path)] = lines
    return lines


def _text_lines(path: str, key: str | None = None) -> Iterator[tuple[int, str]]:
    """(1-based number, line with its ending) of a strict UTF-8 file: invalid UTF-8 is a
    DataError naming file and line, and what the file looks like instead."""
    for number, raw in enumerate(_byte_lines(path, key), start=1):
        try:
            yield number, raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise DataError(f"invalid UTF-8 at byte {err.start} ({raw[err.start:err.start + 4]!r}): "
                            f"{_looks_like(path)}", path=path, line=number, key=key) from None


def _looks_like(path: str) -> str:
    """What a file that is not UTF-8 text probably is, from its first bytes."""
    with _reading(path) as handle:
        head = handle.read(8192)
    if head.startswith(b"\x1f\x8b"):
        return "gzip data: name the file *.gz to have it read as such"
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "UTF-16 text: convert it to UTF-8 (iconv -f utf-16 -t utf-8)"
    if b"\x00" in head:
        return "a binary file, not text"
    return "Latin-1 or Windows-1252 text? convert it to UTF-8 (iconv -f latin1 -t utf-8)"


def _fields_message(count: int) -> str:
    return f"{count} tab-separated field{'s' if count != 1 else ''}, expected 2 (source<TAB>target)"


def _test_line_error(problem: tuple[str, int], labels: list[str], line: int, key: str | None = None) -> DataError:
    reason, side = problem
    where = labels[side] if side < 2 else f"{labels[0]} / {labels[1]}"
    return DataError(f"{reason}; a test set is never cleaned: fix or remove this line on both sides",
                     path=where, line=line, key=key)


# -- reading and cleaning --------------------------------------------------------------

class Counts(dict):
    """reason -> [count, first line number]"""

    def add(self, reason: str, line: int) -> None:
        entry = self.setdefault(reason, [0, line])
        entry[0] += 1


def _normalised(number: int, text: str, control: re.Pattern) -> tuple[str, list[str]]:
    """A line without its ending, a leading BOM (line 1) and control characters; and what
    was done to it (read_file counts it)."""
    done = []
    if number == 1 and text.startswith(BOM):
        text = text[1:]
        done.append("UTF-8 BOM removed")
    if text.endswith("\r\n"):
        text = text[:-2]
        done.append("CRLF line endings normalised")
    elif text.endswith("\n"):
        text = text[:-1]
    if control.search(text):
        text = control.sub(" ", text)
        done.append("lines with control characters (replaced by a space)")
    return text, done


def read_file(path: str, counts: Counts, control: re.Pattern = _CONTROL) -> list[str]:
    """Strict UTF-8 lines, a leading BOM and CRLF endings removed, control characters
    replaced by a space (each counted in ``counts`` as ``path: what``)."""
    lines = []
    for number, text in _text_lines(path):
        text, done = _normalised(number, text, control)
        for what in done:
            counts.add(f"{path}: {what}", number)
        lines.append(text)
    return lines


def read_split(corpus: Mapping[str, Any], pair: str, split: str, counts: Counts
               ) -> tuple[list[str], list[str], str, str]:
    """Source and target lines of one split (and the file names for messages)."""
    src_lang, _, tgt_lang = pair.partition("-")
    entry = _entry(corpus, split)
    if "tsv" in entry:
        path = entry["tsv"]
        src, tgt = [], []
        for number, line in enumerate(read_file(path, counts, _CONTROL_TSV), start=1):
            fields = line.split("\t")
            if len(fields) != 2:
                raise DataError(_fields_message(len(fields)), path=path, line=number)
            src.append(fields[0])
            tgt.append(fields[1])
        if tuple(entry["langs"]) != (src_lang, tgt_lang):
            src, tgt = tgt, src
        return src, tgt, f"{path} (column {entry['langs'].index(src_lang) + 1})", \
            f"{path} (column {entry['langs'].index(tgt_lang) + 1})"
    src_path, tgt_path = entry[src_lang], entry[tgt_lang]
    src, tgt = read_file(src_path, counts), read_file(tgt_path, counts)
    if len(src) != len(tgt):
        raise DataError(f"source and target differ in length: {src_path} has {len(src)} lines, "
                        f"{tgt_path} has {len(tgt)}; the files must be line-aligned", key=f"{split}/{pair}")
    return src, tgt, src_path, tgt_path


def _problem(s: str, t: str, max_tokens: int, max_ratio: float) -> tuple[str, int] | None:
    """(reason, side: 0 source, 1 target, 2 both) of a pair clean-corpus-n would remove."""
    ls, lt = len(s.split()), len(t.split())
    if not ls or not lt:
        return "empty or whitespace-only side", 0 if not ls else 1
    if max(ls, lt) > max_tokens:
        return f"more than {max_tokens} tokens", 0 if ls > max_tokens else 1
    if max(ls, lt) / min(ls, lt) > max_ratio:
        return f"length ratio above {max_ratio:g}", 2
    return None


def clean(src: list[str], tgt: list[str], labels: tuple[str, str], *, strict: bool, max_tokens: int,
          max_ratio: float, counts: Counts) -> tuple[list[str], list[str]]:
    """Remove the pairs clean-corpus-n would (counted), or, ``strict``, raise on the first."""
    keep = []
    for i, (s, t) in enumerate(zip(src, tgt)):
        problem = _problem(s, t, max_tokens, max_ratio)
        if problem is None:
            keep.append(i)
            continue
        if strict:
            raise _test_line_error(problem, list(labels), i + 1)
        counts.add(f"removed: {problem[0]}", i + 1)
    return [src[i] for i in keep], [tgt[i] for i in keep]


def prepare(corpus: Mapping[str, Any], pair: str, split: str, *, size: int | None = None, seed: int = 0,
            log=None) -> tuple[list[str], list[str], dict]:
    """Read, check and clean one split of a pair; returns (src, tgt, report)."""
    counts = Counts()
    src, tgt, src_label, tgt_label = read_split(corpus, pair, split, counts)
    if not src:
        raise DataError(f"empty corpus: {src_label} has no lines", key=f"{split}/{pair}")
    options = {**{"max_tokens": MAX_TOKENS, "max_ratio": MAX_RATIO}, **corpus.get("clean", {})}
    strict = split not in (corpus["train"], corpus["valid"])
    read = len(src)
    src, tgt = clean(src, tgt, (src_label, tgt_label), strict=strict, counts=counts, **options)
    if not src:
        raise DataError(f"nothing left after cleaning {read} pairs", path=src_label)
    if size is not None:
        if size > len(src):
            raise DataError(f"cannot subsample {size} pairs: {len(src)} of {read} are left after cleaning",
                            path=src_label, key="size")
        keep = subsample_indices(len(src), size, seed)
        src, tgt = [src[i] for i in keep], [tgt[i] for i in keep]
    removed = {reason[len("removed: "):]: n for reason, (n, _) in counts.items() if reason.startswith("removed: ")}
    report = {
        "split": split, "pair": pair, "cleaning": options if not strict else "none (test set: strict)",
        "files": [{"path": str(p), "sha256": file_digest(p)} for p in input_files(corpus, split)],
        "pairs_read": read, "pairs_removed": sum(removed.values()), "removed": removed,
        "normalised": {reason: n for reason, (n, _) in counts.items() if not reason.startswith("removed: ")},
        "first_line": {reason: line for reason, (_, line) in counts.items()},
        "pairs_written": len(src),
    }
    print(f"headlab prepare-local: {split} {pair}: {summary(report)}", file=log or sys.stderr)
    return src, tgt, report


def summary(report: Mapping[str, Any]) -> str:
    """One line: pairs read, removed (by reason, first line) and normalised."""
    first = report.get("first_line", {})
    removed = ", ".join(f"{n} {reason} (first: line {first.get('removed: ' + reason)})"
                        for reason, n in report["removed"].items())
    text = f"{report['pairs_read']} pairs read, {report['pairs_removed']} removed" + (f" ({removed})" if removed else "")
    normalised = "; ".join(f"{reason}: {n}" for reason, n in report["normalised"].items())
    if normalised:
        text += f"; normalised: {normalised}"
    return text + f"; {report['pairs_written']} written"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="headlab prepare-local", description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus-json", required=True, help="the corpus's config entry as JSON")
    parser.add_argument("--pair", required=True, help="language pair, SRC-TGT")
    parser.add_argument("--split", required=True, help="train, valid or test")
    parser.add_argument("--out-src", required=True, help="source side to write")
    parser.add_argument("--out-tgt", required=True, help="target side to write")
    parser.add_argument("--report", required=True, help="JSON report (sha256, removed and normalised lines)")
    parser.add_argument("--size", type=int, help="keep this many sentence pairs (a seeded sample; default all)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample")
    args = parser.parse_args(argv)

    def go() -> int:
        src, tgt, report = prepare(json.loads(args.corpus_json), args.pair, args.split, size=args.size,
                                   seed=args.seed)
        with atomic_write(args.report) as handle:
            json.dump(report, handle, indent=1)
        write_pair(src, tgt, args.out_src, args.out_tgt)
        return 0

    return run(go, "prepare-local")
