"""Paper C's claims (§5.2-§A.2) judged on our runs (``effects.csv``), each beside the
paper's own difference where its tables give one."""
from __future__ import annotations

from headlab.studies import published
from headlab.studies.common import at_seeds, corpus_pairs, pair_label, seeds as study_seeds
from headlab.studies.effects import Claim, Judge
from headlab.studies.paper_C.grid import (
    PRUNE, a2_models, analysis_pair, f4_models, runs, t1_models, t2_models, t3_models)
from headlab.studies.paper_C.outputs import BLEU, Files, reference

#: Table 1's syntax-enhanced systems
SYNTAX_SYSTEMS = ["+DEA", "+DEA+RHE", "+LPEA", "+LPEA+RHE"]
#: §5.2's pairwise claims on Table 1: (better, worse, text), judged on the toy runs of every
#: pair and on the published GPU runs that train both systems (their rows named as here)
T1_CONTRASTS = (("+LPEA+RHE", "Transformer", "§5.2: LPEA+RHE beats the Transformer"),
                ("+DEA+RHE", "+DEA", "§5.2: RHE lifts DEA (DEA+RHE > DEA)"),
                ("+LPEA+RHE", "+LPEA", "§5.2: RHE lifts LPEA (LPEA+RHE > LPEA)"))


def _paper_value(table: str, row: str, column: str) -> float | None:
    paper = reference(table)
    found = paper[(paper["table"] == table) & (paper["row"] == row) & (paper["column"] == column)]["value"]
    return float(found.iloc[0]) if len(found) else None


def _paper_t1(better: str | list[str], worse: str | list[str], pair: str) -> float | None:
    """The paper's Table 1 ``better`` - ``worse`` (BLEU) on its WMT16 column of ``pair``
    (en-de, en-cs), else the mean over its columns; each may be a list (their mean)."""
    paper = reference("T1")
    paper = paper[paper["column"].str.endswith("BLEU")].pivot(index="column", columns="row", values="value")
    wanted = {"en-de": "En-De (WMT16) BLEU", "en-cs": "En-Cs (WMT16) BLEU"}.get(pair)
    if wanted in paper.index:
        paper = paper.loc[[wanted]]

    def mean(names):
        return paper[[names] if isinstance(names, str) else list(names)].mean(axis=1)
    return float((mean(better) - mean(worse)).mean())


def _paper_delta(table: str, better: str, worse: str) -> float | None:
    ours, theirs = _paper_value(table, better, BLEU), _paper_value(table, worse, BLEU)
    return None if ours is None or theirs is None else ours - theirs


