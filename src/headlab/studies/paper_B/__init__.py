"""Paper B: Goindani & Shrivastava (2021), *A Dynamic Head Importance Computation Mechanism
for Neural Machine Translation* (DHICM). Tables 2-4 and Figures 1-3, each beside the
paper's own numbers (``paper_B/reference.csv``).

Systems (§4.3)
--------------
* **T-base**: the preset's hyper-parameters ("Default", Table 2), stock heads.
* **DHICM**: DHICM in the last encoder self-attention, decoder self-attention and cross-
  attention layer (``*(HL),HL|dhicm`` at every site, §4.3), KL weight ``lambda_kl``.
* **T-optimal**: the hyper-parameters the grid search chose, stock heads. It has exactly
  DHICM's variant (same options, ``lambda_kl``/``dhicm_dropout`` included, which act only
  on DHICM layers), so the two differ only in their heads and compare-mt's paired
  bootstrap compares them as two systems of one group.

The two-stage grid search (§4.2)
---------------------------------
Stage 1 tunes architecture options (``grid.stage1``: FFN size, number of heads) with
regularisation at the preset's values; stage 2 tunes regularisation (``grid.stage2``:
dropout, attention dropout, DHICM dropout, label smoothing) at stage 1's choice. Both
search with **DHICM models** (the paper's Table 2 tunes DHICM's own dropout, so its search
trained DHICM), one search per language pair, and choose the minimum validation
cross-entropy of each candidate's best checkpoint (``model_selection: valid_loss``,
:mod:`headlab.engine.selection`). Stage 2's candidates and the final models are derived
in the workflow from the stage files (``<results>/paper_B/stages/CORPUS/PAIR/stageN.json``,
written by the generic ``study_stage`` Snakemake checkpoint), never by hand. The final
DHICM model *is* stage 2's winner (same path: not trained twice). OpenNMT-py 3.5.1 has no
separate activation dropout (its FFN applies ``dropout``), so Table 2's "Activation
Dropout" row cannot be tuned here.

Data-size sweep (Table 4): each of ``sizes`` is drawn ``subsamples`` times (seeds 1..k,
size wildcard ``N.sK``: its own BPE and vocabulary), T-base, T-optimal and DHICM trained
on each with the chosen hyper-parameters (§4.3: "we used the optimal hyper-parameters
learned using the full training set"); BLEU mean and standard deviation per size; the
full size is Table 3's models.

Seeds. The grid search runs **once**, at the study's first seed, and the final models are
trained at every seed: the search picks hyper-parameters for the task (paper B searched
once), and a search per seed would make "T-optimal" a different system per seed (a seed
that happened to favour another dropout would change the comparison, not only its noise)
and multiply the search's cost (6 candidates on the embedded default) by the seeds. The
first seed's DHICM final model is the search's winner itself; at the other seeds T-optimal
and DHICM are trained with the chosen options. T3's systems (T-base, T-optimal, DHICM on
the full set) are the headline comparison (``headline_seeds``); the sweep's subsampled
models are trained at ``seeds`` (Table 4 averages over subsamples and seeds).

The study's contract (:class:`headlab.studies.base.Study`) is filled here; its grid and
the stages' choices read back are :mod:`.grid` (no pandas), a stage's selection
:mod:`.search`, its tables and figures :mod:`.outputs`, its claims :mod:`.claims`, its
README :mod:`.readme`.
"""
from __future__ import annotations

from headlab.studies.base import CLAIMS, Study, register_study
from headlab.studies.paper_B import grid


@register_study
class PaperB(Study):
    name = "paper_B"
    outdir = grid.OUTDIR
    tables = ("T2", "T2grid", "T3", "T4", "importance")
    gpu_tables = ("T3",)
    gpu_rows = {"T3": grid.SYSTEMS}
    figures = ("F1", "F2", "F3")
    judges_claims = True
    stages = grid.STAGES

    def models(self, study, root=None):
        return grid.models(study, root)

    def files(self, config, study, root):
        from headlab.studies.paper_B.outputs import Files
        return Files(config, study, root)

    def builder(self, name):
        if name == CLAIMS:
            from headlab.studies.paper_B.claims import effects
            return effects
        from headlab.studies.paper_B.outputs import FIGURES, TABLES
        return {**TABLES, **FIGURES}[name]

    def readme(self, files, provenance):
        from headlab.studies.paper_B.readme import readme
        return readme(files, provenance)

    def check(self, study):
        grid.check(study)

    def varied_options(self, study):
        return grid.varied_options(study)

    def attention_sentences_read(self, study):
        return int(study.get("figure_sentence", 0)) + 1, "studies.paper_B.figure_sentence"

    def is_headline(self, study, root):
        return grid.is_headline(study, root)

    def later_models(self, study):
        return grid.later_models(study)

    def stage_keys(self, study):
        return grid.stage_keys(study)

    def stage_inputs(self, files, corpus, pair, stage):
        from headlab.studies.paper_B.search import stage_inputs
        return stage_inputs(files, corpus, pair, stage)

    def select(self, files, corpus, pair, stage):
        from headlab.studies.paper_B.search import select
        return select(files, corpus, pair, stage)
