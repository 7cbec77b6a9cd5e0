"""Attention with a score bias, computed block by block (no (B, H, N, N) tensor).

For the learned kinds whose logits get a bias that torch's fused SDPA cannot differentiate
(paper C's LPEA P, RHE's per-head choice, Shaw's relative keys and values, Yang's
Gaussian)::

    s_ij = scale · q_i · k_j + bias_ij     (-inf where keep_ij is False)
    α_i  = softmax_j s_ij                  (0 for a row without any allowed key)
    o_i  = Σ_j α_ij v_j  [+ Σ_j α_ij w_{idx(i,j)}]       (Shaw's a^V, optional)

:func:`biased_attention` is one ``torch.autograd.Function``. Its forward goes over blocks
(a few sentences x a range of query rows, :func:`blocks`) and keeps nothing but its
inputs; its backward recomputes each block's scores (as flash attention does) and writes
dq, dk, dv and the gradient of the bias's own inputs (through a small autograd graph per
block, see :class:`ScoreBias`). Memory is that of fused SDPA (q, k, v, the output, their
gradients) plus one block of scores, where a kind that materialised (B, H, N, N) scores
kept about five such tensors for its backward. Without dropout and value term the
forward is torch's SDPA on each block (the bias as a float mask: no gradient is needed
there); otherwise both passes are explicit. A block holds whole sentences when they fit
(``block`` elements of B' x rows x Nk): per sentence and head the products are then
(n x d)(d x n) matrices, which BLAS runs far faster than thin row slices.

Numerics (dtype-agnostic): scores, softmax and its backward are computed in float32 (float64
for float64 inputs; :func:`_acc`), the products with q, k, v in their dtype; masked
logits are filled with the dtype's ``finfo.min`` (finite, so a fully masked row gives no
NaN), and rows without any allowed key are 0 in the output and get no gradient (torch's
CPU SDPA does the same). Attention dropout: each block's mask comes from its own
generator, seeded from one draw of the global generator in the forward, so the backward
redraws the same mask.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

#: elements of one head's block of scores (sentences x rows x keys): 2 MiB of float32
BLOCK_ELEMENTS = 2 ** 19


class Block(NamedTuple):
    """Sentences ``batch``, query rows ``rows``, and the ``head`` of a per-head bias (None:
    the bias is the same for every head)."""

    batch: slice
    rows: slice
    head: int | None


#: every sentence and query row of the batch (the fused path's one block)
WHOLE = Block(slice(None), slice(None), None)


class ScoreBias:
    """What a kind adds to the logits of one :class:`Block`, from differentiable ``tensors``.

    ``row_dims[t]``: None if ``tensors[t]`` is used whole (e.g. a table of 2k+1 values),
    else its query-row dimension; such a tensor is (B, 1|H, Nq, ...) and :meth:`rows`
    sees it cut to the block's sentences, rows (and head, for a per-head bias). Gradients
    reach ``tensors`` through the small autograd graph that :meth:`rows` builds per block.
    Kinds with Shaw's value term set ``value_table`` ((R, d_v)) and implement
    :meth:`value_collect` and :meth:`value_expand`.
    Other (non-differentiable) inputs, e.g. parse columns, are attributes the kind cuts
    to ``block.batch`` itself.
    """

    #: 1: one bias for all heads; H: one per head (:meth:`rows` is then called per head)
    heads = 1
    tensors: tuple[Tensor, ...] = ()
    row_dims: tuple[int | None, ...] = ()
    value_table: Tensor | None = None
    #: (B, H) bool: True where a head keeps its plain attention (no bias, no keep mask,
    #: no value term) for that sentence (RHE: important heads)
    plain: Tensor | None = None
    #: None, or a callable (batch slice, head, α (B', Nq, Nk) of the plain attention) ->
    #: (B',) bool that decides ``plain`` for those sentences in the forward (RHE's labels,
    #: from the scores the forward computes anyway); needs :func:`whole_sentences` blocks
    chooser = None
    #: True: the bias must meet the scores in float32 (never rounded to fp16/bf16 as an SDPA
    #: mask): Yang's Gaussian, whose values reach n² / σ²
    exact = False

    def whole(self, batch: int, n_queries: int, tensors: tuple[Tensor, ...]) -> tuple[Tensor | None, Tensor | None]:
        """:meth:`rows` of the whole batch and all heads, (B, 1|H, Nq, Nk): the fused path's
        one call per layer. A bias with per-batch constants overrides it to take them from
        ``HeadContext.constant`` (built once, shared by every layer). Full slices: a
        compiled graph would be fixed to this batch's sizes by ``slice(0, batch)`` (dynamo
        specialises a slice's symbolic bounds)."""
        return self.rows(WHOLE, tensors)

    def sdpa_mask(self, key_mask: Tensor, dtype: torch.dtype) -> Tensor:
        """The mask torch's SDPA takes for a bias that needs no gradient (MaskRows, DenseRows)."""
        raise NotImplementedError

    def collect(self, probs: Tensor) -> Tensor:
        """Σ_j α_ij over the keys of each value-table row for the whole batch, differentiable:
        (B, H, Nq, Nk) -> (B, H, Nq, R) (the fused path's value term). Default: the blocked
        path's :meth:`value_collect`, with :meth:`value_expand` as its backward."""
        B, H, Nq, Nk = probs.shape
        return _Collect.apply(probs.reshape(B * H, Nq, Nk), self).view(B, H, Nq, -1)

    def rows(self, block: Block, tensors: tuple[Tensor, ...]) -> tuple[Tensor | None, Tensor | None]:
        """(bias (B', 1, c, Nk) or None, keep (B', 1, c, Nk) bool or None) of ``block``."""
        raise NotImplementedError

    def value_collect(self, p: Tensor, rows: slice) -> Tensor:
        """(B', c, Nk) -> (B', c, R): Σ_j p_ij over the keys j whose value-table row is r."""
        raise NotImplementedError

    def value_expand(self, t: Tensor, rows: slice) -> Tensor:
        """(B', c, R) -> (B', c, Nk): t[i, r(i, j)], the adjoint of :meth:`value_collect`."""
        raise NotImplementedError


