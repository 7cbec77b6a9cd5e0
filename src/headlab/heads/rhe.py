"""Redundant head enlivening (paper C §3.0.2, §4.2): kinds ``RHEdea``, ``RHElpea``, ``RHErel``, ``RHEloc``.

Learned heads that, per head and per sentence, decide whether they are *important* and,
if not, replace their attention by a biased one (DEA, LPEA, Rel_Pos or Localness, computed
from the same head's queries and keys). For head h, sentence x with n real pieces and the
head's own attention A = softmax(Q Kᵀ / √d_h):

    eq. 3    hconf    = (1/n) Σ_i max_j A_ij
    eq. 9    Syn_attn = (1/n) Σ_i Σ_j Dep_mask(A)_ij     (mass on dependency-related keys:
                                                            where DEA's D_ij = 0, i = j included)
             Syn_gate = sigmoid(hconf)                  (dynamic, ``-rhe_fgate 0``, default)
                      = f_gate                          (fixed, ``-rhe_fgate f``, 0 < f <= 1; Fig. 4)
    eq. 10   h_label  = 1 (important) if Syn_attn > Syn_gate, else 0 (redundant)

Important heads output A V unchanged; redundant heads output A' V with A' = softmax(Q Kᵀ /
√d_h + bias) (eq. 4 with D for ``RHEdea``, eq. 8's P for ``RHElpea``, Shaw's a^K (and the
a^V value term) for ``RHErel``, Yang's G for ``RHEloc``): the enlivened attention.

Choices:

* **Labels are computed without gradient** (``torch.no_grad``): h_label is a threshold, a
  step function of the attention with zero derivative almost everywhere; the gradient of
  each head flows through the attention it actually used (A or A').
* **Per sentence, in training and translation alike**: labels are recomputed on every
  forward, so translation enlivens the same way as training (the parse is needed at test
  time). With the translate option ``-rhe_prune`` (Table 2 "+RHE (Prune)") a redundant
  head's output is zeroed instead (evaluation mode only; training always enlivens).
* **Fixed gate**: Fig. 4's x-axis is Syn_gate, so ``-rhe_fgate f`` replaces Syn_gate in
  eq. 10 (Syn_attn > f), not Voita et al.'s "hconf > f_gate" recalled in §3.0.2.
* Dep_mask is the dependency relation for every RHE kind (eq. 9 is stated with it), so
  ``RHErel`` and ``RHEloc`` read the parse too.
* hconf and Syn_attn average over the real (non-padding) queries of the sentence; A is the
  attention before dropout.

Cost: a kind declares its choice (:meth:`RHE.choice`) and the executor
(:mod:`headlab.heads.executor`) runs it. On the blocked path (CPU) the labels come from the
scores the blocked forward computes anyway (one block of scores alive at a time, no head
computes both attentions); on the fused path (GPU) from one dense no-grad pass over the
heads' own scores, the chosen bias per head being one ``where`` and the attention one SDPA
call (an explicit float32 softmax for ``RHErel``'s value term and ``RHEloc``'s Gaussian).
``attention()`` (export) is dense.

Logging: ``aux_terms()`` reports ``rhe_redundant`` (redundant heads per sentence, batch
mean) and ``rhe_heads`` (RHE heads); both have weight 0 in the loss and appear on the
training log's ``aux:`` line every report, with their ratio ``rhe_share`` (the share of
RHE heads labelled redundant; :mod:`headlab.engine.aux_loss`). With ``record`` set (export),
``labels`` keeps the (B, count) bool labels of the last forward (True = important),
``stats`` the per-sentence (hconf, Syn_attn), and ``attention()`` also keeps ``raw``, the
heads' own attention before enlivening.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from headlab.errors import ConfigError
from headlab.heads.base import HeadContext
from headlab.heads.chunked import blocks, scaled_scores
from headlab.heads.executor import Choice
from headlab.heads.localness import Local
from headlab.heads.relpos import RelPos, masked_softmax
from headlab.heads.sea import DEA, LPEA, dep_related, read_side
from headlab.heads.spec import register_head_kind


def rhe_fgate(options: dict) -> float:
    """``-rhe_fgate`` checked: 0 (dynamic gate) or a fixed gate in (0, 1]."""
    value = options.get("rhe_fgate", 0.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ConfigError(f"rhe_fgate must be 0 (dynamic gate sigmoid(hconf)) or a fixed gate in "
                          f"(0, 1] (paper C Fig. 4), got {value!r}", key="rhe_fgate")
    return float(value)


def head_labels(att: Tensor, related: Tensor, pad_mask: Tensor, fgate: float = 0.0
                ) -> tuple[Tensor, Tensor, Tensor]:
    """(important, hconf, syn_attn) of eqs. 3, 9, 10 for attention ``att`` (B, H, N, N).

    related: (B, N, N) bool Dep_mask; pad_mask: (B, N) True at padding; fgate 0 = dynamic.
    important: (B, H) bool; hconf, syn_attn: (B, H) float. No gradient."""
    with torch.no_grad():
        # float32 statistics (means over n rows, compared with the gate); the chunked
        # kernel hands the executor's labeller float32 probabilities too
        peak, syn = row_sums(att.float(), related.unsqueeze(1), (~pad_mask).unsqueeze(1))
        return decide(peak, syn, pad_mask, fgate)


def row_sums(att: Tensor, related: Tensor, real: Tensor) -> tuple[Tensor, Tensor]:
    """(Σ_i max_j A_ij, Σ_i Σ_j Dep_mask(A)_ij) over the real query rows i of ``att``
    (..., rows, N); related (..., rows, N) bool, real (..., rows) bool: the sums of eqs. 3
    and 9 (before dividing by n), for some or all rows."""
    weight = real.to(att.dtype)
    return (att.amax(-1) * weight).sum(-1), (torch.where(related, att, 0).sum(-1) * weight).sum(-1)


def decide(peak: Tensor, syn: Tensor, pad_mask: Tensor, fgate: float) -> tuple[Tensor, Tensor, Tensor]:
    """Eq. 10 from the sums of :func:`row_sums` (B, H): (important, hconf, syn_attn)."""
    n = (~pad_mask).sum(-1, keepdim=True).clamp_min(1).to(peak.dtype)      # (B, 1)
    hconf, syn = peak / n, syn / n                                            # eqs. 3, 9
    gate = torch.sigmoid(hconf) if fgate == 0 else torch.full_like(hconf, fgate)
    return syn > gate, hconf, syn                                             # eq. 10


def block_labels(q: Tensor, k: Tensor, ctx: HeadContext, related: Tensor, fgate: float, scale: float
                 ) -> tuple[Tensor, Tensor, Tensor]:
    """:func:`head_labels` of the heads' own attention (q, k: (B, H, N, d)), block by block
    (no gradient; one block of scores of :func:`headlab.heads.chunked.blocks` alive at a
    time): the blocked path's labels for sentences too long for one block, and ``-rhe_prune``."""
    B, H, N, _ = q.shape
    real = ~ctx.pad_mask
    peak = torch.zeros(B, H, device=q.device, dtype=torch.promote_types(q.dtype, torch.float32))
    syn = torch.zeros_like(peak)
    with torch.no_grad():
        for block in blocks(B, H, N, k.size(2), 1):
            bs, rs = block.batch, block.rows
            keys = ctx.key_mask[bs][:, 0]
            keys = keys if keys.size(1) == 1 else keys[:, rs]
            for h in range(H):
                scores = scaled_scores(q[bs, h, rs], k[bs, h], scale)
                att = scores.masked_fill_(~keys, torch.finfo(scores.dtype).min).softmax(-1)
                p, s = row_sums(att, related[bs, rs], real[bs, rs])
                peak[bs, h] += p
                syn[bs, h] += s
    return decide(peak, syn, ctx.pad_mask, fgate)


