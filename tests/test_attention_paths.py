"""The fused and the blocked attention path are one function (headlab.heads.executor).

Every registered kind at every site it serves and every mixer (tests/headcases.py
``layer_specs``), on a padded batch of mixed lengths (9, 1, 5: a one-token sentence) with
word boundaries and parses: forward, input gradient and every parameter's gradient agree
in float64 within 1e-6 (relative), without attention dropout and with it, given the same
dropout mask; RHE's labels agree too, and ``-rhe_prune``.
"""
from __future__ import annotations

import pytest
import torch

from headcases import build_layer, layer_inputs, layer_specs
from headlab.errors import ConfigError
from headlab.heads import executor

CASES = layer_specs() + [("enc", "1DEA+1LPEA+1RHEdea+1RHElpea|gate", {}),
                         ("enc", "1RelPos+1Local+1RHErel+1RHEloc|dhicm", {}),
                         ("enc", "3Ftoken+1L", {}), ("enc", "3Fword+1RHElpea", {}),
                         ("enc", "4RHEdea", {"rhe_fgate": 0.3})]


def _run(site, spec, options, path, monkeypatch, dropout=0.0, prune=False):
    monkeypatch.setenv(executor.PATH_VARIABLE, path)
    layer = build_layer(site, spec, options).double()
    x, ctx, memory = layer_inputs(site)
    x = x.double().requires_grad_()
    memory = None if memory is None else memory.double()
    keep = torch.rand(x.size(0), layer.num_heads, x.size(1), (memory if memory is not None else x).size(1),
                      generator=torch.Generator().manual_seed(7)) > 0.2
    first = 0
    for group in layer.heads:
        if hasattr(group, "dropout_keep"):
            group.dropout_p = dropout
            group.dropout_keep = keep[:, first:first + group.count] if dropout else None
        if prune:
            group.prune = True
        first += group.count
    layer.train(not prune)
    torch.manual_seed(0)                    # the gates' samples
    kv = layer.project_kv(memory) if memory is not None else None
    out = layer.attend(x, ctx, kv)
    real = (~ctx.pad_mask).unsqueeze(-1).double()
    weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    terms = [t for t in layer.aux_terms().values() if t.requires_grad]
    ((out * weights * real).sum() + sum(t.double() for t in terms)).backward()
    labels = [group._important.clone() for group in layer.heads if getattr(group, "_important", None) is not None]
    grads = {name: p.grad for name, p in layer.named_parameters() if p.grad is not None}
    return out.detach() * real, x.grad, grads, labels


def _relative(value, reference):
    return float((value - reference).norm() / reference.norm().clamp_min(1e-30))


def _assert_same(fused, blocked):
    assert _relative(fused[0], blocked[0]) <= 1e-6
    assert _relative(fused[1], blocked[1]) <= 1e-6
    assert fused[2].keys() == blocked[2].keys()
    every = torch.cat([g.flatten() for g in blocked[2].values()])
    for name, grad in blocked[2].items():
        # each parameter's error against the size of all the layer's gradients: a parameter
        # whose true gradient is 0 (a key bias: softmax is shift-invariant) has only round-off
        assert float((fused[2][name] - grad).norm() / every.norm()) <= 1e-6, name
    assert len(fused[3]) == len(blocked[3])
    for mine, theirs in zip(fused[3], blocked[3]):
        assert torch.equal(mine, theirs)


@pytest.mark.parametrize("site, spec, options", CASES, ids=[f"{s}-{p}-{o}" for s, p, o in CASES])
def test_fused_equals_blocked(monkeypatch, site, spec, options):
    _assert_same(_run(site, spec, options, "fused", monkeypatch), _run(site, spec, options, "blocked", monkeypatch))


@pytest.mark.parametrize("site, spec, options", CASES, ids=[f"{s}-{p}-{o}" for s, p, o in CASES])
def test_fused_equals_blocked_with_the_same_dropout_mask(monkeypatch, site, spec, options):
    fused = _run(site, spec, options, "fused", monkeypatch, dropout=0.1)
    blocked = _run(site, spec, options, "blocked", monkeypatch, dropout=0.1)
    _assert_same(fused, blocked)
    plain = _run(site, spec, options, "blocked", monkeypatch)
    if any(hasattr(group, "dropout_keep") for group in build_layer(site, spec, options).heads):
        assert _relative(blocked[0], plain[0]) > 1e-3          # the mask was used


@pytest.mark.parametrize("spec", ["4RHEdea", "4RHElpea", "4RHErel", "4RHEloc"])
def test_rhe_prune_is_the_same_on_both_paths(monkeypatch, spec):
    fused = _run("enc", spec, {}, "fused", monkeypatch, prune=True)
    blocked = _run("enc", spec, {}, "blocked", monkeypatch, prune=True)
    assert _relative(fused[0], blocked[0]) <= 1e-6
    assert torch.equal(fused[3][0], blocked[3][0])
    assert not bool(fused[3][0].all())                   # some heads are pruned: the test bites


def test_a_bad_path_setting_is_one_line_naming_the_variable(monkeypatch):
    monkeypatch.setenv(executor.PATH_VARIABLE, "fast")
    with pytest.raises(ConfigError, match="HEADLAB_ATTENTION_PATH='fast': must be one of fused, blocked, auto"):
        executor.attention_path()


def test_auto_is_fused_on_cuda_measured_on_cpu_and_blocked_when_too_big(monkeypatch):
    monkeypatch.delenv(executor.PATH_VARIABLE, raising=False)
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert executor.choose_path("LPEA", cuda, 10 ** 6) == "fused"
    assert executor.choose_path("LPEA", cuda, executor.FUSED_MAX_ELEMENTS + 1) == "blocked"
    for kind in ("L", "DEA", "LPEA", "Ftoken", "RHErel"):
        assert executor.choose_path(kind, cpu, 10 ** 6) == ("fused" if kind in executor.CPU_FUSED else "blocked")
    monkeypatch.setenv(executor.PATH_VARIABLE, "fused")
    assert executor.choose_path("LPEA", cpu, executor.FUSED_MAX_ELEMENTS + 1) == "fused"
