"""One executor for every head kind: what a kind declares, and the two paths that run it.

A head kind does not compute its attention. It **declares**, once per forward, what it adds
to plain scaled-dot-product attention:

* learned kinds (:class:`Scores`): their queries and keys, and a
  :class:`~headlab.heads.chunked.ScoreBias` (None for ``L``): an additive bias, a keep
  mask, Shaw's value term, and for RHE a per-head, per-sentence :class:`Choice` between the
  head's own attention and the biased one;
* fixed kinds (:class:`Fixed`): paper A's patterns, a fixed row-stochastic matrix per
  sentence.

:func:`execute` runs a declaration on one of two paths. No kind knows which:

``blocked``  the CPU-tuned path: fused SDPA where the bias is a plain mask, otherwise
             :func:`headlab.heads.chunked.biased_attention` (blocks of a few sentences and
             rows, kept within a CPU cache, nothing n x n per head kept for backward); fixed
             patterns in O(n) (:mod:`headlab.heads.patterns`).
``fused``    the GPU path: one batched call per layer and no Python loop over heads, blocks
             or sentences, no host sync. The bias is materialised once as a (B, 1|H, N, N)
             additive mask in the queries' dtype and handed to torch's SDPA (mem-efficient
             or flash kernels take it, with its gradient); kinds with Shaw's value term,
             or whose bias must stay float32 (``ScoreBias.exact``: Yang's Gaussian holds
             positions up to n²), run an explicit float32 softmax instead (a handful of ops).
             RHE's labels come from one dense no-grad pass over the heads' own scores; the
             chosen bias per head is one ``where``. Fixed heads are one float32 matmul with
             the dense pattern matrices (:func:`headlab.heads.patterns.pattern_matrix`),
             built once per batch and shared by every layer through ``HeadContext.constant``.

Memory of the fused path: it materialises n x n per head for every kind with a bias (B x H
x N x N in the queries' dtype: the mask SDPA keeps for backward; float32 scores and
probabilities for the explicit kinds; B x P x N x N float32 pattern matrices for fixed
heads), where the blocked path keeps O(n) per head. ``auto`` takes the blocked path when a
batch's n x n tensors would exceed :data:`FUSED_MAX_ELEMENTS` elements.

``HEADLAB_ATTENTION_PATH`` = ``fused`` | ``blocked`` | ``auto`` (default) selects the path
for every layer of a process. ``auto``: fused on CUDA; on the CPU, per kind, whichever the
CPU attention bench measured faster (:data:`CPU_FUSED`; ``make bench``: ``attention.csv``
has both paths).

Attention dropout: SDPA draws its own mask on both paths. For tests, a group may carry a fixed
keep mask ``dropout_keep`` (B, H, Nq, Nk) bool: both paths then use exactly that mask (the
SDPA cases go explicit), so their outputs and gradients can be compared.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from headlab.errors import ConfigError
from headlab.heads.base import HeadContext, no_autocast
from headlab.heads.chunked import DenseRows, MaskRows, ScoreBias, biased_attention, whole_sentences

#: environment variable selecting the attention path of every layer
PATH_VARIABLE = "HEADLAB_ATTENTION_PATH"
PATHS = ("fused", "blocked", "auto")
#: kinds whose fused path the CPU attention bench measured faster than the blocked one at
#: n = 512, one thread (``python -m headlab.bench --what attention --paths fused,blocked``):
#: ``auto`` runs them fused on the CPU too
CPU_FUSED: frozenset[str] = frozenset({"L", "Lwide", "DEA"})
#: auto takes the blocked path beyond this many elements of one n x n tensor of a layer
#: (B x heads x Nq x Nk): 2^28 float32 elements are 1 GiB, and the fused path holds a few
FUSED_MAX_ELEMENTS = 2 ** 28


def attention_path() -> str:
    """The process's path setting (``HEADLAB_ATTENTION_PATH``, default ``auto``)."""
    value = os.environ.get(PATH_VARIABLE, "auto").strip() or "auto"
    if value not in PATHS:
        raise ConfigError(f"{PATH_VARIABLE}={value!r}: must be one of {', '.join(PATHS)}", key=PATH_VARIABLE)
    return value


