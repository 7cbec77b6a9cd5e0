"""Input checks shared by the evaluation modules."""
from __future__ import annotations

import json
import os
from typing import Any

from headlab.errors import DataError
from headlab.io import atomic_write, read_lines


def read_aligned(**named_paths: str | os.PathLike) -> dict[str, list[str]]:
    """Read several line-aligned files; all must have the same number of lines.

    ``read_aligned(hyp="out.txt", ref="ref.txt")`` -> ``{"hyp": [...], "ref": [...]}``.
    A mismatch raises :class:`DataError` naming every file and its line count.
    """
    texts = {name: read_lines(path) for name, path in named_paths.items()}
    counts = {name: len(lines) for name, lines in texts.items()}
    if len(set(counts.values())) > 1:
        detail = ", ".join(f"{name} {named_paths[name]} has {n}" for name, n in counts.items())
        raise DataError(f"line counts differ: {detail}")
    return texts


def read_scores(path: str | os.PathLike) -> list[float]:
    """One float per line (the output of ``headlab score``: its first column)."""
    values = []
    for number, line in enumerate(read_lines(path), start=1):
        field = line.split("\t", 1)[0].strip()
        try:
            values.append(float(field))
        except ValueError:
            raise DataError(f"not a number: {field!r}", path=str(path), line=number) from None
    return values


def write_json(path: str | os.PathLike, obj: Any) -> None:
    with atomic_write(path) as handle:
        json.dump(obj, handle, indent=2, ensure_ascii=False, sort_keys=False)
        handle.write("\n")


def write_csv(path: str | os.PathLike, frame) -> None:
    """Write a pandas DataFrame atomically (no index)."""
    with atomic_write(path) as handle:
        frame.to_csv(handle, index=False, lineterminator="\n")


def parse_named(values: list[str], what: str, form: str = "NAME=PATH") -> dict[str, str]:
    """``["base=a.txt", "fix=b.txt"]`` -> ``{"base": "a.txt", "fix": "b.txt"}`` (order kept).

    ``NAME::PATH`` is the same where the name holds a ``=`` (workflow system names such
    as ``8L@dec=8L|dhicm``)."""
    out: dict[str, str] = {}
    for value in values:
        name, sep, path = value.partition("::") if "::" in value else value.partition("=")
        if not sep or not name or not path:
            raise DataError(f"{what} must be {form}, got {value!r}")
        if name in out:
            raise DataError(f"{what} name {name!r} given twice")
        out[name] = path
    return out


def parse_tags(values: list[str] | None) -> dict[str, str]:
    """``--tag config=6+1 --tag pair=de-en`` -> constant columns added to every result row,
    so that a table can pivot results of many runs (e.g. Table 1: system x config)."""
    return parse_named(values or [], "--tag", "KEY=VALUE")


def add_tags(frame, tags: dict[str, str]):
    """Insert tag columns at the front of a DataFrame (in place) and return it."""
    for position, (key, value) in enumerate(tags.items()):
        if key in frame.columns:
            raise DataError(f"--tag {key} would overwrite the result column {key!r}")
        frame.insert(position, key, value)
    return frame