class RHE:
    """Mixin placed before a biased kind (DEA, LPEA, RelPos, Local) in the bases: the
    kind's ``logit_bias`` (and RelPos's ``value_term``) give the enlivened attention."""

    side_keys: tuple[str, ...] = ("dep_head",)
    fgate = 0.0
    prune = False           # set at translation by -rhe_prune (headlab.engine.compat)
    record = False          # keep labels of the last forward (export)

    @classmethod
    def build(cls, count, d_model, d_head, options, *, add_qkvbias=False, attention_dropout=0.0):
        fgate = rhe_fgate(options)
        group = super().build(count, d_model, d_head, options, add_qkvbias=add_qkvbias,
                              attention_dropout=attention_dropout)
        group.fgate = fgate
        return group

    def side(self, ctx: HeadContext) -> dict[str, Tensor]:
        return read_side(self, ctx)

    def _labelled(self, important: Tensor, hconf: Tensor, syn: Tensor) -> None:
        self._important = important
        if self.record:
            self.labels, self.stats = important, torch.stack([hconf, syn], -1)

    def enlivened(self, x: Tensor, ctx: HeadContext, keys: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """(attention used (B, count, N, N) before dropout, important (B, count) bool)."""
        q, k = self._qk(x, keys)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.d_head)
        own = masked_softmax(scores, ctx)
        important, hconf, syn = head_labels(own, self.related(ctx), ctx.pad_mask, self.fgate)
        keep = important.view(*important.shape, 1, 1)
        if self.prune and not self.training:
            att = own * keep                                  # redundant heads: output 0
        else:
            att = torch.where(keep, own, masked_softmax(scores, ctx, self.logit_bias(q, ctx)))
        self._labelled(important, hconf, syn)
        if self.record:
            self.raw = own                                    # before enlivening (export)
        return att.to(q.dtype), important

    def related(self, ctx: HeadContext) -> Tensor:
        """(B, N, N) bool Dep_mask of eq. 9 (every RHE kind; DEA's D_ij = 0), once per batch."""
        side = self.side(ctx)
        return ctx.constant("dep_related", lambda: dep_related(ctx.word_ids, side["dep_head"], ctx.pad_mask))

    def labels_of(self, q: Tensor, k: Tensor, ctx: HeadContext) -> tuple[Tensor, Tensor, Tensor]:
        """:func:`block_labels` of this group's heads."""
        return block_labels(q, k, ctx, self.related(ctx), self.fgate, 1 / math.sqrt(self.d_head))

    def choice(self, ctx: HeadContext) -> Choice:
        """Each head, per sentence: its own attention (important) or the kind's bias
        (redundant); translation with ``-rhe_prune`` zeroes redundant heads instead. The
        executor labels the heads from the scores it computes (no head computes both
        attentions on the blocked path; one dense no-grad pass on the fused one)."""
        self._choice = Choice(self.related(ctx), self.fgate, prune=self.prune and not self.training)
        return self._choice

    def forward(self, x: Tensor, values: Tensor, ctx: HeadContext, keys: Tensor | None = None) -> Tensor:
        out = super().forward(x, values, ctx, keys)
        choice = self._choice
        self._labelled(choice.important, choice.hconf, choice.syn)
        return out

    def attention(self, x: Tensor, ctx: HeadContext, keys: Tensor | None = None) -> Tensor:
        return self.enlivened(x, ctx, keys)[0].float()

    def aux_terms(self) -> dict[str, Tensor]:
        important = getattr(self, "_important", None)
        if important is None:
            return {}
        redundant = (~important).float().sum(1).mean()
        # new_full fills on the device; new_tensor would copy a host value there, which on a
        # GPU waits for every queued kernel (a host sync per layer and step)
        return {"rhe_redundant": redundant, "rhe_heads": redundant.new_full((), float(self.count))}


@register_head_kind("RHEdea")
class RHEdea(RHE, DEA):
    """RHE with DEA (eq. 4-5) on the redundant heads (Table 1 "+DEA+RHE")."""


@register_head_kind("RHElpea")
class RHElpea(RHE, LPEA):
    """RHE with LPEA (eq. 7-8) on the redundant heads (Table 1 "+LPEA+RHE")."""

    side_keys = ("dep_head", *LPEA.side_keys)


@register_head_kind("RHErel")
class RHErel(RHE, RelPos):
    """RHE with Shaw et al.'s relative positions on the redundant heads (Table 2)."""


@register_head_kind("RHEloc")
class RHEloc(RHE, Local):
    """RHE with Yang et al.'s localness on the redundant heads (Table 2)."""


__all__ = ["RHE", "RHEdea", "RHElpea", "RHEloc", "RHErel", "block_labels", "head_labels", "rhe_fgate"]
