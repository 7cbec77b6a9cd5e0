"""``-encoder_type headlab``: OpenNMT-py's Transformer encoder with head-spec self-attention.

Same layer as stock ``TransformerEncoderLayer`` (pre-norm, residual, position-wise FFN,
final LayerNorm), same state-dict names except that learned query/key projections sit in
their head group (``self_attn.heads.0.linear_query`` for ``8L``; see
:func:`headlab.heads.attention.stock_key_map`). With ``-enc_heads 8L`` the parameter count
equals stock's and, given the same weights, so do the outputs (tests/test_encoder.py).

Word boundaries come from the source's word-boundary feature column, written from the
text (:mod:`headlab.engine.words`), never from the vocabulary (issue 24).

Public methods: ``from_opt``, ``forward(src, src_len)``,
``disable_heads([k, ...])`` / ``enable_heads()`` / ``disabled_heads``,
``attention(src, src_len)`` (dense per-layer, per-head matrices for export),
``aux_terms()`` / ``aux_loss()``, ``reset_head_parameters()``, ``update_dropout``,
``load_stock_state_dict``.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from onmt.encoders import register_encoder
from onmt.encoders.encoder import EncoderBase
from onmt.modules.position_ffn import ActivationFunction, PositionwiseFeedForward
from onmt.utils.misc import sequence_mask

from headlab.engine.common import HeadSites, check_supported, first, mixer_options
from headlab.errors import ConfigError, DataError
from headlab.heads.attention import HeadlabAttention
from headlab.heads.base import HeadContext, sum_terms
from headlab.heads.side import WORD_COLUMN, model_columns, word_ids as piece_word_ids
from headlab.heads.spec import LayerSpec, parse_spec
from headlab.engine.opts import ENCODER_NAME


def side_inputs(src: Tensor, pad_mask: Tensor, names: tuple[str, ...]) -> dict[str, Tensor]:
    """The feature columns of ``src`` (B, N, 1 + n_src_feats) by name (``names``, the model's
    columns: :func:`headlab.heads.side.model_columns`), value = id - 4 (numeric-order
    feature vocabularies, :mod:`headlab.syntax.features`), 0 at padding. Missing columns are
    a ConfigError; an id that is not a value (``<unk>``: a value missing from the feature
    vocabulary, or the placeholder of a word-boundary column the transform did not fill) a
    DataError."""
    from headlab.engine.config import feature_args
    from headlab.heads.side import SPECIALS, WORD_COLUMN

    columns = src.size(2) - 1 if src.dim() == 3 else 0
    if columns != len(names):
        raise ConfigError(f"this model's encoder heads need {len(names)} source feature columns "
                          f"({', '.join(names)}) on every token, the input has {columns}: train and translate "
                          f"with {feature_args(names)}" + (" on the featured source (results/data/.../feat/"
                                                             "PARSER/SPLIT.src)" if len(names) > 1 else ""),
                          key="enc_heads")
    values = src[:, :, 1:] - SPECIALS
    real = ~pad_mask.unsqueeze(2)
    if src.device.type != "cpu" or torch.compiler.is_compiling():
        # on a GPU, reading the checks' verdict back would stall every batch (a host sync),
        # and a compiled forward cannot branch on it (a graph break): the device asserts
        # instead (a failure stops the process, naming this check); the eager CPU path below
        # names the token. The data pipeline writes these columns (headlab_words, headlab
        # featurize), so neither fires unless it was bypassed.
        columns_ok = ~((values < 0) & real).any()
        if WORD_COLUMN in names:
            columns_ok &= ~((values[:, :, names.index(WORD_COLUMN)] > 1) & real[:, :, 0]).any()
        torch._assert_async(columns_ok, f"headlab: a source feature column ({', '.join(names)}) holds an id that "
                                        f"is not a value: check on the CPU (-gpu -1) to see which token")
        return {name: values[:, :, k].masked_fill(pad_mask, 0) for k, name in enumerate(names)}
    if WORD_COLUMN in names:
        k = names.index(WORD_COLUMN)
        unfilled = ((values[:, :, k] < 0) | (values[:, :, k] > 1)) & real[:, :, 0]
        if bool(unfilled.any()):
            b, i = (int(x) for x in unfilled.nonzero()[0])
            raise DataError(f"the word-boundary column ({WORD_COLUMN}) of token {i} in sentence {b} of the batch "
                            f"is not 0/1 (vocabulary id {int(src[b, i, k + 1])}): it was not filled from the text; "
                            f"list the headlab_words transform ({feature_args(names)})", key="transforms")
    bad = (values < 0) & real
    if bool(bad.any()):
        b, i, k = (int(x) for x in bad.nonzero()[0])
        raise DataError(f"source feature {names[k]} of token {i} in sentence {b} of the batch is not a value "
                        f"(vocabulary id {int(src[b, i, k + 1])}: <unk> = a value missing from "
                        f"the feature vocabulary): featured file and feature vocabularies disagree",
                        key="n_src_feats")
    values = values.masked_fill(pad_mask.unsqueeze(2), 0)
    return {name: values[:, :, k] for k, name in enumerate(names)}


class HeadlabEncoderLayer(nn.Module):
    """Stock TransformerEncoderLayer with HeadlabSelfAttention (same forward order)."""

    def __init__(self, layer: LayerSpec, d_model, heads, d_ff, dropout, attention_dropout, *,
                 pos_ffn_activation_fn=ActivationFunction.relu, add_qkvbias=False,
                 add_ffnbias=True, parallel_residual=False, layer_norm="standard",
                 norm_eps=1e-6, use_ckpting=(), mixer_options=None):
        super().__init__()
        self.self_attn = HeadlabAttention(layer, d_model, d_model // heads, site="enc",
                                          add_qkvbias=add_qkvbias, attention_dropout=attention_dropout,
                                          mixer_options=mixer_options)
        self.feed_forward = PositionwiseFeedForward(
            d_model, d_ff, dropout, pos_ffn_activation_fn, add_ffnbias, parallel_residual,
            layer_norm, norm_eps, use_ckpting=list(use_ckpting))
        self.parallel_residual = parallel_residual
        if layer_norm == "standard":
            self.layer_norm = nn.LayerNorm(d_model, eps=norm_eps)
        else:
            from onmt.modules.rmsnorm import RMSNorm
            self.layer_norm = RMSNorm(d_model, eps=norm_eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, layer_in: Tensor, ctx: HeadContext) -> Tensor:
        norm_layer_in = self.layer_norm(layer_in)
        context = self.dropout(self.self_attn(norm_layer_in, ctx))
        if self.parallel_residual:
            return self.feed_forward(norm_layer_in) - norm_layer_in + layer_in + context
        return self.feed_forward(context + layer_in)

    def update_dropout(self, dropout, attention_dropout):
        self.self_attn.update_dropout(attention_dropout)
        self.feed_forward.update_dropout(dropout)
        self.dropout.p = dropout


@register_encoder(ENCODER_NAME)
class HeadlabEncoder(HeadSites, EncoderBase):
    def __init__(self, num_layers, d_model, heads, d_ff, dropout, attention_dropout,
                 embeddings, enc_heads="8L", enc_head_mask="", **layer_kwargs):
        super().__init__()
        if d_model % heads:
            raise ConfigError(f"hidden size {d_model} is not divisible by heads={heads}", key="heads")
        self.spec = enc_heads
        self.layer_specs = parse_spec(enc_heads, num_layers, site="enc")
        self.embeddings = embeddings
        self.transformer = nn.ModuleList(
            HeadlabEncoderLayer(spec, d_model, heads, d_ff, dropout, attention_dropout, **layer_kwargs)
            for spec in self.layer_specs)
        if layer_kwargs.get("layer_norm", "standard") == "standard":
            self.layer_norm = nn.LayerNorm(d_model, eps=layer_kwargs.get("norm_eps", 1e-6))
        else:
            from onmt.modules.rmsnorm import RMSNorm
            self.layer_norm = RMSNorm(d_model, eps=layer_kwargs.get("norm_eps", 1e-6))
        self.needs_words = any(layer.self_attn.needs_words for layer in self.transformer)
        #: some head kind reads the source parse from ctx.side (paper C: DEA, LPEA, RHE*)
        self.needs_syntax = any(layer.self_attn.needs_syntax for layer in self.transformer)
        #: the source-feature columns this encoder reads: the word boundaries (from the text,
        #: headlab.engine.words) when a head kind reads words, then the parse's columns
        self.columns = model_columns(self.needs_words, self.needs_syntax)
        self.set_head_mask(enc_head_mask)

    # -- construction -------------------------------------------------------------------
    @classmethod
    def from_opt(cls, opt, embeddings):
        """Read the options stock ``TransformerEncoder.from_opt`` reads, plus ``enc_heads``."""
        check_supported(opt, f"-encoder_type {ENCODER_NAME}")
        return cls(
            opt.enc_layers, opt.enc_hid_size, opt.heads, opt.transformer_ff,
            first(opt.dropout), first(opt.attention_dropout), embeddings,
            enc_heads=getattr(opt, "enc_heads", None) or "8L",
            enc_head_mask=getattr(opt, "enc_head_mask", None) or "",
            pos_ffn_activation_fn=getattr(opt, "pos_ffn_activation_fn", ActivationFunction.relu),
            add_qkvbias=getattr(opt, "add_qkvbias", False),
            add_ffnbias=getattr(opt, "add_ffnbias", True),
            parallel_residual=getattr(opt, "parallel_residual", False),
            layer_norm=getattr(opt, "layer_norm", "standard"),
            norm_eps=getattr(opt, "norm_eps", 1e-6),
            use_ckpting=getattr(opt, "use_ckpting", None) or [],
            mixer_options=mixer_options(opt),
        )

    # -- forward ------------------------------------------------------------------------
    def context(self, src: Tensor, src_len: Tensor, word_ids: Tensor | None = None) -> HeadContext:
        """The heads' context; ``word_ids`` (B, N) replaces the word-boundary column (tests)."""
        token_ids = src[:, :, 0] if src.dim() == 3 else src
        pad_mask = sequence_mask(src_len, token_ids.size(1))
        side = {}
        if self.columns and (word_ids is None or self.needs_syntax):
            side = side_inputs(src, pad_mask, self.columns)
            continued = side.pop(WORD_COLUMN)
            if word_ids is None:
                word_ids = piece_word_ids(continued)
        return HeadContext(pad_mask, src_len, token_ids, word_ids, side)

    def forward(self, src: Tensor, src_len: Tensor | None = None, word_ids: Tensor | None = None):
        """src: (B, N, nfeats+1) ids, src_len: (B,) -> (enc_out, None, src_len) like stock."""
        if src_len is None:
            src_len = torch.full((src.size(0),), src.size(1), dtype=torch.long, device=src.device)
        enc_out = self.embeddings(src)
        ctx = self.context(src, src_len, word_ids)
        for layer in self.transformer:
            enc_out = layer(enc_out, ctx)
        return self.layer_norm(enc_out), None, src_len

    @torch.no_grad()
    def attention(self, src: Tensor, src_len: Tensor, word_ids: Tensor | None = None) -> list[Tensor]:
        """Per layer, the (B, heads, N, N) attention of every head (fixed heads densified)."""
        enc_out = self.embeddings(src)
        ctx = self.context(src, src_len, word_ids)
        maps = []
        for layer in self.transformer:
            maps.append(layer.self_attn.attention(layer.layer_norm(enc_out), ctx))
            enc_out = layer(enc_out, ctx)
        return maps

    # -- heads --------------------------------------------------------------------------
    @property
    def num_heads(self) -> int:
        return self.transformer[0].self_attn.num_heads if len(self.transformer) else 0

    def disable_heads(self, heads) -> None:
        """Zero the output of heads ``heads`` (1-based) in every encoder layer (paper A §4.3).

        Heads are numbered in spec order; indices beyond a layer's head count are an error.
        """
        heads = list(heads)
        for layer_no, layer in enumerate(self.transformer, 1):
            attn = layer.self_attn
            for k in heads:
                if not 1 <= int(k) <= attn.num_heads:
                    raise ConfigError(f"cannot disable head {k}: encoder layer {layer_no} has "
                                      f"heads 1..{attn.num_heads} ({self.layer_specs[layer_no - 1]})",
                                      key="disable_enc_heads")
            attn.head_scale.fill_(1.0)
            for k in heads:
                attn.head_scale[int(k) - 1] = 0.0

    def set_head_mask(self, text: str | None) -> None:
        """Fix which heads are kept in every forward (``-enc_head_mask``, headlab.heads.prune)."""
        from headlab.heads.prune import parse_head_mask
        rows = parse_head_mask(text, [layer.self_attn.num_heads for layer in self.transformer])
        for number, layer in enumerate(self.transformer):
            layer.self_attn.head_mask = None if rows is None else torch.tensor(rows[number], dtype=torch.float)

    @property
    def head_mask(self) -> list[list[int]] | None:
        """Rows of 0/1 (kept) per layer, or None when every head is kept."""
        masks = [layer.self_attn.head_mask for layer in self.transformer]
        return None if all(m is None for m in masks) else [[int(v) for v in m.tolist()] for m in masks]

    def enable_heads(self) -> None:
        for layer in self.transformer:
            layer.self_attn.head_scale.fill_(1.0)

    @property
    def disabled_heads(self) -> list[int]:
        if not len(self.transformer):
            return []
        scale = self.transformer[0].self_attn.head_scale
        return [k + 1 for k in range(scale.numel()) if scale[k] == 0]

    def aux_terms(self) -> dict[str, Tensor]:
        """Named auxiliary terms (``kl``, ``l0``) of the last forward, summed over layers."""
        return sum_terms(layer.self_attn.aux_terms() for layer in self.transformer)

    def aux_loss(self) -> Tensor:
        """Unweighted sum of all auxiliary terms (0 if none); training weighs each term
        by its own coefficient instead (headlab.engine.aux_loss)."""
        terms = self.aux_terms()
        return sum(terms.values()) if terms else self.layer_norm.weight.new_zeros(())

    def update_dropout(self, dropout, attention_dropout):
        self.embeddings.update_dropout(dropout)
        for layer in self.transformer:
            layer.update_dropout(dropout, attention_dropout)
