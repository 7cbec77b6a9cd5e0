"""Effects as data: the claims of a study's paper, judged on our runs (``effects.csv``).

Each study's ``effects`` builder writes one row per claim it judges (columns
:data:`COLUMNS`): the claim, the systems compared, the quantity's unit, the paper's
direction (``>`` or ``<``) against the ``null`` value (0 for "A beats B"; a margin such as
-1 for "A is within 1 BLEU of B", i.e. not worse by more than 1), the paper's own value of
the quantity where it reports one, ours (the mean over seeds) with its 95% interval and
p-value against ``null``, the seeds behind it, what the interval covers, and the verdict:

* ``holds``: the interval excludes ``null`` on the paper's side;
* ``reversed``: the interval excludes ``null`` on the other side;
* ``inconclusive at this scale``: the interval contains ``null`` (or there is none: a
  per-seed quantity measured once).

Intervals (:mod:`headlab.eval.significance`): a difference of BLEU (or of an accuracy
over test items) counts the seed variance and the resampling of test sentences; a quantity
measured once per seed without test sentences (the share of gates kept) has a t interval
over the seeds; a count (parameters) is exact. A row whose systems have one seed each
(``seeds == 1``) covers test-set sampling only and the README says so next to its verdict.

The README of each study renders its section from ``effects.csv``
(:func:`readme_lines`) and ``results/effects.md`` lists every study's claims
(:func:`summary`, the ``effects_summary`` rule).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

COLUMNS = ("study", "claim", "compared", "unit", "direction", "null", "paper", "ours", "ci_low", "ci_high",
           "p_value", "seeds", "runs", "interval", "verdict")
HOLDS, REVERSED, INCONCLUSIVE = "holds", "reversed", "inconclusive at this scale"
VERDICTS = (HOLDS, REVERSED, INCONCLUSIVE)
#: what an interval covers
BOTH, TEST_ONLY, SEEDS, NONE, EXACT = ("seeds and test sentences", "test sentences only (1 seed)", "seeds",
                                       "none (1 seed)", "exact")


@dataclass(frozen=True)
class Claim:
    """A claim of a paper as a directional statement about one quantity (``ours``)."""

    text: str                    # "§4.1: with the deep decoder, 7Ftoken+1L is within 1 BLEU of 8L"
    compared: str                # "7Ftoken+1L − 8L (multi30k en-de, 2+2)"
    direction: str = ">"         # the paper's: ours > null, or ours < null
    null: float = 0.0
    paper: float | None = None   # the paper's own value of the quantity, where it has one
    unit: str = "BLEU"


def verdict(ci_low: float, ci_high: float, direction: str, null: float = 0.0) -> str:
    """``holds`` / ``reversed`` / ``inconclusive at this scale`` (see the module doc)."""
    if direction not in (">", "<"):
        raise ValueError(f"direction must be '>' or '<', got {direction!r}")
    if ci_low is None or ci_high is None or math.isnan(ci_low) or math.isnan(ci_high):
        return INCONCLUSIVE
    above, below = ci_low > null, ci_high < null
    if (above and direction == ">") or (below and direction == "<"):
        return HOLDS
    if above or below:
        return REVERSED
    return INCONCLUSIVE


#: a system in a contrast: seed -> (hypothesis file, reference file[, target language]), the
#: target language picking sacreBLEU's tokeniser as the ``bleu`` rule does (zh, ja, ko)
Runs = Mapping[str, tuple[str, ...]]


class Judge:
    """Collects one study's effect rows; reads each hypothesis file once."""

    def __init__(self, study: str, samples: int = 1000):
        self.study, self.samples, self.rows = study, int(samples), []
        self._stats: dict[tuple[str, str, str], np.ndarray] = {}

    def stats(self, hyp: str, ref: str, trg_lang: str = "", metric: str = "bleu") -> np.ndarray:
        from headlab.eval.common import read_aligned
        from headlab.eval.significance import sentence_stats

        key = (hyp, ref, trg_lang, metric)
        if key not in self._stats:
            texts = read_aligned(hyp=hyp, ref=ref)
            self._stats[key] = sentence_stats(texts["hyp"], texts["ref"], metric, trg_lang=trg_lang)
        return self._stats[key]

    def _add(self, claim: Claim, result, interval: str) -> dict:
        runs = [str(n) for n in result.seeds]

        def clean(x):   # a contrast of equal scores is 0, not float noise such as -2.8e-17
            return x if math.isnan(x) else round(x, 6) + 0.0
        row = {"study": self.study, "claim": claim.text, "compared": claim.compared, "unit": claim.unit,
               "direction": claim.direction, "null": claim.null,
               "paper": math.nan if claim.paper is None else round(float(claim.paper), 6), "ours": clean(result.estimate),
               "ci_low": clean(result.ci_low), "ci_high": clean(result.ci_high),
               "p_value": math.nan if interval == EXACT else result.p_value,
               "seeds": min(result.seeds), "runs": "/".join(runs), "interval": interval,
               "verdict": verdict(clean(result.ci_low), clean(result.ci_high), claim.direction, claim.null)}
        self.rows.append(row)
        return row

    def systems(self, claim: Claim, terms: Sequence[tuple[float, Runs]], metric: str = "bleu") -> dict:
        """A contrast of systems' corpus scores (weights: +1 / -1 for a difference)."""
        from headlab.eval.significance import Term, scorer

        stats = [Term(w, {s: self.stats(*run, metric=metric) for s, run in runs.items()}) for w, runs in terms]
        return self.items(claim, stats, scorer(metric))

    def items(self, claim: Claim, terms, score: Callable) -> dict:
        """A contrast over per-item statistics (``significance.Term`` s) and a scorer."""
        from headlab.eval.significance import contrast

        result = contrast(terms, score, samples=self.samples, null=claim.null)
        return self._add(claim, result, BOTH if result.replicated else TEST_ONLY)

    def per_seed(self, claim: Claim, values: Mapping[str, float]) -> dict:
        """A quantity measured once per seed, without test sentences."""
        from headlab.eval.significance import seed_interval

        result = seed_interval(values, null=claim.null)
        return self._add(claim, result, SEEDS if len(values) > 1 else NONE)

    def exact(self, claim: Claim, value: float) -> dict:
        """A quantity without noise (a parameter count)."""
        from headlab.eval.significance import exact

        return self._add(claim, exact(value, null=claim.null), EXACT)

    def frame(self):
        import pandas as pd

        return pd.DataFrame(self.rows, columns=list(COLUMNS))


