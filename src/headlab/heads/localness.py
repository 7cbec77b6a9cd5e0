"""``Local``: localness modelling (Yang et al. 2018), paper C's Localness baseline.

A learned Gaussian bias G on the logits, centred on a predicted position with a predicted
window, both per query (Yang et al. §3, query-specific window)::

    ATT(Q, K) = softmax(Q Kᵀ / √d_h + G)
    G_ij      = -(j - P_i)² / (2 σ_i²),   σ_i = D_i / 2
    P_i       = I · sigmoid(p_i),          p_i = U_pᵀ tanh(W_p Q_i)       (central position)
    D_i       = I · sigmoid(z_i),          z_i = U_dᵀ tanh(W_p Q_i)       (window size)

with I the sentence's real length (pieces), j and P_i positions 0..I-1 in pieces. Choices:
the predictor reads each head's own query Q_i ∈ R^{d_h}; W_p ∈ R^{d_h×d_h} is shared by
the group's heads and U_p, U_d ∈ R^{d_h} are per head (Yang et al. predict one centre and
window per head; their W_p acts on the d-wide query, ours on each head's slice, so the
layer adds d_h² + 2·count·d_h parameters: 5,120 at d_h = 64, 8 heads). σ² is floored at
1e-4 so that a vanishing window gives a peaked but finite bias (never an all -inf row).
P, D and G are computed in float32 whatever the precision (mixed-precision autocast,
``-precision fp16`` weights): they are positions up to the sentence length, and bf16's 8
significant bits put the centre of a 1,024-piece sentence up to 4 positions off (measured:
3), fp16's 11 bits half a position. Encoder self-attention only.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from headlab.heads.base import HeadContext, no_autocast
from headlab.heads.chunked import ScoreBias
from headlab.heads.relpos import QueryBiasedHeads
from headlab.heads.spec import register_head_kind


@register_head_kind("Local")
class Local(QueryBiasedHeads):
    """Yang et al. (2018) localness with query-specific centre and window; see module doc."""

    min_var = 1e-4

    def __init__(self, count, d_model, d_head, *, add_qkvbias=False, attention_dropout=0.0):
        super().__init__(count, d_model, d_head, add_qkvbias=add_qkvbias, attention_dropout=attention_dropout)
        self.W_p = nn.Linear(d_head, d_head, bias=False)
        self.U_p = nn.Parameter(torch.empty(count, d_head).normal_(0, d_head ** -0.5))
        self.U_d = nn.Parameter(torch.empty(count, d_head).normal_(0, d_head ** -0.5))

    def centre_window(self, q: Tensor, ctx: HeadContext) -> tuple[Tensor, Tensor]:
        """(P, D): (B, count, N) float32 predicted centres and windows of the queries q
        (B, count, N, d_h). Float32 on purpose (module doc): autocast off, weights cast."""
        with no_autocast(q):
            hidden = torch.tanh(F.linear(q.float(), self.W_p.weight.float()))
            length = ctx.lengths.to(q.device, torch.float32).view(-1, 1, 1)
            # U_p and U_d in one product: (B, h, N, d) @ (h, d, 2) -> p, z (B, h, N)
            p, z = torch.matmul(hidden, torch.stack([self.U_p, self.U_d], -1).float()).unbind(-1)
        return length * torch.sigmoid(p), length * torch.sigmoid(z)

    def centre_variance(self, q: Tensor, ctx: HeadContext) -> tuple[Tensor, Tensor]:
        """(P, σ²): (B, count, N) float32 (σ² floored at ``min_var``); the Gaussian is
        computed in float32 whatever q's dtype ((j - P)² reaches n²)."""
        centre, window = self.centre_window(q.float(), ctx)
        return centre, (window / 2).pow(2).clamp_min(self.min_var)

    def logit_bias(self, q: Tensor, ctx: HeadContext) -> Tensor:
        """G as (B, count, N, N), float32 (from the float32 P and σ²)."""
        centre, var = self.centre_variance(q, ctx)
        return gaussian(centre, var, q.size(2))

    def score_rows(self, q: Tensor, ctx: HeadContext) -> ScoreBias:
        return GaussianRows(*self.centre_variance(q, ctx))


def gaussian(centre: Tensor, var: Tensor, n_keys: int) -> Tensor:
    """G_ij = -(j - P_i)² / (2 σ_i²): (..., rows) centres and variances -> (..., rows, n_keys)."""
    j = torch.arange(n_keys, device=centre.device, dtype=centre.dtype)
    return -(j - centre.unsqueeze(-1)).pow(2) / (2 * var.unsqueeze(-1))


class GaussianRows(ScoreBias):
    """G for a block of query rows from the per-query centres and variances (B, H, N)."""

    exact = True                       # -(j - P)² / 2σ² reaches n² / 2e-4: float32, never an fp16 mask

    def __init__(self, centre: Tensor, var: Tensor):
        self.heads = centre.size(1)
        self.tensors, self.row_dims = (centre, var), (2, 2)

    def rows(self, block, tensors):
        centre, var = tensors
        return gaussian(centre, var, self.tensors[0].size(2)), None


__all__ = ["GaussianRows", "Local", "gaussian"]
