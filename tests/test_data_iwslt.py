"""IWSLT train.tags and XML parsing, on hand-written fixtures and on the real mirror files."""
from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from headlab.data import prepare
from headlab.data.iwslt import read_segments, read_train_tags
from headlab.errors import DataError
from headlab.io import read_lines

FIXTURES = Path(__file__).parent / "fixtures" / "data"


def test_xml_fixture():
    segments = list(read_segments(read_lines(FIXTURES / "IWSLT.TED.tiny.de-en.de.xml")))
    assert [(s.docid, s.segid) for s in segments] == [("7", "1"), ("7", "2"), ("8", "1")]
    assert [s.text for s in segments] == ["Guten Morgen.", 'Forschung & Entwicklung "jetzt".',
                                          "Noch ein Vortrag."]


def test_malformed_seg_names_the_line():
    lines = ['<doc docid="1">', '<seg id="1"> ok </seg>', '<seg id="2"> broken across', "lines </seg>"]
    with pytest.raises(DataError, match=r"^x\.xml:3: malformed <seg>"):
        list(read_segments(lines, "x.xml"))


def test_train_tags_fixture():
    de = list(read_train_tags(read_lines(FIXTURES / "train.tags.de-en.de")))
    en = list(read_train_tags(read_lines(FIXTURES / "train.tags.de-en.en")))
    assert de == ["Erika Muster: Ein kleines Beispiel", "Ein Vortrag über Beispiele.", "Das ist der erste Satz.",
                  "Hier kommt der zweite Satz & mehr.", "Drei.", "Vier Äpfel."]
    assert len(en) == len(de) and en[0] == "Erika Muster: A small example"


XML_COUNTS = {  # <seg> segments per file in the data mirror (both sides equal)
    "iwslt14-de-en/raw/IWSLT16.TED.dev2010.de-en": 887, "iwslt14-de-en/raw/IWSLT16.TED.tst2010.de-en": 1565,
    "iwslt14-de-en/raw/IWSLT16.TED.tst2011.de-en": 1433, "iwslt14-de-en/raw/IWSLT16.TED.tst2012.de-en": 1700,
    "iwslt14-de-en/raw/IWSLT16.TED.tst2013.de-en": 993, "iwslt14-de-en/raw/IWSLT16.TED.tst2014.de-en": 1305,
    "iwslt14-de-en/raw/IWSLT16.TEDX.dev2012.de-en": 1165, "iwslt14-de-en/raw/IWSLT16.TEDX.tst2013.de-en": 1363,
    "iwslt14-de-en/raw/IWSLT16.TEDX.tst2014.de-en": 1414,
    "iwslt15-en-vi/IWSLT15.TED.dev2010.en-vi": 768, "iwslt15-en-vi/IWSLT15.TED.tst2010.en-vi": 1342,
    "iwslt15-en-vi/IWSLT15.TED.tst2011.en-vi": 1435, "iwslt15-en-vi/IWSLT15.TED.tst2012.en-vi": 1553,
    "iwslt15-en-vi/IWSLT15.TED.tst2013.en-vi": 1268,
}


@pytest.mark.parametrize("stem", sorted(XML_COUNTS))
def test_mirror_xml_counts(mirror, stem):
    langs = stem.rsplit(".", 1)[1].split("-")
    sides = [list(read_segments(read_lines(mirror / f"{stem}.{lang}.xml"))) for lang in langs]
    assert [len(side) for side in sides] == [XML_COUNTS[stem]] * 2
    assert [(s.docid, s.segid) for s in sides[0]] == [(s.docid, s.segid) for s in sides[1]]
    assert all(s.text for side in sides for s in side)


def _letters(text: str) -> str:
    return re.sub(r"[\W_]+", "", text.lower())


def test_iwslt14_test_is_fairseqs_test(mirror):
    """Paper A's test set (dev2010+dev2012+tst2010-2012, 6,750) lines up with fairseq's tok/test."""
    de, en = prepare.extract("iwslt14-de-en", "de-en", "test", mirror / "iwslt14-de-en")
    assert len(de) == len(en) == 6750
    tok = read_lines(mirror / "iwslt14-de-en" / "tok" / "test.en")
    same = sum(_letters(raw) == _letters(t.replace("&apos;", "'").replace("&quot;", '"').replace("&amp;", "&"))
               for raw, t in zip(en, tok))
    assert same / len(tok) > 0.98


def test_iwslt15_dev_and_test(mirror):
    dev = prepare.extract("iwslt15-en-vi", "en-vi", "dev", mirror / "iwslt15-en-vi")
    test = prepare.extract("iwslt15-en-vi", "vi-en", "test", mirror / "iwslt15-en-vi")
    assert (len(dev[0]), len(test[0])) == (1553, 1268)


