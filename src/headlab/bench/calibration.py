"""Calibration of the seed-aware test (``calibration.csv``, :func:`bench_calibration`): how
often :func:`headlab.eval.significance.difference` calls two equal systems different (the
false-positive rate, ``fpr``) and finds a true difference with the right sign (``power``),
at every seed count and seed/test-set variance ratio of :mod:`headlab.eval.calibration`.

Besides the production test (``df_weight`` 4, :data:`~headlab.eval.significance.SEED_DF_WEIGHT`)
at three shares of the persistent system×sentence term, the table has the two ends the
weight was chosen between, at a share of one half: 1 (plain Welch-Satterthwaite) and
``inf`` (the seed estimate's own degrees of freedom), and the production test where system
0 spreads twice as much across seeds as every other system (``spread`` 2: at one seed, a
system whose seed variance is twice that of the pool it borrows from). Minutes on one core.
"""
from __future__ import annotations

import csv
import math
import os

import numpy as np

COLUMNS = ["df_weight", "persistent_share", "spread", "ratio", "seeds", "experiments", "fpr", "fpr_mc_se",
           "coverage", "delta", "power", "power_mc_se"]
#: (df_weight, persistent_share, spread) measured
SETTINGS = ((4.0, 0.5, 1.0), (4.0, 0.1, 1.0), (4.0, 0.9, 1.0), (1.0, 0.5, 1.0), (math.inf, 0.5, 1.0), (4.0, 0.5, 2.0))


def bench_calibration(out_dir: str, experiments: int = 2000, seed: int = 2026) -> list[dict]:
    from headlab.eval import calibration, significance
    from headlab.io import atomic_write

    rows, chosen = [], significance.SEED_DF_WEIGHT
    rng = np.random.default_rng(seed)
    try:
        for weight, share, spread in SETTINGS:
            significance.SEED_DF_WEIGHT = weight     # the only thing varied: the test is the production one
            for ratio in calibration.RATIOS:
                for seeds in calibration.SEEDS:
                    model = dict(persistent_share=share, spread=spread)
                    null = calibration.cell(rng, ratio, seeds, experiments, **model)
                    delta = calibration.effect_size(ratio)
                    power = calibration.cell(rng, ratio, seeds, experiments, delta=delta, **model)
                    rows.append(dict(df_weight=weight, persistent_share=share, spread=spread, ratio=ratio, seeds=seeds,
                                     experiments=experiments, fpr=null["rate"], fpr_mc_se=round(null["mc_se"], 4),
                                     coverage=null["coverage"], delta=round(delta, 3), power=power["rate"],
                                     power_mc_se=round(power["mc_se"], 4)))
                    print(f"calibration: weight {weight:g}, share {share}, spread {spread:g}, R {ratio:g}, {seeds} seed(s): "
                          f"fpr {null['rate']:.3f}, power {power['rate']:.3f}", flush=True)
    finally:
        significance.SEED_DF_WEIGHT = chosen
    os.makedirs(out_dir, exist_ok=True)
    with atomic_write(os.path.join(out_dir, "calibration.csv")) as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return rows
