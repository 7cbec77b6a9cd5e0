"""Paper C's corpora (§5): WMT16 News Commentary v11 en-de / en-cs (OPUS moses zips,
newstest2015 valid, newstest2016 test) and WMT14 en-de, read from miniature archives this
test writes in the upstream layouts."""
from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from headlab.data import prepare, registry
from headlab.errors import DataError


def _sgm(setid: str, lang: str, segs: list[str]) -> str:
    body = "\n".join(f'<seg id="{i}">{s}</seg>' for i, s in enumerate(segs, 1))
    return (f'<srcset setid="{setid}" srclang="any">\n<doc sysid="ref" docid="1" genre="news" origlang="en">\n'
            f"<p>\n{body}\n</p>\n</doc>\n</srcset>\n")


def _tar(path: Path, members: dict[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, text in members.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _nc11_raw(root: Path, other: str) -> Path:
    pair = "-".join(sorted((other, "en")))
    texts = {"en": "Money rules the world.\nThe cat sleeps.\n",
             "de": "Geld regiert die Welt.\nDie Katze schläft.\n",
             "cs": "Peníze vládnou světu.\nKočka spí.\n"}
    (root / "train").mkdir(parents=True)
    with zipfile.ZipFile(root / f"train/news-commentary-v11.{pair}.txt.zip", "w") as z:
        for lang in ("en", other):
            z.writestr(f"News-Commentary.{pair}.{lang}", texts[lang])
        z.writestr("README", "OPUS")
    for year, archive in (("2015", "wmt15-test.tgz"), ("2016", "wmt16-test.tgz")):
        _tar(root / "sacrebleu" / archive, {
            f"test/newstest{year}-en{other}-src.en.sgm": _sgm(f"newstest{year}", "en", [f"News of {year} &amp; more."]),
            f"test/newstest{year}-en{other}-ref.{other}.sgm": _sgm(f"newstest{year}", other, [f"{other} {year}"]),
            # the other direction's files are in the same archive: never read for en->X
            f"test/newstest{year}-{other}en-src.{other}.sgm": _sgm(f"newstest{year}", other, ["wrong"]),
        })
    return root


@pytest.mark.parametrize("other", ["de", "cs"])
def test_nc11_train_and_newstests(tmp_path, other):
    raw = _nc11_raw(tmp_path, other)
    name = f"nc11-en-{other}"
    en, tgt = prepare.extract(name, f"en-{other}", "train", raw)
    assert en == ["Money rules the world.", "The cat sleeps."]
    assert len(tgt) == 2 and tgt[0] in ("Geld regiert die Welt.", "Peníze vládnou světu.")
    assert prepare.extract(name, f"en-{other}", "newstest2015", raw) == (["News of 2015 & more."], [f"{other} 2015"])
    assert prepare.extract(name, f"en-{other}", "newstest2016", raw) == (["News of 2016 & more."], [f"{other} 2016"])


def test_nc11_registry_entries():
    d = registry.get("nc11-en-cs")
    assert d.file("train/news-commentary-v11.cs-en.txt.zip").url == \
        "https://object.pouta.csc.fi/OPUS-News-Commentary/v11/moses/cs-en.txt.zip"
    assert d.file("sacrebleu/wmt16-test.tgz").md5 == "3d809cd0c2c86adb2c67034d15c4e446"     # sacreBLEU's
    assert d.file("sacrebleu/wmt15-test.tgz").md5 == "67e3beca15e69fe3d36de149da0a96df"
    assert not d.file("train/news-commentary-v11.cs-en.txt.zip").verifiable_download    # needs allow_unverified
    assert d.files_for(["newstest2016"]) == ["sacrebleu/wmt16-test.tgz"]
    with pytest.raises(DataError, match="no 'de' side|no language 'de'"):
        d.pair_parts("en-de", "train")


def test_wmt14_en_de(tmp_path):
    for rel, (member, _) in registry.WMT14_DE_EN_TRAIN.items():
        _tar(tmp_path / rel, {member.format(lang="de"): f"Satz aus {Path(rel).name}.\n",
                              member.format(lang="en"): f"Sentence from {Path(rel).name}.\n"})
    _tar(tmp_path / "sacrebleu/wmt13-test.tgz", {
        "test/newstest2013-src.en.sgm": _sgm("newstest2013", "en", ["A dev sentence."]),
        "test/newstest2013-src.de.sgm": _sgm("newstest2013", "de", ["Ein Entwicklungssatz."])})
    _tar(tmp_path / "sacrebleu/wmt14-test-full.tgz", {
        "test-full/newstest2014-deen-src.en.sgm": _sgm("newstest2014", "en", ["A test sentence."]),
        "test-full/newstest2014-deen-ref.de.sgm": _sgm("newstest2014", "de", ["Ein Testsatz."])})
    en, de = prepare.extract("wmt14-en-de", "en-de", "train", tmp_path)
    assert en == ["Sentence from training-parallel-europarl-v7.tgz.", "Sentence from training-parallel-commoncrawl.tgz.",
                  "Sentence from training-parallel-nc-v9.tgz."]
    assert de[2] == "Satz aus training-parallel-nc-v9.tgz."
    assert prepare.extract("wmt14-en-de", "en-de", "newstest2013", tmp_path) == (["A dev sentence."],
                                                                                 ["Ein Entwicklungssatz."])
    assert prepare.extract("wmt14-en-de", "en-de", "newstest2014", tmp_path) == (["A test sentence."], ["Ein Testsatz."])
    d = registry.get("wmt14-en-de")
    assert d.file("train/training-parallel-nc-v9.tgz").url == "https://www.statmt.org/wmt14/training-parallel-nc-v9.tgz"
