"""``RelPos``: relative position representations (Shaw et al. 2018), paper C's Rel_Pos baseline.

Shaw et al. eqs. (3)-(4), (5)-(6) for one head, with clipping distance k (``-relpos_k``)::

    e_ij = x_i W^Q (x_j W^K + a^K_ij)ᵀ / √d_h          α_i = softmax_j e_ij
    z_i  = Σ_j α_ij (x_j W^V + a^V_ij)
    a^K_ij = w^K_{clip(j - i, k)},  a^V_ij = w^V_{clip(j - i, k)},  clip(x, k) = max(-k, min(k, x))

As OpenNMT-py 3.5.1's ``-max_relative_positions k`` (``MultiHeadedAttention``, internals
note §5) one table ``relative_positions_embeddings`` of shape (2k+1, d_h) serves as both
w^K and w^V and is shared by the group's heads; same parameter name, so stock weights map
1:1 and the outputs agree (tests/test_heads_baselines.py). OpenNMT-py's own option stays
rejected for headlab encoders (it would act on the attention we replace): use this kind
(``-enc_heads 8RelPos`` on every layer, ``8RelPos,*(8L)`` on the first) with ``-relpos_k``.

Computed without OpenNMT-py's (n, n, d_h) relation tensor: the key term is
(q Wᵀ)[.., idx] (a (B, h, n, 2k+1) product gathered by the (n, n) index), the value term
Σ_j α_ij w_{idx(i,j)} = (Σ_{j: idx=r} α_ij)_r W (a scatter-add into 2k+1 buckets, then a
(2k+1, d_h) product). Encoder self-attention only (decoding would need the step offset).
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from headlab.errors import ConfigError
from headlab.heads.base import HeadContext
from headlab.heads.chunked import ScoreBias
from headlab.heads.kinds import LearnedHeads
from headlab.heads.spec import register_head_kind


def relative_index(n: int, k: int, device=None) -> Tensor:
    """(n, n) long: clip(j - i, k) + k, as OpenNMT-py's ``gen_relative_positions``."""
    pos = torch.arange(n, device=device)
    return (pos.unsqueeze(0) - pos.unsqueeze(1)).clamp(-k, k) + k


def masked_softmax(scores: Tensor, ctx: HeadContext, bias: Tensor | None = None) -> Tensor:
    """softmax over keys of ``scores`` (+ ``bias``: bool keep-mask or additive float),
    padding keys excluded; float32."""
    scores = scores.float()     # float32 softmax under any precision (the callers cast back)
    if bias is not None:
        scores = scores.masked_fill(~bias, float("-inf")) if bias.dtype == torch.bool else scores + bias
    return scores.masked_fill(~ctx.key_mask, float("-inf")).softmax(-1)


class QueryBiasedHeads(LearnedHeads):
    """Learned heads whose logits get a query-dependent term (Rel_Pos's relative keys,
    Localness's Gaussian) before the masked softmax: dense as ``logit_bias(q, ctx)``
    (export), declared as ``score_rows(q, ctx)`` for training and translation (run by
    :func:`headlab.heads.executor.execute`, on either path)."""

    def logit_bias(self, q: Tensor, ctx: HeadContext) -> Tensor:
        raise NotImplementedError

    def score_rows(self, q: Tensor, ctx: HeadContext) -> ScoreBias:
        raise NotImplementedError

    def _probs(self, x: Tensor, ctx: HeadContext, keys: Tensor | None) -> Tensor:
        q, k = self._qk(x, keys)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.d_head)
        return masked_softmax(scores, ctx, self.logit_bias(q, ctx)).to(q.dtype)

    def attention(self, x: Tensor, ctx: HeadContext, keys: Tensor | None = None) -> Tensor:
        return self._probs(x, ctx, keys).float()


@register_head_kind("RelPos")
class RelPos(QueryBiasedHeads):
    """Shaw et al. (2018) relative positions; see the module doc. Option ``-relpos_k``."""

    def __init__(self, count, d_model, d_head, *, add_qkvbias=False, attention_dropout=0.0, k: int = 16):
        super().__init__(count, d_model, d_head, add_qkvbias=add_qkvbias, attention_dropout=attention_dropout)
        self.k = k
        self.relative_positions_embeddings = nn.Embedding(2 * k + 1, d_head)

    @classmethod
    def build(cls, count, d_model, d_head, options, *, add_qkvbias=False, attention_dropout=0.0):
        k = options.get("relpos_k", 16)
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(f"relpos_k (Shaw et al.'s clipping distance) must be an integer >= 1, "
                              f"got {k!r}", key="relpos_k")
        return cls(count, d_model, d_head, add_qkvbias=add_qkvbias, attention_dropout=attention_dropout, k=k)

    def _index(self, q: Tensor) -> Tensor:
        B, H, N, _ = q.shape
        return relative_index(N, self.k, q.device).expand(B, H, N, N)

    def key_table(self, q: Tensor) -> Tensor:
        """(B, count, N, 2k+1): q_i · w_r / √d_h, the key term for every clipped distance r."""
        return q @ self.relative_positions_embeddings.weight.t().to(q.dtype) / math.sqrt(self.d_head)

    def logit_bias(self, q: Tensor, ctx: HeadContext) -> Tensor:
        """q a^Kᵀ / √d_h as (B, count, N, N): (q Wᵀ) gathered by the relative index."""
        return self.key_table(q).gather(-1, self._index(q))

    def value_term(self, att: Tensor) -> Tensor:
        """Σ_j α_ij a^V_ij as (B, count, N, d_h) from α (B, count, N, N), in α's dtype.

        The bucket sums stay float32 in any precision: the two clipped buckets each sum up
        to n probabilities, and CUDA's scatter_add adds in the tensor's own dtype (atomics),
        where bf16 stops growing a sum once it is ~2^8 times the term added."""
        B, H, N, _ = att.shape
        buckets = att.new_zeros(B, H, N, 2 * self.k + 1, dtype=torch.float32)
        buckets.scatter_add_(-1, self._index(att), att.float())
        return (buckets @ self.relative_positions_embeddings.weight.float()).to(att.dtype)

    def score_rows(self, q: Tensor, ctx: HeadContext) -> ScoreBias:
        return RelativeRows(self.key_table(q), self.relative_positions_embeddings.weight, self.k, ctx)


