"""Attention built from a head spec: many head kinds in one module, at three sites.

The sites are encoder self-attention (``-enc_heads``), decoder self-attention
(``-dec_heads``) and decoder cross-attention (``-cross_heads``); the encoder and decoder
that use them live in :mod:`headlab.engine`.

Layout
------
``builtin``    the built-in kinds and mixers declared: module, sites, what they read
               (the spec checks read these without importing torch).
``spec``       grammar (``7Ftoken+1L``, ``6*(7Ftoken+1L)``, ``8L,8L,4*(8Ftoken)``,
               ``7Ftoken+1L|gate``, ``*(8L),8L|dhicm``), the sites, and the registries
               ``register_head_kind`` / ``register_head_mixer``.
``base``       the interfaces: ``HeadContext``, ``HeadGroup``, ``HeadMixer``.
``executor``   what kinds declare (``Scores``, ``Fixed``, ``Choice``) and the one executor
               that runs them, fused (GPU) or blocked (CPU): ``HEADLAB_ATTENTION_PATH``.
``chunked``    the blocked path's kernel for biased attention; ``ScoreBias``.
``kinds``      built-in kinds: ``L``, ``Lwide`` (all sites), ``Ftoken``, ``Fword`` (encoder).
``patterns``   paper A's fixed patterns in O(n) (shifts + prefix sums); edge cases.
``reference``  dense, exact (Fraction) reference of the patterns, for tests.
``mixers``     ``gate``: hard-concrete head gates (Voita 2019) with an L0 aux term.
``gates``      ``headlab gates``: converged gate values of a checkpoint (paper D Table 2).
``prune``      ``-enc_head_mask``: fixed masks of kept encoder heads (paper D §3.5-3.6).
``dhicm``      ``dhicm``: paper B's second-level attention over heads with a KL aux term.
``sea``        paper C's syntax-enhanced attention: ``DEA`` (dependency mask, eqs. 4-5),
               ``LPEA`` (local-phrase bias, eqs. 7-8; ``rp_matrix``/``rp_index``); read the
               parse from ``ctx.side`` (columns of :mod:`headlab.syntax.trees`).
``relpos``     ``RelPos``: Shaw et al. 2018 relative positions (``-relpos_k``).
``localness``  ``Local``: Yang et al. 2018 localness (Gaussian bias, per-query centre/window).
``rhe``        paper C's redundant head enlivening: ``RHEdea``, ``RHElpea``, ``RHErel``,
               ``RHEloc`` (per-sentence head labels, eqs. 3, 9, 10; ``-rhe_fgate``,
               translate option ``-rhe_prune``).
``attention``  ``HeadlabAttention``: one layer of any site assembled from a LayerSpec.
``export``     ``headlab export-attention`` (all sites, DHICM importance) and
               :func:`export.export_attention`.
``params``     ``headlab params``: parameter counts of presets x head specs.
``onmt_model`` real OpenNMT-py models from a few hyper-parameters (``PRESETS`` base/tiny,
               meta-device builds, OpenNMT-layout checkpoints) for params, tests, bench.

How kinds plug in
-----------------
* **Per-head kinds** produce head outputs from ``(x, values, ctx)``; ``ctx``
  (:class:`base.HeadContext`) carries the padding mask, lengths, token ids, word ids and
  ``side``: per-sentence side inputs (paper C: the parse columns of
  :data:`headlab.syntax.trees.FEATURES`, read by kinds with ``needs_syntax``).
  A kind reads model options through ``HeadGroup.build(count, d_model, d_head, options)``
  (``options`` = :func:`headlab.engine.common.mixer_options`: ``lpea_k``, ``relpos_k``,
  ``rhe_fgate``, ...).
* **Kinds declare, one executor runs** (:mod:`executor`): a learned kind declares its
  queries, keys and what it adds to the scores (``LearnedHeads.score_rows``: a
  :class:`chunked.ScoreBias`), a fixed kind its patterns; ``executor.execute`` runs the
  declaration on the fused path (GPU: one batched call per layer) or the blocked one (CPU),
  chosen by ``HEADLAB_ATTENTION_PATH``. No kind knows which path runs it.
* **Additive bias / mask heads** subclass ``kinds.LearnedHeads`` and override
  ``score_bias(ctx)`` returning a (B, count|1, N, N) additive bias (``-inf`` = masked); both
  paths and the export path use it. A bias built from a small table (LPEA), one that depends
  on the queries (Yang 2018 localness) or one with a value term (Shaw 2018 relative
  positions) overrides ``score_rows`` with its own ScoreBias (:mod:`sea`, :mod:`localness`,
  :mod:`relpos`); OpenNMT-py's ``max_relative_positions`` stays rejected for headlab encoders.
* **Per-sentence head selection** (paper C RHE, :mod:`rhe`): a mixin before a biased kind
  declares a ``choice``: the executor labels each head per sentence and picks the head's own
  or the biased attention.
* **Head mixers** act on the stacked head outputs of a layer before the output
  projection (``HeadMixer.forward(heads, ctx, x)``: hard-concrete gates, ``|gate``), or
  replace it (``replaces_output``, ``HeadMixer.project``: DHICM, ``|dhicm``). Mixers see
  only head outputs and the layer input, so the same class serves encoder and decoder,
  self and cross attention. A kind or mixer lists the sites it serves in ``sites``
  (a built-in one in its declaration, :mod:`builtin`, which the spec checks read
  without importing its module or torch).
* **Auxiliary losses**: every HeadGroup and HeadMixer may report named terms of its last
  forward from ``aux_terms()`` (``kl``, ``l0``); the encoder and decoder sum them, and
  :mod:`headlab.engine.aux_loss` weighs each into the training loss by its own option.
"""
from headlab.heads.spec import (HEAD_KINDS, HEAD_MIXERS, LayerSpec, Term, parse_spec,
                                register_head_kind, register_head_mixer)
# the built-in kinds' and mixers' modules are imported when a model uses them (their
# declarations in headlab.heads.builtin answer the spec checks): a head spec is checked
# without torch

__all__ = ["HEAD_KINDS", "HEAD_MIXERS", "LayerSpec", "Term", "parse_spec",
           "register_head_kind", "register_head_mixer"]
