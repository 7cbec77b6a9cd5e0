"""Paper C's baselines as head kinds: RelPos (Shaw et al. 2018), Local (Yang et al. 2018)."""
import math

import pytest
import torch

from headlab.errors import ConfigError
from headlab.heads import parse_spec
from headlab.heads.attention import HeadlabAttention
from headlab.heads.base import HeadContext
from headlab.heads.relpos import relative_index


def ctx_for(lengths, n):
    lengths = torch.tensor(lengths)
    pad = torch.arange(n)[None] >= lengths[:, None]
    return HeadContext(pad, lengths)


@pytest.mark.parametrize("k", [1, 3])
def test_relpos_equals_onmt_max_relative_positions(k):
    """Copied weights: our 8RelPos layer == OpenNMT-py 3.5.1's MultiHeadedAttention with
    max_relative_positions k (one table for keys and values, shared by the heads)."""
    import headlab.engine.plugin  # noqa: F401
    from onmt.modules import MultiHeadedAttention

    torch.manual_seed(k)
    d, heads, n = 16, 4, 7
    stock = MultiHeadedAttention(heads, d, dropout=0.0, is_decoder=False, max_relative_positions=k,
                                 attn_type="self", add_qkvbias=True)
    for p in stock.parameters():
        torch.nn.init.normal_(p, std=0.3)
    ours = HeadlabAttention(parse_spec(f"{heads}RelPos")[0], d, d // heads, add_qkvbias=True,
                            mixer_options={"relpos_k": k})
    names = {"linear_query": "heads.0.linear_query", "linear_keys": "heads.0.linear_keys",
             "relative_positions_embeddings": "heads.0.relative_positions_embeddings"}
    state = {}
    for key, value in stock.state_dict().items():
        prefix, _, rest = key.partition(".")
        state[f"{names.get(prefix, prefix)}.{rest}"] = value
    ours.load_state_dict(state)
    x = torch.randn(2, n, d)
    lengths = [n, n - 2]
    ctx = ctx_for(lengths, n)
    want, attn = stock(x, x, x, mask=ctx.pad_mask.view(2, 1, 1, n).expand(-1, -1, n, -1), return_attn=True)
    got = ours(x, ctx)
    real = ~ctx.pad_mask
    assert torch.allclose(got[real], want[real], atol=1e-5)
    assert torch.allclose(ours.attention(x, ctx)[0], attn[0].float(), atol=1e-6)
    assert relative_index(4, 1).tolist() == [[1, 2, 2, 2], [0, 1, 2, 2], [0, 0, 1, 2], [0, 0, 0, 1]]


def test_relpos_bad_k():
    with pytest.raises(ConfigError, match=r"\[relpos_k\].*>= 1, got 0"):
        HeadlabAttention(parse_spec("8RelPos")[0], 16, 2, mixer_options={"relpos_k": 0})


def test_local_gaussian_bias_by_hand():
    """G_ij = -(j - P_i)^2 / (2 sigma_i^2), sigma = D/2, P = I sigmoid(p), D = I sigmoid(z),
    p = U_p . tanh(W_p q), z = U_d . tanh(W_p q); one head, d_h = 2, I = 4."""
    layer = HeadlabAttention(parse_spec("1Local")[0], 2, 2)
    local = layer.heads[0]
    with torch.no_grad():
        local.W_p.weight.copy_(torch.eye(2))
        local.U_p.copy_(torch.tensor([[1.0, 0.0]]))
        local.U_d.copy_(torch.tensor([[0.0, 2.0]]))
    q = torch.tensor([[0.3, -0.2], [1.0, 0.5], [-0.4, 0.8], [0.0, 0.0], [9.0, 9.0]]).view(1, 1, 5, 2)
    ctx = ctx_for([4], 5)
    bias = local.logit_bias(q, ctx)[0, 0]
    for i in range(5):
        h = [math.tanh(v) for v in q[0, 0, i].tolist()]
        centre = 4 / (1 + math.exp(-h[0]))
        window = 4 / (1 + math.exp(-2 * h[1]))
        for j in range(5):
            want = -(j - centre) ** 2 / (2 * (window / 2) ** 2)
            assert bias[i, j].item() == pytest.approx(want, rel=1e-5)
    # the attention adds G to the logits, padding keys excluded
    x = torch.randn(1, 5, 2)
    att = local.attention(x, ctx)
    qx, kx = local._qk(x, None)
    manual = (qx @ kx.transpose(-1, -2) / math.sqrt(2) + local.logit_bias(qx, ctx))
    manual = manual.masked_fill(ctx.pad_mask.view(1, 1, 1, 5), -math.inf).softmax(-1)
    assert torch.allclose(att, manual, atol=1e-6)
    out = layer(x, ctx)
    out.sum().backward()
    assert local.U_p.grad.abs().sum() > 0 and local.U_d.grad.abs().sum() > 0


def test_onmt_max_relative_positions_still_rejected():
    from types import SimpleNamespace

    from headlab.engine.common import check_supported
    with pytest.raises(ConfigError, match=r"\[max_relative_positions\].*head kind RelPos"):
        check_supported(SimpleNamespace(max_relative_positions=16), "-encoder_type headlab")
