"""prepare: extraction errors (each names file/line, leaves no output), empty lines, subsampling."""
from __future__ import annotations

import gzip

import pytest

from headlab.data import prepare, registry
from headlab.data.prepare import extract, subsample_indices
from headlab.data.registry import Dataset, Part
from headlab.errors import DataError


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """A registered toy corpus (de, en; train and test) whose files the test writes."""
    splits = {split: {lang: (Part(f"{split}.{lang}.gz" if lang == "de" else f"{split}.{lang}"),)
                      for lang in ("de", "en")} for split in ("train", "test")}
    monkeypatch.setitem(registry.DATASETS, "toy", Dataset("toy", "toy", "none", "here", {},
                                                          ("de", "en"), splits))
    raw = tmp_path / "raw"
    raw.mkdir()

    def write(split: str, de: list[str] | bytes, en: list[str] | bytes) -> None:
        for lang, body in (("de", de), ("en", en)):
            data = body if isinstance(body, bytes) else "".join(f"{line}\n" for line in body).encode()
            if lang == "de":
                (raw / f"{split}.de.gz").write_bytes(gzip.compress(data))
            else:
                (raw / f"{split}.en").write_bytes(data)

    return raw, write, tmp_path / "out"


def run_cli(raw, out, split="train", *extra) -> int:
    return prepare.main(["--dataset", "toy", "--pair", "de-en", "--split", split, "--raw", str(raw),
                         "--out-src", str(out / "src"), "--out-tgt", str(out / "tgt"), *extra])


def test_line_counts_differ(toy, capsys):
    raw, write, out = toy
    write("train", ["a", "b", "c"], ["A", "B"])
    assert run_cli(raw, out) == 1
    err = capsys.readouterr().err
    assert err.startswith("headlab prepare: ") and str(raw / "train.de.gz") in err and str(raw / "train.en") in err
    assert "3 lines" in err and "has 2" in err
    assert not out.exists()


def test_empty_corpus(toy):
    raw, write, out = toy
    write("test", [], [])
    with pytest.raises(DataError, match=r"empty corpus: .*test\.de\.gz"):
        extract("toy", "de-en", "test", raw)


def test_invalid_utf8_names_file_and_line(toy, capsys):
    raw, write, out = toy
    write("train", ["gut", "auch gut"], b"fine\nbad \xff byte\n")
    assert run_cli(raw, out) == 1
    err = capsys.readouterr().err
    assert f"{raw / 'train.en'}:2: invalid UTF-8" in err
    assert not out.exists()


def test_missing_file_says_how_to_fetch(toy):
    raw, write, out = toy
    with pytest.raises(DataError, match="missing; get it with: headlab fetch --dataset toy --file train.de.gz"):
        extract("toy", "de-en", "train", raw)


def test_empty_lines_dropped_in_train_kept_in_test(toy):
    raw, write, out = toy
    de, en = ["eins", "", "drei", "", "fünf"], ["one", "two", "", "", "five"]
    write("train", de, en)
    write("test", de, en)
    assert extract("toy", "de-en", "train", raw) == (["eins", "fünf"], ["one", "five"])
    assert extract("toy", "de-en", "train", raw, keep_empty=True) == (de, en)
    assert extract("toy", "de-en", "test", raw) == (de, en)


def test_line_break_characters_are_spaces(toy):
    raw, write, out = toy
    write("test", ["a\u2028b", "c\x0bd"], ["x\x85y", "z"])
    assert extract("toy", "de-en", "test", raw) == (["a b", "c d"], ["x y", "z"])


def test_cli_writes_both_files(toy):
    raw, write, out = toy
    write("train", [f"de {i}" for i in range(10)], [f"en {i}" for i in range(10)])
    assert run_cli(raw, out, "train", "--size", "4", "--seed", "3") == 0
    src = (out / "src").read_text(encoding="utf-8").splitlines()
    tgt = (out / "tgt").read_text(encoding="utf-8").splitlines()
    assert len(src) == 4 and [s.replace("de", "en") for s in src] == tgt


def test_subsample_is_deterministic_nested_and_checked():
    first = subsample_indices(1000, 100, seed=1)
    assert first == subsample_indices(1000, 100, seed=1) == sorted(set(first))
    assert first != subsample_indices(1000, 100, seed=2)
    assert set(subsample_indices(1000, 50, seed=1)) <= set(first)
    assert subsample_indices(20, 20, seed=5) == list(range(20))
    with pytest.raises(DataError, match="cannot subsample 21 pairs from a corpus of 20"):
        subsample_indices(20, 21, seed=0)
    with pytest.raises(DataError, match="must be positive"):
        subsample_indices(20, 0, seed=0)


def test_subsample_pinned_values():
    """The same pairs on every platform and Python version (sha256-ranked, no random module)."""
    assert subsample_indices(10, 3, seed=0) == [4, 7, 9]


def test_real_multi30k(mirror, tmp_path):
    de, en = extract("multi30k", "de-en", "train", mirror / "multi30k", size=1000, seed=7)
    assert len(de) == len(en) == 1000 and (de, en) == extract("multi30k", "de-en", "train",
                                                             mirror / "multi30k", size=1000, seed=7)
    cs, fr = extract("multi30k", "cs-fr", "test_2016_flickr", mirror / "multi30k")
    assert len(cs) == len(fr) == 1000
    assert len(extract("multi30k", "en-de", "test_2017_mscoco", mirror / "multi30k")[0]) == 461


def test_select_lines_sample_ranges_partition_the_corpus():
    """sample:SEED:START:STOP takes the lines of rank START..STOP-1 (subsample_indices' ranking)."""
    lines = list("abcdefghij")
    assert prepare.select_lines(lines, "sample:0:0:3") == ["e", "h", "j"]  # = subsample_indices(10, 3, 0)
    assert prepare.select_lines(lines, "sample:0:3:") == ["a", "b", "c", "d", "f", "g", "i"]
    assert prepare.select_lines(lines, "sample:0:3:3") == []
    parts = [prepare.select_lines(lines, f"sample:5:{a}:{b}") for a, b in ((0, 2), (2, 4), (4, ""))]
    assert sorted(sum(parts, [])) == lines
    assert prepare.select_lines(lines, "every23") == [] and prepare.select_lines(lines, "not23") == lines
    for bad in ("sample:1:2", "sample:x:0:1", "sample:1:3:2", "random:1:0:1", "every7"):
        with pytest.raises(DataError, match="unknown line selection"):
            prepare.select_lines(lines, bad, "f.tsv")
    with pytest.raises(DataError, match=r"f\.tsv: selection 'sample:1:0:11' needs 11 lines, the corpus has 10"):
        prepare.select_lines(lines, "sample:1:0:11", "f.tsv")


def test_clean_pairs_is_moses_clean_corpus_n():
    src = ["a b c", "", "a " * 9, "x", "Geht's gut?"]
    tgt = ["A B C D", "leer", "A", "y " * 5, "Is it ok?"]
    # 3:4 ok; empty side; 9:1 and 1:5 over ratio 1.5; "Geht's gut?" is 4 Moses tokens, "Is it ok?" 4
    assert prepare.clean_pairs(src, tgt, ("de", "en"), "moses:1.5:1:175") == [True, False, False, False, True]
    assert prepare.clean_pairs(src, tgt, ("de", "en"), "moses:9:1:5") == [True, False, False, True, True]
    for bad in ("moses:1.5:1", "perl:1.5:1:175", "moses:x:1:2"):
        with pytest.raises(DataError, match="unknown cleaning rule"):
            prepare.clean_pairs(src, tgt, ("de", "en"), bad)
