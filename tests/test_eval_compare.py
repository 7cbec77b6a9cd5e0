"""Paired bootstrap (compare-mt) and BLEU by reference length."""
from __future__ import annotations

import random

import pandas as pd
import pytest

from headlab.errors import DataError
from headlab.eval.compare import length_buckets, main, paired_bootstrap

WORDS = "the a cat dog sat ran on under mat house big small red green quickly slowly".split()


def _corpus(n=60, seed=0):
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 15))) for _ in range(n)]


def test_known_winner():
    ref = _corpus()
    garbage = [" ".join(reversed(s.split()))[:7] for s in ref]
    r = paired_bootstrap(ref, ref, garbage, system_name="A", baseline_name="B", samples=200)
    assert r.win_system == 1.0 and r.win_baseline == 0.0
    assert r.significantly_higher and not r.significantly_lower
    assert r.p_value == 0.0 and r.score == pytest.approx(100.0)
    # and the other way round: B is significantly lower than A
    r2 = paired_bootstrap(ref, garbage, ref, system_name="B", baseline_name="A", samples=200)
    assert r2.significantly_lower and not r2.significantly_higher


def test_tie_is_not_significant():
    ref = _corpus()
    hyp = _corpus(seed=1)
    r = paired_bootstrap(ref, hyp, list(hyp), samples=100)
    assert (r.win_system, r.win_baseline, r.ties) == (0.0, 0.0, 1.0)
    assert not r.significantly_higher and not r.significantly_lower
    assert r.p_value == 1.0


def test_seeded_and_restores_global_rng():
    import numpy as np

    ref, a, b = _corpus(), _corpus(seed=1), _corpus(seed=2)
    np.random.seed(7)
    before = np.random.rand()
    np.random.seed(7)
    r1 = paired_bootstrap(ref, a, b, samples=100, seed=3)
    assert np.random.rand() == before
    r2 = paired_bootstrap(ref, a, b, samples=100, seed=3)
    assert r1 == r2
    assert r1.win_system + r1.win_baseline + r1.ties == pytest.approx(1.0)


def test_cached_statistics_give_compare_mt_numbers():
    # the statistics handed to compare-mt as one array (speed) must not change a draw or a
    # win: compare-mt run on its own, from the same seed, gives the same ratios
    import numpy as np
    from compare_mt import scorers, sign_utils

    ref, noise = _corpus(120), _corpus(120, seed=1)
    # each system is right on its own half of the sentences: close scores, fractional wins
    a = [r if i % 2 else n for i, (r, n) in enumerate(zip(ref, noise))]
    b = [n if i % 2 else r for i, (r, n) in enumerate(zip(ref, noise))]
    r = paired_bootstrap(ref, a, b, samples=300, seed=5)
    tok = [[line.strip().split(" ") for line in text] for text in (ref, a, b)]
    np.random.seed(5)
    wins, _ = sign_utils.eval_with_paired_bootstrap(
        tok[0], tok[1:], [None] * len(ref), scorers.create_scorer_from_profile("sacrebleu"),
        compare_directions=[(0, 1)], num_samples=300, sample_ratio=0.5)
    assert 0.0 < r.win_system < 1.0 or 0.0 < r.win_baseline < 1.0
    assert (r.win_system, r.win_baseline) == (wins[0][0], wins[0][1])


def test_length_buckets_hand_counts():
    # reference lengths (whitespace tokens): 3, 9, 10, 19, 25, 61 -> <10: 2, [10,20): 2, [20,30): 1, >=60: 1
    ref = [" ".join(["w"] * n) for n in (3, 9, 10, 19, 25, 61)]
    frame = length_buckets(ref, {"sys": ref})
    assert list(frame.columns) == ["system", "bucket", "bleu", "count"]
    assert list(frame.bucket) == ["<10", "[10,20)", "[20,30)", "[30,40)", "[40,50)", "[50,60)", ">=60"]
    assert list(frame["count"]) == [2, 2, 1, 0, 0, 0, 1]
    assert frame.bleu[frame["count"] > 0].tolist() == pytest.approx([100.0] * 4)
    assert frame.bleu[frame["count"] == 0].isna().all()
    custom = length_buckets(ref, {"sys": ref}, cutoffs=(10, 20))
    assert list(custom.bucket) == ["<10", "[10,20)", ">=20"] and list(custom["count"]) == [2, 2, 2]


