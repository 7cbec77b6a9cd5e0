"""The seed-aware comparison (headlab.eval.significance): hand-computed contrasts, sacreBLEU's
own resampling, and a simulation of systems with and without a true difference."""
from __future__ import annotations

import math

import numpy as np
import pytest

from headlab.errors import DataError
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


def test_unequal_seeds_pool_the_seed_variance():
    # A at seeds 1-3 (values 1, 2, 3: variance 1), B at seed 1 only (0): B borrows A's variance
    r = sig.difference(_const({"1": 1.0, "2": 2.0, "3": 3.0}), _const({"1": 0.0}), MEAN, samples=50)
    assert r.estimate == pytest.approx(2.0) and r.seeds == (3, 1)
    assert r.se_seed == pytest.approx(math.sqrt(1 / 3 + 1)) and r.df == pytest.approx(2.0)
    assert r.ci_high - r.estimate == pytest.approx(4.302653 * math.sqrt(4 / 3))


def test_one_seed_is_the_paired_bootstrap_of_sentences():
    # sentence differences d = (1, 0, 0, 1): mean 0.5; the bootstrap variance of the mean
    # tends to var(d) / n = 0.25 / 4
    a = {"1": np.array([[1, 1], [0, 1], [1, 1], [1, 1]], dtype=float)}
    b = {"1": np.array([[0, 1], [0, 1], [1, 1], [0, 1]], dtype=float)}
    r = sig.difference(a, b, MEAN, samples=20000)
    assert r.estimate == pytest.approx(0.5) and r.se_seed == 0.0 and math.isinf(r.df) and not r.replicated
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


def test_seed_interval_exact_and_binomial():
    r = sig.seed_interval({"1": 0.25, "2": 0.5, "3": 0.75}, null=0.5)
    assert r.estimate == pytest.approx(0.5) and r.p_value == pytest.approx(1.0)
    assert r.ci_high - 0.5 == pytest.approx(4.302653 * 0.25 / math.sqrt(3))
    one = sig.seed_interval([0.3])
    assert one.estimate == 0.3 and math.isnan(one.ci_low) and one.seeds == (1,)
    e = sig.exact(-14.56)
    assert (e.ci_low, e.ci_high, e.p_value) == (-14.56, -14.56, 0.0)
    # Wilson 95% for 8 of 10: (p + z^2/2n) / (1 + z^2/n) -+ z / (1 + z^2/n) sqrt(p(1-p)/n + z^2/4n^2)
    assert sig.binomial_interval(8, 10) == pytest.approx((0.490162, 0.943318), abs=1e-6)


def _experiment(rng, delta, seeds=3, n=100, seed_sd=1.0, sentence_sd=5.0, samples=200):
    """Two systems, ``seeds`` runs each, on a fresh test set of ``n`` sentences: sentence
    score = difficulty (shared) + the run's offset (seed noise) + the run's own noise."""
    difficulty = rng.normal(0.0, 3.0, n)
    runs = []
    for mean in (delta, 0.0):
        runs.append({str(s): np.column_stack([mean + difficulty + rng.normal(0.0, seed_sd)
                                              + rng.normal(0.0, sentence_sd, n), np.ones(n)])
                     for s in range(1, seeds + 1)})
    return sig.difference(*runs, MEAN, samples=samples, seed=int(rng.integers(1 << 30)))


def test_simulation_no_difference_is_called_at_the_stated_rate():
    """400 experiments without a true difference: about 5% are called different (binomial
    sd 1.1 points); the interval covers the true difference (0) about 95% of the time."""
    rng = np.random.default_rng(2024)
    results = [_experiment(rng, 0.0) for _ in range(400)]
    rate = np.mean([r.p_value < 0.05 for r in results])
    assert 0.02 <= rate <= 0.08, rate
    assert np.mean([r.ci_low <= 0.0 <= r.ci_high for r in results]) == pytest.approx(1 - rate)


def test_simulation_a_known_difference_is_found_and_covered():
    rng = np.random.default_rng(7)
    results = [_experiment(rng, 8.0) for _ in range(200)]
    assert np.mean([r.p_value < 0.05 and r.estimate > 0 for r in results]) >= 0.8
    assert np.mean([r.ci_low <= 8.0 <= r.ci_high for r in results]) >= 0.9


def test_simulation_one_seed_ignores_seed_variance():
    """Why one-seed verdicts say so: with seed noise, sentence resampling alone calls
    equal systems different far more often than 5%."""
    rng = np.random.default_rng(11)
    rate = np.mean([_experiment(rng, 0.0, seeds=1).p_value < 0.05 for _ in range(200)])
    assert rate > 0.2
