"""Own corpora (dataset: local): every kind of bad input gives one error naming file and
line, or a documented cleaning step whose count is reported; sides never shift."""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from headlab.data.local import main, prepare, split_config
from headlab.errors import ConfigError, DataError, HeadlabError

GOOD = [(f"das ist satz {i}", f"this is sentence {i}") for i in range(1, 21)]


def _corpus(tmp_path, train=GOOD, test=GOOD[:5], raw=None, **extra):
    """A local corpus with plain train/valid/test files (``raw``: split -> (src bytes, tgt bytes))."""
    files = {}
    for split, pairs in (("train", train), ("valid", GOOD[:5]), ("test", test)):
        data = (raw or {}).get(split) or tuple(("\n".join(p[i] for p in pairs) + "\n").encode() for i in (0, 1))
        files[split] = {}
        for lang, content in zip(("de", "en"), data):
            path = tmp_path / f"{split}.{lang}"
            path.write_bytes(content)
            files[split][lang] = str(path)
    return {"dataset": "local", "files": files, "train": "train", "valid": "valid", "tests": ["test"],
            "bpe_merges": 10, **extra}


def _lines(pairs):
    return [p[0] for p in pairs], [p[1] for p in pairs]


def test_clean_files_pass_unchanged_in_both_directions_and_gzipped(tmp_path):
    corpus = _corpus(tmp_path)
    src, tgt, report = prepare(corpus, "de-en", "train")
    assert (src, tgt) == _lines(GOOD) and report["pairs_removed"] == 0 and report["normalised"] == {}
    src, tgt, _ = prepare(corpus, "en-de", "train")
    assert (tgt, src) == _lines(GOOD)
    for lang in ("de", "en"):
        plain = tmp_path / f"train.{lang}"
        (tmp_path / f"train.{lang}.gz").write_bytes(gzip.compress(plain.read_bytes()))
        corpus["files"]["train"][lang] = str(plain) + ".gz"
    src, tgt, report = prepare(corpus, "de-en", "train")
    assert (src, tgt) == _lines(GOOD)
    assert report["files"][0]["path"].endswith("train.de.gz") and len(report["files"][0]["sha256"]) == 64


def test_tsv_variant_reads_columns_by_language(tmp_path):
    tsv = tmp_path / "train.tsv"
    tsv.write_text("".join(f"{s}\t{t}\n" for s, t in GOOD))
    corpus = _corpus(tmp_path)
    corpus["files"]["train"] = {"tsv": str(tsv), "langs": ["de", "en"]}
    assert prepare(corpus, "de-en", "train")[:2] == _lines(GOOD)
    src, tgt, _ = prepare(corpus, "en-de", "train")
    assert (tgt, src) == _lines(GOOD)


def test_tsv_line_without_exactly_one_tab_names_file_and_line(tmp_path):
    tsv = tmp_path / "train.tsv"
    tsv.write_text("a\tb\nc\td\te\nf\tg\n")
    corpus = _corpus(tmp_path)
    corpus["files"]["train"] = {"tsv": str(tsv), "langs": ["de", "en"]}
    with pytest.raises(DataError, match=rf"{tsv}:2: 3 tab-separated fields, expected 2"):
        prepare(corpus, "de-en", "train")


def test_crlf_and_bom_are_normalised_and_counted(tmp_path):
    src = "\ufeff" + "".join(s + "\r\n" for s, _ in GOOD)
    tgt = "".join(t + "\n" for _, t in GOOD)
    corpus = _corpus(tmp_path, raw={"train": (src.encode(), tgt.encode())})
    out_src, out_tgt, report = prepare(corpus, "de-en", "train")
    assert (out_src, out_tgt) == _lines(GOOD)
    path = corpus["files"]["train"]["de"]
    assert report["normalised"] == {f"{path}: UTF-8 BOM removed": 1, f"{path}: CRLF line endings normalised": 20}


def test_control_characters_become_spaces_and_are_counted(tmp_path):
    pairs = list(GOOD)
    pairs[3] = ("das\x07 ist\x1b satz\u2028vier", "this is\rfour")
    corpus = _corpus(tmp_path, train=pairs)
    src, tgt, report = prepare(corpus, "de-en", "train")
    assert src[3] == "das  ist  satz vier" and tgt[3] == "this is four" and len(src) == 20
    assert report["first_line"][f"{corpus['files']['train']['en']}: lines with control characters (replaced by a space)"] == 4


