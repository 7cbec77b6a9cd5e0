"""How often :func:`headlab.eval.significance.difference` calls two systems different: a
simulator of sentence-level scores, the production test run unchanged on each draw.

A sentence's score for system k, seed s is ``difficulty_i + delta_k + persistent_ki +
offset_ks + noise_ksi``: the difficulty is shared by every system (paired designs cancel
it), the persistent system×sentence term is the same at every seed (what averaging seeds
cannot remove), the seed offset moves the whole run, the noise is the run's own. The
test-set variance of a one-run difference is ``2 (sd_persistent^2 + sd_noise^2) / n``, its
seed variance ``2 sd_offset^2``; ``ratio`` (R) is the second over the first. One-seed
experiments get the study's seed variance from two further systems at three seeds
(:func:`~headlab.eval.significance.seed_pool`), as a study's judge pools it. ``spread``
multiplies system 0's seed variance (the pool's and system 1's stay at 1): a one-seed
system that spreads more than the systems its variance is borrowed from.

``tests/test_eval_significance.py`` asserts the false-positive rate on a few cells;
``python -m headlab.bench --what calibration`` measures the whole table
(``calibration.csv``).
"""
from __future__ import annotations

import math

import numpy as np

from headlab.eval import significance as sig

MEAN = sig.ratio_scorer(scale=1.0)
RATIOS = (0.5, 3.0, 10.0, 50.0)
SEEDS = (1, 3, 5)
#: the pool's systems and their seeds, for one-seed experiments
POOL_SYSTEMS, POOL_SEEDS = 2, 3


def draw(rng: np.random.Generator, experiments: int, systems: int, seeds: int, *, ratio: float, n: int = 100,
         sentence_sd: float = 5.0, persistent_share: float = 0.5, difficulty_sd: float = 3.0,
         deltas=None, spreads=None) -> np.ndarray:
    """``(experiments, systems, seeds, n)`` sentence scores (module doc); ``persistent_share``:
    the persistent term's share of the sentence-level variance; ``spreads``: each system's
    seed variance as a multiple of the set-up's (default 1 each)."""
    deltas = np.zeros(systems) if deltas is None else np.asarray(deltas, dtype=float)
    spreads = np.ones(systems) if spreads is None else np.asarray(spreads, dtype=float)
    sd_persistent = sentence_sd * math.sqrt(persistent_share)
    sd_noise = sentence_sd * math.sqrt(1.0 - persistent_share)
    sd_offset = math.sqrt(ratio * sentence_sd ** 2 / n) * np.sqrt(spreads)
    shape = (experiments, systems, seeds, n)
    return (rng.normal(0.0, difficulty_sd, (experiments, 1, 1, n)) + deltas[None, :, None, None]
            + rng.normal(0.0, sd_persistent, (experiments, systems, 1, n))
            + rng.normal(0.0, 1.0, (experiments, systems, seeds, 1)) * sd_offset[None, :, None, None]
            + rng.normal(0.0, sd_noise, shape))


def _runs(scores: np.ndarray) -> dict[str, np.ndarray]:
    """seed -> (n, 2) statistics (score, 1) of one system: ``MEAN`` is the mean score."""
    return {str(s + 1): np.column_stack([row, np.ones_like(row)]) for s, row in enumerate(scores)}


def experiment(scores: np.ndarray, pool_scores: np.ndarray | None, samples: int) -> sig.Contrast:
    """System 0 − system 1 of one experiment (``scores``: ``(2, seeds, n)``)."""
    pool = None
    if pool_scores is not None:
        pool = sig.seed_pool([_runs(x) for x in pool_scores], MEAN, samples=samples)
    return sig.difference(_runs(scores[0]), _runs(scores[1]), MEAN, samples=samples, pool=pool)


def cell(rng: np.random.Generator, ratio: float, seeds: int, experiments: int, *, delta: float = 0.0,
         samples: int = 200, level: float = 0.05, spread: float = 1.0, **model) -> dict:
    """One cell of the table: the share of ``experiments`` with p < ``level`` (and, with a
    true ``delta``, with the sign right), its Monte-Carlo standard error, and the share of
    intervals that cover ``delta``; ``spread``: system 0's seed variance over the others'."""
    scores = draw(rng, experiments, 2, seeds, ratio=ratio, deltas=(delta, 0.0), spreads=(spread, 1.0), **model)
    pools = draw(rng, experiments, POOL_SYSTEMS, POOL_SEEDS, ratio=ratio, **model) if seeds == 1 else None
    results = [experiment(scores[e], None if pools is None else pools[e], samples) for e in range(experiments)]
    called = np.array([r.p_value < level and (delta == 0 or np.sign(r.estimate) == np.sign(delta))
                       for r in results])
    rate = float(called.mean())
    return dict(ratio=ratio, seeds=seeds, delta=delta, spread=spread, experiments=experiments, rate=rate,
                mc_se=math.sqrt(max(rate * (1 - rate), 1e-12) / experiments),
                coverage=float(np.mean([r.ci_low <= delta <= r.ci_high for r in results])))


def effect_size(ratio: float, *, n: int = 100, sentence_sd: float = 5.0) -> float:
    """The power cells' true difference: twice the sd of a one-seed difference (test set and seed)."""
    return 2.0 * math.sqrt(2 * sentence_sd ** 2 / n * (1.0 + ratio))
