"""preprocess: Moses tokenise/truecase, joint BPE, and the reverse, through the CLI."""
from __future__ import annotations

import itertools
import sys

import pytest

from headlab.data import preprocess
from headlab.data.preprocess import iter_lines, postprocessor, remove_bpe
from headlab.errors import DataError


def cli(*argv: str) -> int:
    return preprocess.main([str(a) for a in argv])


def test_round_trip_on_multi30k(mirror, tmp_path):
    """tokenise -> truecase -> BPE -> postprocess gives back the original text."""
    raw = list(itertools.islice(iter_lines(mirror / "multi30k" / "val.de.gz"), 200))
    (tmp_path / "raw.de").write_text("".join(f"{line}\n" for line in raw), encoding="utf-8")
    assert cli("tokenize", "--lang", "de", "--in", tmp_path / "raw.de", "--out", tmp_path / "tok.de") == 0
    assert cli("truecase-train", "--in", tmp_path / "tok.de", "--model", tmp_path / "tc.de") == 0
    assert cli("truecase", "--model", tmp_path / "tc.de", "--in", tmp_path / "tok.de",
               "--out", tmp_path / "tc.de.txt") == 0
    assert cli("bpe-learn", "--merges", 300, "--in", tmp_path / "tc.de.txt", tmp_path / "tok.de",
               "--codes", tmp_path / "codes") == 0
    assert cli("bpe-apply", "--codes", tmp_path / "codes", "--in", tmp_path / "tc.de.txt",
               "--out", tmp_path / "bpe.de") == 0
    assert cli("postprocess", "--lang", "de", "--in", tmp_path / "bpe.de", "--out", tmp_path / "post.de") == 0

    tok = list(iter_lines(tmp_path / "tok.de"))
    truecased = list(iter_lines(tmp_path / "tc.de.txt"))
    bpe = list(iter_lines(tmp_path / "bpe.de"))
    post = list(iter_lines(tmp_path / "post.de"))
    assert len(tok) == len(truecased) == len(bpe) == len(post) == 200
    assert any("@@ " in line for line in bpe)
    assert [remove_bpe(line) for line in bpe] == truecased
    first = raw[0].split()[0]
    assert first[0].isupper() and truecased[0].split()[0] == first.lower()  # sentence start truecased
    # the few lines Moses detokenisation cannot restore (e.g. doubled spaces) aside, all round-trip
    assert post[:5] == raw[:5]
    assert sum(p == r for p, r in zip(post, raw)) >= 195


def test_truecasing_keeps_known_casing(tmp_path):
    """Moses truecase.perl: a word seen in this casing is kept ("junge" although "Junge" is commoner)."""
    (tmp_path / "train").write_text("Da sind zwei junge Männer .\nDa spielt ein Junge .\nDa lacht ein Junge .\n",
                                    encoding="utf-8")
    (tmp_path / "tok").write_text("Zwei junge Männer .\n", encoding="utf-8")
    assert cli("truecase-train", "--in", tmp_path / "train", "--model", tmp_path / "model") == 0
    assert cli("truecase", "--model", tmp_path / "model", "--in", tmp_path / "tok", "--out", tmp_path / "tc") == 0
    assert (tmp_path / "tc").read_text(encoding="utf-8") == "zwei junge Männer .\n"


def test_tokenize_options(tmp_path):
    (tmp_path / "raw").write_text("A&B rock-solid \"text\".\n\n", encoding="utf-8")
    cli("tokenize", "--lang", "en", "--in", tmp_path / "raw", "--out", tmp_path / "tok")
    assert (tmp_path / "tok").read_text(encoding="utf-8") == "A & B rock-solid \" text \" .\n\n"
    cli("tokenize", "--lang", "en", "--in", tmp_path / "raw", "--out", tmp_path / "tok2", "--jobs", 2,
        "--aggressive-dash-splits")
    assert (tmp_path / "tok2").read_text(encoding="utf-8").splitlines()[0] == 'A & B rock @-@ solid " text " .'


def test_postprocess_pieces():
    post = postprocessor("en")
    assert post("the cat@@ s sat on the m@@ at .") == "The cats sat on the mat."
    assert remove_bpe("ab@@ c d@@") == "abc d"
    assert postprocessor("en", detruecase=False)("the dog .") == "the dog."


def test_invalid_utf8_and_missing_input(tmp_path, capsys):
    (tmp_path / "bad").write_bytes(b"ok\nnot \xc3( ok\n")
    assert cli("tokenize", "--lang", "de", "--in", tmp_path / "bad", "--out", tmp_path / "out") == 1
    err = capsys.readouterr().err
    assert err.startswith(f"headlab preprocess: {tmp_path / 'bad'}:2: invalid UTF-8")
    assert not (tmp_path / "out").exists() and list(tmp_path.iterdir()) == [tmp_path / "bad"]
    assert cli("bpe-apply", "--codes", tmp_path / "nope", "--in", tmp_path / "bad", "--out", tmp_path / "o") == 1
    assert "nope: input file not found" in capsys.readouterr().err


