"""The head atlas (issue 23): every head of every model characterised by every criterion the
four papers use, side by side.

``probe``   the shared passes over one model: attention statistics (Voita et al. 2019),
            gradient importance (Michel et al. 2019), the loss change with each head
            disabled, DHICM importance and RHE labels, all sites
``model``   ``headlab atlas-model``: one model's ``heads.csv`` (+ the syntactic profile of
            paper D §2.2, gates, ΔBLEU) and its example attention for the explorer
``select``  which models (config key ``atlas``) and what their jobs read
``agree``   do the criteria agree: Spearman with bootstrap intervals, the papers' claims

The explorer (``results/atlas/index.html``) is rendered by :mod:`headlab.report.atlas`.
"""