@pytest.mark.parametrize("bad, reason", [
    (("   ", "only the target"), "empty or whitespace-only side"),
    (("nur die quelle", ""), "empty or whitespace-only side"),
    (("wort " * 5000, "word " * 5000), "more than 250 tokens"),
    (("ein", "a very long translation of one single short word here"), "length ratio above 9"),
])
def test_train_pairs_clean_corpus_n_would_drop_are_removed_and_counted(tmp_path, bad, reason):
    pairs = list(GOOD)
    pairs.insert(7, bad)
    corpus = _corpus(tmp_path, train=pairs)
    src, tgt, report = prepare(corpus, "de-en", "train")
    assert (src, tgt) == _lines(GOOD)  # the pair went, both sides: nothing shifted
    assert report["removed"] == {reason: 1} and report["first_line"][f"removed: {reason}"] == 8
    assert report["pairs_read"] == 21 and report["pairs_written"] == 20


@pytest.mark.parametrize("bad, side, reason", [
    (("   ", "only the target"), "de", "empty or whitespace-only side"),
    (("ein wort", "word " * 5000), "en", "more than 250 tokens"),
])
def test_test_sets_are_never_cleaned_a_bad_line_is_an_error(tmp_path, bad, side, reason):
    corpus = _corpus(tmp_path, test=[GOOD[0], bad])
    with pytest.raises(DataError, match=rf"{corpus['files']['test'][side]}:2: {reason}; a test set is never cleaned"):
        prepare(corpus, "de-en", "test")


def test_limits_come_from_the_config(tmp_path):
    pairs = list(GOOD) + [("a b c d e f", "a")]
    corpus = _corpus(tmp_path, train=pairs, clean={"max_tokens": 5, "max_ratio": 3})
    _, _, report = prepare(corpus, "de-en", "train")
    assert report["removed"] == {"more than 5 tokens": 1} and report["cleaning"] == {"max_tokens": 5, "max_ratio": 3}


def test_invalid_utf8_names_file_and_line(tmp_path):
    src = "".join(s + "\n" for s, _ in GOOD[:3]).encode() + b"caf\xe9\n"
    tgt = "".join(t + "\n" for _, t in GOOD[:4]).encode()
    corpus = _corpus(tmp_path, raw={"train": (src, tgt)})
    with pytest.raises(DataError, match=rf"{corpus['files']['train']['de']}:4: invalid UTF-8 at byte 3"):
        prepare(corpus, "de-en", "train")


def test_line_counts_that_differ_name_both_files(tmp_path):
    corpus = _corpus(tmp_path, raw={"train": (b"a\nb\nc\n", b"a\nb\n")})
    with pytest.raises(DataError, match=r"train\.de has 3 lines, .*train\.en has 2"):
        prepare(corpus, "de-en", "train")


def test_subsample_after_cleaning_and_too_large_a_sample(tmp_path):
    pairs = list(GOOD) + [("", "x")]
    corpus = _corpus(tmp_path, train=pairs)
    src, tgt, report = prepare(corpus, "de-en", "train", size=5, seed=1)
    assert len(src) == len(tgt) == 5 and all(s.split()[-1] == t.split()[-1] for s, t in zip(src, tgt))
    with pytest.raises(DataError, match="cannot subsample 21 pairs: 20 of 21 are left after cleaning"):
        prepare(corpus, "de-en", "train", size=21, seed=1)


def test_cli_writes_outputs_and_report_or_nothing(tmp_path, capsys):
    corpus = _corpus(tmp_path, train=list(GOOD) + [("", "x")])
    out = tmp_path / "out"
    args = ["--corpus-json", json.dumps(split_config(corpus, "train")), "--pair", "de-en", "--split", "train",
            "--out-src", str(out / "a.src"), "--out-tgt", str(out / "a.tgt"), "--report", str(out / "a.json")]
    assert main(args) == 0
    assert len((out / "a.src").read_text().splitlines()) == 20
    assert json.loads((out / "a.json").read_text())["removed"] == {"empty or whitespace-only side": 1}
    assert "21 pairs read, 1 removed (1 empty or whitespace-only side (first: line 21))" in capsys.readouterr().err
    (tmp_path / "bad").mkdir()
    bad = _corpus(tmp_path / "bad", raw={"train": (b"a\n", b"a\nb\n")})
    out2 = tmp_path / "out2"
    args = ["--corpus-json", json.dumps(bad), "--pair", "de-en", "--split", "train",
            "--out-src", str(out2 / "a.src"), "--out-tgt", str(out2 / "a.tgt"), "--report", str(out2 / "a.json")]
    assert main(args) == 1
    assert not out2.exists() or not list(out2.iterdir())


