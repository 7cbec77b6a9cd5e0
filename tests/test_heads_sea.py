"""Paper C's DEA (eqs. 4-5) and LPEA (eqs. 7-8, Fig. 3) on hand-built trees."""
import math

import pytest
import torch
from nltk import Tree

from headlab.errors import ConfigError
from headlab.heads import parse_spec
from headlab.heads.attention import HeadlabAttention
from headlab.heads.base import HeadContext
from headlab.heads.sea import DEA, LPEA, dep_related, rp_index, rp_matrix
from headlab.syntax.trees import FEATURES, word_facts

INF = None  # RP = ∞ in the hand-written matrices
FIG3 = "(S (NP (NNP Bush)) (VP (VBD held) (NP (DT a) (NN talk)) (PP (IN with) (NP (NNP Sharon)))))"
FIG3_HEADS = [1, 1, 3, 1, 3, 4]
# RP_ij = layer(x_j) - layer(x_i), leaf depths 3 3 4 4 4 5; ∞ outside the local phrase
# (Rule 1: Bush -> S, held -> VP, a/talk -> NP, with/Sharon -> PP; Rule 2: symmetry)
FIG3_RP = [
    [0, 0, 1, 1, 1, 2],           # Bush
    [0, 0, 1, 1, 1, 2],           # held: RP_{2,4} (1-based) = 1, the text's example
    [-1, -1, 0, 0, INF, INF],     # a
    [-1, -1, 0, 0, INF, INF],     # talk: "Sharon" and "talk" -> ∞
    [-1, -1, INF, INF, 0, 1],     # with
    [-2, -2, INF, INF, -1, 0],    # Sharon
]


def side_of(facts, word_ids):
    """Piece-level (1, N) columns: each piece carries its word's value."""
    return {name: torch.tensor([[facts[name][w] for w in word_ids]]) for name in FEATURES}


def ctx_of(facts, word_ids, pad=0):
    n = len(word_ids) + pad
    word_ids = list(word_ids) + [0] * pad
    side = side_of(facts, word_ids)
    pad_mask = torch.tensor([[i >= n - pad for i in range(n)]])
    return HeadContext(pad_mask, torch.tensor([n - pad]), word_ids=torch.tensor([word_ids]), side=side)


def fig3():
    return word_facts(Tree.fromstring(FIG3), FIG3_HEADS)


def test_fig3_rp_matrix_and_clipped_indices():
    facts = fig3()
    ctx = ctx_of(facts, range(6))
    rp, related = rp_matrix(ctx.word_ids, ctx.side)
    got = [[int(rp[0, i, j]) if related[0, i, j] else INF for j in range(6)] for i in range(6)]
    assert got == FIG3_RP
    # clip at k = 1: index = clip(RP, 1) + 1 in 0..2, ∞ -> 2k+1 = 3
    idx = rp_index(rp, related, 1)[0].tolist()
    expect = [[3 if v is INF else max(-1, min(1, v)) + 1 for v in row] for row in FIG3_RP]
    assert idx == expect
    assert idx[5][0] == 0 and idx[0][5] == 2          # -2 -> -1, 2 -> 1
    assert rp_index(rp, related, 0)[0].tolist() == [[1 if v is INF else 0 for v in row] for row in FIG3_RP]


def test_dea_mask_fig3_by_hand():
    ctx = ctx_of(fig3(), range(6))
    related = dep_related(ctx.word_ids, ctx.side["dep_head"])[0]
    pairs = {(0, 1), (2, 3), (3, 1), (4, 3), (5, 4)}         # (dependent, head)
    expect = [[i == j or (i, j) in pairs or (j, i) in pairs for j in range(6)] for i in range(6)]
    assert related.tolist() == expect
    dea = DEA(1, 8, 8)
    bias = dea.score_bias(ctx)[0, 0]
    assert bias.shape == (6, 6)
    assert all((bias[i, j] == 0) == expect[i][j] and (bias[i, j] == -math.inf) != expect[i][j]
               for i in range(6) for j in range(6))


def test_bpe_pieces_inherit_their_word():
    """Sharon -> Sha@@ ron (pieces 5, 6): pieces of one word see each other (DEA), RP 0
    between them (LPEA), and both pieces have Sharon's row and column."""
    facts = fig3()
    word_ids = [0, 1, 2, 3, 4, 5, 5]
    ctx = ctx_of(facts, word_ids)
    related = dep_related(ctx.word_ids, ctx.side["dep_head"])[0]
    word_rel = dep_related(torch.arange(6)[None], torch.tensor([FIG3_HEADS]))[0]
    assert related.tolist() == [[bool(word_rel[a, b]) for b in word_ids] for a in word_ids]
    assert related[5, 6] and related[6, 5]
    rp, lp = rp_matrix(ctx.word_ids, ctx.side)
    assert rp[0, 5, 6] == 0 and lp[0, 5, 6] and lp[0, 6, 5]
    got = [[int(rp[0, a, b]) if lp[0, a, b] else INF for b in range(7)] for a in range(7)]
    assert got == [[FIG3_RP[wa][wb] for wb in word_ids] for wa in word_ids]


