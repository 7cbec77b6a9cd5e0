"""fetch: mirror first (sha256-verified), else upstream download (file:// here), errors, CLI."""
from __future__ import annotations

import gzip
import hashlib
import io
import urllib.error
from pathlib import Path

import pytest

from headlab.data import fetch as fetch_mod
from headlab.data import registry
from headlab.data.fetch import fetch, read_manifest
from headlab.data.registry import Dataset, RemoteFile
from headlab.errors import DataError


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


GOOD = "eins\nzwei\n".encode()
PLAIN = "one\ntwo\n".encode()


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """A registered toy dataset, a temp mirror holding some of its files, and an 'upstream' folder."""
    mirror, upstream = tmp_path / "mirror", tmp_path / "upstream"
    (mirror / "toy" / "sub").mkdir(parents=True)
    upstream.mkdir()
    (mirror / "toy" / "sub" / "good.txt").write_bytes(GOOD)
    (mirror / "toy" / "bad.txt").write_bytes(b"tampered\n")
    (mirror / "MANIFEST.tsv").write_text(f"toy/sub/good.txt\t{len(GOOD)}\t{sha(GOOD)}\n"
                                         f"toy/bad.txt\t9\t{sha(b'original')}\n", encoding="utf-8")
    (upstream / "remote.txt").write_bytes(PLAIN)
    (upstream / "plain.txt").write_bytes(PLAIN)
    url = (upstream / "remote.txt").as_uri()
    files = [
        RemoteFile("sub/good.txt", "https://example.invalid/good.txt", sha(GOOD)),
        RemoteFile("bad.txt", "https://example.invalid/bad.txt", sha(b"original")),
        RemoteFile("remote.txt", url, sha(PLAIN)),
        RemoteFile("wrong.txt", url, sha(b"something else")),
        RemoteFile("unverified.txt", url, None, note="no published checksum"),
        RemoteFile("md5.txt", url, None, md5=hashlib.md5(PLAIN).hexdigest()),
        RemoteFile("packed.txt.gz", (upstream / "plain.txt").as_uri(), "0" * 64, upstream_sha256=sha(PLAIN)),
        RemoteFile("mirror-only.txt", None, sha(b"x")),
    ]
    monkeypatch.setitem(registry.DATASETS, "toy", Dataset("toy", "toy", "none", "here",
                                                          {f.rel: f for f in files}))
    monkeypatch.delenv(fetch_mod.MIRROR_ENV, raising=False)
    return mirror, tmp_path / "dest"


def leftovers(dest: Path) -> list[str]:
    return sorted(p.name for p in dest.rglob("*")) if dest.exists() else []


def test_fake_manifest(toy):
    mirror, _ = toy
    assert read_manifest(mirror) == {"toy/sub/good.txt": sha(GOOD), "toy/bad.txt": sha(b"original")}


def test_from_mirror(toy):
    mirror, dest = toy
    path = fetch("toy", "sub/good.txt", dest, mirror=mirror, allow_download=False)
    assert path == dest / "sub" / "good.txt" and path.read_bytes() == GOOD
    assert fetch("toy", "sub/good.txt", dest, mirror=None, allow_download=False) == path  # already there


def test_mirror_checksum_mismatch(toy):
    mirror, dest = toy
    with pytest.raises(DataError) as err:
        fetch("toy", "bad.txt", dest, mirror=mirror)
    message = str(err.value)
    assert str(mirror / "toy" / "bad.txt") in message and sha(b"original") in message
    assert sha(b"tampered\n") in message and "mismatch" in message
    assert leftovers(dest) == []


def test_missing_and_offline(toy):
    mirror, dest = toy
    with pytest.raises(DataError) as err:
        fetch("toy", "remote.txt", dest, mirror=mirror, allow_download=False)
    message = str(err.value)
    assert "toy/remote.txt" in message and str(mirror / "toy" / "remote.txt") in message
    assert "remote.txt" in message and (toy[0].parent / "upstream" / "remote.txt").as_uri() in message
    assert leftovers(dest) == []


def test_no_network(toy, monkeypatch):
    mirror, dest = toy

    def offline(url, timeout=None):
        raise urllib.error.URLError("Temporary failure in name resolution")

    monkeypatch.setattr(fetch_mod, "urlopen", offline)
    with pytest.raises(DataError, match=r"toy/remote\.txt: not in the data mirror \(tried .*mirror/toy/remote"
                                        r"\.txt\), and downloading file://.* failed: .*name resolution"):
        fetch("toy", "remote.txt", dest, mirror=mirror)
    assert leftovers(dest) == []


