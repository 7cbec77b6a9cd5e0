"""Do the criteria agree? Spearman rank correlations between head criteria, per study and
over all atlas models, and the papers' claims that are agreements in disguise.

Heads are the unit: every (model, site, layer, head) row of the atlas's ``heads.csv``
files where both criteria are defined, except for a criterion measured per encoder head
index (ΔBLEU: head k disabled in every layer), where the unit is (model, head index) and
the other criterion its mean over the layers (:func:`units`); pruned heads (a head mask: output 0, so every
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
from dataclasses import dataclass

import numpy as np
import pandas as pd

@dataclass(frozen=True)
class Criterion:
    """How to read one head criterion: what it measures; which way a head is more important
    (+1: larger, -1: smaller, 0: no importance reading, it describes the head); whether 0
    means "no effect" with both signs possible (a diverging colour scale); its unit (``head``,
    or ``head index``: one value per encoder head index, all layers together); and what the
    important end of its scale means, for the legend."""
    label: str
    important: int
    signed: bool = False
    unit: str = "head"
    means: str = ""


#: criterion column -> how to read it (the explorer's choices, in this order)
CRITERIA = {
    "confidence": Criterion("confidence: mean max attention weight (Voita et al. 2019)", +1,
                            means="higher confidence (more peaked)"),
    "entropy": Criterion("attention entropy (nats)", -1, means="lower entropy (more focused)"),
    "distance": Criterion("mean attention distance (positions)", 0, means="no importance reading: farther"),
    "grad_raw": Criterion("gradient importance Σ|dL/dξ|, raw (Michel et al. 2019)", +1, means="larger gradient"),
    "grad_importance": Criterion("gradient importance divided by its layer's L2 norm (Michel et al.'s code)", +1,
                                 means="larger share of its layer's gradient"),
    "loss_delta": Criterion("loss change with the head disabled (nats/token)", +1, signed=True,
                            means="loss rises when disabled (blue: it falls)"),
    "value_norm": Criterion("value norm ‖Σ_j α_ij f(x_j)‖: weights × transformed values (Kobayashi et al. 2020)",
                            +1, means="adds more to the layer's output"),
    "delta_bleu": Criterion("BLEU change with head k disabled in every encoder layer (paper A T4): one value per "
                            "head index", -1, signed=True, unit="head index",
                            means="BLEU falls when disabled (blue: it rises)"),
    "syn_margin": Criterion("syntactic margin: best relation's accuracy - best offset baseline (paper D)", +1,
                            signed=True, means="beats the positional baseline (blue: below it)"),
    "syn_accuracy": Criterion("best relation's accuracy (%)", +1, means="more accurate"),
    "dhicm_importance": Criterion("DHICM importance G, mean (paper B)", +1, means="weighted more by G"),
    "gate": Criterion("L0 gate value at test time (paper D, Voita et al.)", +1, means="more open"),
    "rhe_redundant": Criterion("share of sentences RHE labels the head redundant (paper C)", -1,
                               means="less often redundant"),
}
#: criteria whose pairwise agreement is tabulated (syn_accuracy is shown, not correlated:
#: syn_margin says the same relative to the baseline)
CORRELATED = [c for c in CRITERIA if c != "syn_accuracy"]
BOOTSTRAP = 1000
MIN_HEADS = 8

#: the papers' claims that say two criteria agree: (claim, paper, a, b, expected sign, rows,
#: what is compared with what)
CLAIMS = [
    ("the gates keep the syntactic heads", "D §3.4", "gate", "syn_margin", +1, "gated encoder heads",
     "test-time gate vs syntactic margin"),
    ("redundant heads are the low-confidence ones", "C §3", "rhe_redundant", "confidence", -1, "RHE heads",
     "share labelled redundant vs confidence"),
    # like with like: the raw gradient sum against the raw loss change (the layer-normalised
    # score would compare a within-layer share with an absolute change)
    ("gradient importance approximates the ablation loss", "Michel et al. §4", "grad_raw", "loss_delta", +1,
     "all heads", "raw gradient sum vs raw loss change, neither layer-normalised"),
    ("DHICM gives the heads that matter the most weight", "B §3.1", "dhicm_importance", "loss_delta", +1,
     "DHICM-mixed heads", "mean G vs raw loss change"),
]
#: ``n``: distinct units (heads, or head indices: :func:`units`)
AGREEMENT_COLUMNS = ["group", "a", "b", "units", "n", "models", "rho", "low", "high", "interval"]


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


def units(frame: pd.DataFrame, a: str, b: str) -> tuple[pd.DataFrame, str]:
    """(rows with both criteria, one per distinct unit, and the unit's name). A criterion
    given per encoder head index (the same value in every layer) makes the unit
    (model, head index): the other criterion is averaged over the layers, so that one
    measurement is never counted once per layer."""
    keep = [c for c in ("model", "site", "layer", "head") if c in frame]
    both = frame[keep].assign(**{c: pd.to_numeric(frame[c], errors="coerce") for c in (a, b)}).dropna(subset=[a, b])
    per_index = [c for c in (a, b) if CRITERIA.get(c) and CRITERIA[c].unit == "head index"]
    if not per_index:
        return both, "head"
    both = both[both["site"] == "enc"] if "site" in both else both
    grouped = both.groupby(["model", "head"], sort=False)
    return grouped.agg({c: "first" if c in per_index else "mean" for c in (a, b)}).reset_index(), "head index"


def _pair_row(group: str, frame: pd.DataFrame, a: str, b: str) -> dict | None:
    both, unit = units(frame, a, b)
    if len(both) < MIN_HEADS:
        return None
    rho, low, high = spearman_ci(both[a].astype(float), both[b].astype(float))
    if math.isnan(rho):
        return None
    return dict(group=group, a=a, b=b, units=unit, n=len(both), models=both["model"].nunique(), rho=rho,
                low=low, high=high, interval=f"bootstrap 95% over {unit}s")


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


def model_pairs(heads: pd.DataFrame) -> list[dict]:
    """Every pair of :data:`CORRELATED` criteria over one model's usable heads: the
    explorer's agreement view ({a, b, units, n, rho, low, high}, pairs with too few units
    or a constant criterion left out)."""
    heads = usable(heads)
    rows = []
    for a, b in itertools.combinations(CORRELATED, 2):
        if a in heads and b in heads:
            row = _pair_row("model", heads, a, b)
            if row:
                rows.append({k: row[k] for k in ("a", "b", "units", "n", "rho", "low", "high")})
    return rows


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
    for claim, paper, a, b, sign, rows, compares in CLAIMS:
        frame = _claim_rows(heads, rows)
        row = _pair_row("all", frame, a, b) if a in frame and b in frame else None
        base = dict(claim=claim, paper=paper, a=a, b=b, compares=compares, expected="+" if sign > 0 else "-",
                    rows=rows)
        if row is None:
            out.append({**base, "units": "head", "n": len(frame), "models": frame["model"].nunique(), "rho": math.nan,
                        "low": math.nan, "high": math.nan, "verdict": "no data"})
            continue
        low, high = row["low"] * sign, row["high"] * sign
        verdict = "agrees" if min(low, high) > 0 else "contradicts" if max(low, high) < 0 else "undecided"
        out.append({**base, **{k: row[k] for k in ("units", "n", "models", "rho", "low", "high")}, "verdict": verdict})
    return pd.DataFrame(out)
