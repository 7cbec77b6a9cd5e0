"""Paper C: *Redundant heads enlivening* (RHE) with syntax-enhanced attention (DEA, LPEA),
beside Rel_Pos (Shaw et al. 2018) and Localness (Yang et al. 2018). Tables 1-3, A2, A3
and Figures 4-5, each beside the paper's own numbers (``paper_C/reference.csv``).

Systems (§5.2)
--------------
Every enhancement replaces the heads of the **enhanced encoder layers** (``enhanced``,
default ``1-1``: the first layer, as the paper chose after Table A2) and leaves the other
layers stock: ``+DEA`` = ``8DEA,*(8L)``, ``+LPEA+RHE`` = ``8RHElpea,*(8L)``, and so on (the
head kinds are in :mod:`headlab.heads`). The paper's text says so for DEA/LPEA ("all heads
of the first encoder layer"); **we apply Rel_Pos and Localness to the same layers** so that
Table 2's "+RHE" rows (RHE enlivening redundant heads with Rel_Pos / Localness attention,
``RHErel`` / ``RHEloc``) differ from their rows in one thing only. ``+RHE (Prune)`` is
Table 1's LPEA+RHE model translated with its redundant heads pruned (output zeroed,
``-rhe_prune``): the issue asks for pruning *at test time*; the paper also reports a
training speed for it, which here is the LPEA+RHE model's own.

Every T1 system has the default variant, so the Transformer is the very model paper A
trains (shared, not retrained) and compare-mt's paired bootstrap compares the seven as
one group (⇑ / ↑: better than the Transformer at p < 0.01 / p < `evaluation.significance`, 0.05 by default).

Analyses on one pair (``analysis_pair``, the paper's En→De WMT16): Table 2, Table 3 (the
clipping ``k`` of LPEA+RHE), Table A2 (the enhanced layers of LPEA+RHE: the caption says
"without enlivening", but its [1-1] row is Table 1's LPEA+RHE number, 26.28, so we run
LPEA+RHE), Table A3 (parsers: bracketing F1 on the PTB sample and BLEU of LPEA+RHE),
Figure 4 (fixed Syn_gate values vs the dynamic gate) and Figure 5 (one layer-1 head's
attention on the paper's example sentence). Speed (Table 2, A2) is training steps per
second of wall time from each train rule's snakemake benchmark (startup, validation and
checkpoints included).

Seeds: every model at each of ``seeds``; Table 1's headline comparison on the analysis pair
(the Transformer, +DEA+RHE and +LPEA+RHE) also at ``headline_seeds``. Each table's cell is
the mean over its runs (± sd, n); Table 1's ⇑/↑ are compare-mt's paired bootstrap on the
first seed (the paper's test), the seed-aware tests are in ``effects.csv``; the redundant
shares and Figure 5 (one model's attention) use the first seed.

The study's contract (:class:`headlab.studies.base.Study`) is filled here; its grid is
:mod:`.grid` (no pandas), its tables and figures :mod:`.outputs`, its claims :mod:`.claims`,
its README :mod:`.readme`.
"""
from __future__ import annotations

from headlab.studies.base import CLAIMS, Study, register_study
from headlab.studies.paper_C import grid


@register_study
class PaperC(Study):
    name = "paper_C"
    outdir = grid.OUTDIR
    tables = ("T1", "T2", "T3", "A2", "A3", "redundant")
    gpu_tables = ("T1",)
    gpu_rows = {"T1": tuple(grid.T1_SYSTEMS)}
    figures = ("F4", "F5")
    judges_claims = True

    def models(self, study, root=None):
        return grid.models(study, root)

    def files(self, config, study, root):
        from headlab.studies.paper_C.outputs import Files
        return Files(config, study, root)

    def builder(self, name):
        if name == CLAIMS:
            from headlab.studies.paper_C.claims import effects
            return effects
        from headlab.studies.paper_C.outputs import FIGURES, TABLES
        return {**TABLES, **FIGURES}[name]

    def readme(self, files, provenance):
        from headlab.studies.paper_C.readme import readme
        return readme(files, provenance)

    def check(self, study):
        grid.check(study)

    def varied_options(self, study):
        return grid.varied_options(study)

    def checkpoints_read(self, study):
        return int(study.get("average_last", 1)), "studies.paper_C.average_last"

    def tests(self, corpus):
        return grid.tests(corpus)

    def sentences(self, study):
        return grid.sentences(study)

    def is_headline(self, study, root):
        return grid.is_headline(study)