def choose_path(kind: str, device: torch.device, elements: int) -> str:
    """``fused`` or ``blocked`` for a group of ``kind`` whose n x n tensors have ``elements``
    elements (B x heads x Nq x Nk), on ``device``, under :func:`attention_path`."""
    setting = attention_path()
    if setting != "auto":
        return setting
    if elements > FUSED_MAX_ELEMENTS:
        return "blocked"
    if device.type == "cuda":
        return "fused"
    return "fused" if kind in CPU_FUSED else "blocked"


@dataclass
class Choice:
    """RHE (paper C eqs. 3, 9, 10): per head and sentence, keep the head's own attention
    (important) or take the bias (redundant). ``related`` (B, N, N) bool is eq. 9's
    Dep_mask, ``fgate`` 0 the dynamic gate; ``prune`` (translation's ``-rhe_prune``):
    redundant heads output 0 instead. :func:`execute` fills ``important`` (B, H) bool and
    ``hconf``, ``syn`` (B, H) float."""

    related: Tensor
    fgate: float
    prune: bool = False
    important: Tensor | None = None
    hconf: Tensor | None = None
    syn: Tensor | None = None


@dataclass
class Scores:
    """What a learned group attends with: q, k (B, H, Nq|Nk, d), a bias (None: plain
    attention), an RHE :class:`Choice`, dropout (p; ``keep`` a fixed mask for tests)."""

    q: Tensor
    k: Tensor
    bias: ScoreBias | None = None
    choice: Choice | None = None
    dropout_p: float = 0.0
    dropout_keep: Tensor | None = None


@dataclass
class Fixed:
    """Paper A's patterns ``names`` over tokens, or over words with ``word_ids`` (B, N)."""

    names: tuple[str, ...]
    word_ids: Tensor | None = None


def execute(declared: Scores | Fixed, values: Tensor, ctx: HeadContext, kind: str = "?") -> Tensor:
    """values (B, Nk, H, d) token-major -> (B, Nq, H, d) token-major outputs of the heads."""
    B, Nk, H, _ = values.shape
    Nq = declared.q.size(2) if isinstance(declared, Scores) else Nk
    path = choose_path(kind, values.device, B * H * Nq * Nk)
    if isinstance(declared, Fixed):
        return _fixed(declared, values, ctx, path)
    return _learned(declared, values.transpose(1, 2), ctx, path).transpose(1, 2)


# -- fixed heads ------------------------------------------------------------------------
def _fixed(declared: Fixed, values: Tensor, ctx: HeadContext, path: str) -> Tensor:
    from headlab.heads.patterns import apply_patterns, pattern_matrix

    if path == "blocked":
        return apply_patterns(declared.names, values, ctx.lengths, declared.word_ids).to(values.dtype)
    N = values.size(1)
    key = ("patterns", declared.names, declared.word_ids is not None)
    weights = ctx.constant(key, lambda: pattern_matrix(declared.names, ctx.lengths.to(values.device), N,
                                                        declared.word_ids), size=N)
    with no_autocast(values):   # float32: (j+1)^3-weighted averages (see headlab.heads.patterns)
        out = torch.matmul(weights, values.float().transpose(1, 2))          # (B, H, N, d)
    return out.transpose(1, 2).to(values.dtype)


# -- learned heads ----------------------------------------------------------------------
def _learned(declared: Scores, v: Tensor, ctx: HeadContext, path: str) -> Tensor:
    """v (B, H, Nk, d) -> (B, H, Nq, d)."""
    q, k, bias, choice = declared.q, declared.k, declared.bias, declared.choice
    scale = 1 / math.sqrt(q.size(-1))
    if choice is not None and choice.prune:
        return _pruned(declared, v, ctx, path, scale)
    plain = bias is None or (choice is None and isinstance(bias, (MaskRows, DenseRows)))
    if plain and declared.dropout_keep is None:
        # what torch's SDPA takes as it is: the key mask, DEA's keep mask, a constant bias
        mask = ctx.key_mask if bias is None else bias.sdpa_mask(ctx.key_mask, q.dtype)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=declared.dropout_p)
    if path == "blocked":
        return _blocked(declared, v, ctx, scale)
    return _fused(declared, v, ctx, scale)


