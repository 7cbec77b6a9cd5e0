"""The seed-aware comparison (headlab.eval.significance): hand-computed contrasts, sacreBLEU's
own resampling, and its calibration on simulated systems with and without a true difference
(:mod:`headlab.eval.calibration`)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from headlab.errors import DataError
from headlab.eval import calibration
from headlab.eval import significance as sig


def _const(values_by_seed: dict[str, float], n: int = 4) -> dict[str, np.ndarray]:
    """Runs whose every sentence scores the seed's value: no test-set variance."""
    return {s: np.column_stack([np.full(n, v), np.ones(n)]) for s, v in values_by_seed.items()}


MEAN = sig.ratio_scorer(scale=1.0)


def test_paired_seeds_hand_computed():
    # per-seed differences 1, 2, 3: mean 2, variance 1, se sqrt(1/3), t with 2 df
    a = _const({"1": 1.0, "2": 3.0, "3": 5.0})
    b = _const({"1": 0.0, "2": 1.0, "3": 2.0})
    r = sig.difference(a, b, MEAN, samples=50)
    assert r.estimate == pytest.approx(2.0) and r.se_test == 0.0
    assert r.se_seed == pytest.approx(math.sqrt(1 / 3)) and r.df == pytest.approx(2.0)
    assert (r.ci_low, r.ci_high) == pytest.approx((2 - 4.302653 * math.sqrt(1 / 3), 2 + 4.302653 * math.sqrt(1 / 3)))
    assert r.p_value == pytest.approx(0.0741799, abs=1e-6)
    assert r.per_seed == {"1": 1.0, "2": 2.0, "3": 3.0} and r.replicated


def test_run_noise_is_counted_once():
    """Two sentences: a resample's mean is y1 + (c2 / 2)(y2 - y1), so every bootstrap variance
    is V_c times a squared difference (V_c = the variance of c2 / 2 over the resamples).
    A's runs: (0, 2), (0, 4); B's: (0, 0) twice. The bootstrap of the mean contrast: 9 V_c; A's
    run noise: var(2, 4) V_c = 2 V_c, of which the mean over 2 runs holds 1 V_c and the seed
    variance holds it too; so the test-set part is 8 V_c. Seeds: per-seed contrasts 1, 2."""
    a = {"1": np.array([[0.0, 1], [2, 1]]), "2": np.array([[0.0, 1], [4, 1]])}
    b = {"1": np.array([[0.0, 1], [0, 1]]), "2": np.array([[0.0, 1], [0, 1]])}
    r = sig.difference(a, b, MEAN, samples=400)
    v_c = float(np.var(sig.resample_counts(2, 400)[:, 1] / 2, ddof=1))
    assert r.estimate == pytest.approx(1.5) and r.per_seed == {"1": 1.0, "2": 2.0}
    assert r.se_test ** 2 == pytest.approx(8 * v_c) and r.se_seed ** 2 == pytest.approx(0.25)
    assert r.df == pytest.approx((0.25 + 8 * v_c / sig.SEED_DF_WEIGHT) ** 2 / (0.25 ** 2 / 1))
    from scipy.stats import t
    assert r.ci_high - r.estimate == pytest.approx(t(r.df).ppf(0.975) * math.sqrt(8 * v_c + 0.25))


def test_seed_pool_hand_computed():
    # system 1: values 1, 2, 3 (variance 1, 2 df); system 2: 0, 2 (variance 2, 1 df); a
    # one-run system does not count. Pooled: (2 x 1 + 1 x 2) / 3 = 4/3; borrowed: the
    # largest, 2, with the pool's 3 df
    pool = sig.seed_pool([_const({"1": 1.0, "2": 2.0, "3": 3.0}), _const({"1": 0.0, "2": 2.0}),
                          _const({"1": 5.0})], MEAN, samples=50)
    assert (pool.var, pool.pooled, pool.var_run, pool.df, pool.systems) == (2.0, pytest.approx(4 / 3), 0.0, 3, 2)
    assert sig.seed_pool([_const({"1": 5.0})], MEAN) is None
    # one system: the largest is the pooled one
    alone = sig.seed_pool([_const({"1": 1.0, "2": 2.0, "3": 3.0})], MEAN, samples=50)
    assert (alone.var, alone.pooled, alone.df) == (1.0, 1.0, 2)