class MaskRows(ScoreBias):
    """No bias, only a keep mask (B, N, N) bool (e.g. DEA's dependency relation); None keeps
    every key (plain attention, on a path that needs a ScoreBias)."""

    def __init__(self, keep: Tensor | None):
        self.keep = keep

    def rows(self, block, tensors):
        return None, None if self.keep is None else self.keep[block.batch, block.rows].unsqueeze(1)

    def sdpa_mask(self, key_mask, dtype):
        return key_mask if self.keep is None else self.keep.unsqueeze(1) & key_mask


class DenseRows(ScoreBias):
    """A kind's own dense additive bias (B, 1|H, Nq, Nk) (``LearnedHeads.score_bias``:
    -inf masks a key); a bias that needs a gradient is cut per block like any other."""

    def __init__(self, bias: Tensor):
        self.heads = bias.size(1)          # a per-head bias is cut per head, like Local's
        self.tensors, self.row_dims = (bias,), (2,)

    def rows(self, block, tensors):
        return tensors[0], None

    def sdpa_mask(self, key_mask, dtype):
        (bias,) = self.tensors
        return bias.to(dtype).masked_fill(~key_mask, float("-inf"))


def biased_attention(q: Tensor, k: Tensor, v: Tensor, key_mask: Tensor, bias: ScoreBias, *,
                     scale: float | None = None, dropout_p: float = 0.0, block: int = BLOCK_ELEMENTS,
                     dropout_keep: Tensor | None = None) -> Tensor:
    """q, k: (B, H, Nq|Nk, d), v: (B, H, Nk, d_v), key_mask: (B, 1, 1|Nq, Nk) bool (True =
    may attend) -> (B, H, Nq, d_v), a view of a token-major (B, Nq, H, d_v) tensor.
    ``dropout_keep`` (B, H, Nq, Nk) bool: this dropout mask instead of drawn ones (tests)."""
    scale = 1 / math.sqrt(q.size(-1)) if scale is None else scale
    value_table = bias.value_table
    extra = (value_table,) if value_table is not None else ()
    dropout = (dropout_p, dropout_keep)
    return _BiasedAttention.apply(q, k, v, key_mask, bias, scale, dropout, block, len(extra),
                                  *extra, *bias.tensors)


