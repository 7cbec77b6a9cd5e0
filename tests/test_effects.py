"""Effects as data (headlab.studies.effects): verdicts from intervals, rows from hypothesis
files, and the README / results/effects.md renderings."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from headlab.studies.effects import (BOTH, EXACT, HOLDS, INCONCLUSIVE, NONE, REVERSED, TEST_ONLY, Claim, Judge,
                                     readme_lines, summary, verdict)


@pytest.mark.parametrize("low, high, direction, null, expected", [
    (0.2, 1.5, ">", 0.0, HOLDS), (-1.5, -0.2, ">", 0.0, REVERSED), (-0.2, 1.5, ">", 0.0, INCONCLUSIVE),
    (-1.5, -0.2, "<", 0.0, HOLDS), (0.2, 1.5, "<", 0.0, REVERSED),
    (-0.8, 0.5, ">", -1.0, HOLDS),          # "within 1 BLEU": the interval excludes -1 from above
    (-1.6, -1.2, ">", -1.0, REVERSED), (0.0, 0.0, ">", 0.0, INCONCLUSIVE),
    (math.nan, math.nan, ">", 0.0, INCONCLUSIVE),
])
def test_verdict_needs_an_interval_that_excludes_the_null(low, high, direction, null, expected):
    assert verdict(low, high, direction, null) == expected


def _write(path, lines):
    path.write_text("\n".join(lines) + "\n")
    return str(path)


REFS = ["the cat sat on the mat today", "a dog runs in the green park", "two men play chess in the sun",
        "it is raining again in the city", "the children sing a song together", "she reads a long book at night"]


def test_rows_from_hypothesis_files(tmp_path):
    """Two systems, two seeds each: ours = the mean over seeds of sacreBLEU's corpus BLEU difference."""
    from sacrebleu.metrics import BLEU

    ref = _write(tmp_path / "ref", REFS)
    good = [r for r in REFS]
    bad = [" ".join(r.split()[:-2]) for r in REFS]
    worse = [" ".join(r.split()[:3]) for r in REFS]
    files = {("A", "1"): good, ("A", "2"): bad, ("B", "1"): worse, ("B", "2"): worse}
    paths = {k: _write(tmp_path / f"{k[0]}{k[1]}", v) for k, v in files.items()}
    judge = Judge("paper_X", samples=200)
    row = judge.systems(Claim("A beats B", "A − B", ">", 0.0, paper=1.5),
                        [(1, {s: (paths[("A", s)], ref) for s in "12"}), (-1, {s: (paths[("B", s)], ref) for s in "12"})])
    bleu = {k: BLEU().corpus_score(v, [REFS]).score for k, v in files.items()}
    expected = (bleu[("A", "1")] + bleu[("A", "2")]) / 2 - bleu[("B", "1")]
    assert row["ours"] == pytest.approx(expected, abs=1e-6)
    assert (row["seeds"], row["runs"], row["interval"]) == (2, "2/2", BOTH)
    assert row["ci_low"] < row["ours"] < row["ci_high"] and row["paper"] == 1.5
    assert row["verdict"] == verdict(row["ci_low"], row["ci_high"], ">", 0.0)
    one = judge.systems(Claim("A1 beats B1", "A − B", ">"), [(1, {"1": (paths[("A", "1")], ref)}),
                                                          (-1, {"1": (paths[("B", "1")], ref)})])
    assert (one["seeds"], one["interval"]) == (1, TEST_ONLY)
    judge.per_seed(Claim("sparse", "share kept", "<", 0.5, unit="share"), {"1": 0.2, "2": 0.3, "3": 0.25})
    judge.per_seed(Claim("one seed", "share", "<", 0.5, unit="share"), {"1": 0.2})
    judge.exact(Claim("fewer parameters", "#params A − B", ">", 0.0, unit="M params"), 0.015)
    frame = judge.frame()
    assert list(frame["interval"]) == [BOTH, TEST_ONLY, "seeds", NONE, EXACT]
    assert list(frame["verdict"][2:]) == [HOLDS, INCONCLUSIVE, HOLDS]
    # 0.25 ± t(2) * 0.05 / sqrt(3) = 0.25 ± 0.1242
    assert (frame["ci_low"][2], frame["ci_high"][2]) == pytest.approx((0.25 - 0.124209, 0.25 + 0.124209), abs=1e-5)
    path = tmp_path / "effects.csv"
    frame.to_csv(path, index=False)

    lines = readme_lines(str(path))
    assert lines[0] == "## Which effects of the paper hold here"
    holds = int((frame["verdict"] == HOLDS).sum())
    assert f"{holds} hold, " in lines[2] and "; 2 of 5 from one seed" in lines[2]
    table = [line for line in lines if line.startswith("| ")][1:]
    assert len(table) == 5
    assert table[1].endswith("(1 seed: test sentences only) |") and table[3].endswith("(1 seed: no interval) |")
    assert "| < 0.5 share |" in table[2] and "0.25 [0.13, 0.37]" in table[2]
    assert table[4].endswith("| 0.015 |  | 1 | holds |")       # exact: no interval, no p-value
    text = summary([str(path), str(path)])
    assert text.startswith("# What this run reproduces (generated)")
    assert text.count("## paper_X") == 2 and "| paper_X | 5 |" in text


def test_readme_counts_one_seed_rows(tmp_path):
    row = dict(study="s", claim="c", compared="x", unit="BLEU", direction=">", null=0.0, paper=1.0, ours=2.0,
               ci_low=1.0, ci_high=3.0, p_value=0.01, seeds=3, runs="3/3", interval=BOTH, verdict=HOLDS)
    frame = pd.DataFrame([
        row,
        {**row, "claim": "d", "ours": -2.0, "ci_low": -3.0, "ci_high": -1.0, "p_value": 0.0001, "seeds": 1,
         "runs": "1/1", "interval": TEST_ONLY, "verdict": REVERSED},
        {**row, "claim": "e", "seeds": 1, "runs": "3/1"}])     # pooled: one system has a single seed
    frame.to_csv(tmp_path / "e.csv", index=False)
    lines = readme_lines(str(tmp_path / "e.csv"))
    assert "2 hold, 1 reversed, 0 inconclusive at this scale; 1 of 3 from one seed" in lines[2]
    table = [line for line in lines if line.startswith("| ")][1:]      # after the header
    assert table[0].endswith("| 3/3 | holds |")
    assert "| < 0.001 |" in table[1] and table[1].endswith("| reversed (1 seed: test sentences only) |")
    assert table[2].endswith("| 3/1 | holds (a system with 1 seed: the others' seed variance stands for it) |")