def _blocked(declared: Scores, v: Tensor, ctx: HeadContext, scale: float) -> Tensor:
    q, k, choice = declared.q, declared.k, declared.choice
    bias = declared.bias or MaskRows(None)
    if choice is not None:
        if whole_sentences(q.size(2), k.size(2)):
            labeller = bias.chooser = _Labeller(choice, ctx.pad_mask, q.size(1))
            bias.plain = labeller.important
        else:
            bias.plain = _block_labels(choice, q, k, ctx, scale)
    out = biased_attention(q, k, v, ctx.key_mask, bias, scale=scale, dropout_p=declared.dropout_p,
                           dropout_keep=declared.dropout_keep)
    if choice is not None and bias.chooser is not None:
        choice.important, choice.hconf, choice.syn = bias.plain, bias.chooser.hconf, bias.chooser.syn
    return out


def _fused(declared: Scores, v: Tensor, ctx: HeadContext, scale: float) -> Tensor:
    q, k, bias, choice = declared.q, declared.k, declared.bias, declared.choice
    B, H, Nq, _ = q.shape
    exact = bias is not None and (bias.exact or bias.value_table is not None)
    explicit = exact or declared.dropout_keep is not None
    dtype = _accumulate(q.dtype) if explicit else q.dtype
    add, empty = _additive_whole(bias, ctx.key_mask, B, Nq, dtype)
    if choice is not None:
        own = _additive(ctx.key_mask, None, dtype)
        important = _dense_labels(choice, q, k, ctx, scale)
        add = torch.where(important.view(B, H, 1, 1), own, add)
    if not explicit:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=add, dropout_p=declared.dropout_p)
        return out if empty is None else out.masked_fill(empty, 0)
    return _explicit(declared, v, add, empty, scale, choice)


def _explicit(declared: Scores, v: Tensor, add: Tensor, empty: Tensor | None, scale: float,
              choice: Choice | None) -> Tensor:
    """softmax(scale q kᵀ + add) in float32 (float64 for float64 inputs), dropout, the
    product with v, and Shaw's value term where the bias has one."""
    q, k, bias = declared.q, declared.k, declared.bias
    acc = _accumulate(q.dtype)
    with no_autocast(q):
        scores = torch.matmul(q * scale, k.transpose(-1, -2)).to(acc) + add
        probs = torch.softmax(scores, -1)
        if empty is not None:
            probs = probs.masked_fill(empty, 0)
        if declared.dropout_keep is not None:
            probs = probs * declared.dropout_keep / (1 - declared.dropout_p)
        elif declared.dropout_p > 0:
            probs = F.dropout(probs, declared.dropout_p)
        out = torch.matmul(probs.to(v.dtype), v)
        if bias is not None and bias.value_table is not None:
            buckets = bias.collect(probs)                               # (B, H, Nq, R)
            if choice is not None:
                buckets = buckets * (~choice.important).view(*choice.important.shape, 1, 1)
            out = out + torch.matmul(buckets, bias.value_table.to(acc)).to(out.dtype)
    return out


def _pruned(declared: Scores, v: Tensor, ctx: HeadContext, path: str, scale: float) -> Tensor:
    """``-rhe_prune`` (translation): the heads' own attention, redundant heads zeroed."""
    q, k, choice = declared.q, declared.k, declared.choice
    if path == "blocked":
        important = _block_labels(choice, q, k, ctx, scale)
    else:
        important = _dense_labels(choice, q, k, ctx, scale)
    own = F.scaled_dot_product_attention(q, k, v, attn_mask=ctx.key_mask)
    return own * important.view(*important.shape, 1, 1)


