"""Do the criteria agree? Spearman rank correlations between head criteria, per study and
over all atlas models, and the papers' claims that are agreements in disguise.

Heads are the unit: every (model, site, layer, head) row of the atlas's ``heads.csv``
files where both criteria are defined; pruned heads (a head mask: output 0, so every
output-based criterion is 0 by construction) are left out. A model in several studies
counts in each; ``all`` counts it once. Seeds of one configuration are pooled (each seed's
heads are rows of their own).

Interval: a 95% percentile bootstrap over heads (:data:`BOOTSTRAP` resamples of the rows,
seed 0): heads of one model are not independent, so the interval is a lower bound on the
uncertainty; at fewer than :data:`MIN_HEADS` heads, or a constant criterion, no
correlation is given.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

#: criterion column -> what it measures (the explorer's colour choices, in this order)
CRITERIA = {
    "confidence": "confidence: mean max attention weight (Voita et al. 2019)",
    "entropy": "attention entropy (nats)",
    "distance": "mean attention distance (positions)",
    "grad_importance": "gradient importance |dL/dxi|, layer-normalised (Michel et al. 2019)",
    "loss_delta": "loss change with the head disabled (nats/token)",
    "delta_bleu": "BLEU change, head k disabled in every encoder layer (paper A T4)",
    "syn_margin": "syntactic margin: best relation's accuracy - best offset baseline (paper D)",
    "syn_accuracy": "best relation's accuracy (%)",
    "dhicm_importance": "DHICM importance G, mean (paper B)",
    "gate": "L0 gate value at test time (paper D, Voita et al.)",
    "rhe_redundant": "share of sentences RHE labels the head redundant (paper C)",
}
#: criteria whose pairwise agreement is tabulated (syn_accuracy is shown, not correlated:
#: syn_margin says the same relative to the baseline)
CORRELATED = [c for c in CRITERIA if c != "syn_accuracy"]
BOOTSTRAP = 1000
MIN_HEADS = 8

#: the papers' claims that say two criteria agree: (claim, paper, a, b, expected sign, rows)
CLAIMS = [
    ("the gates keep the syntactic heads", "D §3.4", "gate", "syn_margin", +1, "gated encoder heads"),
    ("redundant heads are the low-confidence ones", "C §3", "rhe_redundant", "confidence", -1, "RHE heads"),
    ("gradient importance approximates the ablation loss", "Michel et al. §4", "grad_importance", "loss_delta", +1,
     "all heads"),
    ("DHICM gives the heads that matter the most weight", "B §3.1", "dhicm_importance", "loss_delta", +1,
     "DHICM-mixed heads"),
]
AGREEMENT_COLUMNS = ["group", "a", "b", "heads", "models", "rho", "low", "high", "interval"]


def _average_ranks(codes: np.ndarray, distinct: int) -> np.ndarray:
    """Average ranks (ties share the mean of their places, 1-based) of each row of
    ``codes``: (S, n) integer codes of values in their order (``np.unique``'s inverse), so
    that every bootstrap resample is ranked at once."""
    S = codes.shape[0]
    counts = np.bincount((codes + distinct * np.arange(S)[:, None]).ravel(), minlength=S * distinct)
    counts = counts.reshape(S, distinct)
    average = np.cumsum(counts, 1) - counts + (counts + 1) / 2.0
    return np.take_along_axis(average, codes, 1)


def _row_pearson(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a - a.mean(1, keepdims=True)
    b = b - b.mean(1, keepdims=True)
    den = np.sqrt((a * a).sum(1) * (b * b).sum(1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (a * b).sum(1) / den, np.nan)


def _spearman_rows(a, b, picks: np.ndarray) -> np.ndarray:
    """Spearman's rho of (a[p], b[p]) for each row p of ``picks`` (S, n)."""
    values_a, codes_a = np.unique(np.asarray(a, dtype=float), return_inverse=True)
    values_b, codes_b = np.unique(np.asarray(b, dtype=float), return_inverse=True)
    return _row_pearson(_average_ranks(codes_a[picks], len(values_a)), _average_ranks(codes_b[picks], len(values_b)))


def spearman(a, b) -> float:
    """Spearman's rho (Pearson's r of average ranks); NaN for a constant criterion."""
    return float(_spearman_rows(a, b, np.arange(len(a))[None, :])[0])


def spearman_ci(a, b, samples: int = BOOTSTRAP, seed: int = 0) -> tuple[float, float, float]:
    """(rho, low, high): Spearman's rho and its 95% percentile bootstrap interval over rows
    (resamples where a criterion is constant are dropped)."""
    rho = spearman(a, b)
    if math.isnan(rho):
        return rho, math.nan, math.nan
    picks = np.random.default_rng(seed).integers(0, len(a), (samples, len(a)))
    draws = _spearman_rows(a, b, picks)
    draws = draws[~np.isnan(draws)]
    low, high = np.percentile(draws, [2.5, 97.5]) if len(draws) else (math.nan, math.nan)
    return rho, float(low), float(high)


def _pair_row(group: str, frame: pd.DataFrame, a: str, b: str) -> dict | None:
    both = frame[["model"]].assign(**{c: pd.to_numeric(frame[c], errors="coerce") for c in (a, b)}).dropna()
    if len(both) < MIN_HEADS:
        return None
    rho, low, high = spearman_ci(both[a].astype(float), both[b].astype(float))
    if math.isnan(rho):
        return None
    return dict(group=group, a=a, b=b, heads=len(both), models=both["model"].nunique(), rho=rho, low=low,
                high=high, interval="bootstrap 95% over heads")


def usable(heads: pd.DataFrame) -> pd.DataFrame:
    """Rows that enter the statistics: not pruned."""
    pruned = heads["pruned"].astype(str).str.lower().isin(("true", "1"))
    return heads[~pruned]


def agreement(heads: pd.DataFrame, studies: dict[str, list[str]]) -> pd.DataFrame:
    """Spearman of every pair of :data:`CORRELATED` criteria, per study and ``all``.
    ``heads``: the atlas's head rows (column ``model`` = model path); ``studies``: model
    path -> the studies it belongs to."""
    heads = usable(heads)
    groups = [("all", heads)]
    for name in dict.fromkeys(s for names in studies.values() for s in names):
        groups.append((name, heads[heads["model"].map(lambda m: name in studies.get(m, []))]))
    rows = []
    for group, frame in groups:
        for a, b in itertools.combinations(CORRELATED, 2):
            if a in frame and b in frame:
                row = _pair_row(group, frame, a, b)
                if row:
                    rows.append(row)
    return pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)