def test_bad_merges(tmp_path, capsys):
    (tmp_path / "x").write_text("a b\n", encoding="utf-8")
    with pytest.raises(SystemExit) as caught:
        cli("bpe-learn", "--merges", 0, "--in", tmp_path / "x", "--codes", tmp_path / "c")
    assert caught.value.code == 2 and "argument --merges: 0: must be at least 1" in capsys.readouterr().err
    with pytest.raises(DataError, match=r"\[merges\] --merges must be positive, got 0"):
        preprocess.bpe_learn([tmp_path / "x"], tmp_path / "c", 0)
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("text", ["", "\n\n", "a b c\nd\n"], ids=["empty", "blank-lines", "one-letter-words"])
def test_bpe_learn_on_text_with_nothing_to_merge(tmp_path, capsys, text):
    # subword-nmt's learn_bpe takes max() of no pair counts: "max() arg is an empty sequence"
    (tmp_path / "x").write_text(text, encoding="utf-8")
    assert cli("bpe-learn", "--merges", 10, "--in", tmp_path / "x", "--codes", tmp_path / "c") == 1
    err = capsys.readouterr().err
    assert err == (f"headlab preprocess: {tmp_path / 'x'}: no word of two or more characters: "
                   "no BPE merge to learn (an empty training corpus?)\n")
    assert list(tmp_path.iterdir()) == [tmp_path / "x"]


def test_bpe_learn_with_one_two_letter_word(tmp_path):
    (tmp_path / "x").write_text("a b\nc de de\n", encoding="utf-8")
    preprocess.bpe_learn([tmp_path / "x"], tmp_path / "c", 10)
    assert (tmp_path / "c").read_text(encoding="utf-8").splitlines()[1:] == ["d e</w>"]


def test_usage_errors_exit_2():
    with pytest.raises(SystemExit) as err:
        preprocess.main(["tokenize", "--lang", "de"])
    assert err.value.code == 2


HINDI = "मैं घर जा रहा हूँ। क्या, तुम भी (शायद) ई-मेल भेजोगे? 3.5 किमी है।"
HINDI_TOK = "मैं घर जा रहा हूँ । क्या , तुम भी ( शायद ) ई - मेल भेजोगे ? 3.5 किमी है ।"


def test_indic_tokeniser_for_hindi_and_its_detokeniser(tmp_path):
    """paper B §4.1: IndicNLP tokenises Hindi (danda and ASCII punctuation split off, numbers kept);
    postprocess --tokenizer indic undoes it, so BLEU sees the original text."""
    pytest.importorskip("indicnlp")
    (tmp_path / "raw.hi").write_text(f"{HINDI}\n\n", encoding="utf-8")
    assert cli("tokenize", "--lang", "hi", "--tokenizer", "indic", "--in", tmp_path / "raw.hi",
               "--out", tmp_path / "tok.hi", "--jobs", 2) == 0
    assert (tmp_path / "tok.hi").read_text(encoding="utf-8") == f"{HINDI_TOK}\n\n"
    # Moses keeps the hyphenated word whole: the choice matters
    assert cli("tokenize", "--lang", "hi", "--in", tmp_path / "raw.hi", "--out", tmp_path / "moses.hi") == 0
    assert " ई-मेल " in (tmp_path / "moses.hi").read_text(encoding="utf-8")
    (tmp_path / "hyp.bpe").write_text("मैं घर जा रहा हू@@ ँ । क्या , तुम भी ( शा@@ यद ) ई - मेल भेजोगे ? 3.5 किमी है ।\n",
                                      encoding="utf-8")
    assert cli("postprocess", "--lang", "hi", "--tokenizer", "indic", "--in", tmp_path / "hyp.bpe",
               "--out", tmp_path / "hyp.txt") == 0
    assert (tmp_path / "hyp.txt").read_text(encoding="utf-8") == f"{HINDI}\n"
    assert postprocessor("hi", tokenizer="indic")(HINDI_TOK) == HINDI


def test_unknown_or_missing_tokeniser(tmp_path, monkeypatch, capsys):
    with pytest.raises(DataError, match="unknown tokenizer 'spacy'; known: moses, indic"):
        preprocess.tokenizer_function("hi", "spacy")
    with pytest.raises(SystemExit):  # the CLI offers only the known ones
        preprocess.main(["tokenize", "--lang", "hi", "--tokenizer", "spacy", "--in", "x", "--out", "y"])
    monkeypatch.setitem(sys.modules, "indicnlp.tokenize", None)  # as if not installed
    (tmp_path / "raw.hi").write_text(f"{HINDI}\n", encoding="utf-8")
    assert cli("tokenize", "--lang", "hi", "--tokenizer", "indic", "--in", tmp_path / "raw.hi",
               "--out", tmp_path / "tok.hi") == 1
    assert "needs indic-nlp-library" in capsys.readouterr().err and not (tmp_path / "tok.hi").exists()
