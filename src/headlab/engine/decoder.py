"""``-decoder_type headlab``: OpenNMT-py's Transformer decoder with head-spec attention.

Decoder self-attention takes its heads from ``-dec_heads``, cross (encoder-decoder)
attention from ``-cross_heads`` (both default ``8L``). Everything else is stock
``TransformerDecoder``: its layers, masks, ``_init_cache``, ``map_state`` (beam tiling and
reordering), so incremental decoding works unchanged. Each layer's ``self_attn`` and
``context_attn`` are replaced by :class:`DecoderAttention`, which speaks OpenNMT-py's
``MultiHeadedAttention`` protocol:

* ``forward(key, value, query, mask=None, sliding_window=0, step=0, return_attn=False)``
  -> ``(out, attn)``, ``mask`` True where masked (the layer's causal / source-padding mask);
* ``layer_cache = (decoding, {"keys": ..., "values": ...})``: while decoding, self-attention
  appends each step's projected keys and values, cross-attention projects the encoder
  output once. Both are batch-first tensors, which is all ``map_state`` needs to tile and
  reorder them (``(B, t, width)`` here rather than stock's ``(B, H, t, d_head)``).

With ``8L`` at both sites the parameters are stock's (state-dict keys differ only by the
``heads.0.`` of :func:`headlab.heads.attention.stock_key_map`), and so are the outputs.

Translation never takes OpenNMT-py's flash path here (it lives inside the stock module we
replace), so the softmax is always explicit and head mixers always run.
"""
from __future__ import annotations

import torch
from torch import Tensor

from onmt.decoders import register_decoder
from onmt.decoders.transformer import TransformerDecoder

from headlab.engine.common import HeadSites, check_supported, first, mixer_options
from headlab.errors import ConfigError
from headlab.heads.attention import HeadlabAttention
from headlab.heads.base import HeadContext, sum_terms
from headlab.heads.spec import SITES, parse_spec
from headlab.engine.opts import DECODER_NAME


