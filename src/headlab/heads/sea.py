"""Paper C's syntax-enhanced attention (SEA, §4.1): kinds ``DEA`` (eqs. 4-5), ``LPEA`` (eqs. 7-8).

Both are learned scaled-dot-product heads (:class:`headlab.heads.kinds.LearnedHeads`, own
query/key projections) with an additive bias on the logits, built per sentence from the
source parse in ``ctx.side`` (per-word columns of :mod:`headlab.syntax.trees`, copied onto
every BPE piece of the word; ``ctx.word_ids`` gives each piece's word).

**DEA** (eqs. 4-5)::

    Att(Q_i, K_j) = softmax(Q_i K_jᵀ / √d_h + D_ij),
    D_ij = 0 if x_i, x_j are in a dependency relation (either direction) or i = j, else -inf

**LPEA** (eqs. 7-8, Fig. 3)::

    RP_ij = layer(x_j) - layer(x_i)   if x_i, x_j share a local phrase, else ∞
    M_ij  = w_{clip(RP_ij, k)},  clip(x, k) = max(-k, min(k, x)),  w_{-k..k} ∈ R^{d_h}
    P     = -| tanh(W_P M + b_P) U_P |,   Att = softmax(Q Kᵀ / √d_h + P)

Local phrases: Rule 1 (the yield of the word's lowest ancestor with >= 2 words: columns
``lp_lo``/``lp_hi``) closed under Rule 2 (symmetry): x_i and x_j share a local phrase iff
j ∈ LP(i) or i ∈ LP(j). ``layer(x)`` is the depth of the word's leaf (``word_depth``).

Choices where the paper is ambiguous (tested in tests/test_heads_sea.py):

* **RP sign**: the text computes Layer3 - Layer4 = -1 for "held" (row 2, layer 3) and
  "talk" (column 4, layer 4) and sets RP_{2,4} = 1, so RP_ij = layer(x_j) - layer(x_i)
  (key minus query, as Shaw et al.'s j - i). The text's "(3th row, 6th column)" for
  "Sharon"/"talk" does not fit the 1-based numbering of RP_{2,4}; with the sentence
  "Bush held a talk with Sharon" the pair is (4, 6) and is ∞ under Rules 1-2, which is
  what we test.
* **∞** (outside the local phrase): ``-lpea_outside mask`` (default) maps it to -inf, i.e.
  LPEA also masks keys outside the query's local phrase: §5.3.4 describes Fig. 5(b) as
  "SEA masks those words that do not belong to the local-phrase in each row".
  ``-lpea_outside learned`` gives ∞ its own learned vector w_∞ (one more row of ``w``),
  so P takes 2k+2 finite values. clip(∞, k) = k (the literal eq. 7) would merge "outside"
  with "k layers deeper"; we do not do that.
* **Parameters shared by the group's heads**: one w, W_P, b_P, U_P per layer (a single P
  matrix, as eq. 8 writes it). Paper C's Table 1 lists the same #Para (71.82M) for the
  Transformer and +LPEA; a shared bias adds (2k+1)d_h + d_h² + 2d_h ≈ 4.6k parameters per
  layer at d_h = 64 (invisible at 0.01M), per-head copies would add ~37k (71.86M).
* **P as a lookup**: P has at most 2k+2 distinct values (2k+1 clipped distances and ∞):
  they are computed once (a (2k+1, d_h) matrix through W_P, tanh, U_P) and gathered by
  the (B, N, N) index; no (n, n, d_h) tensor exists. In training (``-lpea_outside mask``)
  not even the (n, n) bias exists: see :meth:`LPEA.attend`.
* **BPE pieces** inherit their word's facts: pieces of one word see each other (same word
  = i = j for DEA; RP = 0 inside one word for LPEA) and every piece of a related word.
* Padding queries see every real key (their rows are discarded; an all -inf row would
  make SDPA return NaN).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from headlab.errors import ConfigError
from headlab.heads.base import HeadContext, no_autocast
from headlab.heads.chunked import WHOLE, MaskRows, ScoreBias
from headlab.heads.kinds import LearnedHeads
from headlab.heads.spec import register_head_kind


class SyntaxHeads(LearnedHeads):
    """Learned heads whose logits get a per-sentence syntactic bias (encoder only)."""

    #: the ctx.side columns this kind reads (names from headlab.syntax.trees.FEATURES)
    side_keys: tuple[str, ...] = ("dep_head",)

    def side(self, ctx: HeadContext) -> dict[str, Tensor]:
        return read_side(self, ctx)

    def logit_bias(self, q: Tensor, ctx: HeadContext) -> Tensor:
        """Bias on this group's logits: a bool mask (B, 1, N, N), True = keep, or an
        additive float (B, count or 1, N, N). Used by the RHE kinds (headlab.heads.rhe)."""
        return self.score_bias(ctx)


def read_side(group, ctx: HeadContext) -> dict[str, Tensor]:
    """The ``ctx.side`` columns ``group.side_keys``; a ConfigError naming ``enc_heads`` if
    the encoder got no parse (a model with syntax kinds fed plain text)."""
    missing = [name for name in group.side_keys if name not in ctx.side]
    if missing:
        raise ConfigError(f"head kind {group.kind_name!r} reads the source parse, but the encoder "
                          f"got no {', '.join(missing)} (ctx.side has {sorted(ctx.side) or 'nothing'}): "
                          f"train and translate it on data with syntax feature columns",
                          key="enc_heads")
    if ctx.word_ids is None:
        raise ConfigError(f"head kind {group.kind_name!r} needs word boundaries (ctx.word_ids)",
                          key="enc_heads")
    return {name: ctx.side[name] for name in group.side_keys}


def dep_related(word_ids: Tensor, dep_head: Tensor, pad_mask: Tensor | None = None) -> Tensor:
    """(B, N, N) bool: pieces i, j belong to words in a dependency relation (either
    direction) or to the same word (DEA's D_ij = 0, eq. 5; Syn_attn's Dep_mask, eq. 9).

    word_ids, dep_head: (B, N) long, word index of each piece and of its word's head.
    Padding queries (``pad_mask`` True) relate to everything (see module doc)."""
    wq, wk = word_ids.unsqueeze(2), word_ids.unsqueeze(1)
    related = (wq == wk) | (dep_head.unsqueeze(2) == wk) | (wq == dep_head.unsqueeze(1))
    if pad_mask is not None:
        related = related | pad_mask.unsqueeze(2)
    return related


@register_head_kind("DEA")
class DEA(SyntaxHeads):
    """Dependency-enhanced attention (paper C eqs. 4-5); see the module doc."""

    def related(self, ctx: HeadContext) -> Tensor:
        side = self.side(ctx)
        return ctx.constant("dep_related", lambda: dep_related(ctx.word_ids, side["dep_head"], ctx.pad_mask))

    def score_bias(self, ctx: HeadContext) -> Tensor:
        """D of eq. 5 as (B, 1, N, N) float: 0 or -inf."""
        related = self.related(ctx).unsqueeze(1)
        return torch.zeros(related.shape, device=related.device).masked_fill(~related, float("-inf"))

    def _mask(self, ctx: HeadContext, dtype) -> Tensor:
        # a bool mask is all SDPA needs: no float (B, 1, N, N) copy of the bias
        return self.related(ctx).unsqueeze(1) & ctx.key_mask

    def logit_bias(self, q: Tensor, ctx: HeadContext) -> Tensor:
        return self.related(ctx).unsqueeze(1)

    def score_rows(self, q: Tensor, ctx: HeadContext) -> ScoreBias:
        """D as a keep mask: torch's SDPA takes it on both paths; RHE cuts it per block."""
        return MaskRows(self.related(ctx))