def test_length_buckets_carry_sacrebleus_interval():
    """confidence=N: each bucket's 95% interval is sacreBLEU's bootstrap on its sentences."""
    from sacrebleu.metrics import BLEU

    ref = _corpus(80)
    hyp = _corpus(80, seed=5)
    frame = length_buckets(ref, {"sys": hyp}, cutoffs=(10,), confidence=200)
    assert list(frame.columns) == ["system", "bucket", "bleu", "count", "ci_low", "ci_high"]
    short = [i for i, r in enumerate(ref) if len(r.split()) < 10]
    score = BLEU().corpus_score([hyp[i] for i in short], [[ref[i] for i in short]], n_bootstrap=200)
    row = frame.iloc[0]
    assert row["count"] == len(short) and row["bleu"] == pytest.approx(score.score, abs=1e-3)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((score._mean - score._ci, score._mean + score._ci),
                                                            abs=1e-3)
    assert row["ci_low"] < row["bleu"] < row["ci_high"]


def test_cli(tmp_path):
    ref = _corpus()
    (tmp_path / "ref").write_text("\n".join(ref) + "\n")
    (tmp_path / "a").write_text("\n".join(ref) + "\n")
    (tmp_path / "b").write_text("\n".join(_corpus(seed=5)) + "\n")
    boot, bins = tmp_path / "sig.csv", tmp_path / "bins.csv"
    assert main(["--ref", str(tmp_path / "ref"), "--sys", f"8L={tmp_path / 'a'}", "--sys", f"1L={tmp_path / 'b'}",
                 "--baseline", "8L", "--bootstrap-out", str(boot), "--length-out", str(bins),
                 "--samples", "100", "--tag", "config=6+1"]) == 0
    sig = pd.read_csv(boot)
    assert list(sig.system) == ["8L", "1L"] and list(sig.config) == ["6+1", "6+1"]
    assert list(sig.significantly_lower) == [False, True] and sig.win_system.isna()[0]
    assert sig.score[0] == pytest.approx(100.0)
    frame = pd.read_csv(bins)
    assert set(frame.system) == {"8L", "1L"} and list(frame.columns) == ["config", "system", "bucket", "bleu", "count"]


@pytest.mark.parametrize("option, value, said", [
    ("--samples", "0", "0: must be at least 10"),             # compare-mt: ZeroDivisionError
    ("--samples", "-3", "-3: must be at least 10"),           # compare-mt: IndexError
    ("--sample-ratio", "0", "0: must be in (0, 1]"),          # resamples of no sentence
    ("--sample-ratio", "1.5", "1.5: must be in (0, 1]"),
    ("--p", "2", "2: must be in (0, 1)"),                     # every difference marked significant
    ("--p", "five", "'five' is not a number"),
])
def test_cli_resampling_options_out_of_range_are_one_line(tmp_path, capsys, option, value, said):
    (tmp_path / "ref").write_text("a b c d\ne f g h\n")
    (tmp_path / "a").write_text("a b c d\ne f g x\n")
    with pytest.raises(SystemExit) as caught:
        main(["--ref", str(tmp_path / "ref"), "--sys", f"8L={tmp_path / 'a'}", "--sys", f"1L={tmp_path / 'a'}",
              "--baseline", "8L", "--bootstrap-out", str(tmp_path / "sig.csv"), option, value])
    assert caught.value.code == 2 and not (tmp_path / "sig.csv").exists()
    assert capsys.readouterr().err.splitlines()[-1] == f"headlab compare: error: argument {option}: {said}"


def test_cli_errors(tmp_path):
    (tmp_path / "ref").write_text("a\nb\n")
    (tmp_path / "a").write_text("a\n")
    with pytest.raises(DataError, match="ref.*a|a.*ref"):
        main(["--ref", str(tmp_path / "ref"), "--sys", f"x={tmp_path / 'a'}", "--length-out", str(tmp_path / "o")])
    (tmp_path / "a").write_text("a\nb\n")
    with pytest.raises(DataError, match="baseline"):
        main(["--ref", str(tmp_path / "ref"), "--sys", f"x={tmp_path / 'a'}", "--baseline", "y",
              "--bootstrap-out", str(tmp_path / "o")])
    assert not (tmp_path / "o").exists()