def _dense_labels(choice: Choice, q: Tensor, k: Tensor, ctx: HeadContext, scale: float) -> Tensor:
    """RHE's labels from the heads' own attention over whole batches (no gradient)."""
    from headlab.heads.rhe import decide, row_sums

    with torch.no_grad(), no_autocast(q):
        acc = _accumulate(q.dtype)
        scores = torch.matmul(q * scale, k.transpose(-1, -2)).to(acc)
        own = torch.softmax(scores + _additive(ctx.key_mask, None, acc), -1)
        real = (~ctx.pad_mask).unsqueeze(1)
        peak, syn = row_sums(own, choice.related.unsqueeze(1), real)
        choice.important, choice.hconf, choice.syn = decide(peak, syn, ctx.pad_mask, choice.fgate)
    return choice.important


def _block_labels(choice: Choice, q: Tensor, k: Tensor, ctx: HeadContext, scale: float) -> Tensor:
    from headlab.heads.rhe import block_labels

    choice.important, choice.hconf, choice.syn = block_labels(q, k, ctx, choice.related, choice.fgate, scale)
    return choice.important


class _Labeller:
    """:attr:`headlab.heads.chunked.ScoreBias.chooser` for RHE on the blocked path: eqs. 3,
    9, 10 of the heads' own attention over whole sentences, from the scores the blocked
    forward computes anyway; fills ``important``, ``hconf`` and ``syn`` (B, count)."""

    def __init__(self, choice: Choice, pad_mask: Tensor, count: int):
        self.related, self.pad_mask, self.fgate = choice.related, pad_mask, choice.fgate
        B = pad_mask.size(0)
        self.important = torch.zeros(B, count, dtype=torch.bool, device=pad_mask.device)
        self.hconf = torch.zeros(B, count, device=pad_mask.device)
        self.syn = torch.zeros_like(self.hconf)

    def __call__(self, batch: slice, head: int, own: Tensor) -> Tensor:
        from headlab.heads.rhe import decide, row_sums

        peak, syn = row_sums(own, self.related[batch], ~self.pad_mask[batch])
        important, hconf, syn = decide(peak.unsqueeze(1), syn.unsqueeze(1), self.pad_mask[batch], self.fgate)
        self.important[batch, head], self.hconf[batch, head], self.syn[batch, head] = (
            important[:, 0], hconf[:, 0], syn[:, 0])
        return important[:, 0]


def _additive_whole(bias: ScoreBias | None, key_mask: Tensor, batch: int, n_queries: int, dtype: torch.dtype
                    ) -> tuple[Tensor, Tensor | None]:
    """(additive mask (B, 1|H, Nq, Nk) in ``dtype``: the bias where a key is kept, else the
    dtype's lowest finite value; rows without any kept key (B, 1|H, Nq, 1), or None when
    the bias keeps no mask of its own)."""
    if bias is None:
        return _additive(key_mask, None, dtype), None
    bias_rows, keep = bias.whole(batch, n_queries, bias.tensors)
    if keep is None:
        return _additive(key_mask, bias_rows, dtype), None
    keep = keep & key_mask
    return _additive(keep, bias_rows, dtype), ~keep.any(-1, keepdim=True)


def _additive(keep: Tensor, bias: Tensor | None, dtype: torch.dtype) -> Tensor:
    """``bias`` (0 if None) where ``keep``, else ``finfo(dtype).min``: finite, so a row
    without any key gives no NaN (its output is zeroed instead)."""
    if bias is None:
        return torch.zeros((), dtype=dtype, device=keep.device).masked_fill(~keep, torch.finfo(dtype).min)
    return torch.where(keep, bias.to(dtype), torch.finfo(dtype).min)


def _accumulate(dtype: torch.dtype) -> torch.dtype:
    """The dtype of explicit scores and softmax: float32, or float64 for float64 inputs (a
    lookup, not ``torch.promote_types``: that is a dispatched op)."""
    return torch.float64 if dtype == torch.float64 else torch.float32


__all__ = ["CPU_FUSED", "Choice", "FUSED_MAX_ELEMENTS", "Fixed", "PATHS", "PATH_VARIABLE", "Scores",
           "attention_path", "choose_path", "execute"]
