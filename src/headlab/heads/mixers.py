"""Layer-level head mixers: act on the stacked head outputs of a layer.

``gate``: hard-concrete gates (Louizos 2018, as used by Voita et al. 2019 for head
pruning; paper D): one gate per head, temperature 0.33, stretch (-0.1, 1.1). In training
the gate is sampled; in eval it is the deterministic clamp(sigmoid(log_alpha)(r-l)+l).
Auxiliary term ``l0``: the expected L0 norm sum_h sigmoid(log_alpha_h - T log(-l/r)),
weighed by ``-lambda_l0`` in the training loss.

``dhicm``: paper B's second-level attention over the heads (:mod:`headlab.heads.dhicm`).
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from headlab.heads.base import HeadContext, HeadMixer, scale_heads
from headlab.heads.spec import register_head_mixer


@register_head_mixer("gate")
class HardConcreteGate(HeadMixer):
    temperature = 0.33
    stretch = (-0.1, 1.1)

    def __init__(self, num_heads: int, d_model: int, init_log_alpha: float = 3.0):
        super().__init__(num_heads, d_model)
        self.init_log_alpha = float(init_log_alpha)
        self.log_alpha = nn.Parameter(torch.full((num_heads,), self.init_log_alpha))

    @torch.no_grad()
    def reset_head_parameters(self) -> None:
        """Gates start open (sigmoid(3)*1.2-0.1 > 1, clamped to 1). OpenNMT-py's training
        init (uniform +-param_init over every parameter) would start them half closed;
        ``HeadlabEncoder.reset_head_parameters()`` restores this after it."""
        self.log_alpha.fill_(self.init_log_alpha)

    def gates(self) -> Tensor:
        """(H,) float32 gates. Float32 whatever the weights' dtype (``-precision fp16``
        makes log_alpha float16): in fp16/bf16 the clamp 1 - 1e-6 rounds to 1 and
        log(1 - u) to -inf."""
        low, high = self.stretch
        log_alpha = self.log_alpha.float()
        if self.training:
            u = torch.rand_like(log_alpha).clamp(1e-6, 1 - 1e-6)
            s = torch.sigmoid((u.log() - (1 - u).log() + log_alpha) / self.temperature)
        else:
            s = torch.sigmoid(log_alpha)
        return (s * (high - low) + low).clamp(0.0, 1.0)

    def forward(self, heads: list[Tensor], ctx: HeadContext, x: Tensor) -> list[Tensor]:
        return scale_heads(heads, self.gates())

    def expected_l0(self) -> Tensor:
        low, high = self.stretch    # float32 (see gates): the aux loss term
        return torch.sigmoid(self.log_alpha.float() - self.temperature * math.log(-low / high)).sum()

    def aux_terms(self) -> dict[str, Tensor]:
        return {"l0": self.expected_l0()}
