"""Paper B's corpora (§4.1): WMT17-CS, HindEnCorp 0.5 and TED be-en, read from miniatures of
the upstream files (tests/fixtures/data, packed here into the upstream archives)."""
from __future__ import annotations

import dataclasses
import gzip
import io
import tarfile
from pathlib import Path

import pytest

from headlab.data import prepare, registry
from headlab.errors import DataError

FIXTURES = Path(__file__).parent / "fixtures" / "data"


def _tar(path: Path, members: dict[str, Path]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, source in members.items():
            tar.add(source, arcname=name)


def _wmt17_raw(root: Path) -> Path:
    """The WMT17 de-en archives as `headlab fetch` leaves them, holding the fixture members."""
    fx = FIXTURES / "wmt17"
    for rel, (member, _, _) in registry.WMT17_DE_EN_TRAIN.items():
        _tar(root / rel, {member.format(lang=lang): fx / member.format(lang=lang) for lang in ("de", "en")})
    _tar(root / "sacrebleu" / "wmt14-test-full.tgz",
         {f"test-full/{name}": fx / "test-full" / name for name in
          ("newstest2014-deen-src.de.sgm", "newstest2014-deen-ref.en.sgm")})
    _tar(root / "sacrebleu" / "wmt17-test.tgz",
         {f"test/{name}": fx / "test" / name for name in
          ("newstest2017-deen-src.de.sgm", "newstest2017-deen-ref.en.sgm")})
    return root


def test_wmt17_train_is_the_four_wmt17_corpora(tmp_path):
    log = io.StringIO()
    de, en = prepare.extract("wmt17-de-en", "de-en", "train", _wmt17_raw(tmp_path), log=log)
    assert de == ["Wiederaufnahme der Sitzungsperiode", "Ich erkläre die Sitzung für eröffnet.",  # Europarl v7
                  "Die Katze schläft.",                                                          # Common Crawl
                  "Geld regiert die Welt.",                                                      # NC v12
                  "Die Kommission begrüßt die Einigung."]                                       # Rapid 2016
    assert en == ["Resumption of the session", "I declare the session open.", "The cat is asleep.",
                  "Money rules the world.", "The Commission welcomes the agreement."]
    assert "dropped 1 of 6 pairs" in log.getvalue()  # the Common Crawl pair without German


def test_wmt17_cs_test_concatenates_newstest2014_and_2017(tmp_path):
    raw = _wmt17_raw(tmp_path)
    de, en = prepare.extract("wmt17-de-en", "de-en", "test", raw)
    assert de == ["Gutach: Noch mehr Sicherheit für Fußgänger",
                  "Sie stehen keine 100 Meter voneinander entfernt & blinken.", "Ein Satz aus dem Jahr 2017."]
    assert en == ["Gutach: Increased safety for pedestrians", "They are not even 100 metres apart & flashing.",
                  "A sentence from 2017."]
    # the pieces are splits of their own too, and the test split is exactly their concatenation
    pieces = [prepare.extract("wmt17-de-en", "en-de", name, raw) for name in ("newstest2014", "newstest2017")]
    assert prepare.extract("wmt17-de-en", "en-de", "test", raw) == (
        pieces[0][0] + pieces[1][0], pieces[0][1] + pieces[1][1])


def test_wmt17_test_piece_missing_names_its_archive(tmp_path):
    raw = _wmt17_raw(tmp_path)
    (raw / "sacrebleu" / "wmt17-test.tgz").unlink()
    with pytest.raises(DataError, match="headlab fetch --dataset wmt17-de-en --file sacrebleu/wmt17-test.tgz"):
        prepare.extract("wmt17-de-en", "de-en", "test", raw)


def test_archives_and_gzip_files_cut_short_are_one_line_naming_them(tmp_path):
    """A copy cut short (a download stopped, a disk full) reaches the reader as gzip's EOFError,
    which tarfile lets through: one DataError naming the file, not a traceback."""
    raw = _wmt17_raw(tmp_path / "wmt17")
    archive = raw / "sacrebleu" / "wmt17-test.tgz"
    archive.write_bytes(archive.read_bytes()[:-40])
    with pytest.raises(DataError) as caught:
        prepare.extract("wmt17-de-en", "de-en", "test", raw)
    assert str(caught.value) == f"{archive}: unreadable archive: it ends early (a copy cut short?)"
    archive.write_bytes(b"<html>a proxy's error page</html>\n")
    with pytest.raises(DataError, match=r"wmt17-test.tgz: unreadable archive: no tar archive \(plain, gzip, bzip2 "
                                        r"or xz\): truncated header$"):
        prepare.extract("wmt17-de-en", "de-en", "test", raw)
    hindencorp = _hindencorp_raw(tmp_path / "hindencorp", (FIXTURES / "hindencorp05.plaintext").read_bytes())
    plain = hindencorp / "hindencorp05.plaintext.gz"
    plain.write_bytes(plain.read_bytes()[:-12])
    with pytest.raises(DataError) as caught:
        prepare.extract("hindencorp", "hi-en", "train", hindencorp)
    assert str(caught.value) == (f"{plain}: not a whole gzip file (cut short: Compressed file ended before the "
                                 f"end-of-stream marker was reached); copy or compress it again")


def _hindencorp_raw(root: Path, body: bytes) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "hindencorp05.plaintext.gz").write_bytes(gzip.compress(body))
    return root


