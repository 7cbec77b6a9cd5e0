"""The 8L baseline: BLEU of every model of the ``baseline`` study on every test set.

Rows: pair (and corpus/size/layers/heads when the study varies them); columns: test sets;
several ``seeds``: each cell the mean ± sd (n) over them (the tidy rows keep one per seed).
The sacreBLEU signature goes into the caption (all scores share one).

The study's contract (:class:`headlab.studies.base.Study`) is filled here; its grid is
:mod:`.grid` (no pandas), its table :mod:`.outputs`, its README :mod:`.readme`."""
from __future__ import annotations

from headlab.studies.base import Study, register_study
from headlab.studies.baseline import grid


@register_study
class Baseline(Study):
    name = "baseline"
    outdir = "tables"
    tables = ("baseline",)
    head_spec_keys = ("heads",)

    def models(self, study, root=None):
        return grid.models(study, root)

    def files(self, config, study, root):
        from headlab.studies.baseline.outputs import Files
        return Files(config, study, root)

    def builder(self, name):
        from headlab.studies.baseline.outputs import TABLES
        return TABLES[name]

    def readme(self, files, provenance):
        from headlab.studies.baseline.readme import readme
        return readme(files, provenance)