def rp_matrix(word_ids: Tensor, side: dict[str, Tensor], pad_mask: Tensor | None = None
              ) -> tuple[Tensor, Tensor]:
    """(RP, related): (B, N, N) long RP_ij = word_depth(j) - word_depth(i) and (B, N, N)
    bool "i and j share a local phrase" (Rule 1 spans, Rule 2 symmetry), per piece.

    ``side``: ``lp_lo``, ``lp_hi``, ``word_depth`` (B, N) columns (word-level values on
    each piece). RP is meaningful only where ``related`` (elsewhere it is ∞)."""
    depth = side["word_depth"]
    return depth.unsqueeze(1) - depth.unsqueeze(2), phrase_related(word_ids, side, pad_mask)


def phrase_related(word_ids: Tensor, side: dict[str, Tensor], pad_mask: Tensor | None = None) -> Tensor:
    """(B, N, N) bool: pieces i, j belong to words sharing a local phrase (Rules 1, 2)."""
    lo, hi = side["lp_lo"], side["lp_hi"]
    key_word = word_ids.unsqueeze(1)
    inside = (lo.unsqueeze(2) <= key_word) & (key_word <= hi.unsqueeze(2))  # j ∈ LP(i), Rule 1
    related = inside | inside.transpose(1, 2)                                 # Rule 2
    if pad_mask is not None:
        related = related | pad_mask.unsqueeze(2)
    return related


