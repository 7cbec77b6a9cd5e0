"""Effects as data: the claims of a study's paper, judged on our runs (``effects.csv``).

Each study's ``effects`` builder writes one row per claim it judges (columns
:data:`COLUMNS`): the claim, the systems compared, the quantity's unit, the paper's
direction (``>`` or ``<``) against the ``null`` value (0 for "A beats B"; a margin such as
-1 for "A is within 1 BLEU of B", i.e. not worse by more than 1), the paper's own value of
the quantity where it reports one (else ``paper_note`` says why not), ours (the mean over
seeds) with its 95% interval and p-value against ``null``, the p-value after Holm's
correction over the study's claims, the seeds behind it, what the interval covers, and the
verdicts (``verdict``: at 5% for this claim alone; ``verdict_adjusted``: at 5% for the
paper's family of claims, the one the READMEs lead with):

* ``holds``: the claim is significant on the paper's side (the interval excludes ``null``);
* ``reversed``: significant on the other side;
* ``inconclusive at this scale``: neither;
* ``inconclusive (one seed)``: a system with one run and no seed variance in the study to
  stand for it: no test is made (the interval shown covers test sentences only);
* for a count or share measured once per seed (heads kept, gates saturated): the sign test
  over seeds, and where it cannot decide (three seeds cannot: all three agreeing has p =
  0.25) ``as claimed in every seed`` or ``contradicted in every seed``, else inconclusive;
* ``not judged``: the claim is configured but this run's results leave nothing to judge it
  on (no head syntactic enough to ask whether the gates keep it); ``interval`` says why, so
  a claim never goes missing from the list without a word.

Tests (:mod:`headlab.eval.significance`): a contrast of BLEU (or of an accuracy over test
items) counts the seed variance and the test-set variance that seeds do not already hold; a
one-run system borrows the largest seed variance of the study's systems with several runs on the
same test set (its ``interval`` says so, with the pool's degrees of freedom); a quantity
measured once per seed has the exact sign test; a count (parameters) is exact, without a
test, and outside the family Holm's correction counts, as is a sign test over too few seeds
to reach 5% (:func:`can_reject`). Holm's correction bounds the chance of at least one false
verdict in the family at 5%.

The README of each study renders its section from ``effects.csv``
(:func:`readme_lines`) and ``results/effects.md`` lists every study's claims
(:func:`summary`, the ``effects_summary`` rule).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

COLUMNS = ("study", "claim", "compared", "unit", "direction", "null", "paper", "paper_note", "ours", "ci_low",
           "ci_high", "p_value", "p_adjusted", "seeds", "runs", "agree", "interval", "verdict", "verdict_adjusted")
LEVEL = 0.05
HOLDS, REVERSED, INCONCLUSIVE = "holds", "reversed", "inconclusive at this scale"
ONE_SEED = "inconclusive (one seed)"
AS_CLAIMED, CONTRADICTED = "as claimed in every seed", "contradicted in every seed"
NOT_JUDGED = "not judged"
VERDICTS = (HOLDS, REVERSED, INCONCLUSIVE, ONE_SEED, AS_CLAIMED, CONTRADICTED, NOT_JUDGED)
#: what an interval covers (a pooled one: :func:`pooled_interval`)
BOTH, TEST_ONLY, SIGN, EXACT = ("seeds and test sentences", "test sentences only (1 seed, no seed variance)",
                                "none: per-seed values, sign test", "exact")
NO_PAPER_VALUE = "the paper reports no number for this contrast"
#: the start of a not-judged row's ``interval``, followed by why
UNJUDGED = "none: not judged, "


def pooled_interval(pool) -> str:
    """The ``interval`` of a contrast whose one-run systems took the study's seed variance
    (the largest of its multi-seed systems', :class:`headlab.eval.significance.SeedPool`)."""
    return (f"seeds (a 1-seed system: the largest seed variance of {pool.systems} multi-seed systems of this study, "
            f"{pool.df} df) and test sentences")


@dataclass(frozen=True)
class Claim:
    """A claim of a paper as a directional statement about one quantity (``ours``)."""

    text: str                    # "§4.1: with the deep decoder, 7Ftoken+1L is within 1 BLEU of 8L"
    compared: str                # "7Ftoken+1L − 8L (multi30k en-de, 2+2)"
    direction: str = ">"         # the paper's: ours > null, or ours < null
    null: float = 0.0
    paper: float | None = None   # the paper's own value of the quantity, where it has one
    unit: str = "BLEU"
    paper_note: str = ""         # why ``paper`` is missing (a figure only, not in the paper...)


def verdict(ci_low: float, ci_high: float, direction: str, null: float = 0.0) -> str:
    """``holds`` / ``reversed`` / ``inconclusive at this scale`` from a 95% interval."""
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


def against_its_paper(frame):
    """The rows (a boolean mask) whose paper's own number does not meet the claim as stated
    (its direction against its null): a claim that misreads its paper. Rows without a paper
    number are not among them."""
    paper = frame["paper"].astype(float)
    return paper.notna() & (((frame["direction"] == ">") & (paper <= frame["null"]))
                            | ((frame["direction"] == "<") & (paper >= frame["null"])))


def verdict_from_p(p_value: float, side: int, direction: str) -> str:
    """``holds`` / ``reversed`` where ``p_value`` < 5%, ``side``: the sign of ours - null."""
    if p_value is None or math.isnan(p_value) or p_value >= LEVEL or side == 0:
        return INCONCLUSIVE
    return HOLDS if (side > 0) == (direction == ">") else REVERSED


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's (1979) step-down adjusted p-values; NaN (no test) stays NaN and is not counted.
    Sorted ascending, the i-th (from 0) of m is multiplied by m - i, then made monotone:
    adjusted_i = max over j <= i of min(1, (m - j) p_j)."""
    values = np.asarray(p_values, dtype=float)
    adjusted = np.full(len(values), math.nan)
    tested = np.flatnonzero(~np.isnan(values))
    order = tested[np.argsort(values[tested], kind="stable")]
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * values[index]))
        adjusted[index] = running
    return adjusted.tolist()


def can_reject(row: Mapping) -> bool:
    """Whether a row can reach p < 5% at all, and so belongs to Holm's family: a row with a
    test, but not a sign test over too few seeds (its smallest p is that of every seed
    agreeing, 2 / 2^n: 1 at one seed, 0.25 at three, 0.0625 at five). A row that cannot
    reject adds no chance of a false verdict, and counting it would only weaken the others."""
    p_value = row["p_value"]
    if p_value is None or math.isnan(p_value):
        return False
    return row["interval"] != SIGN or min(1.0, 2.0 * 0.5 ** int(row["seeds"])) < LEVEL


def _sign_verdict(p_value: float, agree: int, seeds: int) -> str:
    """A per-seed count's verdict: the sign test where it decides, else what every seed shows."""
    if seeds <= 1:
        return ONE_SEED
    if p_value < LEVEL:
        return verdict_from_p(p_value, 1 if 2 * agree > seeds else -1, ">")
    return AS_CLAIMED if agree == seeds else CONTRADICTED if agree == 0 else INCONCLUSIVE


#: a system in a contrast: seed -> (hypothesis file, reference file[, target language]), the
#: target language picking sacreBLEU's tokeniser as the ``bleu`` rule does (zh, ja, ko)
Runs = Mapping[str, tuple[str, ...]]


class Judge:
    """Collects one study's effect rows; reads each hypothesis file once. Contrasts are
    tested in :meth:`frame`, when every system of the study is known: a one-run system's
    seed variance is borrowed from the study's systems with several runs on the same test set
    and metric (those of claims added with ``pooled=True``)."""

    def __init__(self, study: str, samples: int = 1000):
        self.study, self.samples = study, int(samples)
        self._pending: list[tuple] = []
        self._stats: dict[tuple[str, str, str, str], np.ndarray] = {}
        self._pools: dict[tuple[str, str], dict[tuple, Mapping[str, np.ndarray]]] = {}

    def stats(self, hyp: str, ref: str, trg_lang: str = "", metric: str = "bleu") -> np.ndarray:
        from headlab.eval.common import read_aligned
        from headlab.eval.significance import sentence_stats

        key = (hyp, ref, trg_lang, metric)
        if key not in self._stats:
            texts = read_aligned(hyp=hyp, ref=ref)
            self._stats[key] = sentence_stats(texts["hyp"], texts["ref"], metric, trg_lang=trg_lang)
        return self._stats[key]

    def systems(self, claim: Claim, terms: Sequence[tuple[float, Runs]], metric: str = "bleu", *,
                pooled: bool = True) -> None:
        """A contrast of systems' corpus scores (weights: +1 / -1 for a difference).
        ``pooled=False``: its systems' runs are not replicates of one system (subsamples of
        several sizes) and stay out of the study's seed pool."""
        from headlab.eval.significance import Term, scorer

        stats = [Term(weight, {seed: self.stats(*run, metric=metric) for seed, run in runs.items()})
                 for weight, runs in terms]
        refs = {(run[1], metric) for _, runs in terms for run in runs.values()}
        if pooled:
            for (_, runs), term in zip(terms, stats):
                if len(runs) >= 2:
                    key = (next(iter(runs.values()))[1], metric)
                    self._pools.setdefault(key, {})[tuple(sorted(runs.items()))] = term.runs
        self._pending.append(("contrast", claim, stats, scorer(metric), refs.pop() if len(refs) == 1 else None))

    def items(self, claim: Claim, terms, score: Callable, pool=None) -> None:
        """A contrast over per-item statistics (``significance.Term`` s) and a scorer;
        ``pool``: the seed variance for a one-run system (none: no test)."""
        self._pending.append(("contrast", claim, list(terms), score, pool))

    def per_seed(self, claim: Claim, values: Mapping[str, float]) -> None:
        """A count or share measured once per seed, without test sentences: the sign test."""
        self._pending.append(("per_seed", claim, dict(values)))

    def unjudged(self, claim: Claim, why: str) -> None:
        """A claim this run's results cannot judge (``why``: what they lack); its row says so
        instead of the claim leaving the list unseen. No test: outside Holm's family."""
        self._pending.append(("unjudged", claim, str(why)))

    def exact(self, claim: Claim, value: float) -> None:
        """A quantity without noise (a parameter count)."""
        self._pending.append(("exact", claim, float(value)))

    def _pool(self, key, score):
        from headlab.eval.significance import seed_pool

        if key is None or not isinstance(key, tuple):
            return key                  # items(): the caller's pool (or None)
        return seed_pool(list(self._pools.get(key, {}).values()), score, samples=self.samples)

    def rows(self) -> list[dict]:
        """Every claim tested, Holm's correction over the study's family: the rows that can
        reject (:func:`can_reject`); a row outside it keeps its own p-value as ``p_adjusted``."""
        from headlab.eval import significance as sig

        rows, pools = [], {}
        for kind, claim, *rest in self._pending:
            if kind == "contrast":
                terms, score, key = rest
                if key not in pools:
                    pools[key] = self._pool(key, score)
                result = sig.contrast(terms, score, samples=self.samples, null=claim.null, pool=pools[key])
                interval = {sig.NO_SEEDS: TEST_ONLY, sig.POOLED: None}.get(result.seed_source, BOTH)
                rows.append(_row(self.study, claim, result.estimate, result.ci_low, result.ci_high, result.p_value,
                                 result.seeds, interval or pooled_interval(result.pool),
                                 ONE_SEED if result.seed_source == sig.NO_SEEDS else None))
            elif kind == "per_seed":
                count = sig.sign_test(rest[0], claim.direction, claim.null)
                row = _row(self.study, claim, count.estimate, math.nan, math.nan, count.p_value, (count.seeds,),
                           SIGN, _sign_verdict(count.p_value, count.agree, count.seeds))
                row["agree"] = f"{count.agree} of {count.seeds}"
                rows.append(row)
            elif kind == "unjudged":
                row = _row(self.study, claim, math.nan, math.nan, math.nan, math.nan, (0,), UNJUDGED + rest[0],
                           NOT_JUDGED)
                row["runs"] = ""
                rows.append(row)
            else:
                value = rest[0]
                rows.append(_row(self.study, claim, value, value, value, math.nan, (1,), EXACT,
                                 verdict(value, value, claim.direction, claim.null)))
        family = [can_reject(r) for r in rows]
        adjusted_all = holm([r["p_value"] if inside else math.nan for r, inside in zip(rows, family)])
        for row, inside, adjusted in zip(rows, family, adjusted_all):
            adjusted = adjusted if inside else row["p_value"]
            row["p_adjusted"] = adjusted
            row["verdict_adjusted"] = _adjusted(row, adjusted)
        return rows

    def frame(self):
        import pandas as pd

        return pd.DataFrame(self.rows(), columns=list(COLUMNS))


def _clean(value: float) -> float:
    """A contrast of equal scores is 0, not float noise such as -2.8e-17."""
    return value if math.isnan(value) else round(value, 6) + 0.0


def _row(study: str, claim: Claim, estimate, low, high, p_value, seeds, interval: str, fixed: str | None) -> dict:
    low, high = _clean(low), _clean(high)
    note = claim.paper_note or ("" if claim.paper is not None else NO_PAPER_VALUE)
    return {"study": study, "claim": claim.text, "compared": claim.compared, "unit": claim.unit,
            "direction": claim.direction, "null": claim.null,
            "paper": math.nan if claim.paper is None else round(float(claim.paper), 6), "paper_note": note,
            "ours": _clean(estimate), "ci_low": low, "ci_high": high, "p_value": p_value, "p_adjusted": math.nan,
            "seeds": min(seeds), "runs": "/".join(str(n) for n in seeds), "agree": "", "interval": interval,
            "verdict": fixed or verdict(low, high, claim.direction, claim.null), "verdict_adjusted": ""}


def _adjusted(row: dict, p_adjusted: float) -> str:
    """The verdict at 5% for the family: Holm's p-value where the row has a test."""
    if row["interval"] == EXACT or row["verdict"] in (ONE_SEED, NOT_JUDGED):
        return row["verdict"]
    side = int(np.sign(row["ours"] - row["null"]))
    if row["interval"] == SIGN:
        agree, seeds = (int(x) for x in row["agree"].split(" of "))
        return _sign_verdict(p_adjusted, agree, seeds)
    return verdict_from_p(p_adjusted, side, row["direction"])


# -- rendering -------------------------------------------------------------------------------

def _number(value) -> str:
    """Two decimals; small non-zero values (parameter counts in millions) with three digits."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return f"{value:.3g}" if 0 < abs(value) < 0.1 else f"{value:.2f}"


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value == ""


def _ours(row) -> str:
    if str(row["interval"]).startswith(UNJUDGED):
        return f"— ({row['interval'][len(UNJUDGED):]})"
    text = _number(row["ours"])
    if row["interval"] == SIGN:
        text += f" (mean; {row['agree']} seeds {row['direction']} {row['null']:g})"
    elif row["interval"] != EXACT and not math.isnan(row["ci_low"]):
        text += f" [{_number(row['ci_low'])}, {_number(row['ci_high'])}]"
    return text


def _paper(row) -> str:
    value = "—" if _missing(row["paper"]) else _number(row["paper"])
    return f"{value} ({row['paper_note']})" if row["paper_note"] else value


def _p(value) -> str:
    if value is None or math.isnan(value):
        return ""
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def _verdict(row) -> str:
    text = row["verdict_adjusted"]
    if row["interval"] == TEST_ONLY:
        text += " (the interval: test sentences only)"
    elif str(row["interval"]).startswith("seeds (a 1-seed system"):
        text += f" ({row['interval'].split('(', 1)[1].split(')')[0]})"
    return text


def _escape(text) -> str:
    return str(text).replace("|", "\\|")


def table_lines(frame, *, study_column: bool = False) -> list[str]:
    """Markdown table of effect rows, the family-adjusted verdict first."""
    scaled = "scale" in frame.columns   # toy or published GPU runs (headlab.studies.published)
    head = (["study"] if study_column else []) + ["claim", "compared", *(["scale"] if scaled else []), "paper says",
                                                  "paper", "ours [95% CI]", "p (Holm)", "p", "seeds",
                                                  "verdict (Holm)", "verdict alone"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for _, row in frame.iterrows():
        cells = ([row["study"]] if study_column else []) + [
            row["claim"], row["compared"], *([row["scale"]] if scaled else []),
            f"{row['direction']} {row['null']:g} {row['unit']}", _paper(row),
            _ours(row), _p(row["p_adjusted"]), _p(row["p_value"]), row["runs"], _verdict(row), row["verdict"]]
        lines.append("| " + " | ".join(_escape(c) for c in cells) + " |")
    return lines


def counts(frame, column: str = "verdict_adjusted") -> str:
    """``2 hold, 1 reversed, 5 inconclusive (3 of them from one seed), ...`` of ``column``."""
    tally = {v: int((frame[column] == v).sum()) if len(frame) else 0 for v in VERDICTS}
    text = f"{tally[HOLDS]} hold, {tally[REVERSED]} reversed, {tally[INCONCLUSIVE]} inconclusive at this scale"
    if tally[ONE_SEED]:
        text += f", {tally[ONE_SEED]} inconclusive with one seed"
    if tally[AS_CLAIMED] or tally[CONTRADICTED]:
        text += (f", {tally[AS_CLAIMED]} as claimed and {tally[CONTRADICTED]} contradicted in every seed "
                 f"(too few seeds to test)")
    if tally[NOT_JUDGED]:
        text += f", {tally[NOT_JUDGED]} not judged (the results lack what they ask for)"
    return text


def chance_line(frame) -> str:
    """What chance alone would give: m claims that can reject at 5% each, and what Holm's
    correction over them bounds (the chance of at least one false verdict, not a count)."""
    rows = frame.to_dict("records") if len(frame) else []
    family = sum(can_reject(r) for r in rows)
    left_out = sum(not _missing(r["p_value"]) for r in rows) - family
    outside = (f" ({left_out} more have a sign test over too few seeds to reach p < 0.05 and stay out of the "
               f"family)" if left_out else "")
    return (f"Chance verdicts: {family} claims can reach p < 0.05{outside}. If none of their effects were real, up "
            f"to {LEVEL * family:.2f} of the unadjusted verdicts (`verdict alone`, 5% each) would be expected to be "
            f"holds or reversed by chance; Holm's correction over the {family} keeps the chance of at least one false "
            f"verdict (a hold or a reversal with no real effect behind it) in the adjusted list (`verdict (Holm)`) at "
            f"or below {LEVEL:.0%}.")


EXPLANATION = ("Each claim is a directional statement about one quantity (`paper says`: ours should be above "
               "or below that value). `ours` is the mean over seeds with its 95% interval, counting the variance "
               "across seeds and the test-set variance the seeds do not already hold (`headlab.eval.significance`; "
               "its false-positive rate is measured in docs/statistics.md). A system with one seed borrows the "
               "largest seed variance of this study's systems with several seeds on the same test set, and the row "
               "says so; "
               "where there is none, no test is made: `inconclusive (one seed)`. A count or share measured once per "
               "seed gets the sign test over seeds (`k of n seeds`). `verdict (Holm)`: holds / reversed when Holm's "
               "adjusted p-value over the paper's claims is below 5% (on the paper's side / the other), the verdict "
               "this list leads with; `verdict alone`: the claim at 5% by itself.")


def _read(path: str):
    """An ``effects.csv``, its text columns as text (empty, not NaN)."""
    import pandas as pd

    text = {"paper_note": str, "runs": str, "agree": str, "interval": str, "verdict": str, "verdict_adjusted": str}
    return pd.read_csv(path, dtype=text, keep_default_na=False, na_values={c: ["", "nan", "NaN"] for c in COLUMNS
                                                                           if c not in text})


def readme_lines(path: str) -> list[str]:
    """A study README's section on the paper's effects, rendered from its ``effects.csv``."""
    frame = _read(path)
    return ["## Which effects of the paper hold here", "",
            f"From [effects.csv](effects.csv), after Holm's correction over the paper's claims: {counts(frame)} "
            f"(each claim alone: {counts(frame, 'verdict')}). {EXPLANATION}", "", *table_lines(frame), "",
            chance_line(frame), ""]


def summary(paths: Sequence[str]) -> str:
    """``results/effects.md``: every configured study's claims at a glance."""
    frames = [_read(p) for p in paths]
    lines = ["# What this run reproduces (generated)", "",
             "Every claim each configured study judges, from its `effects.csv`. " + EXPLANATION, "",
             "| study | claims | verdicts (Holm, within the paper) | each claim alone |", "|---|---|---|---|"]
    for path, frame in zip(paths, frames):
        name = frame["study"].iloc[0] if len(frame) else path
        lines.append(f"| {name} | {len(frame)} | {counts(frame)} | {counts(frame, 'verdict')} |")
    for frame in frames:
        if len(frame):
            lines += ["", f"## {frame['study'].iloc[0]}", "", *table_lines(frame), "", chance_line(frame)]
    return "\n".join(lines) + "\n"


def main_effects_summary(argv: list[str]) -> int:
    """``headlab effects-summary --in A/effects.csv [--in ...] --out results/effects.md``."""
    import argparse

    from headlab.io import atomic_write

    parser = argparse.ArgumentParser(prog="headlab effects-summary", description=main_effects_summary.__doc__)
    parser.add_argument("--in", dest="inputs", action="append", required=True, help="a study's effects.csv (repeatable)")
    parser.add_argument("--out", required=True, help="the summary (Markdown) to write")
    args = parser.parse_args(argv)
    text = summary(args.inputs)
    with atomic_write(args.out) as handle:
        handle.write(text)
    return 0
