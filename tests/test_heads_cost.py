"""Fixed heads cost no attention FLOPs: counted exactly with torch's FlopCounterMode."""
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from headlab.heads.attention import HeadlabSelfAttention
from headlab.heads.base import HeadContext
from headlab.heads.spec import parse_spec

B, N, D = 2, 64, 512


def flops(spec):
    layer = HeadlabSelfAttention(parse_spec(spec)[0], D, D // 8, add_qkvbias=True)
    ctx = HeadContext(torch.zeros(B, N, dtype=torch.bool), torch.full((B,), N),
                      word_ids=(torch.arange(N) // 2).expand(B, N))
    x = torch.randn(B, N, D)
    # the math SDPA kernel decomposes into matmuls the counter sees (fused CPU kernels are
    # not counted); the FLOPs are the same
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        layer(x, ctx)
    return counter.get_total_flops()


def test_fixed_heads_cost_only_their_projections():
    projection = 2 * B * N * D * D                       # one d x d linear, forward
    attention_per_head = 2 * 2 * B * N * N * (D // 8)    # scores + weighted sum
    assert flops("8Ftoken") == 2 * projection            # values + output only
    assert flops("8L") == 4 * projection + 8 * attention_per_head
    assert flops("7Ftoken+1L") == 2 * projection + 2 * projection // 8 + attention_per_head
    assert flops("7Fword+1L") == flops("7Ftoken+1L") < flops("8L")