def test_a_one_seed_system_borrows_the_largest_spread_of_a_disagreeing_pool():
    """The pool's systems disagree: 1, 2, 3 (variance 1) and 0, 2, 4 (variance 4), pooled 2.5
    with 4 df. A one-seed system may spread like either, so it borrows 4 (not 2.5), with the
    pool's 4 df: A (1, 2, 3: its own variance 1, 2 df) minus B (one seed, 0)."""
    from scipy.stats import t

    pool = sig.seed_pool([_const({"1": 1.0, "2": 2.0, "3": 3.0}), _const({"1": 0.0, "2": 2.0, "3": 4.0})], MEAN,
                         samples=50)
    assert (pool.var, pool.pooled, pool.df, pool.systems) == (4.0, 2.5, 4, 2)
    r = sig.difference(_const({"1": 1.0, "2": 2.0, "3": 3.0}), _const({"1": 0.0}), MEAN, samples=50, pool=pool)
    assert r.se_seed ** 2 == pytest.approx(1 / 3 + 4.0) and r.seed_source == sig.POOLED
    df = (1 / 3 + 4.0) ** 2 / ((1 / 3) ** 2 / 2 + 4.0 ** 2 / 4)
    assert r.df == pytest.approx(df)
    assert r.p_value == pytest.approx(2 * t(df).sf(2.0 / math.sqrt(1 / 3 + 4.0)))


def test_a_one_seed_system_takes_the_study_pool():
    """A at seeds 1-3 (values 1, 2, 3: its own variance 1, 2 df), B at seed 1 only (0): B's
    seed variance is the pool's (1.5 with 4 df), not A's; Satterthwaite over the two."""
    from scipy.stats import t

    pool = sig.SeedPool(var=1.5, var_run=0.0, df=4, systems=2, pooled=1.5)
    r = sig.difference(_const({"1": 1.0, "2": 2.0, "3": 3.0}), _const({"1": 0.0}), MEAN, samples=50, pool=pool)
    assert r.estimate == pytest.approx(2.0) and r.seeds == (3, 1) and r.seed_source == sig.POOLED
    assert r.se_seed ** 2 == pytest.approx(1 / 3 + 1.5) and r.pool is pool
    df = (1 / 3 + 1.5) ** 2 / ((1 / 3) ** 2 / 2 + 1.5 ** 2 / 4)
    assert r.df == pytest.approx(df)
    assert r.ci_high - r.estimate == pytest.approx(t(df).ppf(0.975) * math.sqrt(1 / 3 + 1.5))
    # two one-run systems share one pooled estimate: its 4 df count once, not twice
    both = sig.difference(_const({"1": 2.0}), _const({"1": 0.0}), MEAN, samples=50, pool=pool)
    assert both.se_seed ** 2 == pytest.approx(3.0) and both.df == pytest.approx(4.0)


def test_one_seed_without_a_pool_makes_no_test():
    # sentence differences d = (1, 0, 0, 1): mean 0.5; the bootstrap variance of the mean
    # tends to var(d) / n = 0.25 / 4: an interval of test sentences only, and no p-value
    a = {"1": np.array([[1, 1], [0, 1], [1, 1], [1, 1]], dtype=float)}
    b = {"1": np.array([[0, 1], [0, 1], [1, 1], [0, 1]], dtype=float)}
    r = sig.difference(a, b, MEAN, samples=20000)
    assert r.estimate == pytest.approx(0.5) and r.seed_source == sig.NO_SEEDS and not r.replicated
    assert math.isnan(r.p_value) and math.isnan(r.se_seed)
    assert r.se_test ** 2 == pytest.approx(0.25 / 4, rel=0.03)
    assert r.ci_low == pytest.approx(0.5 - 1.959964 * r.se_test)


def test_resampling_is_sacrebleus_paired_bootstrap():
    """One seed per system: the resampled BLEU scores are sacreBLEU's own (same ids, same statistics)."""
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import _bootstrap_resample

    refs = ["the cat sat on the mat", "a dog runs in the park", "two men play chess today", "it is raining again"]
    hyps = ["the cat sat on a mat", "a dog runs in a park", "two men play chess", "it rains again"]
    stats = sig.sentence_stats(hyps, refs)
    counts = sig.resample_counts(len(refs), samples=30)
    ours = sig.scorer("bleu")(counts @ stats)
    _, theirs = _bootstrap_resample(stats.tolist(), BLEU(), 30)
    assert ours == pytest.approx([s.score for s in theirs], abs=1e-4)
    assert sig.scorer("bleu")(stats.sum(0))[0] == pytest.approx(BLEU().corpus_score(hyps, [refs]).score)