def effects(files: Files):
    """(inputs, build) of ``effects.csv``: §5.2-§A.2's claims. Table 1's on every pair (the
    analysis pair's headline systems with all their seeds), the analyses on the analysis pair."""
    study = files.study
    seeds = study_seeds(study)
    claims = []      # (claim, [(weight, [runs], ablation)])
    for corpus, pair in corpus_pairs(study):
        systems = {name: runs(study, model) for name, model in t1_models(study, corpus, pair).items()}
        where = pair_label(corpus, pair)
        for better, worse, text in T1_CONTRASTS:
            claims.append((Claim(text, f"{better} − {worse} ({where})", ">", 0.0, _paper_t1(better, worse, pair)),
                           [(1, systems[better], "full"), (-1, systems[worse], "full")]))
        claims.append((Claim("§5.2: the syntax-enhanced systems beat Rel_Pos and Localness (their means)",
                             f"mean(DEA, DEA+RHE, LPEA, LPEA+RHE) − mean(Rel_Pos, Localness) ({where})", ">", 0.0,
                             _paper_t1(SYNTAX_SYSTEMS, ["+Rel_Pos", "+Localness"], pair)),
                       [(1 / 4, systems[name], "full") for name in SYNTAX_SYSTEMS]
                       + [(-1 / 2, systems[name], "full") for name in ("+Rel_Pos", "+Localness")]))
    where = pair_label(*analysis_pair(study))
    t2 = {name: at_seeds(model, seeds) for name, model in t2_models(study).items()}
    for better, worse in (("Rel_Pos+RHE", "Rel_Pos"), ("Localness+RHE", "Localness")):
        claims.append((Claim(f"§5.3.1: RHE lifts {worse}", f"{better} − {worse} ({where})", ">", 0.0,
                             _paper_delta("T2", better, worse)),
                       [(1, t2[better], "full"), (-1, t2[worse], "full")]))
    claims.append((Claim("§5.3.1: pruning the redundant heads costs at most 0.5 BLEU against the Transformer",
                         f"+RHE (Prune) − Transformer ({where})", ">", -0.5, _paper_delta("T2", "+RHE (Prune)", "Transformer")),
                   [(1, t2["+RHE (Prune)"], PRUNE), (-1, t2["Transformer"], "full")]))
    t3 = t3_models(study)
    clippings = sorted(t3)
    if len(clippings) > 1:
        best = 6 if 6 in clippings else clippings[-1]
        claims.append((Claim(f"§5.3.3: local-phrase clipping matters: k={best} (the paper's best) beats k={clippings[0]}",
                             f"LPEA+RHE k={best} − k={clippings[0]} ({where})", ">", 0.0,
                             _paper_delta("T3", f"k={best}", f"k={clippings[0]}")),
                       [(1, at_seeds(t3[best], seeds), "full"), (-1, at_seeds(t3[clippings[0]], seeds), "full")]))
    a2 = a2_models(study)
    for name, model in a2.items():
        if name not in ("[0-0]", "[1-1]") and "[1-1]" in a2:
            claims.append((Claim("§A.2: enhancing the first encoder layer only is best",
                                 f"LPEA+RHE [1-1] − {name} ({where})", ">", 0.0, _paper_delta("A2", "[1-1]", name)),
                           [(1, at_seeds(a2["[1-1]"], seeds), "full"), (-1, at_seeds(model, seeds), "full")]))
    f4 = f4_models(study)
    fixed = [gate for gate in f4 if gate not in ("dynamic", "Transformer")]
    if fixed:
        claims.append((Claim("§5.3.2: the dynamic Syn_gate beats fixed gates", f"dynamic − mean(fixed gates "
                             f"{', '.join(fixed)}) ({where})", ">", 0.0,
                             paper_note="the paper shows it in Figure 4 only, without numbers"),
                       [(1, at_seeds(f4["dynamic"], seeds), "full")]
                       + [(-1 / len(fixed), at_seeds(f4[gate], seeds), "full") for gate in fixed]))
    # "full" stands for the translation the study scores (the averaged checkpoints, if any)
    ablation = {"full": files.ablation}
    inputs = [file for _, terms in claims for _, system_runs, name in terms for run in system_runs
              for file in files.scored(run, ablation.get(name, name))[:2]]
    gpu = published.read(files.published)
    inputs += published.inputs(files.published) + published.claim_inputs(gpu, "paper_C", "T1", by="row")
    inputs += [files.ref(model) for corpus, pair in corpus_pairs(study)
               for model in list(t1_models(study, corpus, pair).values())[:1]]

    def build():
        judge = Judge("paper_C", files.samples())
        for claim, terms in claims:
            judge.systems(claim, [(weight, {run["seed"]: files.scored(run, ablation.get(name, name)) for run in system_runs})
                                  for weight, system_runs, name in terms])
        scales = judge_published(judge, files, gpu)
        return published.with_scale(judge.frame(), scales)
    return inputs, build


def judge_published(judge: Judge, files: Files, frame, reference_of=None) -> dict[str, str]:
    """§5.2's pairwise claims (:data:`T1_CONTRASTS`) on the published GPU runs of Table 1
    (systems named by their table row), in the toy claims' family; ``reference_of(pair,
    test)``: the reference file (default: this workflow's, where the study trains that pair
    and scores that test set). Returns compared -> scale."""
    def claim_of(better, worse, text):
        return lambda slice_, layers, pair: Claim(text, f"{better} − {worse} (GPU base {slice_}, {pair}, {layers})",
                                                  ">", 0.0, _paper_t1(better, worse, pair))
    contrasts = [(claim_of(better, worse, text), [(1, better), (-1, worse)]) for better, worse, text in T1_CONTRASTS]
    first_model = published.reference_of(files, lambda corpus, pair: next(iter(t1_models(files.study, corpus,
                                                                                          pair).values())))
    return published.judge(judge, frame, "paper_C", "T1", contrasts, reference_of or first_model, by="row")
