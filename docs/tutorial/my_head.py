"""Tutorial: two head kinds of your own, used in one attention layer and in a whole model.

Run it from the repository root: ``.venv/bin/python docs/tutorial/my_head.py``.
``tests/test_docs.py`` runs the same functions, so this code cannot go stale.
"""
from __future__ import annotations

import torch
from torch import Tensor

from headlab.heads import parse_spec, register_head_kind
from headlab.heads.base import HeadContext, HeadGroup
from headlab.heads.kinds import LearnedHeads


# -- 1. a kind from scratch: every query averages the values of its whole sentence --------
@register_head_kind("Mean")
class MeanHeads(HeadGroup):
    """A bag-of-words head: uniform attention over the sentence's real tokens.

    No query/key projections (``key_width`` stays 0), so it costs only its value and
    output columns, like paper A's fixed heads. Encoder-only: it reads the whole sentence."""

    sites = ("enc",)

    def _weights(self, ctx: HeadContext) -> Tensor:
        # (B, 1, 1, N): 1/length on real tokens, 0 on padding
        keep = (~ctx.pad_mask).float()
        return (keep / keep.sum(-1, keepdim=True)).view(keep.size(0), 1, 1, -1)

    def forward(self, x: Tensor, values: Tensor, ctx: HeadContext, keys: Tensor | None = None) -> Tensor:
        # values: (B, N, count, d_head) -> every query gets the same mean: (B, N, count, d_head)
        weights = self._weights(ctx).to(values.dtype).squeeze(1).transpose(1, 2)    # (B, N, 1)
        mean = (values * weights.unsqueeze(-1)).sum(1, keepdim=True)
        return mean.expand(-1, x.size(1), -1, -1)

    def attention(self, x: Tensor, ctx: HeadContext, keys: Tensor | None = None) -> Tensor:
        # dense probabilities for export and the atlas: (B, count, N, N)
        B, N = ctx.pad_mask.shape
        return self._weights(ctx).expand(B, self.count, N, N).float()


# -- 2. a learned kind with a bias: attend only within `width` tokens of the query --------
@register_head_kind("Band")
class BandHeads(LearnedHeads):
    """Learned heads restricted to a window of +-2 tokens (a hard local mask).

    ``LearnedHeads`` does the projections and the fused attention; a kind adds an additive
    bias (``-inf`` = masked) through :meth:`score_bias`, used by training and export alike.
    Encoder-only: step-by-step decoding would need the query's position, not a square mask."""

    width = 2
    sites = ("enc",)

    def score_bias(self, ctx: HeadContext) -> Tensor | None:
        pos = torch.arange(ctx.pad_mask.size(1), device=ctx.pad_mask.device)
        far = (pos.view(-1, 1) - pos.view(1, -1)).abs() > self.width
        # (1, 1, N, N); LearnedHeads adds the padding mask to it
        return torch.zeros(far.shape, device=pos.device).masked_fill(far, float("-inf"))[None, None]


# -- 3. one encoder self-attention layer with both kinds and stock learned heads ---------
def layer_demo() -> Tensor:
    from headlab.heads.attention import HeadlabAttention

    torch.manual_seed(0)
    layer_spec = parse_spec("2Mean+2Band+4L")[0]                 # one layer, 8 heads
    layer = HeadlabAttention(layer_spec, d_model=32, default_d_head=4, site="enc").eval()
    lengths = torch.tensor([5, 3])
    pad_mask = torch.arange(5).unsqueeze(0) >= lengths.unsqueeze(1)
    ctx = HeadContext(pad_mask=pad_mask, lengths=lengths)
    x = torch.randn(2, 5, 32)
    out = layer(x, ctx)                                          # (B, N, d_model)
    probs = layer.attention(x, ctx)                              # (B, heads, N, N)
    assert out.shape == (2, 5, 32) and probs.shape == (2, 8, 5, 5)
    assert torch.allclose(probs[1, :, :3, :3].sum(-1), torch.ones(8, 3))
    assert probs[0, 2:4, 0, 3:].abs().max() == 0                 # Band: no weight beyond +-2
    return out


# -- 4. a whole OpenNMT-py model whose encoder uses the new kinds -------------------------
def model_demo() -> Tensor:
    from headlab.engine.model import build_model, model_opt, toy_vocabs

    torch.manual_seed(0)
    opt = model_opt(enc_heads="2Mean+2Band+4L", enc_layers=2, dec_layers=2, hidden_size=32,
                    heads=8, transformer_ff=64, dropout=0.0, attention_dropout=0.0)
    vocabs = toy_vocabs(40, share=True)
    model = build_model(opt, vocabs).eval()
    src = torch.randint(4, 40, (2, 6, 1))                         # (B, S, 1): token ids
    src_len = torch.tensor([6, 4])
    src[1, 4:] = 1                                                # padding id
    tgt = torch.randint(4, 40, (2, 5, 1))
    with torch.no_grad():
        out, _ = model(src, tgt, src_len)                         # teacher-forced decoder states
        logp = model.generator(out).log_softmax(-1)
    assert logp.shape == (2, 4, 40) and torch.isfinite(logp).all()
    return logp


if __name__ == "__main__":
    print("layer output", tuple(layer_demo().shape))
    print("model log-probabilities", tuple(model_demo().shape))
