"""Paper B's claims (§5), judged on our runs (``effects.csv``): Table 3 at every seed, and
Table 4's larger gain at small sizes (the subsamples and seeds as runs)."""
from __future__ import annotations

from headlab.studies import published
from headlab.studies.effects import Claim, Judge
from headlab.studies.paper_B.grid import SYSTEMS, sweep_sizes
from headlab.studies.paper_B.outputs import Files, reference, sweep, t3_cells


#: the abstract's headline claim (Table 3), on the toy runs and on the published GPU ones
HEADLINE = ("§5 (T3), the abstract's headline: DHICM outperforms the Transformer with the default "
            "hyper-parameters: DHICM > T-base")


def _paper_pivot(table: str):
    """One of the paper's tables as numbers: row x column."""
    return reference(table).assign(value=lambda ref: ref["value"].astype(float)).pivot(
        index="row", columns="column", values="value")


def _paper_gap(better: str, worse: str) -> float:
    """The paper's mean of better - worse over its Table 3 corpora."""
    paper = _paper_pivot("T3")
    return float((paper[better] - paper[worse]).mean())


def _paper_t4_gain() -> float:
    """The paper's DHICM - T-optimal at its smallest size minus at its full size (Table 4)."""
    paper = _paper_pivot("T4")
    gap = paper["DHICM"] - paper["T-optimal"]
    sizes = sorted(gap.index, key=lambda row: int(row.split()[-1].rstrip("K")))
    return float(gap[sizes[0]] - gap[sizes[-1]])


def _run_id(model) -> str:
    """A run of a system: its seed on the full set, else its subsample and seed."""
    return model["seed"] if model["size"] == "full" else f"{model['size']}/{model['seed']}"


def effects(files: Files):
    """(inputs, build) of ``effects.csv``: §5's claims, Table 3 at every seed and Table 4's
    gain at small sizes (the subsamples and seeds as runs)."""
    study = files.study
    claims = []
    for corpus, pair, runs in t3_cells(files):
        by_system = {system: [finals[system][0] for finals in runs.values()] for system in SYSTEMS}
        claims.append((Claim("§5 (T3): the grid search's hyper-parameters beat the default: T-optimal > T-base",
                             f"T-optimal − T-base ({corpus} {pair})", ">", 0.0, _paper_gap("T-optimal", "T-base")),
                       [(1, by_system["T-optimal"]), (-1, by_system["T-base"])]))
        claims.append((Claim(HEADLINE, f"DHICM − T-base ({corpus} {pair})", ">", 0.0, _paper_gap("DHICM", "T-base")),
                       [(1, by_system["DHICM"]), (-1, by_system["T-base"])]))
        claims.append((Claim("§5 (T3): DHICM > T-optimal (DHICM >= T-optimal in every pair)",
                             f"DHICM − T-optimal ({corpus} {pair})", ">", 0.0, _paper_gap("DHICM", "T-optimal")),
                       [(1, by_system["DHICM"]), (-1, by_system["T-optimal"])]))
        if sweep_sizes(study, corpus, pair):
            runs_here = [(size, system, model) for run_corpus, run_pair, size, system, _, model in sweep(files)
                         if (run_corpus, run_pair) == (corpus, pair)]
            # (DHICM - T-optimal) over every small run (sizes x subsamples x seeds) minus on the full set
            terms = [(sign * (1 if small else -1), [model for size, run_system, model in runs_here
                                                    if run_system == system and (size != "full") == small])
                     for system, sign in (("DHICM", 1), ("T-optimal", -1)) for small in (True, False)]
            claims.append((Claim("§5 (T4): DHICM's gain over T-optimal is larger at small training sizes",
                                 f"(DHICM − T-optimal) at {', '.join(map(str, study.get('sizes', [])))} pairs − at the "
                                 f"full set ({corpus} {pair})", ">", 0.0, _paper_t4_gain()), terms))
    inputs = [file for _, terms in claims for _, models in terms for model in models
              for file in files.scored(model)[:2]]
    gpu = published.read(files.published)
    inputs += published.inputs(files.published) + published.claim_inputs(gpu, "paper_B", "T3", by="row")

    def build():
        judge = Judge("paper_B", files.samples())
        for claim, terms in claims:
            # the sweep's runs of a system span sizes and subsamples: not seed replicates for the pool
            judge.systems(claim, [(weight, {_run_id(model): files.scored(model) for model in models})
                                  for weight, models in terms],
                          pooled=all(model["size"] == "full" for _, models in terms for model in models))
        scales = judge_published(judge, files, gpu)
        return published.with_scale(judge.frame(), scales)
    return inputs, build


def judge_published(judge: Judge, files: Files, frame, reference_of=None) -> dict[str, str]:
    """The abstract's headline, DHICM > T-base with the default hyper-parameters, on the
    published GPU runs of Table 3 (systems named by their table row: the paper's T-optimal
    needs the grid search, which no sitting runs), in the toy claims' family;
    ``reference_of(pair, test)``: the reference file (default: this workflow's, where the
    study trains that pair and scores that test set). Returns compared -> scale."""
    def claim_of(slice_, layers, pair):
        return Claim(HEADLINE, f"DHICM − T-base (GPU base {slice_}, {pair}, {layers})", ">", 0.0,
                     _paper_gap("DHICM", "T-base"))
    return published.judge(judge, frame, "paper_B", "T3", [(claim_of, [(1, "DHICM"), (-1, "T-base")])],
                           reference_of or published.reference_of(files, lambda corpus, pair: _any_model(files, corpus, pair)),
                           by="row")


def _any_model(files: Files, corpus: str, pair: str) -> dict:
    """A model of the pair, whose reference is the pair's (the ``raw`` path names the data only)."""
    for cell_corpus, cell_pair, runs in t3_cells(files):
        if (cell_corpus, cell_pair) == (corpus, pair):
            return next(iter(runs.values()))["T-base"][0]
    raise KeyError((corpus, pair))