class _Collect(torch.autograd.Function):
    @staticmethod
    def forward(ctx, probs, bias):
        # every row (the kinds read the rows' start only): no symbolic bound to specialise
        ctx.bias = bias
        return bias.value_collect(probs, slice(0, None))

    @staticmethod
    def backward(ctx, grad):
        return ctx.bias.value_expand(grad.contiguous(), slice(0, None)), None


def whole_sentences(Nq: int, Nk: int, block: int = BLOCK_ELEMENTS) -> bool:
    """True if :func:`blocks` holds every query row of a sentence in one block."""
    return Nq * Nk <= block


def blocks(B: int, H: int, Nq: int, Nk: int, heads: int, block: int = BLOCK_ELEMENTS) -> list[Block]:
    """Whole sentences per block while they fit in ``block`` elements, else row ranges of
    one sentence; one block per head if the bias is per head (``heads`` > 1)."""
    per_sentence = Nq * Nk
    if per_sentence <= block:
        step, rows = max(1, block // per_sentence), Nq
    else:
        step, rows = 1, max(1, block // Nk)
    out = []
    for b0 in range(0, B, step):
        for lo in range(0, Nq, rows):
            where = (slice(b0, min(B, b0 + step)), slice(lo, min(Nq, lo + rows)))
            out += [Block(*where, None)] if heads == 1 else [Block(*where, h) for h in range(H)]
    return out


def _cut(bias: ScoreBias, tensors, block: Block):
    """``tensors`` cut to ``block`` (whole tensors and None as they are)."""
    out = []
    for t, dim in zip(tensors, bias.row_dims):
        if t is not None and dim is not None:
            t = t[block.batch].narrow(dim, block.rows.start, block.rows.stop - block.rows.start)
            if block.head is not None and t.size(1) > 1:
                t = t.narrow(1, block.head, 1)
        out.append(t)
    return tuple(out)


class _Rows(NamedTuple):
    """One block: ``add`` (B', 1, c|1, Nk), the bias with ``finfo.min`` where a key is not
    kept (key mask included), in :func:`_acc` precision: added by the product itself, so a
    head's scores cost one batched product and no masking pass (masked_fill is ~10x
    slower than an add on CPU); ``keys`` the same for the key mask alone (RHE's plain
    heads); ``biased``: the bias needs a gradient; ``empty``/``keys_empty`` (B', 1, c|1, 1)
    rows without any key, None where there is none (the usual case)."""

    add: Tensor
    keys: Tensor
    empty: Tensor | None
    keys_empty: Tensor | None
    graded: bool


class _Head(NamedTuple):
    """One head's view of a block: add (B', c|1, Nk), empty (B', c|1, 1) or None, biased
    (B',) bool or None (None: every sentence takes the bias; else RHE's ``~plain``)."""

    add: Tensor
    empty: Tensor | None
    biased: Tensor | None


def _empty_rows(keep: Tensor) -> Tensor | None:
    empty = ~keep.any(-1, keepdim=True)
    return empty if bool(empty.any()) else None


def _additive(keep: Tensor, bias: Tensor | None, dtype: torch.dtype) -> Tensor:
    """bias (0 if None) where ``keep``, else ``finfo(dtype).min`` (finite: no NaN)."""
    value = torch.zeros((), dtype=dtype, device=keep.device) if bias is None else bias.to(dtype)
    return torch.where(keep, value, torch.finfo(dtype).min)


def _unit(bias: ScoreBias, tensors, key_mask: Tensor, block: Block, dtype: torch.dtype
          ) -> tuple[_Rows, Tensor | None]:
    """(the block's :class:`_Rows`, its bias (B', 1, c, Nk) as ``rows`` built it, or None)."""
    bias_rows, keep = bias.rows(block, tensors)
    keys = key_mask[block.batch]
    keys = keys if keys.size(2) == 1 else keys[:, :, block.rows]
    keys_add, keys_empty = _additive(keys, None, dtype), _empty_rows(keys)
    if keep is None and bias_rows is None:
        return _Rows(keys_add, keys_add, keys_empty, keys_empty, False), None
    keep = keys if keep is None else keep & keys
    graded = bias_rows is not None and bias_rows.requires_grad
    add = _additive(keep, None if bias_rows is None else bias_rows.detach(), dtype)
    return _Rows(add, keys_add, _empty_rows(keep), keys_empty, graded), bias_rows


def _head(bias: ScoreBias, rows: _Rows, batch: slice, h: int) -> _Head:
    plain = None if bias.plain is None else bias.plain[batch, h]
    add, empty, biased = rows.add, rows.empty, None
    if plain is not None and bool(plain.all()):
        add, empty, biased = rows.keys, rows.keys_empty, torch.zeros_like(plain)
    elif plain is not None and bool(plain.any()):             # some sentences plain, some biased
        biased, pick = ~plain, plain.view(-1, 1, 1, 1)
        add = torch.where(pick, rows.keys, add)
        if empty is not None or rows.keys_empty is not None:
            empty = torch.where(pick, _or_false(rows.keys_empty), _or_false(empty))
    return _Head(add[:, 0], None if empty is None else empty[:, 0], biased)


def _or_false(empty: Tensor | None) -> Tensor | bool:
    return False if empty is None else empty


def _heads(block: Block, H: int):
    return range(H) if block.head is None else (block.head,)


def _dropout_mask(shape, p: float, seed: int, index: int, device) -> Tensor:
    gen = torch.Generator(device=device)
    gen.manual_seed(seed + index)
    return torch.rand(shape, generator=gen, device=device) >= p


def _drop(keep: Tensor | None, shape, p: float, seed: int, index: int, unit: Block, head: int, device,
          dtype: torch.dtype) -> Tensor:
    """The block's dropout factor (keep / (1 - p)): from the fixed mask ``keep`` (B, H, Nq,
    Nk) when one is given, else drawn from the block's own generator."""
    mask = keep[unit.batch, head, unit.rows] if keep is not None else _dropout_mask(shape, p, seed, index, device)
    return mask.to(dtype) / (1 - p)


class _BiasedAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, key_mask, bias, scale, dropout, block, n_extra, *tensors):
        dropout_p, keep = dropout
        B, H, Nq, _ = q.shape
        acc = _acc(q.dtype)
        value_table = tensors[0] if n_extra else None
        bias_tensors = tensors[n_extra:]
        seed = int(torch.randint(0, 2 ** 62, (1,)).item()) if dropout_p > 0 and keep is None else 0
        out = q.new_empty(B, Nq, H, v.size(-1)).transpose(1, 2)
        units = blocks(B, H, Nq, k.size(2), bias.heads, block)
        fused = dropout_p == 0 and value_table is None and bias.chooser is None
        if bias.chooser is not None and any(unit.rows != slice(0, Nq) for unit in units):
            raise ValueError("ScoreBias.chooser needs blocks of whole sentences (see whole_sentences)")
        with torch.no_grad():
            for u, unit in enumerate(units):
                bs, rs = unit.batch, unit.rows
                rows, _ = _unit(bias, _cut(bias, bias_tensors, unit), key_mask, unit, acc)
                if fused and unit.head is None and bias.plain is None:
                    # torch's fused kernel on the block, all heads; the bias rides as a float mask
                    o = F.scaled_dot_product_attention(q[bs, :, rs], k[bs], v[bs], attn_mask=rows.add.to(q.dtype),
                                                       scale=scale)
                    out[bs, :, rs] = o if rows.empty is None else o.masked_fill(rows.empty, 0)
                    continue
                for h in _heads(unit, H):
                    if bias.chooser is not None:
                        p, view = _chosen(q[bs, h], k[bs, h], bias, rows, bs, h, scale)
                    else:
                        view = _head(bias, rows, bs, h)
                    if fused:
                        o = F.scaled_dot_product_attention(q[bs, h:h + 1, rs], k[bs, h:h + 1], v[bs, h:h + 1],
                                                           attn_mask=view.add.to(q.dtype).unsqueeze(1),
                                                           scale=scale)[:, 0]
                        out[bs, h, rs] = o if view.empty is None else o.masked_fill(view.empty, 0)
                        continue
                    if bias.chooser is None:
                        p = _probs(q[bs, h, rs], k[bs, h], view, scale)
                    if dropout_p > 0:
                        p = p * _drop(keep, p.shape, dropout_p, seed, u * H + h, unit, h, p.device, p.dtype)
                    o = torch.bmm(p.to(v.dtype), v[bs, h])
                    if value_table is not None and not _no_value(view):
                        o = o + _value_term(bias, p, rs, value_table, view.biased).to(o.dtype)
                    out[bs, h, rs] = o
        ctx.bias, ctx.scale, ctx.dropout_p, ctx.seed, ctx.units, ctx.n_extra, ctx.keep = (
            bias, scale, dropout_p, seed, units, n_extra, keep)
        ctx.save_for_backward(q, k, v, key_mask, *tensors)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, key_mask, *tensors = ctx.saved_tensors
        bias, scale, dropout_p, seed = ctx.bias, ctx.scale, ctx.dropout_p, ctx.seed
        value_table = tensors[0] if ctx.n_extra else None
        bias_tensors = tensors[ctx.n_extra:]
        H = q.size(1)
        acc = _acc(q.dtype)
        # token-major, the layout of q, k, v (views of the projections' outputs); not zeroed:
        # each block writes its part, the first block of a sentence's rows (lo = 0) by copy
        dq, dk, dv = (torch.empty_like(t.transpose(1, 2)).transpose(1, 2) for t in (q, k, v))
        d_value = torch.zeros_like(value_table, dtype=acc) if value_table is not None else None
        wants = list(ctx.needs_input_grad[9 + ctx.n_extra:])
        d_tensors = [torch.zeros_like(t) if w else None for t, w in zip(bias_tensors, wants)]
        for u, unit in enumerate(ctx.units):
            bs, rs = unit.batch, unit.rows
            inputs = [t.detach().requires_grad_(w) for t, w in zip(_cut(bias, bias_tensors, unit), wants)]
            with torch.enable_grad():
                rows, bias_rows = _unit(bias, inputs, key_mask, unit, acc)
            d_bias = torch.zeros_like(bias_rows, dtype=acc) if rows.graded else None
            for h in _heads(unit, H):
                view = _head(bias, rows, bs, h)
                q_h, k_h, v_h, g = q[bs, h, rs], k[bs, h], v[bs, h], grad_out[bs, h, rs]
                p = _probs(q_h, k_h, view, scale)
                dp = torch.bmm(g, v_h.transpose(1, 2)).to(acc)             # dL/d(dropped α)
                drop, p_used = None, p
                if dropout_p > 0:
                    drop = _drop(ctx.keep, p.shape, dropout_p, seed, u * H + h, unit, h, p.device, p.dtype)
                    p_used = p * drop
                first = rs.start == 0
                # (gᵀ α)ᵀ: BLAS runs this orientation ~25% faster than αᵀ g
                _write(dv[bs, h], torch.bmm(g.transpose(1, 2), p_used.to(v.dtype)).transpose(1, 2), first)
                if value_table is not None and not _no_value(view):
                    gw = g.to(acc) @ value_table.to(acc).t()                # (B', c, R): dO · w_r
                    if view.biased is not None:
                        gw = gw * view.biased.view(-1, 1, 1)
                    dp = dp + bias.value_expand(gw, rs)
                    buckets = _buckets(bias, p_used, rs, view.biased)
                    d_value += buckets.flatten(0, 1).t() @ g.to(acc).flatten(0, 1)
                if drop is not None:
                    dp = dp * drop
                ds = torch._softmax_backward_data(dp, p, -1, acc)            # dL/ds (0 on empty rows)
                if d_bias is not None and not _no_value(view):
                    d_bias[:, 0] += ds if view.biased is None else ds * view.biased.view(-1, 1, 1)
                ds = ds.to(q.dtype)
                dq[bs, h, rs] = torch.bmm(ds, k_h).mul_(scale)
                _write(dk[bs, h], torch.bmm(q_h.transpose(1, 2), ds).mul_(scale).transpose(1, 2), first)
            if d_bias is not None:
                targets = [t for t in inputs if t.requires_grad]
                grads = iter(torch.autograd.grad(bias_rows, targets, d_bias, allow_unused=True))
                for t, part in zip(d_tensors, _cut(bias, d_tensors, unit)):
                    if t is not None:
                        grad = next(grads)
                        if grad is not None:
                            part.add_(grad)
        extra = (d_value.to(value_table.dtype),) if value_table is not None else ()
        return (dq, dk, dv, None, None, None, None, None, None, *extra, *d_tensors)


def _no_value(view: _Head) -> bool:
    """True if no sentence of this head takes the bias or value term (all plain)."""
    return view.biased is not None and not bool(view.biased.any())


def _write(part: Tensor, value: Tensor, first: bool) -> None:
    if first:
        part.copy_(value)
    else:
        part.add_(value)


def _acc(dtype: torch.dtype) -> torch.dtype:
    """The dtype of scores and softmax: float32, or float64 for float64 inputs."""
    return torch.promote_types(dtype, torch.float32)


def _chosen(q: Tensor, k: Tensor, bias: ScoreBias, rows: _Rows, batch: slice, h: int, scale: float
            ) -> tuple[Tensor, _Head]:
    """(α, view) of one head over whole sentences, ``bias.chooser`` deciding from the plain
    attention which sentences keep it (it writes ``bias.plain[batch, h]``)."""
    s = scaled_scores(q, k, scale)
    own = _softmax(s + rows.keys[:, 0], None if rows.keys_empty is None else rows.keys_empty[:, 0])
    plain = bias.chooser(batch, h, own)
    view = _head(bias, rows, batch, h)
    if bool(plain.all()):
        return own, view
    # plain sentences of a mixed head: view.add is the key mask alone there, i.e. own
    return _softmax(s.add_(view.add), view.empty), view


def _probs(q: Tensor, k: Tensor, view: _Head, scale: float) -> Tensor:
    """α of one head: q (B', c, d), k (B', Nk, d) -> (B', c, Nk) in :func:`_acc` precision."""
    if q.dtype == _acc(q.dtype):
        s = torch.baddbmm(view.add, q, k.transpose(1, 2), alpha=scale)   # bias and mask in the product
    else:
        s = scaled_scores(q, k, scale).add_(view.add)
    return _softmax(s, view.empty)


def _softmax(s: Tensor, empty: Tensor | None) -> Tensor:
    p = torch.softmax(s, -1)
    return p if empty is None else p.masked_fill_(empty, 0)


def scaled_scores(q: Tensor, k: Tensor, scale: float) -> Tensor:
    """scale · q kᵀ: (B', c, d), (B', Nk, d) -> (B', c, Nk) in :func:`_acc` precision; the
    scale multiplies q (c x d), not the scores (c x Nk)."""
    return torch.bmm(q * scale, k.transpose(1, 2)).to(_acc(q.dtype))


def _buckets(bias: ScoreBias, p: Tensor, rows: slice, gate: Tensor | None) -> Tensor:
    """(B', c, R): Σ_{j: row r} α_ij (0 for the sentences where ``gate`` is False)."""
    buckets = bias.value_collect(p, rows)
    return buckets if gate is None else buckets * gate.view(-1, 1, 1)


def _value_term(bias: ScoreBias, p: Tensor, rows: slice, table: Tensor, gate: Tensor | None) -> Tensor:
    return _buckets(bias, p, rows, gate) @ table.to(p.dtype)


__all__ = ["BLOCK_ELEMENTS", "Block", "DenseRows", "MaskRows", "ScoreBias", "biased_attention", "blocks",
           "scaled_scores", "whole_sentences"]
