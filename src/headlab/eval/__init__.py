"""Evaluation: corpus scores, significance, length bins, forced decoding, contrastive suites.

Each module is one job and one ``main(argv) -> int`` (see :mod:`headlab.cli`); the shared
input checks live in :mod:`headlab.eval.common`.
"""