def rp_index(rp: Tensor, related: Tensor, k: int) -> Tensor:
    """Index into w_{-k..k} (0..2k) of clip(RP, k) (eq. 7); 2k+1 where RP = ∞."""
    return torch.where(related, rp.clamp(-k, k) + k, torch.full_like(rp, 2 * k + 1))


class PhraseBias(nn.Module):
    """The 2k+2 values of P (eq. 8) and their lookup by :func:`rp_index`."""

    def __init__(self, k: int, d_head: int, outside: str = "mask"):
        super().__init__()
        self.k, self.outside = k, outside
        rows = 2 * k + 1 + (outside == "learned")
        self.relative_phrase_embeddings = nn.Embedding(rows, d_head)   # w_{-k..k} (, w_∞)
        self.W_P = nn.Linear(d_head, d_head)                           # W_P, b_P
        self.U_P = nn.Linear(d_head, 1, bias=False)

    def values(self) -> Tensor:
        """(2k+2,) float32: P for clip(RP) = -k..k, then for RP = ∞ (-inf with ``mask``).

        Float32 under any precision (autocast, ``-precision fp16`` weights): 2k+2 numbers,
        rounded once where they meet the logits (``depth_factors``, ``_mask``)."""
        w = self.relative_phrase_embeddings.weight.float()
        with no_autocast(w):
            hidden = torch.tanh(F.linear(w, self.W_P.weight.float(), self.W_P.bias.float()))
            p = -F.linear(hidden, self.U_P.weight.float()).squeeze(-1).abs()
        if self.outside == "mask":
            p = torch.cat([p, p.new_full((1,), float("-inf"))])
        return p

    def forward(self, index: Tensor) -> Tensor:
        return self.values()[index]


@register_head_kind("LPEA")
class LPEA(SyntaxHeads):
    """Local-phrase-enhanced attention (paper C eqs. 7-8, Fig. 3); see the module doc.
    Options: ``-lpea_k`` (k of eq. 7), ``-lpea_outside`` (mask | learned)."""

    side_keys = ("lp_lo", "lp_hi", "word_depth")

    def __init__(self, count, d_model, d_head, *, add_qkvbias=False, attention_dropout=0.0,
                 k: int = 6, outside: str = "mask"):
        super().__init__(count, d_model, d_head, add_qkvbias=add_qkvbias, attention_dropout=attention_dropout)
        self.phrase = PhraseBias(k, d_head, outside)

    @classmethod
    def build(cls, count, d_model, d_head, options, *, add_qkvbias=False, attention_dropout=0.0):
        return cls(count, d_model, d_head, add_qkvbias=add_qkvbias, attention_dropout=attention_dropout,
                   **lpea_options(options))

    def phrase_index(self, ctx: HeadContext) -> Tensor:
        rp, related = rp_matrix(ctx.word_ids, self.side(ctx), ctx.pad_mask)
        return rp_index(rp, related, self.phrase.k)

    def score_bias(self, ctx: HeadContext) -> Tensor:
        """P of eq. 8 as (B, 1, N, N) float (export, RHE, ``-lpea_outside learned``)."""
        return self.phrase(self.phrase_index(ctx)).unsqueeze(1)

    def score_rows(self, q: Tensor, ctx: HeadContext) -> ScoreBias:
        """P as :class:`PhraseRows`: the blocked path builds it per block of query rows from
        the parse columns (no (n, n) tensor), the fused path once per batch."""
        return PhraseRows(self, ctx)


