"""Seed-aware comparison of systems: a difference tested so that both the variance across
training seeds and the sampling of test sentences count, each once.

One training run is one draw of the training randomness (initialisation, dropout, batch
order); one test set is one draw of sentences. A system's score on a test set is moved by
three things: the test sentences it is good or bad at (a system×sentence term that is the
same at every seed, so averaging seeds does not remove it), the seed's offset, and the
run's own sentence-level noise. Following Clark et al. (2011, "Better Hypothesis Testing
for Statistical Machine Translation: Controlling for Optimizer Instability", ACL), the
contrast ``Q = sum_k w_k * mean_seeds(score_k)`` (a difference: weights +1, -1; "A keeps
90% of B": +1, -0.9; a mean over several systems: 1/m each) gets

* **the seed variance** ``v_seed``: when every system was trained at the same seeds, the
  contrast per seed ``q_s`` (paired: a fine-tune and its control share their parent's
  seed), ``var(q_s) / S`` with ``S - 1`` degrees of freedom; otherwise each system's own
  variance over its runs, ``w_k^2 s_k^2 / n_k`` with ``n_k - 1`` degrees of freedom, and a
  system with a single run borrows the study's seed variance (:class:`SeedPool`: the
  largest of the systems' with several seeds at the same scale, so that a one-seed system
  may spread like the most variable of them) with the pool's degrees of freedom. With a
  one-run system and no pool there is no seed variance: ``seed_source == "none"``, no
  p-value, and the verdict is "inconclusive (one seed)".
* **the test-set variance that seeds do not already hold** ``v_persist``: paired bootstrap
  resampling of test sentences (Koehn 2004), the same resampled ids for every system and
  seed, drawn as sacreBLEU 2.x draws them (``default_rng(12345).choice(n, (samples, n))``)
  and scored from sacreBLEU's sentence statistics. The bootstrap variance of ``Q`` holds
  the persistent system×sentence term and each run's own sentence noise; the per-seed
  values already hold the run noise, so it is taken out once: ``v_persist = var_boot(Q) -
  sum_k w_k^2 v_run_k / n_k``, where ``v_run_k`` is the bootstrap variance of a run's
  deviation from its system's mean over runs (``sum_s var(B_ks - mean_s B_ks) / (n_k - 1)``;
  a one-run system: the pool's).

``se = sqrt(v_persist + v_seed)``; the 95% interval and the two-sided p-value use a t
distribution with Satterthwaite's (1946) degrees of freedom in which the seed variance
counts four times (:data:`SEED_DF_WEIGHT`): ``(v_seed + v_persist / 4)^2 / sum_i (v_i^2 /
df_i)`` over the seed estimates ``v_i``. Three seeds estimate a variance with 2 degrees of
freedom; the plain formula (weight 1) gives many degrees of freedom exactly when that
estimate came out small, and called equal systems different in 7.5-8.5% of simulated
experiments at 3 seeds and variance ratios from 3 to 50; the estimate's own degrees of
freedom (weight infinite) in almost none where the test-set variance dominates, at a cost
in power. The weight was chosen by
simulation (:mod:`headlab.eval.calibration`; the table in the README, ``python -m
headlab.bench --what calibration``): with 4 the false-positive rate stays at or below 6%
within its Monte-Carlo error at 1, 3 and 5 seeds for seed/test-set variance ratios from 0.5
to 50, with a persistent term of 10%, 50% or 90% of the sentence-level variance;
``tests/test_eval_significance.py`` checks it at every seed count.

The resampling is sacreBLEU's, the test is not: sacreBLEU's ``--paired-bs`` p-value is
the share of resampled absolute differences, centred on their mean, above the observed one
(one run per system); ours is a t test of the contrast over seeds and test sentences.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np

from headlab.errors import DataError

DEFAULT_SAMPLES = 1000
#: sacreBLEU's default resampling seed (``SACREBLEU_SEED``)
SACREBLEU_SEED = 12345
LEVEL = 0.95
METRICS = ("bleu", "chrf")
#: the weight of the seed variance in the Satterthwaite degrees of freedom (module doc): 1 is
#: plain Welch-Satterthwaite, ``math.inf`` the seed estimate's own degrees of freedom
SEED_DF_WEIGHT = 4.0
#: where a contrast's seed variance comes from
PAIRED, OWN, POOLED, NO_SEEDS = "paired", "own", "pooled", "none"

#: summed sufficient statistics, shape (samples, k) -> one score per row
Scorer = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Term:
    """One system in a contrast: its weight and, per seed, the sufficient statistics of each
    test sentence (``(n, k)``, rows aligned with the test set)."""

    weight: float
    runs: Mapping[str, np.ndarray]


@dataclass(frozen=True)
class SeedPool:
    """The seed variance a one-run system borrows from the systems of its study that have
    several runs: the variance of one run's score across seeds (``var``: seed offset and the
    run's own sentence noise; the largest of the systems' own, see :func:`seed_pool`), of it
    the run's sentence noise (``var_run``, pooled: the bootstrap of a one-run system already
    counts it), the pool's degrees of freedom, how many systems, and the pooled variance
    (``pooled``: the systems' variances weighted by their degrees of freedom)."""

    var: float
    var_run: float
    df: int
    systems: int
    pooled: float | None = None


@dataclass
class Contrast:
    """A contrast ``Q = sum_k w_k mean_seeds(score_k)``, tested against ``null``."""

    estimate: float
    ci_low: float
    ci_high: float
    p_value: float
    se_test: float                   # sqrt(v_persist): the test-set variance seeds do not hold
    se_seed: float
    df: float
    seeds: tuple[int, ...]           # runs per term
    null: float = 0.0
    level: float = LEVEL
    per_seed: dict = field(default_factory=dict)   # seed -> contrast, where paired
    seed_source: str = PAIRED        # PAIRED, OWN, POOLED or NO_SEEDS
    pool: SeedPool | None = None     # the pool a one-run system borrowed from

    @property
    def replicated(self) -> bool:
        """True when a seed variance was estimated or borrowed."""
        return self.seed_source != NO_SEEDS


@functools.lru_cache(maxsize=8)
def resample_counts(n: int, samples: int = DEFAULT_SAMPLES, seed: int = SACREBLEU_SEED) -> np.ndarray:
    """``(samples, n)``: how often each test sentence is drawn in each bootstrap resample,
    from the ids sacreBLEU draws (``default_rng(seed).choice(n, (samples, n))``); a resample's
    summed statistics are ``counts @ stats``. Cached (read-only): every contrast on one test
    set uses the same resamples."""
    if n < 1:
        raise DataError("no test sentences to resample")
    ids = np.random.default_rng(seed).choice(n, size=(samples, n), replace=True)
    counts = np.zeros((samples, n), dtype=np.float64)
    np.add.at(counts, (np.arange(samples)[:, None], ids), 1.0)
    counts.flags.writeable = False
    return counts


def _metric(name: str, trg_lang: str = ""):
    from sacrebleu.metrics import BLEU, CHRF

    if name not in METRICS:
        raise DataError(f"unknown metric {name!r} ({', '.join(METRICS)})")
    return BLEU(trg_lang=trg_lang) if name == "bleu" else CHRF()


def sentence_stats(hyps: Sequence[str], refs: Sequence[str], metric: str = "bleu", *,
                   trg_lang: str = "") -> np.ndarray:
    """sacreBLEU's per-sentence sufficient statistics of a system, ``(n, k)`` (``trg_lang``:
    the target language, whose default tokeniser BLEU uses, as ``headlab bleu`` does)."""
    if len(hyps) != len(refs):
        raise DataError(f"{len(hyps)} hypotheses but {len(refs)} references")
    if not hyps:
        raise DataError("no sentences to score")
    return np.asarray(_metric(metric, trg_lang)._extract_corpus_statistics(list(hyps), [list(refs)]),
                      dtype=np.float64)


def scorer(metric: str = "bleu") -> Scorer:
    """Corpus scores from summed statistics, by sacreBLEU's ``_compute_score_from_stats``."""
    m = _metric(metric)

    def score(summed: np.ndarray) -> np.ndarray:
        return np.array([m._compute_score_from_stats(list(row)).score for row in np.atleast_2d(summed)])
    return score


def ratio_scorer(scale: float = 100.0) -> Scorer:
    """``scale * sum(stat 0) / sum(stat 1)``: an accuracy from per-item (correct, 1) rows."""
    def score(summed: np.ndarray) -> np.ndarray:
        summed = np.atleast_2d(summed)
        return scale * summed[:, 0] / summed[:, 1]
    return score


def _t(df: float):
    from scipy import stats

    return stats.t(df) if math.isfinite(df) else stats.norm()


def _run_noise(boot: np.ndarray) -> float:
    """A run's own sentence-noise variance from its system's bootstrap scores ``(runs,
    samples)``: each run's deviation from the mean over runs, ``sum_s var / (runs - 1)``."""
    return float(np.var(boot - boot.mean(0), axis=1, ddof=1).sum() / (len(boot) - 1))


def _scores(runs: Mapping[str, np.ndarray], score: Scorer, counts: np.ndarray):
    """Per run: the point score and the bootstrap scores ``(runs, samples)``."""
    point = {s: float(score(stats.sum(0))[0]) for s, stats in runs.items()}
    return point, np.array([score(counts @ stats) for stats in runs.values()])


def seed_pool(systems: Sequence[Mapping[str, np.ndarray]], score: Scorer, *, samples: int = DEFAULT_SAMPLES,
              seed: int = SACREBLEU_SEED) -> SeedPool | None:
    """The :class:`SeedPool` of ``systems`` (seed -> sentence statistics, on one test set):
    those with two or more runs; None where there is none.

    The variance borrowed is the largest of the systems' own, not their pooled one: the pool
    tells how far systems of this set-up differ in spread, and a one-run system's spread is
    not seen at all. With the pooled variance, a one-seed system spreading twice as much as
    the pool was called different from an equal one-seed system in 6-9% of simulated
    experiments (R 0.5 to 200, :mod:`headlab.eval.calibration`), from a three-seed one in up
    to 11.5%; with the largest, 3.7-5.4% and up to 8%. The degrees of freedom stay the
    pool's: the largest of k estimates is no chi-square of one system's 2 df (three seeds),
    and those would cost two thirds of the power (33% to 7% at one seed). Where the systems
    agree the largest is a little above the pooled variance (the maximum of noisy
    estimates): the test is then conservative (2-3.5%, power 22-29% instead of 33-36%)."""
    parts = []
    for runs in systems:
        if len(runs) >= 2:
            counts = resample_counts(len(next(iter(runs.values()))), samples, seed)
            point, boot = _scores(runs, score, counts)
            parts.append((len(runs) - 1, float(np.var(list(point.values()), ddof=1)), _run_noise(boot)))
    df = sum(d for d, _, _ in parts)
    if not df:
        return None
    pooled = sum(d * v for d, v, _ in parts) / df
    return SeedPool(max(v for _, v, _ in parts), sum(d * r for d, _, r in parts) / df, df, len(parts), pooled)


def _finish(estimate: float, v_persist: float, seed_parts: Sequence[tuple[float, float]], seeds, null: float,
            level: float, per_seed=None, source: str = PAIRED, pool: SeedPool | None = None) -> Contrast:
    """``seed_parts``: (variance, degrees of freedom) of each seed-variance estimate."""
    v_seed = float(sum(v for v, _ in seed_parts))
    denominator = sum(v ** 2 / d for v, d in seed_parts if v > 0)
    df = (v_seed + v_persist / SEED_DF_WEIGHT) ** 2 / denominator if denominator else math.inf
    se = math.sqrt(v_persist + v_seed)
    extra = dict(per_seed=per_seed or {}, seed_source=source, pool=pool)
    if se == 0.0:        # identical systems, or a quantity without noise (a parameter count)
        p = 1.0 if estimate == null else 0.0
        return Contrast(estimate, estimate, estimate, p, 0.0, 0.0, df, tuple(seeds), null, level, **extra)
    dist = _t(df)
    half = float(dist.ppf(0.5 + level / 2)) * se
    p = float(2.0 * dist.sf(abs(estimate - null) / se))
    return Contrast(estimate, estimate - half, estimate + half, min(p, 1.0), math.sqrt(v_persist), math.sqrt(v_seed),
                    df, tuple(seeds), null, level, **extra)


def contrast(terms: Sequence[Term], score: Scorer, *, samples: int = DEFAULT_SAMPLES, seed: int = SACREBLEU_SEED,
             null: float = 0.0, level: float = LEVEL, pool: SeedPool | None = None) -> Contrast:
    """Test ``Q = sum_k w_k mean_seeds(score_k)`` against ``null`` (see the module doc);
    ``pool``: the seed variance a one-run system takes."""
    if not terms or any(not t.runs for t in terms):
        raise DataError("a contrast needs at least one system, each with at least one run")
    sizes = {len(stats) for t in terms for stats in t.runs.values()}
    if len(sizes) != 1:
        raise DataError(f"the runs are not scored on the same test sentences (sizes {sorted(sizes)})")
    counts = resample_counts(sizes.pop(), samples, seed)
    scored = [_scores(t.runs, score, counts) for t in terms]
    point = [p for p, _ in scored]
    weights = np.array([t.weight for t in terms], dtype=float)
    n = [len(p) for p in point]
    estimate = float(sum(w * np.mean(list(p.values())) for w, p in zip(weights, point)))
    v_boot = float(np.var(sum(w * b.mean(0) for w, (_, b) in zip(weights, scored)), ddof=1))
    single = any(k == 1 for k in n)
    if single and pool is None:
        # no seed variance to be had: the interval covers test sentences only, and no test is made
        half = float(_t(math.inf).ppf(0.5 + level / 2)) * math.sqrt(v_boot)
        return Contrast(estimate, estimate - half, estimate + half, math.nan, math.sqrt(v_boot), math.nan, math.nan,
                        tuple(n), null, level, {}, NO_SEEDS)
    v_run = [pool.var_run if k == 1 else _run_noise(b) for k, (_, b) in zip(n, scored)]
    v_persist = max(v_boot - float(sum(w ** 2 * r / k for w, r, k in zip(weights, v_run, n))), 0.0)
    common = set(point[0]).intersection(*point[1:])
    if all(k == len(common) for k in n) and len(common) >= 2:
        # every system at the same seeds: the contrast per seed (paired by seed)
        per_seed = {s: float(sum(w * p[s] for w, p in zip(weights, point))) for s in sorted(common, key=str)}
        parts = [(float(np.var(list(per_seed.values()), ddof=1)) / len(common), len(common) - 1)]
        return _finish(estimate, v_persist, parts, n, null, level, per_seed, PAIRED)
    # each system with several runs: its own variance; the one-run systems: one pooled
    # estimate between them (one estimate, so its degrees of freedom count once)
    parts = [(w ** 2 * float(np.var(list(p.values()), ddof=1)) / k, k - 1)
             for w, p, k in zip(weights, point, n) if k > 1]
    if single:
        parts.append((float(sum(w ** 2 for w, k in zip(weights, n) if k == 1)) * pool.var, pool.df))
    return _finish(estimate, v_persist, parts, n, null, level, None, POOLED if single else OWN,
                   pool if single else None)


def difference(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray], score: Scorer, **kwargs) -> Contrast:
    """System A minus system B (``a``, ``b``: seed -> sentence statistics)."""
    return contrast([Term(1.0, a), Term(-1.0, b)], score, **kwargs)


