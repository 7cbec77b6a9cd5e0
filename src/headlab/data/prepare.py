"""Extract one (language pair, split) of a registered corpus into two plain UTF-8 text files.

    headlab prepare --dataset multi30k --pair de-en --split train --raw DIR
                    --out-src F --out-tgt F [--size N --seed S] [--keep-empty]

``--raw`` is the dataset's local folder as ``headlab fetch --dest`` fills it (or the data
mirror's ``<mirror>/<dataset>``, the default). The output has one sentence a line and the
two files are line-aligned.

Checks (each a single :class:`DataError` naming the file/line; no output is written then):
source and target line counts differ; empty corpus; invalid UTF-8; XML segment ids that
differ between the sides.

Decisions:

* Empty lines. In training splits (``train``) pairs with an empty (blank) side are dropped,
  as usual for NMT training, and the number dropped is reported; ``--keep-empty`` keeps them.
  In every other split (dev/test) nothing is ever dropped: the references must stay aligned
  with the official set; one-sided empty lines are only reported.
* Characters that other tools treat as line breaks (\\r, \\v, \\f, U+0085, U+2028, U+2029,
  U+001C-U+001E) are replaced by a space, so that one line stays one sentence everywhere.
* Cleaning. Where the registry gives a split a ``clean`` rule (IWSLT14's ``train_fairseq`` /
  ``valid_fairseq``: Moses clean-corpus-n, ratio 1.5, 1-175 tokens, as fairseq's
  prepare-iwslt14.sh), the rule filters the pairs of the whole parts first, and the parts'
  line selection then applies to what it kept; the number dropped is reported.
* Subsampling (``--size N --seed S``) picks the N pairs whose sha256("S:index") are smallest
  and keeps them in corpus order: deterministic on every platform and Python version, and
  nested (for one seed, the N=1000 sample is contained in the N=2000 sample), which suits
  data-size sweeps. It applies after empty pairs are dropped. N larger than the corpus is
  an error (a sweep asking for more data than exists would silently mislabel its points);
  N equal to the corpus size returns the whole corpus.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import html
import io
import os
import re
import sys
import tarfile
import zipfile
from pathlib import Path

from headlab.data import registry
from headlab.data._cli import run
from headlab.data.bitext import read_tmx, tsv_column
from headlab.data.iwslt import read_segments, read_train_tags
from headlab.data.registry import Part
from headlab.errors import DataError
from headlab.io import ARCHIVE_ERRORS, archive_problem, atomic_write, read_lines

_LINE_BREAKS = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def _decode(raw_lines, where: str) -> list[str]:
    lines = []
    for number, raw in enumerate(raw_lines, start=1):
        try:
            lines.append(raw.decode("utf-8").rstrip("\r\n"))
        except UnicodeDecodeError as err:
            raise DataError(f"invalid UTF-8 at byte {err.start} ({raw[err.start:err.start + 4]!r})",
                            path=where, line=number) from None
    return lines


def _read_member(archive: Path, member: str) -> list[str]:
    """The decoded lines of one member of a tar (any compression) or zip archive."""
    where = f"{archive}!{member}"
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as bundle:
                data = bundle.read(member)
        else:
            with tarfile.open(archive) as tar:
                try:
                    handle = tar.extractfile(member)
                except KeyError:  # archives made with `tar czf x.tgz ./dir` name members ./dir/...
                    handle = tar.extractfile(f"./{member}")
                if handle is None:
                    raise KeyError(member)
                data = handle.read()
    except KeyError:
        raise DataError(f"no member {member!r} in the archive", path=str(archive)) from None
    except ARCHIVE_ERRORS as err:
        raise DataError(f"unreadable archive: {archive_problem(err)}", path=str(archive)) from None
    return _decode(io.BytesIO(data), where)


def read_part(raw_dir: str | os.PathLike, part: Part, dataset: str = "?") -> tuple[list[str], list | None]:
    """The sentences of one part, and its (docid, segid) list for XML parts (else None)."""
    path = Path(raw_dir) / part.rel
    if not path.is_file():
        raise DataError(f"missing; get it with: headlab fetch --dataset {dataset} --file {part.rel} "
                        f"--dest {raw_dir}", path=str(path))
    where = f"{path}!{part.member}" if part.member else str(path)
    ids = None
    if part.fmt == "tmx":  # parsed from the file itself: a TMX segment may span lines
        lines = list(read_tmx(path, part.lang))
    else:
        lines = _read_member(path, part.member) if part.member else read_lines(path)
    if part.fmt == "tsv":
        lines = list(tsv_column(lines, part.column, part.fields))
    elif part.fmt == "xml":
        segments = list(read_segments(lines, where))
        lines, ids = [s.text for s in segments], [(s.docid, s.segid) for s in segments]
    elif part.fmt == "tags":
        lines = list(read_train_tags(lines, where))
    elif part.fmt not in ("text", "tmx"):
        raise DataError(f"unknown format {part.fmt!r}", path=where)
    if part.unescape:
        lines = [html.unescape(line) for line in lines]
    if part.detokenize:
        from headlab.data.preprocess import detokenizer
        detok = detokenizer(part.detokenize)
        lines = [detok(line) for line in lines]
    if part.select:
        lines = select_lines(lines, part.select, where)
    return [_LINE_BREAKS.sub(" ", line) for line in lines], ids


def select_lines(lines: list[str], select: str, where: str = "?") -> list[str]:
    """The lines of one part that a split takes (``Part.select``), in corpus order:

    * ``every23`` / ``not23``: fairseq prepare-iwslt14.sh's valid/train rule, NR % 23 == 0 -> valid;
    * ``sample:SEED:START:STOP``: the lines whose rank, when all lines are ordered by
      sha256("SEED:index") as :func:`subsample_indices` orders them, lies in [START, STOP)
      (STOP empty: to the end). Splits of one corpus that give disjoint rank ranges with the
      same seed are disjoint, cover the corpus together, and are the same on every platform.
    """
    if select == "every23":
        return [line for number, line in enumerate(lines, start=1) if number % 23 == 0]
    if select == "not23":
        return [line for number, line in enumerate(lines, start=1) if number % 23 != 0]
    kind, _, spec = select.partition(":")
    try:
        seed, start, stop = spec.split(":")
        seed, start, stop = int(seed), int(start), int(stop) if stop else len(lines)
    except ValueError:
        kind = "bad"
    if kind != "sample" or not 0 <= start <= stop:
        raise DataError(f"unknown line selection {select!r} (every23, not23 or sample:SEED:START:STOP)",
                        path=where)
    if stop > len(lines):
        raise DataError(f"selection {select!r} needs {stop} lines, the corpus has {len(lines)}", path=where)
    keep = sorted(_rank(len(lines), seed)[start:stop])
    return [lines[i] for i in keep]


def _rank(total: int, seed: int) -> list[int]:
    return sorted(range(total), key=lambda i: hashlib.sha256(f"{seed}:{i}".encode()).digest())


def read_side(raw_dir, parts: tuple[Part, ...], dataset: str) -> tuple[list[str], list | None, str]:
    """The concatenated sentences of one side, its XML ids (if all parts are XML) and a label."""
    lines, ids = [], []
    for part in parts:
        part_lines, part_ids = read_part(raw_dir, part, dataset)
        lines += part_lines
        ids = ids + part_ids if ids is not None and part_ids is not None else None
    label = " + ".join(str(Path(raw_dir) / p.rel) + (f"!{p.member}" if p.member else "") for p in parts)
    return lines, ids, label


def subsample_indices(total: int, size: int, seed: int) -> list[int]:
    """Indices of ``size`` of ``total`` items, chosen by seed, in increasing order (see module doc)."""
    if size <= 0:
        raise DataError(f"subsample size must be positive, got {size}", key="size")
    if size > total:
        raise DataError(f"cannot subsample {size} pairs from a corpus of {total}", key="size")
    return sorted(_rank(total, seed)[:size])


def extract(dataset: str, pair: str, split: str, raw_dir: str | os.PathLike, *, size: int | None = None,
            seed: int = 0, keep_empty: bool = False, log=sys.stderr) -> tuple[list[str], list[str]]:
    """The validated (and optionally subsampled) source and target sentences of a pair/split."""
    data = registry.get(dataset)
    src_parts, tgt_parts = data.pair_parts(pair, split)
    clean = data.clean.get(split)
    if clean:  # the filter sees the whole parts; their select applies to what it keeps
        selects = [_one_select(parts, dataset, split) for parts in (src_parts, tgt_parts)]
        src_parts, tgt_parts = (tuple(dataclasses.replace(p, select=None) for p in parts)
                                for parts in (src_parts, tgt_parts))
    src, src_ids, src_label = read_side(raw_dir, src_parts, dataset)
    tgt, tgt_ids, tgt_label = read_side(raw_dir, tgt_parts, dataset)
    if len(src) != len(tgt):
        raise DataError(f"source and target differ in length: {src_label} has {len(src)} lines, "
                        f"{tgt_label} has {len(tgt)}", key=f"{dataset}/{pair}/{split}")
    if clean:
        keep = clean_pairs(src, tgt, registry.split_pair(pair), clean)
        print(f"headlab prepare: {clean} cleaning dropped {keep.count(False)} of {len(src)} pairs", file=log)
        src, tgt = ([line for line, k in zip(side, keep) if k] for side in (src, tgt))
        src, tgt = (select_lines(side, select, label) if select else side
                    for side, select, label in zip((src, tgt), selects, (src_label, tgt_label)))
        src_ids = tgt_ids = None
    if not src:
        raise DataError(f"empty corpus: {src_label} and {tgt_label} have no lines",
                        key=f"{dataset}/{pair}/{split}")
    if src_ids is not None and tgt_ids is not None and src_ids != tgt_ids:
        first = next(i for i, (a, b) in enumerate(zip(src_ids, tgt_ids)) if a != b)
        raise DataError(f"segment {first + 1} is doc {src_ids[first][0]} seg {src_ids[first][1]} in "
                        f"{src_label} but doc {tgt_ids[first][0]} seg {tgt_ids[first][1]} in {tgt_label}",
                        key=f"{dataset}/{pair}/{split}")
    one_sided = [i for i, (s, t) in enumerate(zip(src, tgt)) if (not s.strip()) != (not t.strip())]
    both = [i for i, (s, t) in enumerate(zip(src, tgt)) if not s.strip() and not t.strip()]
    if split in data.train_splits and not keep_empty:
        drop = set(one_sided) | set(both)
        if drop:
            print(f"headlab prepare: dropped {len(drop)} of {len(src)} pairs with an empty side",
                  file=log)
            src = [s for i, s in enumerate(src) if i not in drop]
            tgt = [t for i, t in enumerate(tgt) if i not in drop]
        if not src:
            raise DataError(f"empty corpus after dropping empty pairs: {src_label}, {tgt_label}",
                            key=f"{dataset}/{pair}/{split}")
    elif one_sided:
        print(f"headlab prepare: warning: {len(one_sided)} pairs have one empty side (kept; first at "
              f"line {one_sided[0] + 1})", file=log)
    if size is not None:
        keep = subsample_indices(len(src), size, seed)
        src, tgt = [src[i] for i in keep], [tgt[i] for i in keep]
    return src, tgt


def _one_select(parts: tuple[Part, ...], dataset: str, split: str) -> str | None:
    selects = {part.select for part in parts}
    if len(selects) > 1:
        raise DataError("a cleaned split needs one line selection for all its parts",
                        key=f"{dataset}/{split}")
    return selects.pop()


def clean_pairs(src: list[str], tgt: list[str], langs: tuple[str, str], rule: str) -> list[bool]:
    """Which pairs a ``Dataset.clean`` rule keeps. ``moses:RATIO:MIN:MAX`` is Moses'
    clean-corpus-n.perl on the Moses-tokenised pair (the text itself stays untokenised): both
    sides have MIN..MAX tokens and neither is more than RATIO times longer than the other."""
    kind, _, spec = rule.partition(":")
    try:
        ratio, low, high = (float(x) for x in spec.split(":"))
    except ValueError:
        kind = "bad"
    if kind != "moses":
        raise DataError(f"unknown cleaning rule {rule!r} (moses:RATIO:MIN:MAX)", key="clean")
    from headlab.data.preprocess import tokenizer_function
    tokenize = [tokenizer_function(lang) for lang in langs]
    keep = []
    for pair in zip(src, tgt):
        a, b = (len(tok(line).split()) for tok, line in zip(tokenize, pair))
        keep.append(low <= a <= high and low <= b <= high and a <= ratio * b and b <= ratio * a)
    return keep


def write_pair(src: list[str], tgt: list[str], out_src, out_tgt) -> None:
    """Write both sides atomically: on any failure neither output file appears."""
    with atomic_write(out_src) as a, atomic_write(out_tgt) as b:
        for line in src:
            a.write(line + "\n")
        for line in tgt:
            b.write(line + "\n")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="headlab prepare", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", required=True, help=f"one of: {', '.join(registry.DATASETS)}")
    parser.add_argument("--pair", required=True, help="SRC-TGT, e.g. de-en")
    parser.add_argument("--split", required=True, help="e.g. train, val, test_2016_flickr, test")
    parser.add_argument("--raw", help="the dataset's local folder (default: <data mirror>/<dataset>)")
    parser.add_argument("--out-src", required=True, help="source side to write")
    parser.add_argument("--out-tgt", required=True, help="target side to write")
    parser.add_argument("--size", type=int, help="subsample to N pairs (data-size sweeps)")
    parser.add_argument("--seed", type=int, default=0, help="subsampling seed (default 0)")
    parser.add_argument("--keep-empty", action="store_true",
                        help="keep training pairs with an empty side (dev/test never drop)")
    args = parser.parse_args(argv)

    def go() -> int:
        raw = args.raw
        if raw is None:
            from headlab.data.fetch import default_mirror
            mirror = default_mirror()
            if mirror is None:
                raise DataError("no --raw given and no data mirror found", key="raw")
            raw = mirror / args.dataset
        src, tgt = extract(args.dataset, args.pair, args.split, raw, size=args.size, seed=args.seed,
                           keep_empty=args.keep_empty)
        write_pair(src, tgt, args.out_src, args.out_tgt)
        print(f"headlab prepare: {len(src)} pairs -> {args.out_src}, {args.out_tgt}", file=sys.stderr)
        return 0

    return run(go, "prepare")
