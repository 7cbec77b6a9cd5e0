"""Seed-aware comparison of systems: a difference tested so that both the variance across
training seeds and the sampling of test sentences count.

One training run is one draw of the training randomness (initialisation, dropout, batch
order); one test set is one draw of sentences. A difference between two systems is only
evidence if it is larger than what either draw moves it by. Following Clark et al. (2011,
"Better Hypothesis Testing for Statistical Machine Translation: Controlling for Optimizer
Instability", ACL), we estimate the two variances separately and add them:

* **test-set sampling** (their s_sel): paired bootstrap resampling of test sentences
  (Koehn 2004), the same resampled sentence ids for every system and every seed, so that
  the difference is paired. The ids are drawn exactly as sacreBLEU 2.x draws them for
  ``--paired-bs`` and ``--confidence`` (``numpy.random.default_rng(12345).choice(n,
  (samples, n))``, :func:`sacrebleu.significance._bootstrap_resample`), and each resample
  is scored from sacreBLEU's own sentence statistics (``_extract_corpus_statistics``,
  ``_compute_score_from_stats``): with one seed per system this *is* sacreBLEU's paired
  bootstrap. ``v_test`` = the variance of the contrast over the resamples.
* **seeds** (their s_dev): the variance of the per-seed values. When every system was
  trained at the same seeds, the contrast is computed per seed (a paired design: a
  fine-tune and its control share their parent's seed) and ``v_seed = var(q_s) / S``
  with ``S - 1`` degrees of freedom; otherwise each system's seed variance is the pooled
  variance of the systems with two or more seeds (the seed variance is taken as a property
  of the training set-up, not of the system), ``v_seed = sum_k w_k^2 s_pooled^2 / n_k``.

The contrast is ``Q = sum_k w_k * mean_seeds(score_k)`` (a difference: weights +1, -1; a
ratio claim "A keeps 90% of B": +1, -0.9; a mean over several systems: 1/m each), its
standard error ``sqrt(v_test + v_seed)``, and its 95% interval and two-sided p-value use a
t distribution with Welch-Satterthwaite degrees of freedom (Satterthwaite 1946):
``(v_test + v_seed)^2 / (v_seed^2 / df_seed)`` (v_test counts as known: a thousand
resamples). With three seeds and a seed variance that dominates, that is t with 2 degrees
of freedom: an interval 4.3 standard errors wide on either side, which is what three runs
can tell. With one seed per system there is no seed variance to estimate (``seeds == 1``):
the test covers test-set sampling only and says so (its false-positive rate is then above
the nominal one whenever seeds matter, which ``tests/test_eval_significance.py`` shows).

The simulation in ``tests/test_eval_significance.py`` checks the calibration: systems
that differ only by seed noise and test-set noise are called different in about 5% of
experiments (the stated rate), systems with a known difference are detected and covered
by the interval.
"""
from __future__ import annotations

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

#: summed sufficient statistics, shape (samples, k) -> one score per row
Scorer = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Term:
    """One system in a contrast: its weight and, per seed, the sufficient statistics of each
    test sentence (``(n, k)``, rows aligned with the test set)."""

    weight: float
    runs: Mapping[str, np.ndarray]


@dataclass
class Contrast:
    """A contrast ``Q = sum_k w_k mean_seeds(score_k)``, tested against ``null``."""

    estimate: float
    ci_low: float
    ci_high: float
    p_value: float
    se_test: float
    se_seed: float
    df: float
    seeds: tuple[int, ...]           # runs per term
    null: float = 0.0
    level: float = LEVEL
    per_seed: dict = field(default_factory=dict)   # seed -> contrast, where paired

    @property
    def replicated(self) -> bool:
        """True when a seed variance was estimated (some system has two or more seeds)."""
        return max(self.seeds, default=0) >= 2


def resample_counts(n: int, samples: int = DEFAULT_SAMPLES, seed: int = SACREBLEU_SEED) -> np.ndarray:
    """``(samples, n)``: how often each test sentence is drawn in each bootstrap resample,
    from the ids sacreBLEU draws (``default_rng(seed).choice(n, (samples, n))``); a resample's
    summed statistics are ``counts @ stats``."""
    if n < 1:
        raise DataError("no test sentences to resample")
    ids = np.random.default_rng(seed).choice(n, size=(samples, n), replace=True)
    counts = np.zeros((samples, n), dtype=np.float64)
    np.add.at(counts, (np.arange(samples)[:, None], ids), 1.0)
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


