"""Small I/O helpers shared by every module: atomic writes and strict UTF-8 reading.

Every output is written to a temporary file beside its target and renamed into place
only when complete, so an interrupted or failing step never leaves partial output.
"""
from __future__ import annotations

import contextlib
import gzip
import os
import re
import tarfile
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import IO, Iterator

from headlab.errors import DataError


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Open a temporary file next to ``path``; on success rename it to ``path``. On failure
    nothing is left: neither the temporary file nor the folders made for it."""
    path = Path(path)
    made = [folder for folder in (path.parent, *path.parent.parents) if not folder.exists()]  # deepest first
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
        for folder in made:
            with contextlib.suppress(OSError):     # not empty: another writer's
                folder.rmdir()
        raise


#: what gzip raises, while reading, on a damaged .gz: cut short (EOFError), no gzip file or a
#: bad header (BadGzipFile), damaged deflate data (zlib.error)
GZIP_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error)


#: what reading a damaged archive raises: tarfile's and zipfile's own errors, and gzip's
#: underneath, which tarfile lets through (a stream cut short, the usual end of an
#: interrupted copy, is gzip's EOFError)
ARCHIVE_ERRORS = (tarfile.TarError, zipfile.BadZipFile, *GZIP_ERRORS)

#: tarfile's header complaints about data that is no tar stream at all
_NO_TAR = ("empty file", "truncated header", "invalid header", "bad checksum")


def archive_problem(err: BaseException) -> str:
    """One line saying why an archive could not be read (``err`` one of :data:`ARCHIVE_ERRORS`).

    ``tarfile.open``'s automatic detection raises one error whose message holds a line per
    compression it tried ("- method gz: ReadError('not a gzip file')", then bz2, xz, tar):
    the line of a compression that recognised the file says what is wrong with it; where
    none did, the file is no tar archive of any kind."""
    if isinstance(err, EOFError) or str(err) == "unexpected end of data":  # gzip's, then tar's own
        return "it ends early (a copy cut short?)"
    if isinstance(err, (gzip.BadGzipFile, zlib.error)):  # past tarfile.open: gzip's and zlib's own
        return f"damaged gz data: {err}"
    lines = str(err).splitlines()
    if len(lines) < 2:
        return f"unreadable ({str(err) or type(err).__name__})"
    tried = re.findall(r"^- method (\w+): \w+\('(.*)'\)$", "\n".join(lines[1:]), flags=re.M)
    if dict(tried).get("tar") == "empty file":
        return "an empty file"
    recognised = [(method, reason) for method, reason in tried
                  if method != "tar" and not reason.startswith("not a") and reason not in _NO_TAR]
    if recognised:
        method, reason = recognised[0]
        return f"damaged {method} data: {reason}"
    compressed = [method for method, reason in tried if method != "tar" and not reason.startswith("not a")]
    if compressed:  # a gzip file of something that is no tar (or an empty one)
        return f"{compressed[0]} data, but no tar archive inside it ({dict(tried)[compressed[0]]})"
    return "no tar archive (plain, gzip, bzip2 or xz): " + dict(tried).get("tar", lines[0])


def read_to_the_end(tar: tarfile.TarFile) -> None:
    """Read what is left of a tar archive's compressed stream, so that its own check runs.

    tarfile stops at the end-of-archive blocks, before gzip's trailer, so gzip never compares
    its CRC-32 with what it unpacked: a byte changed inside a stored (uncompressed) deflate
    block, which zlib cannot see, unpacks without an error. Read to the end, gzip raises
    ``BadGzipFile("CRC check failed ...")`` (one of :data:`ARCHIVE_ERRORS`). bz2 and xz check
    as they go; a plain tar has only its headers' checksums."""
    while tar.fileobj.read(1 << 20):
        pass


def open_maybe_gz(path: str | os.PathLike, mode: str = "rb") -> IO:
    path = str(path)
    return gzip.open(path, mode) if path.endswith(".gz") else open(path, mode)


def gzip_problem(err: BaseException) -> str:
    """One line for one of :data:`GZIP_ERRORS` (not gzip's traceback)."""
    if isinstance(err, EOFError):
        return f"not a whole gzip file (cut short: {err}); copy or compress it again"
    return f"not a readable gzip file ({err})"


def iter_lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """(1-based number, line with its line ending) of a text file (optionally .gz), strict
    UTF-8: :class:`DataError` naming the file and line of the first invalid byte, or the
    file where a .gz is damaged."""
    try:
        with open_maybe_gz(path, "rb") as handle:
            for number, raw in enumerate(handle, start=1):
                try:
                    yield number, raw.decode("utf-8")
                except UnicodeDecodeError as err:
                    raise DataError(f"invalid UTF-8 at byte {err.start} ({raw[err.start:err.start + 4]!r})",
                                    path=str(path), line=number) from None
    except GZIP_ERRORS as err:
        raise DataError(gzip_problem(err), path=str(path)) from None


def read_lines(path: str | os.PathLike) -> list[str]:
    """Read a text file (optionally .gz) as strict UTF-8 lines without newlines."""
    return [text.rstrip("\r\n") for _, text in iter_lines(path)]
