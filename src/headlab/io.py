"""Small I/O helpers shared by every module: atomic writes and strict UTF-8 reading.

Every output is written to a temporary file beside its target and renamed into place
only when complete, so an interrupted or failing step never leaves partial output.
"""
from __future__ import annotations

import contextlib
import gzip
import os
import tempfile
from pathlib import Path
from typing import IO, Iterator

from headlab.errors import DataError


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Open a temporary file next to ``path``; on success rename it to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; outputs are ordinary files
    try:
        if "b" in mode:
            with open(tmp, mode) as handle:
                yield handle
        else:
            with open(tmp, mode, encoding=encoding, newline="\n") as handle:
                yield handle
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def open_maybe_gz(path: str | os.PathLike, mode: str = "rb") -> IO:
    path = str(path)
    return gzip.open(path, mode) if path.endswith(".gz") else open(path, mode)


def iter_lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """(1-based number, line with its line ending) of a text file (optionally .gz), strict
    UTF-8: :class:`DataError` naming the file and line of the first invalid byte."""
    with open_maybe_gz(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                yield number, raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise DataError(f"invalid UTF-8 at byte {err.start} ({raw[err.start:err.start + 4]!r})",
                                path=str(path), line=number) from None


def read_lines(path: str | os.PathLike) -> list[str]:
    """Read a text file (optionally .gz) as strict UTF-8 lines without newlines."""
    return [text.rstrip("\r\n") for _, text in iter_lines(path)]
