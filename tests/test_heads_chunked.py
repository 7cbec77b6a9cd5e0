"""The block-wise biased attention kernel (heads/chunked.py) against dense references:
many blocks (rows of one sentence, sentences of a batch, per-head) give the dense
softmax's output and gradients; fully masked rows give 0 and no NaN; Shaw's relative
expand/collect pair is an adjoint pair matching a dense scatter."""
import functools
import math

import pytest
import torch

from headlab.heads import chunked, parse_spec
from headlab.heads.attention import HeadlabAttention
from headlab.heads.base import HeadContext
from headlab.heads import executor
from headlab.heads.relpos import collect_relative, expand_relative


class DenseBias(chunked.ScoreBias):
    """A (B, H|1, N, N) bias and keep mask, cut to each block."""

    def __init__(self, bias, keep):
        self.heads = bias.size(1)
        self.tensors, self.row_dims = (bias,), (2,)
        self.keep = keep

    def rows(self, block, tensors):
        return tensors[0], self.keep[block.batch, :, block.rows]


def dense(q, k, v, keep, bias):
    s = q @ k.transpose(-1, -2) / math.sqrt(q.size(-1)) + bias
    s = s.masked_fill(~keep, float("-inf"))
    p = torch.softmax(s, -1).nan_to_num(0.0)                  # a row with no key: 0
    return p @ v


@pytest.mark.parametrize("heads_of_bias", [1, 3])
@pytest.mark.parametrize("block", [chunked.BLOCK_ELEMENTS, 40, 5])
def test_blocks_match_dense_attention_forward_and_backward(block, heads_of_bias):
    torch.manual_seed(block + heads_of_bias)
    B, H, N, d = 2, 3, 7, 4
    q, k, v = (torch.randn(B, H, N, d, dtype=torch.float64, requires_grad=True) for _ in range(3))
    bias = torch.randn(B, heads_of_bias, N, N, dtype=torch.float64, requires_grad=True)
    keep = torch.rand(B, 1, N, N) > 0.3
    keep[0, 0, 2] = False                                      # a fully masked query row
    key_mask = torch.ones(B, 1, 1, N, dtype=torch.bool)
    got = chunked.biased_attention(q, k, v, key_mask, DenseBias(bias, keep), block=block)
    want = dense(q, k, v, keep, bias)
    assert torch.isfinite(got).all() and torch.allclose(got, want, atol=1e-10)
    assert got[0, :, 2].abs().max() == 0
    g = torch.randn_like(want)
    grads = torch.autograd.grad(got, (q, k, v, bias), g)
    refs = torch.autograd.grad(want, (q, k, v, bias), g)
    for name, a, b in zip("qkvb", grads, refs):
        assert torch.allclose(a, b.nan_to_num(0.0), atol=1e-9), name


def test_blocks_cover_every_row_once():
    for B, H, N, heads, block in [(3, 2, 5, 1, 1000), (3, 2, 5, 2, 7), (1, 1, 9, 1, 9)]:
        seen = torch.zeros(B, H if heads > 1 else 1, N, dtype=torch.int64)
        for blk in chunked.blocks(B, H, N, N, heads, block):
            seen[blk.batch, blk.head if blk.head is not None else 0, blk.rows] += 1
        assert (seen == 1).all()


@pytest.mark.parametrize("k, lo, n", [(1, 0, 5), (2, 3, 6), (4, 1, 3), (0, 2, 4)])
def test_relative_expand_collect_are_adjoint_and_match_a_dense_scatter(k, lo, n):
    torch.manual_seed(k + lo)
    c = n - lo
    table = torch.randn(2, c, 2 * k + 1, dtype=torch.float64)
    x = torch.randn(2, c, n, dtype=torch.float64)
    index = (torch.arange(n)[None] - torch.arange(lo, lo + c)[:, None]).clamp(-k, k) + k
    assert torch.equal(expand_relative(table, lo, k, n), table.gather(-1, index.expand(2, -1, -1)))
    scatter = torch.zeros(2, c, 2 * k + 1, dtype=torch.float64).scatter_add_(-1, index.expand(2, -1, -1), x)
    assert torch.allclose(collect_relative(x, lo, k), scatter, atol=1e-12)
    lhs = (expand_relative(table, lo, k, n) * x).sum()
    assert torch.allclose(lhs, (table * collect_relative(x, lo, k)).sum(), atol=1e-12)


@pytest.mark.parametrize("spec, options", [("4RelPos", {"relpos_k": 2}), ("4Local", {})])
def test_kinds_give_the_same_output_and_gradients_in_small_blocks(monkeypatch, spec, options):
    """One block per sentence (the default at this size) == two query rows per block."""
    torch.manual_seed(0)
    d, n = 16, 9
    layer = HeadlabAttention(parse_spec(spec)[0], d, d // 4, mixer_options=options)
    x = torch.randn(2, n, d)
    lengths = torch.tensor([n, n - 3])
    ctx = HeadContext(torch.arange(n)[None] >= lengths[:, None], lengths)

    def run():
        layer.zero_grad()
        out = layer(x, ctx)
        out[~ctx.pad_mask].pow(2).sum().backward()
        return out.detach(), [p.grad.clone() for p in layer.parameters() if p.grad is not None]

    monkeypatch.setenv(executor.PATH_VARIABLE, "blocked")
    whole, whole_grads = run()
    # the blocked path (heads/executor.py) calls the kernel
    monkeypatch.setattr(executor, "biased_attention", functools.partial(chunked.biased_attention, block=2 * n))
    small, small_grads = run()
    real = ~ctx.pad_mask
    assert torch.allclose(whole[real], small[real], atol=1e-5)
    assert len(whole_grads) == len(small_grads) > 0
    for a, b in zip(whole_grads, small_grads):
        assert torch.allclose(a, b, atol=1e-4)