def test_hindencorp_columns_are_english_then_hindi(tmp_path):
    raw = _hindencorp_raw(tmp_path, (FIXTURES / "hindencorp05.plaintext").read_bytes())
    whole = {lang: dataclasses.replace(registry.get("hindencorp").parts(lang, "train")[0], select=None)
             for lang in ("hi", "en")}
    assert prepare.read_part(raw, whole["en"])[0] == ["The Prime Minister spoke today.", "house",
                                                      "What, again? Yes: 3.5 km."]
    assert prepare.read_part(raw, whole["hi"])[0] == ["प्रधानमंत्री ने आज भाषण दिया।", "घर",
                                                      "क्या, फिर से? हाँ: 3.5 किमी।"]


def test_hindencorp_random_split_is_seeded_disjoint_and_complete(tmp_path):
    total = 2 * registry.HINDENCORP_HELDOUT + 25
    body = "".join(f"src\t1-1\t0.5\tsentence {i}\tवाक्य {i}\n" for i in range(total)).encode()
    raw = _hindencorp_raw(tmp_path, body)
    splits = {split: prepare.extract("hindencorp", "hi-en", split, raw) for split in ("train", "valid", "test")}
    assert [len(splits[s][0]) for s in ("valid", "test", "train")] == [7000, 7000, 25]
    ids = {}
    for split, (hi, en) in splits.items():
        ids[split] = [int(s.split()[1]) for s in en]
        assert [int(s.split()[1]) for s in hi] == ids[split]     # sides stay aligned
        assert ids[split] == sorted(ids[split])                  # corpus order kept
    assert not set(ids["train"]) & set(ids["valid"]) and not set(ids["valid"]) & set(ids["test"])
    assert sorted(ids["train"] + ids["valid"] + ids["test"]) == list(range(total))
    assert prepare.extract("hindencorp", "en-hi", "train", raw) == (splits["train"][1], splits["train"][0])
    # pinned: the same pairs on every platform (sha256 ranks, seed 1)
    assert ids["train"][:5] == [265, 541, 1197, 1213, 1756]


def test_hindencorp_too_small_for_its_heldout_sets(tmp_path):
    raw = _hindencorp_raw(tmp_path, (FIXTURES / "hindencorp05.plaintext").read_bytes())
    with pytest.raises(DataError, match="needs 7000 lines, the corpus has 3"):
        prepare.extract("hindencorp", "hi-en", "valid", raw)


@pytest.mark.parametrize("prefix", ["", "./"])
def test_ted_be_en_is_detokenised_plain_text(tmp_path, prefix):
    folder = FIXTURES / "qi18" / "datasets" / "be_to_en"
    _tar(tmp_path / "qi18naacl-dataset.tar.gz",
         {f"{prefix}datasets/be_to_en/{path.name}": path for path in sorted(folder.iterdir())})
    assert prepare.extract("ted-be-en", "be-en", "train", tmp_path) == (
        ["дзякуй.", 'гэта "тэст".'], ["thank you.", 'it\'s a "test".'])
    assert prepare.extract("ted-be-en", "en-be", "dev", tmp_path) == (["(applause)"], ["(апладысменты)"])
    assert prepare.extract("ted-be-en", "be-en", "test", tmp_path) == (["так, 100%."], ["yes, 100%."])