# -- rendering -------------------------------------------------------------------------------

def _number(value) -> str:
    """Two decimals; small non-zero values (parameter counts in millions) with three digits."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return f"{value:.3g}" if 0 < abs(value) < 0.1 else f"{value:.2f}"


def _ours(row) -> str:
    text = _number(row["ours"])
    if row["interval"] != EXACT and not math.isnan(row["ci_low"]):
        text += f" [{_number(row['ci_low'])}, {_number(row['ci_high'])}]"
    return text


def _p(value) -> str:
    if value is None or math.isnan(value):
        return ""
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def _verdict(row) -> str:
    text = row["verdict"]
    if row["interval"] == TEST_ONLY:
        text += " (1 seed: test sentences only)"
    elif row["interval"] == NONE:
        text += " (1 seed: no interval)"
    elif row["interval"] == BOTH and row["seeds"] <= 1:
        text += " (a system with 1 seed: the others' seed variance stands for it)"
    return text


def _escape(text) -> str:
    return str(text).replace("|", "\\|")


def table_lines(frame, *, study_column: bool = False) -> list[str]:
    """Markdown table of effect rows."""
    head = (["study"] if study_column else []) + ["claim", "compared", "paper says", "paper", "ours [95% CI]",
                                                  "p", "seeds", "verdict"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for _, row in frame.iterrows():
        cells = ([row["study"]] if study_column else []) + [
            row["claim"], row["compared"], f"{row['direction']} {row['null']:g} {row['unit']}",
            _number(row["paper"]), _ours(row), _p(row["p_value"]), row["runs"], _verdict(row)]
        lines.append("| " + " | ".join(_escape(c) for c in cells) + " |")
    return lines


def counts(frame) -> str:
    """``2 hold, 1 reversed, 5 inconclusive at this scale (3 of them from one seed)``."""
    n = {v: int((frame["verdict"] == v).sum()) for v in VERDICTS}
    one = int(frame["interval"].isin([TEST_ONLY, NONE]).sum()) if len(frame) else 0
    return (f"{n[HOLDS]} hold, {n[REVERSED]} reversed, {n[INCONCLUSIVE]} inconclusive at this scale; "
            f"{one} of {len(frame)} from one seed")


EXPLANATION = ("Each claim is a directional statement about one quantity (`paper says`: ours should be above "
               "or below that value). `ours` is the mean over seeds with its 95% interval, counting both the "
               "variance across seeds and the resampling of test sentences (`headlab.eval.significance`); "
               "`holds`: the interval excludes the value on the paper's side, `reversed`: on the other side, "
               "otherwise `inconclusive at this scale`. `seeds`: runs behind each system compared; a row from one "
               "seed per system covers test-set sampling only and says so.")


def readme_lines(path: str) -> list[str]:
    """A study README's section on the paper's effects, rendered from its ``effects.csv``."""
    import pandas as pd

    frame = pd.read_csv(path)
    return ["## Which effects of the paper hold here", "",
            f"From [effects.csv](effects.csv): {counts(frame)}. {EXPLANATION}", "", *table_lines(frame), ""]


def summary(paths: Sequence[str]) -> str:
    """``results/effects.md``: every configured study's claims at a glance."""
    import pandas as pd

    frames = [pd.read_csv(p) for p in paths]
    lines = ["# What this run reproduces (generated)", "",
             "Every claim each configured study judges, from its `effects.csv`. " + EXPLANATION, "",
             "| study | claims | verdicts |", "|---|---|---|"]
    for path, frame in zip(paths, frames):
        name = frame["study"].iloc[0] if len(frame) else path
        lines.append(f"| {name} | {len(frame)} | {counts(frame)} |")
    for frame in frames:
        if len(frame):
            lines += ["", f"## {frame['study'].iloc[0]}", "", *table_lines(frame)]
    return "\n".join(lines) + "\n"


def main_effects_summary(argv: list[str]) -> int:
    """``headlab effects-summary --in A/effects.csv [--in ...] --out results/effects.md``."""
    import argparse

    from headlab.io import atomic_write

    parser = argparse.ArgumentParser(prog="headlab effects-summary", description=main_effects_summary.__doc__)
    parser.add_argument("--in", dest="inputs", action="append", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    text = summary(args.inputs)
    with atomic_write(args.out) as handle:
        handle.write(text)
    return 0