class DecoderAttention(HeadlabAttention):
    """Decoder self- or cross-attention in OpenNMT-py's MultiHeadedAttention protocol."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.layer_cache = (False, {"keys": torch.tensor([]), "values": torch.tensor([])})
        self.query_pad: Tensor | None = None   # (B, T) target padding, set by the decoder
        self.record = False                    # keep dense maps of the last forward (export)
        self.recorded: Tensor | None = None

    def _kv(self, key: Tensor, query: Tensor) -> tuple[Tensor, Tensor]:
        decoding, cache = self.layer_cache
        if not decoding:
            return self.project_kv(query if self.site == "dec" else key)
        if self.site == "dec":               # append this step's keys and values
            keys, values = self.project_kv(query)
            if cache["keys"].numel():
                keys = torch.cat((cache["keys"], keys), 1)
                values = torch.cat((cache["values"], values), 1)
        elif cache["keys"].numel():          # the encoder output's, projected at step 0
            return cache["keys"], cache["values"]
        else:
            keys, values = self.project_kv(key)
        cache["keys"], cache["values"] = keys, values
        return keys, values

    def forward(self, key, value, query, mask=None, sliding_window=0, step=0, return_attn=False):
        kv = self._kv(key, query)
        B, Nq, _ = query.shape
        Nk = kv[1].size(1)
        if mask is None:                     # one step of self-attention: every cached key
            allowed = torch.ones(B, 1, 1, Nk, dtype=torch.bool, device=query.device)
        else:
            allowed = ~mask.view(B, 1, -1, Nk)
        pad = self.query_pad
        if pad is None or pad.shape != (B, Nq):
            pad = torch.zeros(B, Nq, dtype=torch.bool, device=query.device)
        ctx = HeadContext(pad, (~pad).sum(1), allowed=allowed)
        out = self.attend(query, ctx, kv)
        attn = None
        if return_attn or self.record:
            attn = self.attention(query, ctx, kv).to(query.dtype)
            if self.record:
                self.recorded = attn.detach()
        return out, (attn if return_attn else None)


@register_decoder(DECODER_NAME)
class HeadlabDecoder(HeadSites, TransformerDecoder):
    """Stock TransformerDecoder whose attentions come from ``-dec_heads`` / ``-cross_heads``."""

    @classmethod
    def from_opt(cls, opt, embeddings):
        check_supported(opt, f"-decoder_type {DECODER_NAME}", {
            "self_attn_type": getattr(opt, "self_attn_type", "scaled-dot") == "average",
            "sliding_window": getattr(opt, "sliding_window", 0) != 0,
            "copy_attn": bool(getattr(opt, "copy_attn", False)),
        })
        decoder = super().from_opt(opt, embeddings)
        decoder.build_heads(getattr(opt, "dec_heads", None) or "8L",
                            getattr(opt, "cross_heads", None) or "8L", opt)
        return decoder

    def build_heads(self, dec_heads: str, cross_heads: str, opt) -> None:
        """Replace every layer's attentions (the stock ones were built by __init__)."""
        d_model, heads = opt.dec_hid_size, opt.heads
        if d_model % heads:
            raise ConfigError(f"hidden size {d_model} is not divisible by heads={heads}", key="heads")
        n = len(self.transformer_layers)
        self.specs = {"dec": dec_heads, "cross": cross_heads}
        self.layer_specs = {site: parse_spec(spec, n, site=site) for site, spec in self.specs.items()}
        kwargs = dict(add_qkvbias=getattr(opt, "add_qkvbias", False),
                      attention_dropout=first(opt.attention_dropout), mixer_options=mixer_options(opt))
        for i, layer in enumerate(self.transformer_layers):
            layer.self_attn = DecoderAttention(self.layer_specs["dec"][i], d_model, d_model // heads,
                                               site="dec", **kwargs)
            layer.context_attn = DecoderAttention(self.layer_specs["cross"][i], d_model, d_model // heads,
                                                  site="cross", **kwargs)

    # -- sites --------------------------------------------------------------------------
    def attentions(self, site: str) -> list[DecoderAttention]:
        attr = {"dec": "self_attn", "cross": "context_attn"}[site]
        return [getattr(layer, attr) for layer in self.transformer_layers]

    def forward(self, tgt, enc_out=None, step=None, **kwargs):
        pad = tgt[:, :, 0].eq(self.embeddings.word_padding_idx)
        for site in ("dec", "cross"):
            for attn in self.attentions(site):
                attn.query_pad = pad
        return super().forward(tgt, enc_out, step=step, **kwargs)

    def disable_heads(self, site: str, heads) -> None:
        """Zero the output of heads ``heads`` (1-based) in every layer of ``site``."""
        heads = list(heads)
        for layer_no, attn in enumerate(self.attentions(site), 1):
            for k in heads:
                if not 1 <= int(k) <= attn.num_heads:
                    raise ConfigError(f"cannot disable head {k}: {site} layer {layer_no} has heads "
                                      f"1..{attn.num_heads} ({attn.spec})", key=f"disable_{SITES[site]}")
            attn.head_scale.fill_(1.0)
            for k in heads:
                attn.head_scale[int(k) - 1] = 0.0

    def aux_terms(self) -> dict[str, Tensor]:
        """Named auxiliary terms of the last forward, summed over both sites and all layers."""
        return sum_terms(attn.aux_terms() for site in ("dec", "cross") for attn in self.attentions(site))


def as_headlab_decoder(model, opt) -> HeadlabDecoder:
    """The model's decoder as a :class:`HeadlabDecoder` (put in place): a stock
    ``TransformerDecoder`` becomes one with learned self- and cross-attention heads and the same
    weights (:func:`headlab.heads.attention.stock_key_map`; the outputs are equal, tested in
    tests/test_decoder.py), so that analyses reach decoder heads of every model (the atlas's
    head probes). A headlab decoder is returned as it is."""
    import copy

    decoder = model.decoder
    if isinstance(decoder, HeadlabDecoder):
        return decoder
    if type(decoder) is not TransformerDecoder:
        raise ConfigError(f"decoder {type(decoder).__name__} has no attention heads headlab can reach",
                          key="decoder_type")
    opt = copy.copy(opt)
    learned = f"{opt.heads}L"        # stock attention: opt.heads learned heads
    opt.decoder_type, opt.dec_heads, opt.cross_heads = DECODER_NAME, learned, learned
    param = next(decoder.parameters())
    new = HeadlabDecoder.from_opt(opt, decoder.embeddings)
    new.load_state_dict(HeadlabDecoder.load_stock_state_dict(decoder.state_dict()))
    new.to(device=param.device, dtype=param.dtype).train(decoder.training)
    model.decoder = new
    return new