class RelativeRows(ScoreBias):
    """Shaw's key term for a block of query rows, expanded from the (B, H, N, 2k+1) table
    q wᵀ/√d_h by :func:`expand_relative`, and his value term (``value_table`` w). Both
    directions are O(rows x N) passes (a gather; for the adjoint a few cumulative sums),
    never a scatter-add (a serial ~30x slower loop on CPU)."""

    def __init__(self, table: Tensor, weight: Tensor, k: int, ctx: HeadContext):
        self.heads = table.size(1)
        self.tensors, self.row_dims = (table,), (2,)
        self.value_table, self.k, self.n_keys = weight, k, table.size(2)
        self.ctx = ctx

    def rows(self, block, tensors):
        (table,) = tensors                                           # (B', 1, c, 2k+1)
        bias = _Expand.apply(table.flatten(0, 1), block.rows.start, self.k, self.n_keys)
        return bias.view(*table.shape[:3], -1), None

    def _index(self, like: Tensor) -> Tensor:
        """(B, H, N, N) view of the (N, N) relative index, built once per batch and length."""
        n = self.n_keys
        index = self.ctx.constant(("relative_index", self.k), lambda: relative_index(n, self.k, like.device), size=n)
        return index.expand(*like.shape[:2], n, n)

    def whole(self, batch, n_queries, tensors):
        """The fused path: one gather of the (B, H, N, 2k+1) table by the shared index (its
        backward one scatter-add into 2k+1 columns per row)."""
        (table,) = tensors
        return table.gather(-1, self._index(table)), None

    def collect(self, probs):
        """The fused path's value-term buckets: one scatter-add of α by the shared index,
        in float32 at least (CUDA adds in the tensor's dtype; see RelPos.value_term)."""
        buckets = probs.new_zeros(*probs.shape[:3], 2 * self.k + 1)
        return buckets.scatter_add(-1, self._index(probs), probs)

    def value_collect(self, p: Tensor, rows: slice) -> Tensor:
        return collect_relative(p, rows.start, self.k)

    def value_expand(self, t: Tensor, rows: slice) -> Tensor:
        return expand_relative(t, rows.start, self.k, self.n_keys)


def _relative_cols(lo: int, rows: int, k: int, device) -> Tensor:
    """(rows, 2k+1): key position lo + i + o of query row i and offset o = -k..k."""
    return (torch.arange(lo, lo + rows, device=device).unsqueeze(1)
            + torch.arange(-k, k + 1, device=device).unsqueeze(0))


def expand_relative(table: Tensor, lo: int, k: int, n_keys: int) -> Tensor:
    """(B', c, 2k+1) -> (B', c, n_keys): out[i, j] = table[i, clip(j - (lo + i), k) + k]."""
    B, c, _ = table.shape
    keys = torch.arange(n_keys, device=table.device)
    index = (keys.unsqueeze(0) - torch.arange(lo, lo + c, device=table.device).unsqueeze(1)).clamp(-k, k) + k
    return table.gather(-1, index.expand(B, -1, -1))


def collect_relative(x: Tensor, lo: int, k: int) -> Tensor:
    """Adjoint of :func:`expand_relative`: (B', c, N) -> (B', c, 2k+1), out[i, r] = Σ_j x[i, j]
    over the keys j with clip(j - (lo + i), k) + k = r: the band |j - i| < k read off
    directly, the two clipped ends from a prefix and a suffix sum (never subtracted)."""
    B, c, N = x.shape
    if k == 0:                                                       # one bucket: every key
        return x.sum(-1, keepdim=True)
    cols = _relative_cols(lo, c, k, x.device)
    out = x.gather(-1, cols.clamp(0, N - 1).expand(B, -1, -1))
    out = out * ((cols >= 0) & (cols < N))                           # keys beyond the sentence ends
    first, last = cols[:, 0], cols[:, -1]                            # lo + i - k, lo + i + k
    prefix = x.cumsum(-1).gather(-1, first.clamp(0, N - 1).view(1, c, 1).expand(B, -1, -1))
    suffix = x.flip(-1).cumsum(-1).gather(-1, (N - 1 - last).clamp(0, N - 1).view(1, c, 1).expand(B, -1, -1))
    out[..., :1] = prefix * (first >= 0).view(1, c, 1)               # Σ_{j <= i - k}
    out[..., -1:] = suffix * (last <= N - 1).view(1, c, 1)           # Σ_{j >= i + k}
    return out


class _Expand(torch.autograd.Function):
    """:func:`expand_relative` with :func:`collect_relative` as its backward."""

    @staticmethod
    def forward(ctx, table, lo, k, n_keys):
        ctx.lo, ctx.k = lo, k
        return expand_relative(table, lo, k, n_keys)

    @staticmethod
    def backward(ctx, grad):
        return collect_relative(grad, ctx.lo, ctx.k), None, None, None


__all__ = ["QueryBiasedHeads", "RelPos", "RelativeRows", "masked_softmax", "relative_index"]
