"""Built-in head kinds: learned dot-product heads and paper A's fixed patterns.

=========  ===============================================================================
kind       heads
=========  ===============================================================================
``L``      learned scaled-dot-product heads of width d_model/heads, as stock OpenNMT-py;
           own query/key projections (d_model -> count*d_head), values from the layer's
           shared value projection. ``1L`` (paper A) is the learned head of
           ``7Ftoken+1L`` alone: d_head = d/8, so the layer's value/output projections
           shrink to d x d/8.
``Lwide``  learned heads of full width d_head = d_model: ``1Lwide`` is one head with the
           parameter count of a standard 8-head layer.
``Ftoken`` paper A's fixed patterns 1..count (§3.2; 8 = last token, §4.4), token-based;
           no query/key projections, no attention dropout (a fixed pattern is not a
           random variable; dropout on its rows would break the O(n) algorithm).
``Fword``  the same patterns, word-based (pieces joined at ``@@``).
=========  ===============================================================================

A new kind is one subclass of :class:`headlab.heads.base.HeadGroup` plus one
``@register_head_kind("name")``.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from headlab.heads.base import HeadContext, HeadGroup
from headlab.heads.chunked import DenseRows, ScoreBias
from headlab.heads.executor import Choice, Fixed, Scores, execute
from headlab.heads.patterns import PATTERNS, dense_patterns
from headlab.heads.spec import register_head_kind


@register_head_kind("L")
class LearnedHeads(HeadGroup):
    """Scaled dot-product heads (Vaswani 2017): they declare their queries, keys and any
    bias (:meth:`score_rows`), and :func:`headlab.heads.executor.execute` runs them (torch's
    SDPA for plain heads on either path)."""

    def __init__(self, count, d_model, d_head, *, add_qkvbias=False, attention_dropout=0.0):
        super().__init__(count, d_model, d_head)
        # same names as OpenNMT-py's MultiHeadedAttention, so stock weights map 1:1
        self.linear_query = nn.Linear(d_model, count * d_head, bias=add_qkvbias)
        self.linear_keys = nn.Linear(d_model, count * d_head, bias=add_qkvbias)
        self.key_width = count * d_head
        self.dropout_p = attention_dropout
        #: tests only: a fixed attention-dropout keep mask (B, count, Nq, Nk) for both paths
        self.dropout_keep: Tensor | None = None

    def update_dropout(self, attention_dropout: float) -> None:
        self.dropout_p = attention_dropout

    def project_keys(self, kv: Tensor) -> Tensor:
        return self.linear_keys(kv)

    def _qk(self, x: Tensor, keys: Tensor | None) -> tuple[Tensor, Tensor]:
        B, N, _ = x.shape
        keys = self.linear_keys(x) if keys is None else keys
        q = self.linear_query(x).view(B, N, self.count, self.d_head).transpose(1, 2)
        k = keys.view(B, keys.size(1), self.count, self.d_head).transpose(1, 2)
        return q, k

    def score_bias(self, ctx: HeadContext) -> Tensor | None:
        """Additive (B, count or 1, N, N) bias on the scores, -inf to mask; None = none.

        The simplest way for a new kind to change the scores (a band, a fixed mask): both
        attention paths and the export path use it. Kinds whose bias needs its own
        per-block form (a bias from a small table, a query-dependent bias, a value term)
        override :meth:`score_rows` instead (DEA/LPEA, RelPos, Local).
        """
        return None

    def score_rows(self, q: Tensor, ctx: HeadContext) -> ScoreBias | None:
        """What this group adds to plain attention, declared once per forward for the
        executor (:mod:`headlab.heads.executor`): None, or a ScoreBias."""
        bias = self.score_bias(ctx)
        return None if bias is None else DenseRows(bias)

    def choice(self, ctx: HeadContext) -> Choice | None:
        """RHE's per-head choice between own and biased attention (None: no choice)."""
        return None

    def _mask(self, ctx: HeadContext, dtype) -> Tensor:
        bias = self.score_bias(ctx)
        if bias is None:
            return ctx.key_mask
        return bias.to(dtype).masked_fill(~ctx.key_mask, float("-inf"))

    def forward(self, x: Tensor, values: Tensor, ctx: HeadContext, keys: Tensor | None = None) -> Tensor:
        q, k = self._qk(x, keys)
        declared = Scores(q, k, self.score_rows(q, ctx), self.choice(ctx),
                          self.dropout_p if self.training else 0.0,
                          self.dropout_keep if self.training else None)
        return execute(declared, values, ctx, self.kind_name)

    def attention(self, x: Tensor, ctx: HeadContext, keys: Tensor | None = None) -> Tensor:
        q, k = self._qk(x, keys)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.d_head)
        mask = self._mask(ctx, scores.dtype)
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))
        else:
            scores = scores + mask
        return scores.float().softmax(-1)      # exported probabilities: float32 in any precision


@register_head_kind("Lwide")
class WideLearnedHeads(LearnedHeads):
    """Learned heads of full model width (paper A's ``1Lwide``)."""

    @classmethod
    def head_width(cls, d_model: int, default: int) -> int:
        return d_model


class _FixedHeads(HeadGroup):
    """Heads 1..count are paper A's patterns 1..count; see headlab.heads.patterns.

    Encoder-only, at most len(PATTERNS) heads: their declarations (headlab.heads.builtin)."""

    def __init__(self, count, d_model, d_head, *, add_qkvbias=False, attention_dropout=0.0):
        super().__init__(count, d_model, d_head)
        self.patterns = PATTERNS[:count]

    def _word_ids(self, ctx: HeadContext) -> Tensor | None:
        return None

    def forward(self, x: Tensor, values: Tensor, ctx: HeadContext, keys: Tensor | None = None) -> Tensor:
        return execute(Fixed(tuple(self.patterns), self._word_ids(ctx)), values, ctx, self.kind_name)

    def attention(self, x: Tensor, ctx: HeadContext, keys: Tensor | None = None) -> Tensor:
        return dense_patterns(self.patterns, ctx.lengths, x.size(1), self._word_ids(ctx))


@register_head_kind("Ftoken")
class FixedTokenHeads(_FixedHeads):
    """Fixed token-based patterns (paper A §3.2, Fig. 1 upper row)."""


@register_head_kind("Fword")
class FixedWordHeads(_FixedHeads):
    """Fixed word-based patterns (paper A §3.2, Fig. 1 lower row); reads word boundaries
    (``needs_words``: its declaration)."""

    def _word_ids(self, ctx: HeadContext) -> Tensor:
        if ctx.word_ids is None:
            from headlab.errors import ConfigError
            raise ConfigError("word-based fixed heads (Fword) need word boundaries (ctx.word_ids; the "
                              "encoder reads them from the source's word-boundary feature column, "
                              "headlab.heads.side.WORD_COLUMN)", key="enc_heads")
        return ctx.word_ids
