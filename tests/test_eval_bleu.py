"""Corpus BLEU/chrF with signature; bad inputs."""
from __future__ import annotations

import json

import pytest

from headlab.errors import DataError
from headlab.eval.bleu import corpus_scores, main


def test_identical_is_100_and_signature_kept():
    refs = ["The cat sat on the mat.", "A dog barked loudly at night."]
    result = corpus_scores(refs, refs, lang_pair="de-en")
    assert result["bleu"] == pytest.approx(100.0)
    assert result["chrf"] == pytest.approx(100.0)
    assert result["n"] == 2
    assert result["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")


def test_matches_sacrebleu_directly():
    import sacrebleu

    hyps = ["The cat is on the mat.", "A dog barked at night."]
    refs = ["The cat sat on the mat.", "A dog barked loudly at night."]
    assert corpus_scores(hyps, refs)["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score, abs=1e-4)


def test_cli_writes_json(tmp_path):
    (tmp_path / "hyp").write_text("a b c d\ne f g h\n")
    (tmp_path / "ref").write_text("a b c d\ne f g x\n")
    out = tmp_path / "s.json"
    assert main(["--hyp", str(tmp_path / "hyp"), "--ref", str(tmp_path / "ref"), "--out", str(out),
                 "--system", "8L", "--tag", "config=6+1"]) == 0
    data = json.loads(out.read_text())
    assert set(data) >= {"bleu", "chrf", "signature", "n"} and data["n"] == 2 and 0 < data["bleu"] < 100
    assert data["system"] == "8L" and data["config"] == "6+1"
    with pytest.raises(DataError, match="KEY=VALUE"):
        main(["--hyp", str(tmp_path / "hyp"), "--ref", str(tmp_path / "ref"), "--out", str(out), "--tag", "x"])


@pytest.mark.parametrize("resamples", ["1", "-5", "ten"])
def test_confidence_without_resamples_is_refused_not_silently_dropped(tmp_path, capsys, resamples):
    """--confidence 1 or a negative N once wrote scores with no interval and said nothing."""
    (tmp_path / "hyp").write_text("a b c d\n")
    (tmp_path / "ref").write_text("a b c d\n")
    with pytest.raises(SystemExit) as caught:
        main(["--hyp", str(tmp_path / "hyp"), "--ref", str(tmp_path / "ref"), "--out", str(tmp_path / "s.json"),
              "--confidence", resamples])
    assert caught.value.code == 2 and not (tmp_path / "s.json").exists()
    assert capsys.readouterr().err.splitlines()[-1].startswith("headlab bleu: error: argument --confidence: ")
    assert main(["--hyp", str(tmp_path / "hyp"), "--ref", str(tmp_path / "ref"), "--out", str(tmp_path / "s.json"),
                 "--confidence", "0"]) == 0 and "bleu_ci" not in json.loads((tmp_path / "s.json").read_text())


def test_line_count_mismatch_names_both_files(tmp_path):
    hyp, ref = tmp_path / "system.out", tmp_path / "newstest.ref"
    hyp.write_text("a\nb\nc\n")
    ref.write_text("a\nb\n")
    out = tmp_path / "s.json"
    with pytest.raises(DataError) as err:
        main(["--hyp", str(hyp), "--ref", str(ref), "--out", str(out)])
    assert str(hyp) in str(err.value) and str(ref) in str(err.value)
    assert "3" in str(err.value) and "2" in str(err.value)
    assert not out.exists()


def test_invalid_utf8_names_file_and_line(tmp_path):
    (tmp_path / "hyp").write_bytes(b"ok\n\xff bad\n")
    (tmp_path / "ref").write_text("ok\nfine\n")
    with pytest.raises(DataError, match=r"hyp:2:"):
        main(["--hyp", str(tmp_path / "hyp"), "--ref", str(tmp_path / "ref"), "--out", str(tmp_path / "o")])


def test_confidence_interval_is_sacrebleus():
    """--confidence N: sacreBLEU's own bootstrap interval (mu ± ci), the plain signature kept."""
    from sacrebleu.metrics import BLEU, CHRF

    refs = ["The cat sat on the mat.", "A dog barked loudly at night.", "Two men play chess.", "It rains."] * 5
    hyps = ["The cat is on the mat.", "A dog barked at night.", "Two men play chess.", "It is raining."] * 5
    result = corpus_scores(hyps, refs, confidence=200)
    bleu = BLEU().corpus_score(hyps, [refs], n_bootstrap=200)
    chrf = CHRF().corpus_score(hyps, [refs], n_bootstrap=200)
    assert result["bleu_mu"] == pytest.approx(bleu._mean, abs=1e-4)
    assert result["bleu_ci"] == pytest.approx(bleu._ci, abs=1e-4) and result["bleu_ci"] > 0
    assert result["chrf_ci"] == pytest.approx(chrf._ci, abs=1e-4)
    assert (result["bleu_ci_low"], result["bleu_ci_high"]) == pytest.approx(
        (bleu._mean - bleu._ci, bleu._mean + bleu._ci), abs=2e-4)
    assert result["bleu"] == corpus_scores(hyps, refs)["bleu"]
    assert result["signature"] == corpus_scores(hyps, refs)["signature"] and "bs:" not in result["signature"]
    assert result["confidence_signature"].startswith("nrefs:1|bs:200|seed:12345|case:mixed")
    assert "bleu_ci" not in corpus_scores(hyps, refs)


def test_confidence_when_some_resamples_score_nothing():
    """sacreBLEU 2.6.0's own corpus_score(n_bootstrap=N) raises TypeError on these (chrF mixes
    float and float32 scores across resamples); ours gives the interval."""
    from sacrebleu.metrics import CHRF

    hyps, refs = ["a a a a a a a", "b", "c"], ["a b c", "d e f", "g h"]
    with pytest.raises(TypeError, match="coerce"):
        CHRF().corpus_score(hyps, [refs], n_bootstrap=100)
    result = corpus_scores(hyps, refs, confidence=100)
    assert result["chrf_ci_low"] <= result["chrf_mu"] <= result["chrf_ci_high"]
    assert result["chrf"] == pytest.approx(CHRF().corpus_score(hyps, [refs]).score, abs=1e-4)
