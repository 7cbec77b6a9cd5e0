"""Paper D: Ondov et al., *Interpretability in Neural Machine Translation* (the attention
heads of a Transformer trained on English-German translation): L0 head gates on a converged model (§3.1-3.4, Table 2),
pruned and inverse-pruned fine-tuning (§3.5-3.6, Table 3), beside the paper's numbers
(``paper_D/reference.csv``), and what the paper's future work asks for.

Models (all fine-tunes, :mod:`headlab.engine.finetune`; paths name their parent)
---------------------------------------------------------------------------------
* **Baseline (converged)**: ``heads`` (``8L``) at ``layers`` with ``preset``: on the
  embedded default exactly paper A's 8L en-de 2+2 mini model (same path: not retrained).
* **Gated** (§3.4, "Pruned (converged)" in Table 3): the baseline fine-tuned with
  hard-concrete gates on every **encoder** self-attention layer (paper D: "we focus on
  pruning attention heads in encoder layers"; Voita et al. also gate the decoder, option
  ``gate_sites: all``) and ``L = L_xent + lambda_l0 * L_C`` (eq. 7, ``lambda_l0``; tau 0.33).
* **Non-inverted** (§3.5): the baseline with only the heads whose converged test-time gate
  is >= 0.5 kept (``-enc_head_mask``), BLEU at step 0 (no training: the masked baseline)
  and after fine-tuning. **Inverted** (§3.6): only the other heads kept. The mask is
  read from the gated model of the same seed by the ``gates`` stage (a Snakemake checkpoint
  writing ``<results>/paper_D/stages/CORPUS/PAIR/seedN/gates.json``), so ``snakemake -n`` shows these two
  fine-tunes only after the gated model exists. Both start from the *baseline* (paper D:
  "training a baseline model and pruning the baseline"), not from the gated model.
* Beyond the paper: the gated fine-tune at every ``lambda_sweep`` value (heads kept vs
  BLEU); gates on ``fixed_heads`` (paper A's 7Ftoken+1L: which heads, fixed or learned,
  are kept); a **control**, the baseline fine-tuned exactly like the pruned models without
  a mask (Table 3 row "Baseline (fine-tuned, no pruning)"): a baseline that is not fully
  converged (the embedded default's) gains BLEU from any fine-tune, so the README's
  verdicts compare the fine-tuned models with it.

Syntax (§2, :mod:`headlab.syntax`): Table 1 and Figures 1-2 come from
the ``profile_heads`` rule's profile of the converged baseline on ``treebank`` (UD
English-EWT test by default; ``spacy-test`` = the corpus's test split parsed with spaCy,
newstest2016 in ``config/paper.yaml``); the ``join`` table puts each head's gate beside its
most syntactic relation, answering §3.4's claim that the gates keep the syntactic heads.

Seeds: a fine-tune keeps its parent's seed (its config is the parent's, ``seed`` included:
:func:`headlab.naming.finetune` changes only the path's tune segment), so "seed N" of the
gated, pruned, inverted and control models is a fine-tune of the seed-N baseline (paper
A's 8L model of that seed on the embedded default) and the masks of seed N come from the
gated model of seed N. Table 3 and its BLEU curve are the headline comparison
(``headline_seeds``: baseline, gated, control, non-inverted, inverted); the lambda sweep
uses ``seeds``; the gates' tables, the join, the head profile (Table 1, Figures 1-2) and the
fixed-head model are one model's internals: the first seed.

Fine-tune length: ``finetune`` options (OpenNMT-py training options, e.g. ``train_steps``,
``learning_rate``) apply to every fine-tune; the optimizer restarts (``reset_optim all``).
Paper D trains "until the gate values converged" and its pruned models 16,000 / 4,000
batches; the embedded default trains a few hundred steps (docs/studies/paper_D.md).

The study's contract (:class:`headlab.studies.base.Study`) is filled here; its grid and
config checks are :mod:`.grid` (no pandas), the gates stage :mod:`.search`, its tables and
figures :mod:`.outputs`, its claims :mod:`.claims`, its README :mod:`.readme`.
"""

from __future__ import annotations

from headlab.studies.base import CLAIMS, Study, register_study
from headlab.studies.paper_D import grid


@register_study
class PaperD(Study):
    name = "paper_D"
    outdir = grid.OUTDIR
    tables = ("T1", "T2", "T2values", "T3", "lambda_sweep", "join", "fixed")
    gpu_tables = ("T3",)
    gpu_rows = {"T3": grid.T3_ROWS}
    figures = ("F1", "F2", "F_gates", "curve")
    judges_claims = True
    head_spec_keys = ("heads", "fixed_heads")
    stages = grid.STAGES

    def models(self, study, root=None):
        return grid.models(study, root)

    def files(self, config, study, root):
        from headlab.studies.paper_D.outputs import Files
        return Files(config, study, root)

    def builder(self, name):
        if name == CLAIMS:
            from headlab.studies.paper_D.claims import effects
            return effects
        from headlab.studies.paper_D.outputs import FIGURES, TABLES
        return {**TABLES, **FIGURES}[name]

    def readme(self, files, provenance):
        from headlab.studies.paper_D.readme import readme
        return readme(files, provenance)

    def check(self, study):
        grid.check(study)

    def tests(self, corpus):
        # its tables read the first test set only (StudyFiles.test): score no other
        return list(corpus["tests"][:1])

    def later_models(self, study):
        return grid.later_models(study)

    def stage_keys(self, study):
        return grid.stage_keys(study)

    def stage_inputs(self, files, corpus, pair, stage):
        from headlab.studies.paper_D.search import stage_inputs
        return stage_inputs(files, corpus, pair, stage)

    def select(self, files, corpus, pair, stage):
        from headlab.studies.paper_D.search import select
        return select(files, corpus, pair, stage)
