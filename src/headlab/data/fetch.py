"""Fetch one registered file: from the offline data mirror if it has it, else from upstream.

Either way the bytes are checked against the registry's sha256 before they land at
``<dest_dir>/<rel>`` (``dest_dir`` is the dataset's folder, the same layout as
``<mirror>/<dataset>/``, so ``headlab prepare --raw`` reads either). Every write goes to a
temporary file that is renamed into place only once verified: a failure leaves nothing.

Files without a trustworthy checksum (``sha256=None`` in the registry) are refused unless
``allow_unverified`` is given; the observed sha256 is then printed and recorded beside the
file as ``<file>.sha256`` so a later run can at least detect a change.

    headlab fetch --dataset NAME [--file REL ...] --dest DIR [--mirror DIR] [--offline]
                  [--allow-unverified] [--list]
    headlab fetch --list                 (every dataset's files, checksums and addresses)
"""
from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import os
import shutil
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

from headlab.data import registry
from headlab.data._cli import run
from headlab.data.registry import RemoteFile
from headlab.errors import DataError

REPO_ROOT = Path(__file__).resolve().parents[3]
MIRROR_ENV = "HEADLAB_DATA_MIRROR"
CHUNK = 1 << 20

#: the opener used for downloads; tests replace it (urllib also serves file:// URLs)
urlopen = urllib.request.urlopen


def default_mirror() -> Path | None:
    """``$HEADLAB_DATA_MIRROR``, else ``../shared/data`` beside the checkout (or beside the
    working directory, for a non-editable install run from the repo root) when it exists."""
    if os.environ.get(MIRROR_ENV):
        return Path(os.environ[MIRROR_ENV])
    for root in (REPO_ROOT, Path.cwd()):
        candidate = root.parent / "shared" / "data"
        if candidate.is_dir():
            return candidate
    return None


def file_digest(path: str | os.PathLike, algorithm: str = "sha256") -> str:
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_manifest(mirror: str | os.PathLike) -> dict[str, str]:
    """The mirror's ``MANIFEST.tsv`` (path, size, sha256 per line) as path -> sha256."""
    path = Path(mirror) / "MANIFEST.tsv"
    entries = {}
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            fields = line.rstrip("\n").split("\t")
            if len(fields) != 3:
                raise DataError(f"expected 3 tab-separated fields (path, size, sha256), got {len(fields)}",
                                path=str(path), line=number)
            entries[fields[0]] = fields[2]
    return entries