class PhraseRows(ScoreBias):
    """LPEA's P (eq. 8) for query rows lo:hi: the 2k+1 (+1) values of
    :meth:`PhraseBias.values` gathered by clip(RP) of the block; with ``-lpea_outside
    mask`` RP = ∞ is a keep mask (the table has no -inf entry to differentiate)."""

    def __init__(self, group: LPEA, ctx: HeadContext):
        side = group.side(ctx)
        self.k, self.mask = group.phrase.k, group.phrase.outside == "mask"
        values = group.phrase.values()
        self.tensors, self.row_dims = ((values[:2 * self.k + 1] if self.mask else values),), (None,)
        # int32 columns: the (B, rows, N) comparisons stream a quarter of int64's bytes
        self.word_ids = ctx.word_ids.int()
        self.lo, self.hi, self.depth = (side[name].int() for name in ("lp_lo", "lp_hi", "word_depth"))
        self.pad = ctx.pad_mask
        self.ctx = ctx

    def related(self, batch: slice, rows: slice) -> Tensor:
        """(B', c, N) bool: :func:`phrase_related` of the sentences ``batch``, query ``rows``."""
        words, lo, hi = self.word_ids[batch], self.lo[batch], self.hi[batch]
        key_word, query_word = words.unsqueeze(1), words[:, rows, None]
        inside = (lo[:, rows, None] <= key_word) & (key_word <= hi[:, rows, None])      # Rule 1
        inside |= (lo.unsqueeze(1) <= query_word) & (query_word <= hi.unsqueeze(1))     # Rule 2
        return inside | self.pad[batch, rows, None]

    def index(self, block) -> tuple[Tensor, Tensor | None]:
        """(index into the table (B', c, N), keep mask (B', c, N) or None) of ``block``."""
        related = self.related(block.batch, block.rows)
        depth = self.depth[block.batch]
        index = (depth.unsqueeze(1) - depth[:, block.rows, None]).clamp_(-self.k, self.k).add_(self.k)
        if self.mask:
            return index, related
        return torch.where(related, index, torch.full_like(index, 2 * self.k + 1)), None

    def rows(self, block, tensors):
        (table,) = tensors
        index, keep = self.index(block)
        return table[index].unsqueeze(1), None if keep is None else keep.unsqueeze(1)

    def whole(self, batch, n_queries, tensors):
        """The whole batch, its index and mask built once per batch (every layer's LPEA
        heads share them through ``HeadContext.constant``)."""
        (table,) = tensors
        index, keep = self.ctx.constant(("lpea_index", self.k, self.mask), lambda: self.index(WHOLE))
        return TableLookup.apply(table, index).unsqueeze(1), None if keep is None else keep.unsqueeze(1)


class TableLookup(torch.autograd.Function):
    """``table[index]`` for a table of a few values and an index of B x N x N entries, whose
    backward is one histogram of the gradient by index (``bincount``: a shared-memory
    histogram on CUDA) instead of indexing's ``index_put_(accumulate=True)``, which sorts
    every entry of the index on CUDA to add them into 2k+2 rows."""

    @staticmethod
    def forward(ctx, table, index):
        ctx.save_for_backward(index)
        ctx.rows = table.size(0)
        return table[index]

    @staticmethod
    def backward(ctx, grad):
        (index,) = ctx.saved_tensors
        weights = grad.flatten().double() if grad.dtype == torch.float64 else grad.flatten().float()
        if torch.compiler.is_compiling():
            # bincount's output size depends on the index's values (a graph break): the same
            # sums into a table-sized tensor
            summed = weights.new_zeros(ctx.rows).index_add_(0, index.flatten(), weights)
        else:
            summed = torch.bincount(index.flatten(), weights=weights, minlength=ctx.rows)
        return summed.to(grad.dtype), None


def lpea_options(options: dict) -> dict:
    """``k`` and ``outside`` from the model options, checked (errors name the option)."""
    k = options.get("lpea_k", 6)
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ConfigError(f"lpea_k (the clipping distance k of paper C eq. 7) must be an integer "
                          f">= 0, got {k!r}", key="lpea_k")
    outside = options.get("lpea_outside", "mask")
    if outside not in ("mask", "learned"):
        raise ConfigError(f"lpea_outside must be 'mask' or 'learned', got {outside!r}", key="lpea_outside")
    return {"k": k, "outside": outside}


__all__ = ["DEA", "LPEA", "PhraseBias", "SyntaxHeads", "dep_related", "lpea_options", "phrase_related",
           "read_side", "rp_index", "rp_matrix"]
