"""Paper A (Raganato et al. 2020, fixed encoder self-attention patterns): Tables 1-6 and
Figures 2-3, each beside the paper's own numbers (``paper_A/reference.csv``).

The study config names the grid (see config/schema.yaml ``paper_A``)::

    data:    {multi30k: [de-en, en-de]}   # the standard scenario: T1, T4, T5, T6, F2, F3
    layers:  ["1+1", "2+1", "2+2"]         # T1 columns
    shallow: "2+1"                          # stands where the paper has 6+1 (T4, T6, F3)
    deep:    "2+2"                          # stands where the paper has 6+6 (T2-T6, F2, F3)
    heads:   [8L, 7Ftoken+1L, 7Fword+1L, 1L]
    lowres:  {data: ..., preset: ...}       # T2 (§4.2 hyper-parameters)
    eight_fixed_lowres: [en-vi, vi-en]      # T5's low-resource columns (8Ftoken trained there too)
    highres: {data: ..., preset: ...}       # T3 (optional: without it T3 shows the paper only)

Rows are systems (head specs; ``H8 disabled`` = head 8 ablated at test time, §4.3).
Where our grid is smaller than the paper's, columns are labelled by *role* (shallow /
deep decoder) so that our numbers stand beside the paper's 6+1 / 6+6 ones.

Seeds: every model at each of ``seeds``; the headline comparison, Table 1's deep row
(8L, 7Ftoken+1L and Table 5's 8Ftoken) and Table 2's 8L and 7Ftoken+1L (§4.2's claim),
also at ``headline_seeds``. A cell is the mean over its runs (± sd, n); Table 1's ``*``
marks are compare-mt's paired bootstrap on the first seed (the paper's test), the seed-aware
tests are in ``effects.csv``; Table 4's ablations, Table 6 and the figures use ``seeds``
(Figures 2-3: the first seed, with 95% intervals from the test items).

The study's contract (:class:`headlab.studies.base.Study`) is filled here; its grid is
:mod:`.grid` (no pandas), its tables and figures :mod:`.outputs`, its judged claims
:mod:`.claims`, its README :mod:`.readme`.
"""
from __future__ import annotations

from headlab.studies.base import CLAIMS, Study, register_study
from headlab.studies.paper_A import grid


@register_study
class PaperA(Study):
    name = "paper_A"
    outdir = grid.OUTDIR
    tables = ("T1", "T2", "T3", "T4", "T5", "T6")
    gpu_tables = ("T1", "T2")
    figures = ("F2", "F3")
    judges_claims = True
    head_spec_keys = ("heads", "eight_fixed")

    def models(self, study, root=None):
        return grid.models(study, root)

    def files(self, config, study, root):
        from headlab.studies.paper_A.outputs import Files
        return Files(config, study, root)

    def builder(self, name):
        if name == CLAIMS:
            from headlab.studies.paper_A.claims import effects
            return effects
        from headlab.studies.paper_A.outputs import FIGURES, TABLES
        return {**TABLES, **FIGURES}[name]

    def readme(self, files, provenance):
        from headlab.studies.paper_A.readme import readme
        return readme(files, provenance)

    def check(self, study):
        grid.check(study)

    def check_in(self, study, config, roots):
        from headlab.eval.mucow import AVERAGE_OF

        # the schema's default when evaluation.mucow_domains is absent
        domains = (config.get("evaluation") or {}).get("mucow_domains", list(AVERAGE_OF))
        grid.check_wsd(study, domains, roots)

    def tests(self, corpus):
        return grid.tests(corpus)

    def is_headline(self, study, root):
        return lambda model: grid.atlas_headline(study, model)

    def ablates_heads(self, study, model):
        return grid.ablates_heads(study, model)