@contextlib.contextmanager
def _temp_beside(target: Path) -> Iterator[Path]:
    """A temporary path next to ``target``, removed unless the caller renamed it away."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    os.close(fd)
    try:
        yield Path(tmp)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _recorded_sha256(target: Path) -> str | None:
    record = target.with_name(target.name + ".sha256")
    return record.read_text(encoding="utf-8").split()[0] if record.exists() else None


def _is_current(rf: RemoteFile, target: Path) -> bool:
    """Whether ``target`` already holds the registered (or, if unverifiable, recorded) bytes."""
    if not target.exists():
        return False
    if rf.gzip_after_download:  # downloaded and gzipped here: its gzip header differs from the mirror's
        digest = hashlib.sha256()
        with gzip.open(target, "rb") as handle:
            for chunk in iter(lambda: handle.read(CHUNK), b""):
                digest.update(chunk)
        return digest.hexdigest() == rf.upstream_sha256 or file_digest(target) == rf.sha256
    expected = rf.sha256 or _recorded_sha256(target)
    return expected is not None and file_digest(target) == expected


def fetch_file(rf: RemoteFile, dataset: str, dest_dir: str | os.PathLike, *,
               mirror: str | os.PathLike | None = None, allow_download: bool = True,
               allow_unverified: bool = False) -> Path:
    """Put the verified file ``rf`` of ``dataset`` at ``dest_dir/rf.rel`` and return that path."""
    target = Path(dest_dir) / rf.rel
    if _is_current(rf, target):
        return target
    mirror = Path(mirror) if mirror is not None else default_mirror()
    mirror_path = mirror / dataset / rf.rel if mirror is not None else None
    if mirror_path is not None and mirror_path.is_file():
        return _from_mirror(rf, mirror_path, target)
    tried = f"not in the data mirror (tried {mirror_path})" if mirror_path else "no data mirror configured"
    if rf.url is None:
        raise DataError(f"{tried}, and it has no upstream URL (only the mirror provides it)",
                        path=f"{dataset}/{rf.rel}")
    if not allow_download:
        raise DataError(f"{tried}, and downloads are off (offline); upstream URL: {rf.url}",
                        path=f"{dataset}/{rf.rel}")
    if not rf.verifiable_download and not allow_unverified:
        raise DataError(f"{tried}, and no checksum is known for its upstream {rf.url}, so a download "
                        f"could not be verified; pass --allow-unverified (allow_unverified=True) to accept "
                        f"it and record its sha256" + (f". Note: {rf.note}" if rf.note else ""),
                        path=f"{dataset}/{rf.rel}")
    return _download(rf, dataset, target, tried)


def _from_mirror(rf: RemoteFile, mirror_path: Path, target: Path) -> Path:
    actual = file_digest(mirror_path)
    if rf.sha256 is not None and actual != rf.sha256:
        raise DataError(f"sha256 mismatch in the data mirror: expected {rf.sha256}, got {actual}",
                        path=str(mirror_path))
    if target.resolve() == mirror_path.resolve():
        return target
    with _temp_beside(target) as tmp:
        shutil.copyfile(mirror_path, tmp)
        os.replace(tmp, target)
    return target


def _download(rf: RemoteFile, dataset: str, target: Path, tried: str) -> Path:
    name = f"{dataset}/{rf.rel}"
    sha256, md5 = hashlib.sha256(), hashlib.md5()
    with _temp_beside(target) as tmp:
        try:
            with urlopen(rf.url, timeout=60) as response, open(tmp, "wb") as out:
                for chunk in iter(lambda: response.read(CHUNK), b""):
                    sha256.update(chunk)
                    md5.update(chunk)
                    out.write(chunk)
        except (urllib.error.URLError, OSError, ValueError) as err:
            raise DataError(f"{tried}, and downloading {rf.url} failed: {err}", path=name) from None
        observed = sha256.hexdigest()
        expected = rf.upstream_sha256 if rf.gzip_after_download else rf.sha256
        if expected is not None and observed != expected:
            raise DataError(f"sha256 mismatch for the download from {rf.url}: expected {expected}, "
                            f"got {observed}", path=name)
        if expected is None and rf.md5 is not None and md5.hexdigest() != rf.md5:
            raise DataError(f"md5 mismatch for the download from {rf.url}: expected {rf.md5}, "
                            f"got {md5.hexdigest()}", path=name)
        if rf.gzip_after_download:  # the registry's sha256 is of the mirror's gzip: store gzipped too
            with _temp_beside(target) as packed:
                with open(tmp, "rb") as raw, gzip.GzipFile(packed, "wb", mtime=0) as out:
                    shutil.copyfileobj(raw, out, CHUNK)
                os.replace(packed, tmp)
        if expected is None and rf.md5 is None:
            print(f"headlab: warning: {name} downloaded from {rf.url} WITHOUT verification; "
                  f"sha256 {observed}, md5 {md5.hexdigest()} (recorded in {target.name}.sha256)",
                  file=sys.stderr)
            with _temp_beside(target) as record:  # sha256sum format, md5 as a trailing comment
                record.write_text(f"{observed}  {target.name}\n# md5 {md5.hexdigest()}\n", encoding="utf-8")
                os.replace(record, target.with_name(target.name + ".sha256"))
        os.replace(tmp, target)
    return target


def fetch(dataset: str, file: str, dest_dir: str | os.PathLike, mirror: str | os.PathLike | None = None,
          allow_download: bool = True, allow_unverified: bool = False) -> Path:
    """Fetch ``file`` (a path inside the dataset, e.g. ``"translation/de-en.key.txt"``)."""
    return fetch_file(registry.get(dataset).file(file), dataset, dest_dir, mirror=mirror,
                      allow_download=allow_download, allow_unverified=allow_unverified)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="headlab fetch", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", help=f"one of: {', '.join(registry.DATASETS)} (required but with --list)")
    parser.add_argument("--file", nargs="+", metavar="REL", help="files inside the dataset (default: all)")
    parser.add_argument("--dest", help="the dataset's local folder (files land at DEST/REL)")
    parser.add_argument("--mirror", help=f"data mirror root (default: ${MIRROR_ENV} or ../shared/data)")
    parser.add_argument("--offline", action="store_true", help="never download; the mirror must have it")
    parser.add_argument("--allow-unverified", action="store_true",
                        help="accept downloads that have no known checksum (records the observed sha256)")
    parser.add_argument("--list", action="store_true",
                        help="list the dataset's files (without --dataset: every dataset's) and exit; "
                             "'-': no published checksum")
    args = parser.parse_args(argv)
    if not args.dataset and not args.list:
        parser.error("--dataset is required")

    def go() -> int:
        if args.list:
            # one dataset's files, or every dataset's with its name first
            for name in [args.dataset] if args.dataset else list(registry.DATASETS):
                for rf in registry.get(name).files.values():
                    print(("" if args.dataset else f"{name}\t") + f"{rf.rel}\t{rf.sha256 or '-'}\t{rf.url or '(mirror only)'}")
            return 0
        dataset = registry.get(args.dataset)
        if not args.dest:
            parser.error("--dest is required")
        for rel in args.file or list(dataset.files):
            print(fetch(args.dataset, rel, args.dest, mirror=args.mirror, allow_download=not args.offline,
                        allow_unverified=args.allow_unverified))
        return 0

    return run(go, "fetch")