def lpea_with_known_weights(k=1, outside="mask"):
    """d_h = 2, W_P = I, b_P = 0, U_P = (1, 0): P_r = -|tanh(w_r[0])|."""
    lpea = LPEA(1, 4, 2, k=k, outside=outside)
    with torch.no_grad():
        emb = lpea.phrase.relative_phrase_embeddings.weight
        emb.copy_(torch.tensor([[0.5 * (r + 1) * (-1) ** r, 9.0] for r in range(emb.size(0))]))
        lpea.phrase.W_P.weight.copy_(torch.eye(2))
        lpea.phrase.W_P.bias.zero_()
        lpea.phrase.U_P.weight.copy_(torch.tensor([[1.0, 0.0]]))
    return lpea


@pytest.mark.parametrize("outside", ["mask", "learned"])
def test_lpea_bias_fig3_by_hand(outside):
    lpea = lpea_with_known_weights(1, outside)
    values = [-abs(math.tanh(0.5 * (r + 1) * (-1) ** r)) for r in range(4)]   # w_-1, w_0, w_1, w_∞
    if outside == "mask":
        values[3] = -math.inf
    assert lpea.phrase.values().tolist() == pytest.approx(values)
    bias = lpea.score_bias(ctx_of(fig3(), range(6)))[0, 0]
    for i, row in enumerate(FIG3_RP):
        for j, rp in enumerate(row):
            want = values[3] if rp is INF else values[max(-1, min(1, rp)) + 1]
            assert bias[i, j].item() == pytest.approx(want)
    assert lpea.phrase.relative_phrase_embeddings.num_embeddings == 3 + (outside == "learned")


@pytest.mark.parametrize("outside", ["mask", "learned"])
def test_lpea_forward_equals_explicit_softmax_and_padding_is_finite(outside):
    """mask: fused SDPA with depth factors on widened q/k (LPEA.forward); learned: the
    float (n, n) bias path. Both must equal softmax(QK/sqrt(d) + P) V."""
    torch.manual_seed(0)
    layer = HeadlabAttention(parse_spec("2LPEA")[0], 8, 4, mixer_options={"lpea_k": 1, "lpea_outside": outside})
    lpea = layer.heads[0]
    ctx = ctx_of(fig3(), range(6), pad=2)
    x = torch.randn(1, 8, 8)
    out = layer(x, ctx)
    assert torch.isfinite(out).all()
    keys, values = layer.project_kv(x)
    q = lpea.linear_query(x).view(1, 8, 2, 4).transpose(1, 2)
    k = keys.view(1, 8, 2, 4).transpose(1, 2)
    scores = q @ k.transpose(-1, -2) / 2 + lpea.score_bias(ctx)
    scores = scores.masked_fill(ctx.pad_mask.view(1, 1, 1, 8), -math.inf)
    att = scores.softmax(-1)
    assert torch.allclose(att, lpea.attention(x, ctx), atol=1e-6)
    if outside == "mask":
        assert (att[0, :, :6][lpea.score_bias(ctx)[0, :, :6].expand(2, 6, 8) == -math.inf] == 0).all()
        assert (att[0, :, :6] == 0).any()
    heads = (att @ values.view(1, 8, 2, 4).transpose(1, 2)).transpose(1, 2).reshape(1, 8, 8)
    assert torch.allclose(out, layer.final_linear(heads), atol=1e-5)
    out[0, :6].sum().backward()
    assert lpea.phrase.relative_phrase_embeddings.weight.grad.abs().sum() > 0


def test_dea_forward_uses_mask():
    torch.manual_seed(1)
    layer = HeadlabAttention(parse_spec("2DEA")[0], 8, 4)
    ctx = ctx_of(fig3(), range(6), pad=1)
    att = layer.heads[0].attention(torch.randn(1, 7, 8), ctx)
    related = dep_related(ctx.word_ids, ctx.side["dep_head"])[0]
    assert (att[0, :, :6, :6][~related[:6, :6].expand(2, 6, 6)] == 0).all()
    assert torch.allclose(att[0, :, :6].sum(-1), torch.ones(2, 6))
    assert (att[0, :, :, 6] == 0).all()                     # padding key
    assert torch.isfinite(layer(torch.randn(1, 7, 8), ctx)).all()


def test_missing_parse_and_bad_k_name_their_keys():
    layer = HeadlabAttention(parse_spec("2DEA")[0], 8, 4)
    ctx = HeadContext(torch.zeros(1, 3, dtype=torch.bool), torch.tensor([3]), word_ids=torch.arange(3)[None])
    with pytest.raises(ConfigError, match=r"\[enc_heads\].*DEA.*dep_head"):
        layer(torch.randn(1, 3, 8), ctx)
    with pytest.raises(ConfigError, match=r"\[lpea_k\].*>= 0, got -1"):
        HeadlabAttention(parse_spec("2LPEA")[0], 8, 4, mixer_options={"lpea_k": -1})
    with pytest.raises(ConfigError, match=r"\[lpea_outside\]"):
        HeadlabAttention(parse_spec("2LPEA")[0], 8, 4, mixer_options={"lpea_outside": "zero"})
    with pytest.raises(ConfigError, match=r"\[dec_heads\].*cannot be used in decoder self"):
        parse_spec("8DEA", site="dec")