def test_download_file_url(toy):
    mirror, dest = toy
    assert fetch("toy", "remote.txt", dest, mirror=mirror).read_bytes() == PLAIN
    assert fetch("toy", "md5.txt", dest, mirror=mirror).read_bytes() == PLAIN
    packed = fetch("toy", "packed.txt.gz", dest, mirror=mirror)
    assert gzip.decompress(packed.read_bytes()) == PLAIN
    assert fetch("toy", "packed.txt.gz", dest, mirror=mirror, allow_download=False) == packed  # current


def test_download_checksum_mismatch_leaves_nothing(toy):
    mirror, dest = toy
    with pytest.raises(DataError, match=f"sha256 mismatch.*expected {sha(b'something else')}, got {sha(PLAIN)}"):
        fetch("toy", "wrong.txt", dest, mirror=mirror)
    assert leftovers(dest) == []


def test_unverifiable_download(toy, capsys):
    mirror, dest = toy
    with pytest.raises(DataError, match="no checksum is known.*--allow-unverified.*no published checksum"):
        fetch("toy", "unverified.txt", dest, mirror=mirror)
    assert leftovers(dest) == []
    path = fetch("toy", "unverified.txt", dest, mirror=mirror, allow_unverified=True)
    assert path.read_bytes() == PLAIN
    assert (dest / "unverified.txt.sha256").read_text().split()[0] == sha(PLAIN)
    assert sha(PLAIN) in capsys.readouterr().err
    # recorded now: a later offline run accepts the same bytes
    assert fetch("toy", "unverified.txt", dest, mirror=mirror, allow_download=False) == path


def test_mirror_only_file(toy):
    mirror, dest = toy
    with pytest.raises(DataError, match="no upstream URL"):
        fetch("toy", "mirror-only.txt", dest, mirror=mirror)


def test_cli(toy, capsys):
    mirror, dest = toy
    assert fetch_mod.main(["--dataset", "toy", "--file", "sub/good.txt", "--dest", str(dest),
                           "--mirror", str(mirror), "--offline"]) == 0
    assert capsys.readouterr().out.strip() == str(dest / "sub" / "good.txt")
    assert fetch_mod.main(["--dataset", "toy", "--file", "bad.txt", "--dest", str(dest),
                           "--mirror", str(mirror)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("headlab fetch: ") and err.count("\n") == 1 and "mismatch" in err
    assert fetch_mod.main(["--dataset", "toy", "--list"]) == 0
    assert "mirror-only.txt" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        fetch_mod.main(["--dest", str(dest)])            # --dataset: required but with --list
    assert "--dataset is required" in capsys.readouterr().err


def test_fetch_list_without_a_dataset_lists_every_datasets_files(capsys):
    """`headlab fetch --list` (config/paper.yaml's pointer to the downloads that publish no
    checksum): one line per file of every registered dataset, its name first, '-' where
    upstream publishes no checksum."""
    from headlab.data import registry

    assert fetch_mod.main(["--list"]) == 0
    lines = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert {fields[0] for fields in lines} == set(registry.DATASETS)
    assert len(lines) == sum(len(registry.get(name).files) for name in registry.DATASETS)
    unverified = [fields for fields in lines if fields[0] == "wmt19-de-en" and fields[2] == "-"]
    assert unverified and all(fields[3].startswith("http") for fields in unverified)


def test_real_mirror(mirror, tmp_path):
    path = fetch("mucow", "translation/de-en.key.txt", tmp_path, mirror=mirror, allow_download=False)
    assert path == tmp_path / "translation" / "de-en.key.txt"
    assert sum(1 for _ in path.open(encoding="utf-8")) == 4268
    fetch("multi30k", "val.de.gz", tmp_path, mirror=mirror, allow_download=False)


def test_paper_b_downloads_are_checked(tmp_path, monkeypatch):
    """sacreBLEU's md5 guards the WMT17 test archive; HindEnCorp has no checksum: refused unless allowed."""
    served = {}

    def fake_urlopen(url, timeout=None):
        served["url"] = url
        return io.BytesIO(b"not the archive")

    monkeypatch.setattr(fetch_mod, "urlopen", fake_urlopen)
    with pytest.raises(DataError, match="md5 mismatch.*expected 86a1724c276004aa25455ae2a04cef26"):
        fetch("wmt17-de-en", "sacrebleu/wmt17-test.tgz", tmp_path, mirror=tmp_path / "no-mirror")
    assert served["url"] == "https://data.statmt.org/wmt17/translation-task/test.tgz"
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []  # nothing half-downloaded
    with pytest.raises(DataError, match="no checksum is known.*--allow-unverified"):
        fetch("hindencorp", "hindencorp05.plaintext.gz", tmp_path, mirror=tmp_path / "no-mirror")
    path = fetch("hindencorp", "hindencorp05.plaintext.gz", tmp_path, mirror=tmp_path / "no-mirror",
                 allow_unverified=True)
    assert path.read_bytes() == b"not the archive" and (tmp_path / "hindencorp05.plaintext.gz.sha256").exists()