def test_bad_input_is_an_error():
    with pytest.raises(DataError, match="same test sentences"):
        sig.difference(_const({"1": 1.0}, n=4), _const({"1": 1.0}, n=5), MEAN)
    with pytest.raises(DataError, match="at least one run"):
        sig.contrast([sig.Term(1.0, {})], MEAN)
    with pytest.raises(DataError, match="unknown metric"):
        sig.scorer("ter")


def test_sign_test_exact_and_binomial():
    # paper D's share kept, 0.38 at each of 3 seeds, against "< 0.5": 3 of 3 agree, and the
    # exact two-sided binomial p-value of 3 of 3 is 2 / 8
    r = sig.sign_test({"1": 0.38, "2": 0.38, "3": 0.38}, "<", 0.5)
    assert (r.agree, r.seeds, r.p_value, r.low, r.high) == (3, 3, 0.25, 0.38, 0.38)
    # "at least one head in every layer" (> 0) with a layer at 0 heads in every seed: none agrees
    none = sig.sign_test([0.0, 0.0, 0.0], ">", 0.0)
    assert (none.agree, none.p_value) == (0, 0.25)
    assert sig.sign_test([1, 2, 3, 4, 5, 6], ">", 0.0).p_value == pytest.approx(2 / 64)
    e = sig.exact(-14.56)
    assert (e.ci_low, e.ci_high, e.p_value) == (-14.56, -14.56, 0.0)
    # Wilson 95% for 8 of 10: (p + z^2/2n) / (1 + z^2/n) -+ z / (1 + z^2/n) sqrt(p(1-p)/n + z^2/4n^2)
    assert sig.binomial_interval(8, 10) == pytest.approx((0.490162, 0.943318), abs=1e-6)


@pytest.mark.parametrize("seeds", calibration.SEEDS)
def test_calibration_equal_systems_are_called_different_at_most_6_percent(seeds):
    """The simulator of :mod:`headlab.eval.calibration` (a persistent system×sentence term,
    seed offsets, run noise) at seed/test-set variance ratios 0.5 to 50: the production
    test's false-positive rate is at most 6% within its Monte-Carlo error (two standard
    errors of a 6% rate) in every cell. 600 experiments a cell: a few seconds."""
    rng = np.random.default_rng(20 + seeds)
    for ratio in calibration.RATIOS:
        cell = calibration.cell(rng, ratio, seeds, 600)
        assert cell["rate"] <= 0.06 + 2 * math.sqrt(0.06 * 0.94 / 600), cell


def test_calibration_a_one_seed_system_spreading_twice_the_pool_is_not_called_different_too_often():
    """At one seed, system 0's seed variance twice that of system 1 and of the pool it
    borrows from (the pool's two systems agree, so nothing in the data shows it): over the
    table's ratios the false-positive rate is at most 6% on average (2,400 experiments:
    Monte-Carlo se about 0.5 points) and in every cell within two standard errors of 6%.
    Borrowing the pooled variance gave 6-9% a cell, 7.3% on average."""
    rng = np.random.default_rng(41)
    rates = []
    for ratio in calibration.RATIOS:
        cell = calibration.cell(rng, ratio, 1, 600, spread=2.0)
        assert cell["rate"] <= 0.06 + 2 * math.sqrt(0.06 * 0.94 / 600), cell
        rates.append(cell["rate"])
    assert np.mean(rates) <= 0.06, rates


def test_calibration_a_known_difference_is_found_and_covered():
    """Power at 3 seeds: a true difference of twice a one-seed difference's sd is found
    (with its sign) more often with more seeds, and the interval covers it."""
    rng = np.random.default_rng(7)
    delta = calibration.effect_size(3.0)
    found = {seeds: calibration.cell(rng, 3.0, seeds, 300, delta=delta) for seeds in (3, 5)}
    assert found[3]["rate"] >= 0.35 and found[5]["rate"] > found[3]["rate"] + 0.15
    assert min(c["coverage"] for c in found.values()) >= 0.9


def test_calibration_bench_writes_the_table_and_restores_the_weight(tmp_path):
    """``python -m headlab.bench --what calibration``: one row per setting, ratio and seed count
    (20 experiments a cell here), the production weight restored afterwards."""
    import csv

    from headlab.bench.calibration import COLUMNS, SETTINGS, bench_calibration

    bench_calibration(str(tmp_path), experiments=20)
    with open(tmp_path / "calibration.csv", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == COLUMNS
    assert len(rows) == len(SETTINGS) * len(calibration.RATIOS) * len(calibration.SEEDS)
    assert {float(r["df_weight"]) for r in rows} == {1.0, 4.0, math.inf} and sig.SEED_DF_WEIGHT == 4.0
    assert {float(r["spread"]) for r in rows} == {1.0, 2.0}