def test_iwslt14_train_and_valid_from_the_archive(tmp_path, monkeypatch):
    """The train.tags files inside de-en.tgz; every 23rd pair is valid, as fairseq does."""
    import tarfile
    body = {lang: ["<url>u</url>", "<talkid>1</talkid>"] + [f"{lang} sentence {i}" for i in range(1, 50)]
            for lang in ("de", "en")}
    for lang, lines in body.items():
        (tmp_path / f"train.tags.de-en.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with tarfile.open(tmp_path / "de-en.tgz", "w:gz") as tar:
        for lang in body:
            tar.add(tmp_path / f"train.tags.de-en.{lang}", arcname=f"de-en/train.tags.de-en.{lang}")
    train = prepare.extract("iwslt14-de-en", "de-en", "train", tmp_path)
    valid = prepare.extract("iwslt14-de-en", "en-de", "valid", tmp_path)
    assert valid == (["en sentence 23", "en sentence 46"], ["de sentence 23", "de sentence 46"])
    assert len(train[0]) == 47 and "de sentence 23" not in train[0] and train[1][0] == "en sentence 1"


def test_wmt_sgm_inside_the_sacrebleu_archive(tmp_path):
    """wmt19-de-en dev = newstest2013, read as <seg> lines from the archive sacreBLEU downloads."""
    import tarfile
    docs = {"de": ["Guten Tag.", "Wie geht &apos;s?"], "en": ["Good day.", "How are you?"]}
    (tmp_path / "test").mkdir()
    for lang, segs in docs.items():
        body = "".join(f'<seg id="{i}">{s}</seg>\n' for i, s in enumerate(segs, start=1))
        (tmp_path / "test" / f"newstest2013-src.{lang}.sgm").write_text(
            f'<srcset setid="newstest2013" srclang="any">\n<doc sysid="ref" docid="d1" genre="news" '
            f'origlang="de">\n{body}</doc>\n</srcset>\n', encoding="utf-8")
    (tmp_path / "sacrebleu").mkdir()
    with tarfile.open(tmp_path / "sacrebleu" / "wmt13-test.tgz", "w:gz") as tar:
        tar.add(tmp_path / "test", arcname="test")
    assert prepare.extract("wmt19-de-en", "de-en", "dev", tmp_path) == (
        ["Guten Tag.", "Wie geht 's?"], ["Good day.", "How are you?"])
    with pytest.raises(DataError, match="no member 'test-full/newstest2014-deen-src.de.sgm'|missing"):
        prepare.extract("wmt19-de-en", "de-en", "test", tmp_path)


def test_iwslt15_stanford_train_is_unescaped(tmp_path):
    (tmp_path / "stanford").mkdir()
    (tmp_path / "stanford" / "train.en").write_text("It &apos;s a &quot; test &quot; &amp; more\n",
                                                    encoding="utf-8")
    (tmp_path / "stanford" / "train.vi").write_text("Đó là một &quot; thử nghiệm &quot;\n", encoding="utf-8")
    assert prepare.extract("iwslt15-en-vi", "en-vi", "train", tmp_path) == (
        ['It \'s a " test " & more'], ['Đó là một " thử nghiệm "'])


def test_iwslt14_fairseq_split_cleans_before_taking_every_23rd(tmp_path):
    """train_fairseq/valid_fairseq: prepare-iwslt14.sh's clean-corpus-n (ratio 1.5, 1-175 Moses
    tokens) first, then NR % 23 on what is left: the standard 160,239 / 7,283 split."""
    import tarfile
    body = {lang: ["<url>u</url>", "<talkid>1</talkid>"] + [f"{lang} sentence {i}" for i in range(1, 51)]
            for lang in ("de", "en")}
    body["en"][2 + 4] = "en sentence 5 , which is " + "much " * 5 + "longer"   # ratio > 1.5: dropped
    body["de"][2 + 9] = body["en"][2 + 9] = " ".join(["wort"] * 176)            # > 175 tokens: dropped
    body["de"][2 + 14] = "Geht's?"  # 3 Moses tokens against 3: kept
    for lang, lines in body.items():
        (tmp_path / f"train.tags.de-en.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with tarfile.open(tmp_path / "de-en.tgz", "w:gz") as tar:
        for lang in body:
            tar.add(tmp_path / f"train.tags.de-en.{lang}", arcname=f"de-en/train.tags.de-en.{lang}")
    log = io.StringIO()
    de, en = prepare.extract("iwslt14-de-en", "de-en", "valid_fairseq", tmp_path, log=log)
    assert en == ["en sentence 25", "en sentence 48"] and de == ["de sentence 25", "de sentence 48"]
    assert "moses:1.5:1:175 cleaning dropped 2 of 50 pairs" in log.getvalue()
    de, en = prepare.extract("iwslt14-de-en", "de-en", "train_fairseq", tmp_path)
    assert len(de) == len(en) == 46 and "de sentence 25" not in de and "Geht's?" in de
    assert not any(line.endswith("longer") for line in en) and "de sentence 5" not in de
    assert prepare.extract("iwslt14-de-en", "de-en", "valid", tmp_path)[1] == [
        "en sentence 23", "en sentence 46"]  # the uncleaned rule
