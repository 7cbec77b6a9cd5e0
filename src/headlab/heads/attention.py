"""One attention layer of any site (encoder self, decoder self, cross) from a :class:`LayerSpec`.

    queries' input x, key/value input kv (x itself for self-attention, the encoder output
    for cross-attention, the cache while decoding step by step)
      -> linear_values(kv) (d -> sum of head widths), each learned group's keys of kv
      -> each HeadGroup: (x, its values, its keys, ctx) -> head outputs
      -> ablation mask (disable_*_heads) -> head probe ξ (analysis) -> mixers (gates)
      -> concat -> final_linear
                                                      or -> an output mixer (DHICM)

Only learned groups own query/key projections, so a fixed head costs exactly its value
and output columns (paper A §4.4, Table 5 parameter counts). For ``8L`` the parameters are
those of OpenNMT-py's MultiHeadedAttention (``linear_query``/``linear_keys`` live in the
group, ``linear_values``/``final_linear`` here; see :func:`stock_key_map`). A layer whose
last mixer ``replaces_output`` (DHICM) has no ``final_linear``: the mixer projects.

:class:`HeadlabAttention` is the encoder's self-attention (``forward(x, ctx)``);
:class:`headlab.engine.decoder.DecoderAttention` wraps it in OpenNMT-py's decoder call
protocol and KV cache.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from headlab.heads.base import HeadContext, scale_heads, sum_terms
from headlab.heads.spec import HEAD_KINDS, HEAD_MIXERS, SITES, LayerSpec


class HeadlabAttention(nn.Module):
    def __init__(self, layer: LayerSpec, d_model: int, default_d_head: int, *, site: str = "enc",
                 add_qkvbias: bool = False, attention_dropout: float = 0.0,
                 mixer_options: dict | None = None):
        super().__init__()
        self.site, self.spec = site, layer
        # kinds' and mixers' errors name the site's option and the layer
        options = {**(mixer_options or {}), "site_key": SITES[site], "layer": str(layer)}
        groups = []
        for term in layer.terms:
            cls = HEAD_KINDS[term.kind]
            d_head = cls.head_width(d_model, default_d_head)
            groups.append(cls.build(term.count, d_model, d_head, options, add_qkvbias=add_qkvbias,
                                    attention_dropout=attention_dropout))
        self.heads = nn.ModuleList(groups)
        self.widths = [g.count * g.d_head for g in groups]
        self.key_widths = [g.key_width for g in groups if g.key_width]
        self.num_heads = sum(g.count for g in groups)
        self.linear_values = nn.Linear(d_model, sum(self.widths), bias=add_qkvbias)
        head_widths = [g.d_head for g in groups for _ in range(g.count)]
        mixers = [HEAD_MIXERS[name].build(self.num_heads, d_model, head_widths, options, add_qkvbias)
                  for name in layer.mixers]
        self.mixers = nn.ModuleList(mixers)
        if self.output_mixer is None:
            self.final_linear = nn.Linear(sum(self.widths), d_model, bias=add_qkvbias)
        # 1 = enabled, 0 = ablated at test time (paper A §4.3). A plain attribute, not a
        # buffer: not saved, and OpenNMT-py's strict loader rejects unsaved buffers.
        self.head_scale = torch.ones(self.num_heads, device="cpu")
        # fixed pruning mask (-enc_head_mask, headlab.heads.prune): 1 kept, 0 pruned, in
        # every forward; None keeps all. Plain attribute too: the option is in the checkpoint.
        self.head_mask: torch.Tensor | None = None
        # analysis probe ξ (Michel et al. 2019: a mask variable multiplying each head's output
        # before the output projection): None (off), (H,) or per sentence (B, H); it may
        # require grad, so that dL/dξ_h is a head's gradient importance (headlab.atlas).
        self.head_probe: torch.Tensor | None = None
        self._scale: torch.Tensor | None = None          # head_scale x head_mask on the device (None: all kept)
        self._scale_key: tuple | None = None
        self.needs_words = any(g.needs_words for g in groups)
        self.needs_syntax = any(g.needs_syntax for g in groups)

    def _active_scale(self, device: torch.device) -> torch.Tensor | None:
        """``head_scale`` x ``head_mask`` (ablation, pruning) on ``device``, or None when every
        head is kept. Worked out again only when either changed (their in-place versions) or
        the device did, so that a forward reads no tensor value (``bool(t)`` is a host sync)
        and copies nothing to the device (a blocking copy waits for it, every pruned layer
        of every step of paper D's pruned fine-tune)."""
        if torch.compiler.is_compiling():
            # a traced forward can read neither a tensor's version nor its values (each is a
            # graph break): it takes what was worked out before tracing (prime_scale, which
            # headlab.engine.compiled runs), and dynamo guards on that attribute
            return self._scale
        self.prime_scale(device)
        return self._scale

    def prime_scale(self, device: torch.device) -> None:
        """Work :meth:`_active_scale` out now, eagerly, unless nothing changed since."""
        mask = self.head_mask
        key = (id(self.head_scale), self.head_scale._version, id(mask), None if mask is None else mask._version,
               torch.device(device))
        if key != self._scale_key:
            scale = self.head_scale if mask is None else self.head_scale * mask
            self._scale, self._scale_key = (None if bool(scale.all()) else scale.to(device)), key

    @property
    def output_mixer(self):
        """The mixer that replaces the output projection (DHICM), or None. A property, not
        an attribute: a second registration would save its weights twice."""
        last = self.mixers[-1] if len(self.mixers) else None
        return last if last is not None and last.replaces_output else None

    # -- keys and values ----------------------------------------------------------------
    def project_kv(self, kv: Tensor) -> tuple[Tensor, Tensor]:
        """(keys (B, Nk, sum of key widths), values (B, Nk, sum of head widths)) of ``kv``;
        the decoder caches exactly these two tensors (batch first, as OpenNMT-py's
        ``map_state`` expects)."""
        return self.project_kv_keys(kv), self.linear_values(kv)

    def _per_group(self, kv: tuple[Tensor, Tensor | list[Tensor]]) -> list[tuple]:
        """(group, its values (B, Nk, count, d_head), its keys or None) of each group: a
        list, not a generator (torch 2.11's dynamo cannot resume a graph around a generator
        that advances an iterator of its own)."""
        keys, values = kv
        if isinstance(values, Tensor):
            values = values.split(self.widths, -1)
        key_parts = list(keys.split(self.key_widths, -1)) if self.key_widths else []
        keyed = [group for group in self.heads if group.key_width]
        return [(group, v.view(*v.shape[:2], group.count, group.d_head),
                 key_parts[keyed.index(group)] if group.key_width else None)
                for group, v in zip(self.heads, values)]

    def _self_kv(self, x: Tensor) -> tuple[Tensor, Tensor | list[Tensor]]:
        """:meth:`project_kv` for self-attention, each learned group's values a tensor of its
        own: its SDPA then keeps only its share for backward, and the layer's value tensor
        is freed once the groups have run (fixed heads keep nothing; 7Ftoken+1L would
        otherwise keep all d_model columns alive for its one learned head)."""
        keys, values = self.project_kv(x)
        if len(self.heads) == 1:
            return keys, values
        parts = values.split(self.widths, -1)
        return keys, [v.contiguous() if g.key_width else v for g, v in zip(self.heads, parts)]

    def project_kv_keys(self, kv: Tensor) -> Tensor:
        keys = [g.project_keys(kv) for g in self.heads if g.key_width]
        if not keys:
            return kv.new_zeros(*kv.shape[:2], 0)
        return keys[0] if len(keys) == 1 else torch.cat(keys, -1)

    # -- forward ------------------------------------------------------------------------
    def head_outputs(self, x: Tensor, ctx: HeadContext, kv: tuple[Tensor, Tensor] | None = None) -> list[Tensor]:
        """One (B, Nq, count, d_head) tensor per group, after ablation and the list mixers."""
        outs = [group(x, v, ctx, k) for group, v, k in self._per_group(kv or self._self_kv(x))]
        scale = self._active_scale(x.device)
        if scale is not None:
            outs = scale_heads(outs, scale)
        if self.head_probe is not None:
            outs = scale_heads(outs, self.head_probe)
        for mixer in self.mixers:
            if mixer is not self.output_mixer:
                outs = mixer(outs, ctx, x)
        return outs

    def attend(self, x: Tensor, ctx: HeadContext, kv: tuple[Tensor, Tensor] | None = None) -> Tensor:
        """x: (B, Nq, d) queries' input; kv: from :meth:`project_kv` (None: self-attention
        over ``x``) -> (B, Nq, d)."""
        outs = self.head_outputs(x, ctx, kv)
        if self.output_mixer is not None:
            return self.output_mixer.project(outs, ctx, x)
        B, N, _ = x.shape
        heads = torch.cat([o.reshape(B, N, -1) for o in outs], -1) if len(outs) > 1 else outs[0].reshape(B, N, -1)
        del outs            # the groups' outputs are not needed once concatenated: free them now
        return self.final_linear(heads)

    def forward(self, x: Tensor, ctx: HeadContext) -> Tensor:
        return self.attend(x, ctx)

    def attention(self, x: Tensor, ctx: HeadContext, kv: tuple[Tensor, Tensor] | None = None) -> Tensor:
        """(B, num_heads, Nq, Nk) attention probabilities of every head (export only).

        Mixers and ablation act on head outputs, not on these distributions."""
        return torch.cat([g.attention(x, ctx, k).float()
                          for g, _, k in self._per_group(kv or self._self_kv(x))], 1)

    def aux_terms(self) -> dict[str, Tensor]:
        """Named auxiliary terms of the last forward, summed over groups and mixers."""
        return sum_terms(module.aux_terms() for module in [*self.heads, *self.mixers])

    def update_dropout(self, attention_dropout: float) -> None:
        for group in self.heads:
            group.update_dropout(attention_dropout)


#: the name paper A's encoder used
HeadlabSelfAttention = HeadlabAttention


def stock_key_map(name: str) -> str:
    """Map a stock TransformerEncoder/Decoder state-dict key to headlab's (``8L`` sites)."""
    for site in ("self_attn", "context_attn"):
        for proj in ("linear_query", "linear_keys"):
            name = name.replace(f"{site}.{proj}.", f"{site}.heads.0.{proj}.")
    return name
