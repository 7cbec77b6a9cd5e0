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

What happens to bad input (the same on every split unless said otherwise):

=============================  ==================================================================
input                          result
=============================  ==================================================================
invalid UTF-8                  error naming file and line
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
=============================  ==================================================================

Removal is Moses ``clean-corpus-n.perl``'s (min 1 token, max ``max_tokens``, ratio
``max_ratio``, 250 and 9 by default) applied to both sides at once, so sides never shift.
A test set is never altered: it is the reference the scores are computed against. Both
outputs and the report are written atomically; on any error nothing is written.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Mapping

from headlab.data._cli import run
from headlab.data.fetch import file_digest
from headlab.data.prepare import subsample_indices, write_pair
from headlab.errors import ConfigError, DataError
from headlab.io import atomic_write, iter_lines, open_maybe_gz

KIND = "local"
MAX_TOKENS, MAX_RATIO = 250, 9.0
_LANG = re.compile(r"^[a-z]{2,3}$")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff]")
_CONTROL_TSV = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\ufeff]")  # TAB separates fields
BOM = "\ufeff"


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


def check_corpus(corpus: Mapping[str, Any], key: str) -> None:
    """ConfigError naming the key of a missing split, a bad language set or a missing file."""
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
        _check_aligned(entry, where)


def _check_aligned(entry: Mapping[str, Any], key: str) -> None:
    """Two files of one split with different line counts: found here, when the DAG is
    built, rather than by the prepare-local job (a TSV's pairs are aligned by construction)."""
    if "tsv" in entry:
        return
    src_path, tgt_path = entry.values()
    lines = {path: _line_count(path) for path in (src_path, tgt_path)}
    if lines[src_path] != lines[tgt_path]:
        raise ConfigError(f"the sides differ in length: {src_path} has {lines[src_path]} lines, {tgt_path} has "
                          f"{lines[tgt_path]}; the files must be line-aligned", key=key)


def _line_count(path: str) -> int:
    """Lines as read_file counts them (a last line without a newline counts)."""
    with open_maybe_gz(path, "rb") as handle:
        return sum(1 for _ in handle)


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


# -- reading and cleaning --------------------------------------------------------------

class Counts(dict):
    """reason -> [count, first line number]"""

    def add(self, reason: str, line: int) -> None:
        entry = self.setdefault(reason, [0, line])
        entry[0] += 1


def read_file(path: str, counts: Counts, control: re.Pattern = _CONTROL) -> list[str]:
    """Strict UTF-8 lines, a leading BOM and CRLF endings removed, control characters
    replaced by a space (each counted in ``counts`` as ``path: what``)."""
    lines = []
    for number, text in iter_lines(path):
        if number == 1 and text.startswith(BOM):
            text = text[1:]
            counts.add(f"{path}: UTF-8 BOM removed", number)
        if text.endswith("\r\n"):
            text = text[:-2]
            counts.add(f"{path}: CRLF line endings normalised", number)
        elif text.endswith("\n"):
            text = text[:-1]
        if control.search(text):
            text = control.sub(" ", text)
            counts.add(f"{path}: lines with control characters (replaced by a space)", number)
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
                raise DataError(f"{len(fields)} tab-separated fields, expected 2 (source<TAB>target)",
                                path=path, line=number)
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
        reason, side = problem
        if strict:
            where = labels[side] if side < 2 else f"{labels[0]} / {labels[1]}"
            raise DataError(f"{reason}; a test set is never cleaned: fix or remove this line on both sides",
                            path=where, line=i + 1)
        counts.add(f"removed: {reason}", i + 1)
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

    return run(go)