@dataclass(frozen=True)
class SeedCount:
    """A quantity measured once per seed and compared with ``null`` (a count or a share of
    heads): in how many seeds it lies on the claim's side, and the exact sign test."""

    estimate: float                  # the mean over seeds
    agree: int                       # seeds on the claim's side (strictly)
    seeds: int
    p_value: float                   # two-sided exact binomial test of agree / seeds against 1/2
    low: float                       # the smallest and largest per-seed value
    high: float


def sign_test(values: Mapping[str, float] | Sequence[float], direction: str, null: float = 0.0) -> SeedCount:
    """:class:`SeedCount` of per-seed ``values`` against ``null`` in ``direction`` (``>``,
    ``<``). A value equal to ``null`` contradicts a strict claim ("at least one head": > 0).
    Three seeds cannot reach p < 0.05 (all three agreeing gives 0.25): the count says what
    they show."""
    from scipy.stats import binomtest

    values = list(values.values()) if isinstance(values, Mapping) else list(values)
    if not values:
        raise DataError("no values to summarise")
    if direction not in (">", "<"):
        raise ValueError(f"direction must be '>' or '<', got {direction!r}")
    agree = sum((v > null) if direction == ">" else (v < null) for v in values)
    p = float(binomtest(agree, len(values), 0.5).pvalue)
    return SeedCount(float(np.mean(values)), int(agree), len(values), p, float(min(values)), float(max(values)))


def exact(value: float, *, null: float = 0.0) -> Contrast:
    """A quantity without noise (a parameter count): its interval is the value."""
    return _finish(float(value), 0.0, [], (1,), null, LEVEL)


def binomial_interval(correct: int, total: int, level: float = LEVEL) -> tuple[float, float]:
    """Wilson score interval of a proportion (scipy's ``binomtest(...).proportion_ci``)."""
    from scipy.stats import binomtest

    if total <= 0:
        return math.nan, math.nan
    ci = binomtest(int(correct), int(total)).proportion_ci(confidence_level=level, method="wilson")
    return float(ci.low), float(ci.high)