def _claim_rows(heads: pd.DataFrame, rows: str) -> pd.DataFrame:
    if rows == "gated encoder heads":
        return heads[(heads["site"] == "enc") & heads["gate"].notna()]
    if rows == "RHE heads":
        return heads[heads["kind"].astype(str).str.startswith("RHE")]
    if rows == "DHICM-mixed heads":
        return heads[heads["dhicm_importance"].notna()]
    return heads


def claims(heads: pd.DataFrame) -> pd.DataFrame:
    """One row per claim of :data:`CLAIMS`: rho with its interval and a verdict: ``agrees``
    (the interval excludes 0 on the claimed side), ``contradicts`` (on the other side),
    ``undecided`` (it holds 0), ``no data``."""
    heads = usable(heads)
    out = []
    for claim, paper, a, b, sign, rows in CLAIMS:
        frame = _claim_rows(heads, rows)
        row = _pair_row("all", frame, a, b) if a in frame and b in frame else None
        base = dict(claim=claim, paper=paper, a=a, b=b, expected="+" if sign > 0 else "-", rows=rows)
        if row is None:
            out.append({**base, "heads": len(frame), "models": frame["model"].nunique(), "rho": math.nan,
                        "low": math.nan, "high": math.nan, "verdict": "no data"})
            continue
        low, high = row["low"] * sign, row["high"] * sign
        verdict = "agrees" if min(low, high) > 0 else "contradicts" if max(low, high) < 0 else "undecided"
        out.append({**base, **{k: row[k] for k in ("heads", "models", "rho", "low", "high")}, "verdict": verdict})
    return pd.DataFrame(out)