def test_config_check_of_local_corpora(tmp_path):
    from headlab.data.local import check_corpus, check_pair

    corpus = _corpus(tmp_path)
    check_corpus(corpus, "corpora.mine")
    check_pair(corpus, "en-de", "k")
    with pytest.raises(ConfigError, match=r"\[k\] pair 'de-fr' is not in this local corpus: its files are in de and en"):
        check_pair(corpus, "de-fr", "k")
    corpus["files"]["valid"]["en"] = str(tmp_path / "missing.en")
    with pytest.raises(ConfigError, match=r"\[corpora.mine.files.valid\] no such file: .*missing.en"):
        check_corpus(corpus, "corpora.mine")
    corpus["tests"] = ["tset"]
    with pytest.raises(ConfigError, match=r"\[corpora.mine.tests\[0\]\] split 'tset' has no files"):
        check_corpus(corpus, "corpora.mine")


def test_sides_of_different_lengths_are_a_config_error_naming_key_and_files(tmp_path):
    from headlab.data.local import check_corpus

    corpus = _corpus(tmp_path)
    Path(corpus["files"]["train"]["en"]).write_text("one line too many\n" * 3, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^\[corpora.mine.files.train\] the sides differ in length: .*train.de has "
                                          r"\d+ lines, .*train.en has 3; the files must be line-aligned"):
        check_corpus(corpus, "corpora.mine")


# -- what a prepare-local job would fail on, found by the config check before any job --------

def _gz(path: Path, content: bytes) -> str:
    gz_path = path.with_name(path.name + ".gz")
    gz_path.write_bytes(gzip.compress(content))
    return str(gz_path)


def _tsv_test(tmp_path, corpus, text: str) -> str:
    tsv = tmp_path / "test.tsv"
    tsv.write_text(text, encoding="utf-8")
    corpus["files"]["test"] = {"tsv": str(tsv), "langs": ["de", "en"]}
    return str(tsv)


def _latin1(tmp_path, corpus):
    Path(corpus["files"]["train"]["de"]).write_bytes("das ist gut\nStraße café\n".encode("latin-1") * 10)
    return corpus["files"]["train"]["de"], r":2: \[corpora.mine.files.train\] invalid UTF-8 at byte 4 .*Latin-1"


def _binary(tmp_path, corpus):
    Path(corpus["files"]["valid"]["en"]).write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    return corpus["files"]["valid"]["en"], r":1: \[corpora.mine.files.valid\] invalid UTF-8 at byte 0 .*binary"


def _invalid_utf8(tmp_path, corpus):
    Path(corpus["files"]["train"]["en"]).write_bytes(b"one\ntwo\nthree\ncaf\xe9\n" * 5)
    return corpus["files"]["train"]["en"], r":4: \[corpora.mine.files.train\] invalid UTF-8 at byte 3"


def _empty_train(tmp_path, corpus):
    for lang in ("de", "en"):
        Path(corpus["files"]["train"][lang]).write_bytes(b"")
    return corpus["files"]["train"]["de"], r": \[corpora.mine.files.train\] empty corpus: the file has no lines"


def _nothing_left(tmp_path, corpus):
    Path(corpus["files"]["train"]["de"]).write_text(" \n" * 20)
    return corpus["files"]["train"]["de"], (r": \[corpora.mine.files.train\] nothing left after cleaning 20 pairs "
                                            r"\(20 empty or whitespace-only side, first: line 1\)")


def _tsv_without_tab(tmp_path, corpus):
    return _tsv_test(tmp_path, corpus, "a\tb\nno tab here\n"), (
        r":2: \[corpora.mine.files.test\] 1 tab-separated field, expected 2 \(source<TAB>target\)")


def _tsv_two_tabs(tmp_path, corpus):
    return _tsv_test(tmp_path, corpus, "a\tb\nc\td\ne\t\tf\n"), (
        r":3: \[corpora.mine.files.test\] 3 tab-separated fields, expected 2")


def _tsv_three_columns(tmp_path, corpus):
    return _tsv_test(tmp_path, corpus, "a\tb\tc\n"), r":1: \[corpora.mine.files.test\] 3 tab-separated fields"


def _empty_test_side(tmp_path, corpus):
    Path(corpus["files"]["test"]["en"]).write_text("one\n\nthree\nfour\nfive\n")
    return corpus["files"]["test"]["en"], (r":2: \[corpora.mine.files.test\] empty or whitespace-only side; "
                                           r"a test set is never cleaned")


