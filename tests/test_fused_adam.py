"""``-optim adam`` is torch's fused Adam (headlab.engine.compat._patch_fused_adam): the same
update as torch's default implementation, through OpenNMT-py's own Optimizer (noam decay,
warm-up), on a model with every kind of parameter tensor (gates, DHICM, learned heads)."""
from __future__ import annotations

import copy

import torch

from headcases import FF, OPTIONS, vocabs


def _model_and_opt(adam: str):
    from headlab.engine.model import build_model, model_opt
    torch.manual_seed(0)
    opt = model_opt(enc_heads="3L+1Lwide|gate", enc_layers=2, dec_layers=2, hidden_size=32, heads=4,
                    transformer_ff=FF, dropout=0.0, attention_dropout=0.0, decoder_type="headlab",
                    dec_heads="4L|dhicm", cross_heads="4L", extra=[*OPTIONS, "-adam_impl", adam])
    return build_model(opt, vocabs()).train(), opt


def _twenty_steps(model, opt):
    """The parameters after 20 optimizer steps on the same gradients (drawn per step): the
    two implementations see identical inputs, so any difference is their arithmetic."""
    from onmt.utils.optimizers import Optimizer
    optim = Optimizer.from_opt(model, opt)
    for step in range(20):
        generator = torch.Generator().manual_seed(step)
        optim.zero_grad(set_to_none=True)
        for param in model.parameters():
            param.grad = torch.randn(param.shape, generator=generator)
        optim.step()
    return optim, {name: p.detach().clone() for name, p in model.named_parameters()}


def test_fused_adam_makes_the_same_update_as_torchs_default():
    model, opt = _model_and_opt("fused")
    start = {name: p.detach().clone() for name, p in model.named_parameters()}
    fused_optim, fused = _twenty_steps(copy.deepcopy(model), opt)
    plain_optim, plain = _twenty_steps(copy.deepcopy(model), _model_and_opt("torch")[1])
    assert fused_optim._optimizer.param_groups[0]["fused"] is True
    assert not plain_optim._optimizer.param_groups[0]["fused"]
    for name, value in plain.items():
        update = (value - start[name]).norm()
        assert update > 0, name
        assert float((fused[name] - value).norm() / update) <= 1e-6, name