def _finish(estimate: float, v_test: float, v_seed: float, df_seed: float, seeds, null: float,
            level: float, per_seed=None) -> Contrast:
    var = v_test + v_seed
    df = math.inf if v_seed <= 0 else var ** 2 / (v_seed ** 2 / df_seed)
    se = math.sqrt(var)
    if se == 0.0:        # identical systems, or a quantity without noise (a parameter count)
        p = 1.0 if estimate == null else 0.0
        return Contrast(estimate, estimate, estimate, p, 0.0, 0.0, df, tuple(seeds), null, level, per_seed or {})
    dist = _t(df)
    half = float(dist.ppf(0.5 + level / 2)) * se
    p = float(2.0 * dist.sf(abs(estimate - null) / se))
    return Contrast(estimate, estimate - half, estimate + half, min(p, 1.0), math.sqrt(v_test), math.sqrt(v_seed),
                    df, tuple(seeds), null, level, per_seed or {})


def contrast(terms: Sequence[Term], score: Scorer, *, samples: int = DEFAULT_SAMPLES, seed: int = SACREBLEU_SEED,
             null: float = 0.0, level: float = LEVEL) -> Contrast:
    """Test ``Q = sum_k w_k mean_seeds(score_k)`` against ``null`` (see the module doc)."""
    if not terms or any(not t.runs for t in terms):
        raise DataError("a contrast needs at least one system, each with at least one run")
    sizes = {len(stats) for t in terms for stats in t.runs.values()}
    if len(sizes) != 1:
        raise DataError(f"the runs are not scored on the same test sentences (sizes {sorted(sizes)})")
    counts = resample_counts(sizes.pop(), samples, seed)
    point, boot = [], []
    for t in terms:
        point.append({s: float(score(stats.sum(0))[0]) for s, stats in t.runs.items()})
        boot.append(np.mean([score(counts @ stats) for stats in t.runs.values()], axis=0))
    weights = np.array([t.weight for t in terms], dtype=float)
    estimate = float(sum(w * np.mean(list(p.values())) for w, p in zip(weights, point)))
    v_test = float(np.var(weights @ np.array(boot), ddof=1))
    n = [len(p) for p in point]
    common = set(point[0]).intersection(*point[1:])
    per_seed = {}
    if all(len(p) == len(common) for p in point) and len(common) >= 2:
        # every system at the same seeds: the contrast per seed (paired by seed)
        per_seed = {s: float(sum(w * p[s] for w, p in zip(weights, point))) for s in sorted(common, key=str)}
        v_seed, df_seed = float(np.var(list(per_seed.values()), ddof=1)) / len(common), len(common) - 1
    else:
        spread = [(len(p) - 1, float(np.var(list(p.values()), ddof=1))) for p in point if len(p) >= 2]
        df_seed = sum(d for d, _ in spread)
        pooled = sum(d * v for d, v in spread) / df_seed if df_seed else 0.0
        v_seed = float(sum(w ** 2 * pooled / k for w, k in zip(weights, n)))
    return _finish(estimate, v_test, v_seed, df_seed or math.inf, n, null, level, per_seed)


def difference(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray], score: Scorer, **kwargs) -> Contrast:
    """System A minus system B (``a``, ``b``: seed -> sentence statistics)."""
    return contrast([Term(1.0, a), Term(-1.0, b)], score, **kwargs)


def seed_interval(values: Mapping[str, float] | Sequence[float], *, null: float = 0.0,
                  level: float = LEVEL) -> Contrast:
    """A quantity measured once per seed without test-set sampling (the share of gates a
    model keeps): its mean, a t interval over the seeds and the p-value against ``null``.
    One seed: the interval is the value itself and ``seeds == (1,)`` says so."""
    values = list(values.values()) if isinstance(values, Mapping) else list(values)
    if not values:
        raise DataError("no values to summarise")
    mean = float(np.mean(values))
    if len(values) == 1:
        return Contrast(mean, math.nan, math.nan, math.nan, 0.0, 0.0, math.nan, (1,), null, level)
    v_seed = float(np.var(values, ddof=1)) / len(values)
    return _finish(mean, 0.0, v_seed, len(values) - 1, (len(values),), null, level)


def exact(value: float, *, null: float = 0.0) -> Contrast:
    """A quantity without noise (a parameter count): its interval is the value."""
    return _finish(float(value), 0.0, 0.0, math.inf, (1,), null, LEVEL)


def binomial_interval(correct: int, total: int, level: float = LEVEL) -> tuple[float, float]:
    """Wilson score interval of a proportion (scipy's ``binomtest(...).proportion_ci``)."""
    from scipy.stats import binomtest

    if total <= 0:
        return math.nan, math.nan
    ci = binomtest(int(correct), int(total)).proportion_ci(confidence_level=level, method="wilson")
    return float(ci.low), float(ci.high)
