"""The generator's chunked cross-entropy on CPU (headlab.engine.xent) against OpenNMT-py's
own loss: the same summed loss, statistics and gradients, padding skipped."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from headlab.engine import xent


def _data(rows=300, d=16, vocab=50, pad=1, seed=0):
    gen = torch.Generator().manual_seed(seed)
    generator = torch.nn.Linear(d, vocab)
    with torch.no_grad():
        generator.weight.copy_(torch.randn(vocab, d, generator=gen))
        generator.bias.copy_(torch.randn(vocab, generator=gen))
    hidden = torch.randn(rows, d, generator=gen, requires_grad=True)
    target = torch.randint(0, vocab, (rows,), generator=gen)
    target[::7] = pad
    return generator, hidden, target


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("chunk", [7, 64, 1000])        # several chunks, a ragged last one, one chunk
def test_loss_count_and_gradients_equal_cross_entropy(monkeypatch, smoothing, chunk):
    generator, hidden, target = _data()
    monkeypatch.setattr(xent, "chunk_rows", lambda vocab: chunk)
    loss, correct, words = xent.generator_xent(generator, hidden, target, padding_idx=1, smoothing=smoothing)
    grads = torch.autograd.grad(loss * 0.37, (hidden, generator.weight, generator.bias))

    logits = generator(hidden)
    ref = F.cross_entropy(logits, target, ignore_index=1, reduction="sum", label_smoothing=smoothing)
    ref_grads = torch.autograd.grad(ref * 0.37, (hidden, generator.weight, generator.bias))
    keep = target.ne(1)
    assert loss.item() == pytest.approx(ref.item(), rel=1e-6)
    assert words == int(keep.sum()) <= 300 - 43           # every 7th row at least is padding
    assert correct == int(((logits.argmax(1) == target) & keep).sum())
    for ours, theirs in zip(grads, ref_grads):
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    assert grads[0][~keep].abs().max() == 0          # padding rows get no gradient


def test_no_gradient_work_under_no_grad():
    generator, hidden, target = _data()
    with torch.no_grad():
        loss, _, _ = xent.generator_xent(generator, hidden, target, padding_idx=1)
    assert not loss.requires_grad
    ref = F.cross_entropy(generator(hidden), target, ignore_index=1, reduction="sum")
    assert loss.item() == pytest.approx(ref.item(), rel=1e-6)


def _model_and_batch(label_smoothing):
    import headlab.engine.plugin  # noqa: F401
    from headlab.engine.aux_loss import AuxLossCompute
    from headlab.engine.model import build_model, model_opt, toy_vocabs

    torch.manual_seed(0)
    opt = model_opt(hidden_size=16, heads=4, transformer_ff=32, enc_layers=1, dec_layers=1, enc_heads="4L",
                    dropout=0.0, attention_dropout=0.0, extra=["-label_smoothing", str(label_smoothing)])
    opt.param_init = 0.3
    vocabs = toy_vocabs(40)
    model = build_model(opt, vocabs)
    compute = AuxLossCompute.from_opts(opt, model, vocabs["tgt"], train=True)
    gen = torch.Generator().manual_seed(1)
    src = torch.randint(4, 40, (5, 9, 1), generator=gen)
    tgt = torch.randint(4, 40, (5, 8, 1), generator=gen)
    src_len = torch.tensor([9, 7, 5, 9, 3])
    tgt[1, 6:], tgt[2, 4:], tgt[4, 2:] = 1, 1, 1           # padded targets
    src[1, 7:], src[2, 5:], src[4, 3:] = 1, 1, 1
    batch = {"src": src, "tgt": tgt, "srclen": src_len}
    return model, compute, batch


@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
def test_training_loss_equals_opennmt_losscompute(monkeypatch, label_smoothing):
    """AuxLossCompute takes the chunked path for a CPU float32 model; OpenNMT-py's own
    LossCompute.forward (forced by switching the path off) gives the same loss, the same
    Statistics and the same parameter gradients."""
    results = []
    for fast in (True, False):
        model, compute, batch = _model_and_batch(label_smoothing)
        assert xent.applies(compute, torch.zeros(1))
        monkeypatch.setattr(xent, "applies", lambda compute, output, fast=fast: fast)
        out, attns = model(batch["src"], batch["tgt"], batch["srclen"])
        loss, stats = compute(batch, out, attns)
        (loss / 17.0).backward()
        results.append((loss.item(), stats, {n: p.grad.clone() for n, p in model.named_parameters()}))
    (fast_loss, fast_stats, fast_grads), (ref_loss, ref_stats, ref_grads) = results
    assert fast_loss == pytest.approx(ref_loss, rel=1e-6)
    assert (fast_stats.n_words, fast_stats.n_correct, fast_stats.n_sents) == \
        (ref_stats.n_words, ref_stats.n_correct, ref_stats.n_sents)
    assert fast_stats.loss == pytest.approx(ref_stats.loss, rel=1e-6)
    for name, grad in ref_grads.items():
        torch.testing.assert_close(fast_grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_other_losses_keep_opennmt_path():
    model, compute, _ = _model_and_batch(0.0)
    assert xent.applies(compute, torch.zeros(1))
    assert not xent.applies(compute, torch.zeros(1, dtype=torch.float16))
    compute.lambda_coverage = 1.0
    assert not xent.applies(compute, torch.zeros(1))