def _truncated_gz(tmp_path, corpus):
    whole = gzip.compress("".join(f"das ist satz {i}\n" for i in range(5000)).encode())
    gz_path = tmp_path / "train.de.gz"
    gz_path.write_bytes(whole[:len(whole) // 2])
    corpus["files"]["train"]["de"] = str(gz_path)
    return str(gz_path), r": \[corpora.mine.files.train\] not a whole gzip file \(cut short"


def _gzip_without_gz_name(tmp_path, corpus):
    Path(corpus["files"]["train"]["de"]).write_bytes(gzip.compress(b"das ist gut\n" * 20))
    return corpus["files"]["train"]["de"], r":1: \[corpora.mine.files.train\] invalid UTF-8 at byte 1 .*gzip data"


DEFECTS = [_invalid_utf8, _latin1, _binary, _empty_train, _nothing_left, _tsv_without_tab, _tsv_two_tabs,
           _tsv_three_columns, _empty_test_side, _truncated_gz, _gzip_without_gz_name]


@pytest.mark.parametrize("defect", DEFECTS, ids=[d.__name__.strip("_") for d in DEFECTS])
def test_the_config_check_finds_what_a_prepare_job_would_fail_on(tmp_path, defect):
    """Each defect: one line naming the file (and line), from the check run when the DAG
    is built, before any job."""
    from headlab.data.local import check_corpus

    corpus = _corpus(tmp_path)
    path, message = defect(tmp_path, corpus)
    with pytest.raises(HeadlabError) as caught:
        check_corpus(corpus, "corpora.mine")
    text = str(caught.value)
    assert len(text.splitlines()) == 1 and re.match(re.escape(path) + message, text), text


def test_the_config_check_passes_what_prepare_cleans(tmp_path):
    """Defects prepare-local repairs or removes from train and valid stop nothing."""
    from headlab.data.local import check_corpus

    pairs = list(GOOD) + [("", "x"), ("wort " * 300, "word"), ("a\x07b", "c\rd")]
    corpus = _corpus(tmp_path, train=pairs)
    Path(corpus["files"]["valid"]["de"]).write_bytes(b"\xef\xbb\xbf" + b"eins\r\nzwei\r\n drei\r\n vier\r\nfuenf\r\n")
    corpus["files"]["train"]["en"] = _gz(Path(corpus["files"]["train"]["en"]),
                                          Path(corpus["files"]["train"]["en"]).read_bytes())
    check_corpus(corpus, "corpora.mine")


@pytest.mark.parametrize("name", ["my corpus", "korpus-ü", "a/b"])
def test_a_corpus_name_that_cannot_be_a_folder_name_is_one_line(tmp_path, name):
    from headlab.workflow.config_check import check_corpora

    with pytest.raises(ConfigError) as caught:
        check_corpora({"corpora": {name: _corpus(tmp_path)}})
    assert str(caught.value) == (f"[corpora.{name}] corpus name {name!r} is a folder name in every path of its "
                                 f"data and models: use ASCII letters, digits, '_', '.' and '-' only")


@pytest.mark.parametrize("defect", [_invalid_utf8, _empty_test_side, _truncated_gz, _tsv_without_tab],
                         ids=["invalid_utf8", "empty_test_side", "truncated_gz", "tsv_without_tab"])
def test_a_corpus_defect_stops_the_workflow_before_any_job(tmp_path, mirror, defect):
    """Through snakemake itself: one line, exit status 1, no results folder."""
    import yaml

    from test_workflow import snakemake, write_config

    corpus = _corpus(tmp_path)
    path, message = defect(tmp_path, corpus)
    config_path = write_config(tmp_path, mirror)
    config = yaml.safe_load(config_path.read_text())
    config["corpora"] = {"mine": corpus}
    config["studies"] = {"baseline": {"data": {"mine": ["de-en"]}, "layers": ["1+1"], "heads": ["8L"],
                                      "preset": "tiny"}}
    config_path.write_text(yaml.safe_dump(config))
    result = snakemake("--cores", "1", "--configfile", str(config_path))
    lines = [line for line in (result.stdout + result.stderr).splitlines() if not line.startswith("Using profile")]
    assert result.returncode == 1 and len(lines) == 1, lines
    assert re.match("headlab: config error: " + re.escape(path) + message, lines[0]), lines[0]
    assert not (tmp_path / "results").exists()


def test_prepare_local_names_a_gzip_file_cut_short(tmp_path):
    """Run by hand (or by a job), the same one line as the config check, not gzip's EOFError."""
    corpus = _corpus(tmp_path)
    path, _ = _truncated_gz(tmp_path, corpus)
    with pytest.raises(DataError, match=re.escape(path) + r": not a whole gzip file \(cut short"):
        prepare(corpus, "de-en", "train")
