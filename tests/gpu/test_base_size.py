"""The GPU suite's first file (pytest runs files in name order): what fails first on a real
GPU run at base size, before the small cases of test_gpu.py.

Every head kind and mixer at every site it serves, at Transformer-base shapes (d = 512, 8
heads of 64, eight sentences of up to 100 tokens, attention dropout 0.1 in training mode),
through three optimizer steps under mixed precision as OpenNMT-py trains: fp16 autocast
with a live ``GradScaler`` (a step whose gradients overflow is skipped and the scale
halved: more than one skip in three steps means the kind overflows at base size), bf16
autocast without scaling. Outputs, gradients and the updated weights stay finite.

On CUDA every case runs (marked ``gpu``); the CPU stands in for it with one layer per site
in bf16 (CPU autocast), so that ``make test`` runs this file's logic.
"""
from __future__ import annotations

import re

import torch

import headcases as hc
from gputargets import DTYPES, params, precisions

D_MODEL, HEADS, MAX_LEN, BATCH, DROPOUT = 512, 8, 100, 8, 0.1


def base_spec(spec: str) -> str:
    """A small case's spec at 8 heads (``4L`` -> ``8L``, ``2Lwide`` -> ``4Lwide``)."""
    return re.sub(r"^\d+", lambda count: str(int(count[0]) * 2), spec)


CASES = [(site, base_spec(spec), options) for site, spec, options in hc.layer_specs()]
CPU_CASES = [case for case in CASES if (case[0], case[1]) in {("enc", "8Local"), ("dec", "8L|dhicm"),
                                                              ("cross", "4Lwide")}]


def build(site: str, spec: str, options: dict, device: str):
    """A base-size attention layer of ``site`` with OpenNMT-py's Xavier-like scale, training mode."""
    from headlab.engine.decoder import DecoderAttention
    from headlab.heads.attention import HeadlabAttention
    from headlab.heads.spec import parse_spec

    torch.manual_seed(1)
    cls = HeadlabAttention if site == "enc" else DecoderAttention
    layer = cls(parse_spec(spec, site=site)[0], D_MODEL, D_MODEL // HEADS, site=site, add_qkvbias=True,
                attention_dropout=DROPOUT, mixer_options={**hc.LAYER_OPTIONS, **options})
    with torch.no_grad():
        for name, param in layer.named_parameters():
            if name.endswith("log_alpha"):
                param.uniform_(-1.0, 3.0)
            elif param.dim() > 1:
                torch.nn.init.xavier_uniform_(param)
    return layer.to(device).train()


def inputs(site: str, device: str):
    """(x, HeadContext, memory) for eight sentences of 100 tokens down to 13, on ``device``."""
    from headlab.bench import synthetic_side
    from headlab.heads.base import HeadContext

    gen = torch.Generator().manual_seed(0)
    lengths = torch.tensor([MAX_LEN - 12 * i for i in range(BATCH)])
    pad = torch.arange(MAX_LEN).unsqueeze(0) >= lengths.unsqueeze(1)
    x = torch.randn(BATCH, MAX_LEN, D_MODEL, generator=gen)
    memory = None
    if site == "enc":
        starts = torch.rand(BATCH, MAX_LEN, generator=gen) > 0.3
        starts[:, 0] = True
        word_ids = torch.cumsum(starts.long(), 1) - 1
        ctx = HeadContext(pad, lengths, word_ids=word_ids, side=synthetic_side(word_ids, lengths, gen))
    elif site == "dec":
        allowed = torch.ones(MAX_LEN, MAX_LEN, dtype=torch.bool).tril().view(1, 1, MAX_LEN, MAX_LEN)
        ctx = HeadContext(pad, lengths, allowed=allowed & ~pad.view(BATCH, 1, 1, MAX_LEN))
    else:
        memory = torch.randn(BATCH, MAX_LEN, D_MODEL, generator=gen)
        ctx = HeadContext(pad, lengths, allowed=(~pad).view(BATCH, 1, 1, MAX_LEN).expand(BATCH, 1, MAX_LEN, MAX_LEN))
    return x.to(device), hc.ctx_to(ctx, device), None if memory is None else memory.to(device)


@params([(site, spec, options, p) for site, spec, options in CASES for p in precisions("cuda")[1:]],
        [(site, spec, options, "bf16") for site, spec, options in CPU_CASES],
        "target, site, spec, options, precision")
def test_every_kind_trains_at_base_size_in_mixed_precision(target, site, spec, options, precision):
    layer = build(site, spec, options, target)
    x, ctx, memory = inputs(site, target)
    optimizer = torch.optim.Adam(layer.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler(target, enabled=precision == "fp16")
    weights = torch.linspace(-1.0, 1.0, x.numel(), device=target).view(x.shape)
    skipped = 0
    for _ in range(3):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(target, dtype=DTYPES[precision]):
            kv = layer.project_kv(memory) if memory is not None else None
            out = layer.attend(x, ctx, kv)
            terms = [t for t in layer.aux_terms().values() if t.requires_grad]
        assert out.dtype in (DTYPES[precision], torch.float32) and torch.isfinite(out[~ctx.pad_mask]).all()
        loss = (out.float() * weights).mean() + sum(t.float() for t in terms)
        scale = scaler.get_scale() if scaler.is_enabled() else 1.0
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        skipped += scaler.is_enabled() and scaler.get_scale() < scale
    assert skipped <= 1, f"{skipped} of 3 fp16 steps overflowed at base size"
    assert all(torch.isfinite(p).all() for p in layer.parameters())
