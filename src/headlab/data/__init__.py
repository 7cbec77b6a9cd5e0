"""Data side of headlab: dataset registry, fetching, pair/split extraction, preprocessing.

Modules (one job each):

* :mod:`headlab.data.registry`   -- what exists: dataset -> files, URLs, sha256, licence, splits
* :mod:`headlab.data.fetch`      -- get one file: data mirror first, else upstream download, verified
* :mod:`headlab.data.iwslt`      -- parse IWSLT ``train.tags.*`` and ``IWSLT*.xml`` files
* :mod:`headlab.data.prepare`    -- extract a (pair, split) to plain text, validate, subsample
* :mod:`headlab.data.preprocess` -- Moses tokenise/truecase, joint BPE, and the reverse for scoring
"""
