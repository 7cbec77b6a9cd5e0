"""WMT19 training data: TSV columns, TMX units, zip and tar members, put together by prepare."""
from __future__ import annotations

import gzip
import io
import tarfile
import zipfile

import pytest

from headlab.data import prepare
from headlab.data.bitext import read_tmx, tsv_column
from headlab.errors import DataError

TMX = """<?xml version="1.0" encoding="utf-8"?>
<tmx version="1.4"><header srclang="en" datatype="plaintext"/>
<body>
<tu tuid="1"><tuv xml:lang="en"><seg>Hello  &amp; welcome.</seg></tuv><tuv xml:lang="de"><seg>Hallo und
willkommen.</seg></tuv></tu>
<tu tuid="2"><tuv xml:lang="de"><seg>Nur Deutsch.</seg></tuv></tu>
<tu tuid="3"><prop type="score">0.9</prop><tuv lang="EN"><seg>Old <ph>x</ph>style.</seg></tuv><tuv xml:lang="de-DE"><seg>Alt.</seg></tuv></tu>
</body></tmx>
"""


def test_tsv_column_keeps_every_line_in_place():
    lines = ["Haus\thouse", "nur links", "a\tb\tc", " Baum \t tree "]
    assert list(tsv_column(lines, 0)) == ["Haus", "nur links", "", "Baum"]
    # the one-field and the three-field line give an empty target: the pair is dropped later
    assert list(tsv_column(lines, 1)) == ["house", "", "", "tree"]
    # HindEnCorp: 5 fields (source, alignment type, quality, en, hi)
    five = ["tides\t1-1\t0.9\tyes\tहाँ", "x\t1-1\t0.9\tyes\tहाँ\textra", "x\t1-1\t0.9\tonly en"]
    assert list(tsv_column(five, 3, fields=5)) == ["yes", "", "only en"]
    assert list(tsv_column(five, 4, fields=5)) == ["हाँ", "", ""]


def test_tmx_units_by_language(tmp_path):
    path = tmp_path / "p.tmx.gz"
    path.write_bytes(gzip.compress(TMX.encode()))
    assert list(read_tmx(path, "en")) == ["Hello & welcome.", "", "Old xstyle."]
    assert list(read_tmx(path, "de")) == ["Hallo und willkommen.", "Nur Deutsch.", "Alt."]


def test_malformed_tmx_names_file_and_line(tmp_path):
    path = tmp_path / "bad.tmx"
    path.write_text(TMX.replace("</seg></tuv></tu>\n<tu tuid=\"2\">", "</tuv></tu>\n<tu tuid=\"2\">"),
                    encoding="utf-8")
    with pytest.raises(DataError, match=r"bad\.tmx:5: malformed TMX: mismatched tag"):
        list(read_tmx(path, "en"))


def _wmt19_raw(root, paracrawl=True):
    """A miniature of the WMT19 training files, laid out as `headlab fetch` leaves them."""
    train = root / "train"
    train.mkdir(parents=True)
    (train / "europarl-v9.de-en.tsv.gz").write_bytes(
        gzip.compress("Wiederaufnahme\tResumption\nleer\t\nich\tI\n".encode()))
    (train / "news-commentary-v14.de-en.tsv.gz").write_bytes(gzip.compress("Geld\tMoney\n".encode()))
    with tarfile.open(train / "training-parallel-commoncrawl.tgz", "w:gz") as tar:
        for lang, text in (("de", "Katze\nHund\n"), ("en", "cat\ndog\n"), ("fr", "chat\n")):
            data = text.encode()
            info = tarfile.TarInfo(f"commoncrawl.de-en.{lang}" if lang != "fr" else "commoncrawl.fr-en.fr")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    (train / "wikititles-v1.de-en.tsv.gz").write_bytes(gzip.compress("Berlin\tBerlin\n".encode()))
    with zipfile.ZipFile(train / "rapid2019.de-en.zip", "w") as bundle:
        bundle.writestr("rapid2019.de-en.de", "Kommission\n")
        bundle.writestr("rapid2019.de-en.en", "Commission\n")
    if paracrawl:
        (train / "paracrawl-release3.en-de.bicleaner07.tmx.gz").write_bytes(gzip.compress(TMX.encode()))
    return root


def test_wmt19_train_splits(tmp_path):
    raw, log = _wmt19_raw(tmp_path), io.StringIO()
    src, tgt = prepare.extract("wmt19-de-en", "de-en", "train", raw, log=log)
    assert src == ["Wiederaufnahme", "ich", "Katze", "Hund", "Geld"]  # europarl, commoncrawl, news commentary
    assert tgt == ["Resumption", "I", "cat", "dog", "Money"]
    assert "dropped 1 of 6 pairs" in log.getvalue()
    src, tgt = prepare.extract("wmt19-de-en", "en-de", "train_all", raw)
    assert src[-2:] == ["Berlin", "Commission"] and tgt[-2:] == ["Berlin", "Kommission"]
    src, tgt = prepare.extract("wmt19-de-en", "de-en", "train_paracrawl", raw)
    assert src[-2:] == ["Hallo und willkommen.", "Alt."]  # the unit without English is dropped
    assert tgt[-2:] == ["Hello & welcome.", "Old xstyle."]


def test_zip_member_missing(tmp_path):
    raw = _wmt19_raw(tmp_path)
    with zipfile.ZipFile(raw / "train" / "rapid2019.de-en.zip", "w") as bundle:
        bundle.writestr("rapid2019.de-en.de", "Kommission\n")
    with pytest.raises(DataError, match=r"rapid2019\.de-en\.zip: no member 'rapid2019\.de-en\.en'"):
        prepare.extract("wmt19-de-en", "de-en", "train_all", raw)


def test_missing_paracrawl_says_how_to_fetch_it(tmp_path):
    raw = _wmt19_raw(tmp_path, paracrawl=False)
    with pytest.raises(DataError, match="headlab fetch --dataset wmt19-de-en --file "
                                        "train/paracrawl-release3.en-de.bicleaner07.tmx.gz"):
        prepare.extract("wmt19-de-en", "de-en", "train_paracrawl", raw)
