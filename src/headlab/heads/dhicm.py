"""``dhicm``: the Dynamic Head Importance Computation Mechanism (paper B, Goindani &
Shrivastava 2021, §3.1), a head mixer that replaces the layer's output projection.

For the layer input ``x`` of one token (d) and the outputs O^h of its H heads (d_k each,
before any output projection):

    eq. 2   s(x, O^h)    = O^hᵀ Wᵀ U x / √d_m        (dropout after U x)
    eq. 1   G(x, O^h)    = softmax_h s(x, O^h)          the importance of head h for x
    eq. 3   DHICM(x, O)  = W_s Σ_h G(x, O^h) V O^h

with W, V ∈ R^{d_m×d_k}, U ∈ R^{d_m×d}, W_s ∈ R^{d×d_m}. The layer's own output
projection W_o is **dropped**: W_s V takes its place (the paper's "output of the second
level attention is then passed to the feed forward network"). Per layer that is
d_m(2d_k + 2d) parameters instead of d² (+ the bias of W_s where W_o had one): at d = 512,
d_m = 512, 8 heads (d_k = 64), +327,680 over ``8L`` per DHICM layer, +983,040 for the
paper's three layers (last encoder self, last decoder self and cross); with 4 heads
(d_k = 128) +393,216 per layer. The paper's "~d² additional parameters" counts one layer.

Computed as V Σ_h G_h O^h (V is shared by the heads, so one projection after the sum) and
s = O^h · (Wᵀ U x) (one d_m×d_k product per token, not one per head).

Options: ``-dhicm_dm`` (d_m; 0 = d_model), ``-dhicm_dropout`` (the dropout after U x; the
"Dropout (Section 3.1)" row of paper B's Table 2). Auxiliary term ``kl`` (eq. 4):
L_KL = Σ_h a_h ln(a_h H), a = G(x, ·), averaged over the layer's real (non-padding)
query tokens; the training loss *subtracts* ``lambda_kl`` times it (eq. 5, L = L_c − λ L_KL):
a sharper importance distribution is rewarded. 0 for uniform importance, ln H for one-hot.

The importance G of the last forward is kept in ``importance`` (B, N, H) when ``record``
is set: the export path (Figure 3 of paper B) reads it.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from headlab.errors import ConfigError
from headlab.heads.base import HeadContext, HeadMixer
from headlab.heads.spec import register_head_mixer


@register_head_mixer("dhicm")
class DHICM(HeadMixer):
    """Paper B's mixer; it replaces the output projection and needs at least 2 heads in
    its layer (its declaration, headlab.heads.builtin)."""

    def __init__(self, num_heads: int, d_model: int, d_head: int, d_m: int = 0,
                 dropout: float = 0.0, bias: bool = False):
        super().__init__(num_heads, d_model)
        d_m = d_m or d_model
        self.d_head, self.d_m = d_head, d_m
        self.W = nn.Linear(d_head, d_m, bias=False)
        self.U = nn.Linear(d_model, d_m, bias=False)
        self.V = nn.Linear(d_head, d_m, bias=False)
        self.W_s = nn.Linear(d_m, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.record = False
        self.importance: Tensor | None = None
        self._kl: Tensor | None = None

    @classmethod
    def build(cls, num_heads, d_model, widths, options, add_bias):
        key = options.get("site_key", "enc_heads")
        if len(set(widths)) != 1:
            raise ConfigError(f"dhicm needs heads of one width (eq. 3 shares V across heads), "
                              f"layer {options.get('layer')} has widths {sorted(set(widths))}", key=key)
        d_m = int(options.get("dhicm_dm") or 0)
        dropout = options.get("dhicm_dropout", 0.0)
        dropout = float(dropout[0] if isinstance(dropout, (list, tuple)) else dropout)
        if d_m < 0:
            raise ConfigError(f"dhicm_dm must be >= 0 (0 = d_model), got {d_m}", key="dhicm_dm")
        if not 0.0 <= dropout < 1.0:
            raise ConfigError(f"dhicm_dropout must be in [0, 1), got {dropout}", key="dhicm_dropout")
        return cls(num_heads, d_model, widths[0], d_m, dropout, add_bias)

    def scores(self, heads: Tensor, x: Tensor) -> Tensor:
        """eq. 2: (B, N, H) from heads (B, N, H, d_k) and x (B, N, d)."""
        query = self.dropout(self.U(x)) @ self.W.weight             # Wᵀ U x: (B, N, d_k)
        return torch.einsum("bnhk,bnk->bnh", heads, query) / math.sqrt(self.d_m)

    def project(self, heads: list[Tensor], ctx: HeadContext, x: Tensor) -> Tensor:
        stacked = heads[0] if len(heads) == 1 else torch.cat(heads, 2)   # (B, N, H, d_k)
        # float32 from here (autocast left the scores in fp16/bf16): the softmax over heads
        # and its KL; 1e-12 below is no number in fp16 (it would round to 0 and log to -inf)
        importance = self.scores(stacked, x).float().softmax(-1)          # eq. 1
        real = ~ctx.pad_mask
        # eq. 4 per token; the clamp keeps the gradient finite where a head's importance
        # underflows to 0 (a·ln(a·H) -> 0 there, its derivative ln(a·H) + 1 would be -inf)
        kl = (importance * (importance * self.num_heads).clamp_min(1e-12).log()).sum(-1)
        self._kl = (kl * real).sum() / real.sum().clamp_min(1)
        if self.record:
            self.importance = importance.detach()
        mixed = torch.einsum("bnh,bnhk->bnk", importance.to(stacked.dtype), stacked)   # Σ_h G_h O^h
        return self.W_s(self.V(mixed))                                          # eq. 3

    def aux_terms(self) -> dict[str, Tensor]:
        return {} if self._kl is None else {"kl": self._kl}
