"""One self-attention layer assembled from a :class:`LayerSpec`.

    x -> linear_values (d -> sum of head widths) -> split per group
      -> each HeadGroup: (x, its values, ctx) -> head outputs
      -> ablation mask (disable_heads) -> mixers (gates, DHICM) -> concat -> final_linear

Only learned groups own query/key projections, so a fixed head costs exactly its value
and output columns (paper A §4.4, Table 5 parameter counts). For ``8L`` the parameters are
those of OpenNMT-py's MultiHeadedAttention (``linear_query``/``linear_keys`` live in the
group, ``linear_values``/``final_linear`` here; see :func:`stock_key_map`).
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from headlab.heads.base import HeadContext, scale_heads
from headlab.heads.spec import HEAD_KINDS, HEAD_MIXERS, LayerSpec


class HeadlabSelfAttention(nn.Module):
    def __init__(self, layer: LayerSpec, d_model: int, default_d_head: int, *,
                 add_qkvbias: bool = False, attention_dropout: float = 0.0):
        super().__init__()
        groups = []
        for term in layer.terms:
            cls = HEAD_KINDS[term.kind]
            d_head = cls.head_width(d_model, default_d_head)
            groups.append(cls(term.count, d_model, d_head, add_qkvbias=add_qkvbias,
                              attention_dropout=attention_dropout))
        self.heads = nn.ModuleList(groups)
        self.widths = [g.count * g.d_head for g in groups]
        self.num_heads = sum(g.count for g in groups)
        self.linear_values = nn.Linear(d_model, sum(self.widths), bias=add_qkvbias)
        self.final_linear = nn.Linear(sum(self.widths), d_model, bias=add_qkvbias)
        self.mixers = nn.ModuleList(HEAD_MIXERS[name](self.num_heads, d_model) for name in layer.mixers)
        # 1 = enabled, 0 = ablated at test time (paper A §4.3). A plain attribute, not a
        # buffer: not saved, and OpenNMT-py's strict loader rejects unsaved buffers.
        self.head_scale = torch.ones(self.num_heads, device="cpu")
        self.needs_words = any(g.needs_words for g in groups)

    def head_outputs(self, x: Tensor, ctx: HeadContext) -> list[Tensor]:
        B, N, _ = x.shape
        values = self.linear_values(x).split(self.widths, dim=-1)
        outs = []
        for group, v in zip(self.heads, values):
            outs.append(group(x, v.view(B, N, group.count, group.d_head), ctx))
        if not bool(self.head_scale.all()):
            outs = scale_heads(outs, self.head_scale.to(x.device))
        for mixer in self.mixers:
            outs = mixer(outs, ctx)
        return outs

    def forward(self, x: Tensor, ctx: HeadContext) -> Tensor:
        B, N, _ = x.shape
        outs = [o.reshape(B, N, -1) for o in self.head_outputs(x, ctx)]
        return self.final_linear(outs[0] if len(outs) == 1 else torch.cat(outs, -1))

    def attention(self, x: Tensor, ctx: HeadContext) -> Tensor:
        """(B, num_heads, N, N) attention probabilities of every head (export only).

        Mixers and ablation act on head outputs, not on these distributions."""
        return torch.cat([g.attention(x, ctx).float() for g in self.heads], 1)

    def aux_loss(self) -> Tensor | None:
        losses = [m.aux_loss() for m in [*self.heads, *self.mixers]]
        losses = [loss for loss in losses if loss is not None]
        return sum(losses) if losses else None

    def update_dropout(self, attention_dropout: float) -> None:
        for group in self.heads:
            group.update_dropout(attention_dropout)


def stock_key_map(name: str) -> str:
    """Map a stock TransformerEncoder state-dict key to headlab's (8L only)."""
    for proj in ("linear_query", "linear_keys"):
        name = name.replace(f"self_attn.{proj}.", f"self_attn.heads.0.{proj}.")
    return name
