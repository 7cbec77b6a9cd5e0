"""Attention built from a head spec: many head kinds in one module, at three sites.

The sites are encoder self-attention (``-enc_heads``), decoder self-attention
(``-dec_heads``) and decoder cross-attention (``-cross_heads``); the encoder and decoder
that use them live in :mod:`headlab.engine`.

Layout
------
``spec``       grammar (``7Ftoken+1L``, ``6*(7Ftoken+1L)``, ``8L,8L,4*(8Ftoken)``,
               ``7Ftoken+1L|gate``, ``*(8L),8L|dhicm``), the sites, and the registries
               ``register_head_kind`` / ``register_head_mixer``.
``base``       the interfaces: ``HeadContext``, ``HeadGroup``, ``HeadMixer``.
``kinds``      built-in kinds: ``L``, ``Lwide`` (all sites), ``Ftoken``, ``Fword`` (encoder).
``patterns``   paper A's fixed patterns in O(n) (shifts + prefix sums); edge cases.
``reference``  dense, exact (Fraction) reference of the patterns, for tests.
``mixers``     ``gate``: hard-concrete head gates (Voita 2019) with an L0 aux term.
``gates``      ``headlab gates``: converged gate values of a checkpoint (paper D Table 2).
``prune``      ``-enc_head_mask``: fixed masks of kept encoder heads (paper D §3.5-3.6).
``dhicm``      ``dhicm``: paper B's second-level attention over heads with a KL aux term.
``attention``  ``HeadlabAttention``: one layer of any site assembled from a LayerSpec.
``export``     ``headlab export-attention`` (all sites, DHICM importance) and
               :func:`export.export_attention`.
``params``     ``headlab params``: parameter counts of presets x head specs.
``onmt_model`` real OpenNMT-py models from a few hyper-parameters (``PRESETS`` base/tiny,
               meta-device builds, OpenNMT-layout checkpoints) for params, tests, bench.

How later kinds plug in (interfaces exist now; kinds to be written)
-------------------------------------------------------------------
* **Per-head kinds** produce head outputs from ``(x, values, ctx)``; ``ctx``
  (:class:`base.HeadContext`) carries the padding mask, lengths, token ids, word ids and
  ``side``: a dict of optional per-sentence side inputs.
* **Additive bias / mask heads** (paper C: DEA dependency mask, LPEA learned local-phrase
  bias; Yang 2018 localness Gaussian bias): subclass ``kinds.LearnedHeads`` and override
  ``score_bias(ctx)`` returning a (B, count|1, N, N) additive bias (``-inf`` = masked),
  e.g. from ``ctx.side["dep_mask"]``; the SDPA path and the export path both use it.
  Side inputs reach the encoder through ``HeadlabEncoder.context`` (extend it to read
  them from the batch).
* **Relative positions** (Shaw 2018): a ``LearnedHeads`` subclass owning the relative
  key/value embeddings and overriding ``forward``/``attention``; until it exists the
  encoder rejects ``max_relative_positions != 0`` with a ConfigError.
* **Head mixers** act on the stacked head outputs of a layer before the output
  projection (``HeadMixer.forward(heads, ctx, x)``: hard-concrete gates, ``|gate``), or
  replace it (``replaces_output``, ``HeadMixer.project``: DHICM, ``|dhicm``). Mixers see
  only head outputs and the layer input, so the same class serves encoder and decoder,
  self and cross attention. A kind or mixer lists the sites it serves in ``sites``.
* **Auxiliary losses**: every HeadGroup and HeadMixer may report named terms of its last
  forward from ``aux_terms()`` (``kl``, ``l0``); the encoder and decoder sum them, and
  :mod:`headlab.engine.aux_loss` weighs each into the training loss by its own option.
"""
from headlab.heads.spec import (HEAD_KINDS, HEAD_MIXERS, LayerSpec, Term, parse_spec,
                                register_head_kind, register_head_mixer)
from headlab.heads import kinds as _kinds  # noqa: F401  (registers built-in kinds)
from headlab.heads import mixers as _mixers  # noqa: F401  (registers built-in mixers)
from headlab.heads import dhicm as _dhicm  # noqa: F401  (registers "dhicm")

__all__ = ["HEAD_KINDS", "HEAD_MIXERS", "LayerSpec", "Term", "parse_spec",
           "register_head_kind", "register_head_mixer"]
