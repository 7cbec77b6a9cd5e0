"""Contrastive/WSD suites as ordinary ``split`` files of a corpus directory.

``headlab suite-split --suite NAME --pair P --root DIR --out-prefix PREFIX`` writes
``PREFIX.src`` and ``PREFIX.tgt`` (raw text, one segment per line) so that the workflow's
own tokenise -> truecase -> BPE rules bring a suite into each model's preprocessing, and
translation/forced scoring treat it like any test set. Suites:

- ``distil_<name>`` (EN->DE, DistilLingEval ``<name>.mt``): source twice, then the correct
  targets followed by the incorrect ones (the single-score-file layout that
  ``headlab contrastive distil --scores`` reads).
- ``mucow`` (the MuCoW WMT19 translation suite): sources and references of the sentences
  whose corpus (key column 2) is in ``--domains`` (default: ted, tatoeba, the two paper A
  Table 6 reports), plus ``PREFIX.key`` with their key lines; an error, writing nothing, when
  the pair has no items from those corpora.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from headlab.errors import ConfigError, DataError
from headlab.eval.mucow import CORPORA
from headlab.io import atomic_write, read_lines
from headlab.options import bounded

DISTIL_PAIRS = {"en-de"}
MUCOW_PAIRS = set(CORPORA)


def _write(path: str, lines: list[str]) -> None:
    with atomic_write(path) as handle:
        handle.writelines(line + "\n" for line in lines)


def distil(root: Path, name: str, pair: str, limit: int | None = None) -> tuple[list[str], list[str]]:
    from headlab.eval.suites import load_distil_lingeval

    if pair not in DISTIL_PAIRS:
        raise ConfigError(f"DistilLingEval is an EN->DE suite; pair {pair!r} cannot score it", key="suite")
    folder = root / "distil-lingeval"
    if not (folder / f"{name}.mt").is_dir():
        known = sorted(path.name[:-3] for path in folder.glob("*.mt") if path.is_dir())
        raise DataError(f"no suite {name!r} here (suites: {', '.join(known)})" if known else
                        f"missing; get it with: headlab fetch --dataset distil-lingeval --dest {folder}",
                        path=str(folder / f"{name}.mt"))
    _, src, good, bad = load_distil_lingeval(folder / f"{name}.mt")
    src, good, bad = src[:limit], good[:limit], bad[:limit]
    return src + src, good + bad


def mucow(root: Path, pair: str, domains: list[str], limit: int | None = None) -> tuple[list[str], list[str], list[str]]:
    if pair not in MUCOW_PAIRS:
        raise ConfigError(f"MuCoW has no translation suite for {pair!r}", key="suite")
    folder = root / "mucow" / "translation"
    paths = [folder / f"{pair}.{kind}.txt" for kind in ("text", "ref", "key")]
    for path in paths:
        if not path.is_file():
            raise DataError(f"missing; get it with: headlab fetch --dataset mucow --dest {root / 'mucow'}",
                            path=str(path))
    src, ref, keys = (read_lines(path) for path in paths)
    corpora = [key.split("\t")[1] for key in keys]
    keep = [i for i, corpus in enumerate(corpora) if corpus in domains][:limit]
    if not keep:        # empty files would be translated and scored as if they were a suite
        raise ConfigError(f"MuCoW's {pair} suite has no items from {', '.join(domains)} "
                          f"(its corpora: {', '.join(sorted(set(corpora)))})", key="domains")
    return [src[i] for i in keep], [ref[i] for i in keep], [keys[i] for i in keep]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="headlab suite-split", description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", required=True, help="distil_<name> or mucow")
    parser.add_argument("--pair", required=True, help="language pair, SRC-TGT")
    parser.add_argument("--root", required=True, help="folder with the fetched datasets (DATA/raw)")
    parser.add_argument("--out-prefix", required=True, help="prefix of the .src/.ref (and key) files written")
    parser.add_argument("--domains", default="ted,tatoeba", help="MuCoW corpora to keep")
    # a negative N would slice from the end: every item but the last N, silently
    parser.add_argument("--limit", type=bounded(int, 1), default=None, help="first N items only (smoke tests)")
    args = parser.parse_args(argv)
    root = Path(args.root)
    if args.suite.startswith("distil_"):
        src, tgt = distil(root, args.suite[len("distil_"):], args.pair, args.limit)
    elif args.suite == "mucow":
        src, tgt, keys = mucow(root, args.pair, args.domains.split(","), args.limit)
        _write(f"{args.out_prefix}.key", keys)
    else:
        raise ConfigError(f"unknown suite {args.suite!r} (distil_<name> or mucow)", key="suite")
    _write(f"{args.out_prefix}.src", src)
    _write(f"{args.out_prefix}.tgt", tgt)
    return 0
