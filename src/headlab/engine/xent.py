"""The generator's cross-entropy on CPU: only real target tokens, in cache-sized chunks.

OpenNMT-py 3.5.1's ``LossCompute`` projects every target position of the padded batch
(padding included, ~13% of the rows of a `mini` batch) to the vocabulary, then runs
``CrossEntropyLoss`` and, for the accuracy statistic, ``max`` over that (rows x V) matrix:
five passes over a 25 MB array (``mini``: ~1,950 rows x 3.2k words) forward and backward,
the largest tensors of a step, which spill out of the cache and slow the job running
beside it. On CPU the output layer was ~35% of a `mini` training step.

Here the same loss is computed for the non-padding rows only, ``chunk`` rows at a time:
for each chunk the logits ``z = h Wᵀ + b``, their log-sum-exp, the loss and the
gradient of the logits (``softmax(z) − q``, q the smoothed target distribution) are
computed while the chunk is in cache, and the gradients of ``h``, ``W`` and ``b`` are
accumulated at once; backward only scales them by the incoming gradient. The loss is
``CrossEntropyLoss(reduction="sum", label_smoothing=ε)`` exactly (Szegedy et al. 2016:
``(1 − ε)·(lse − z_t) + ε·(lse − mean_j z_j)`` per token); the accuracy counts
``argmax z = t``. Results equal OpenNMT-py's up to float rounding (tests/test_xent.py).

Used by :class:`headlab.engine.aux_loss.AuxLossCompute` for float32 CPU models (outside
autocast) with a
plain linear generator (no copy attention, alignment, coverage or LM prior: :func:`plain`);
a GPU keeps OpenNMT-py's own ops (there with its statistics kept on the device), and every
other case OpenNMT-py's own path.
"""
from __future__ import annotations

import torch
from torch import Tensor

#: logits per chunk: 2^20 floats (4 MB) keep a chunk's (rows x V) block in L2/L3
CHUNK_ELEMENTS = 1 << 20


def chunk_rows(vocab_size: int) -> int:
    return max(8, CHUNK_ELEMENTS // max(1, vocab_size))


class LinearCrossEntropy(torch.autograd.Function):
    """Summed cross-entropy of ``h Wᵀ + b`` against ``target`` and its correct-argmax count."""

    @staticmethod
    def forward(ctx, hidden: Tensor, weight: Tensor, bias: Tensor | None, target: Tensor,
                smoothing: float, chunk: int, need_grad: bool):
        # need_grad comes from the caller: inside forward grad mode is off, and
        # ctx.needs_input_grad is True even under torch.no_grad() (validation)
        vocab = weight.shape[0]
        loss = hidden.new_zeros((), dtype=torch.float64)     # exact sum of float32 chunk sums
        correct = 0
        if need_grad:
            grad_hidden = torch.empty_like(hidden)
            grad_weight = torch.zeros_like(weight)
            grad_bias = torch.zeros_like(bias) if bias is not None else None
        for start in range(0, hidden.shape[0], chunk):
            h, t = hidden[start:start + chunk], target[start:start + chunk]
            z = torch.addmm(bias, h, weight.t()) if bias is not None else h @ weight.t()
            top, pred = z.max(1)
            correct += int((pred == t).sum())
            z_t = z.gather(1, t.unsqueeze(1)).squeeze(1)
            z_mean = z.mean(1) if smoothing else None
            z.sub_(top.unsqueeze(1)).exp_()                 # z is now exp(z - max)
            total = z.sum(1)
            lse = total.log() + top
            nll = lse - z_t
            rows = (1.0 - smoothing) * nll + smoothing * (lse - z_mean) if smoothing else nll
            loss += rows.sum()
            if need_grad:
                z.div_(total.unsqueeze(1))                  # softmax
                z.scatter_add_(1, t.unsqueeze(1), z.new_full((len(t), 1), smoothing - 1.0))
                if smoothing:
                    z.sub_(smoothing / vocab)               # softmax - q
                torch.mm(z, weight, out=grad_hidden[start:start + chunk])
                grad_weight.addmm_(z.t(), h)
                if grad_bias is not None:
                    grad_bias += z.sum(0)
        if need_grad:
            ctx.save_for_backward(grad_hidden, grad_weight, grad_bias)
        ctx.has_bias = bias is not None
        loss = loss.to(hidden.dtype)
        count = torch.tensor(correct)
        ctx.mark_non_differentiable(count)
        return loss, count

    @staticmethod
    def backward(ctx, grad_loss: Tensor, _grad_count):
        grad_hidden, grad_weight, grad_bias = ctx.saved_tensors
        return (grad_hidden * grad_loss, grad_weight * grad_loss,
                grad_bias * grad_loss if ctx.has_bias else None, None, None, None, None)


def generator_xent(generator: torch.nn.Linear, output: Tensor, target: Tensor, padding_idx: int,
                   smoothing: float = 0.0) -> tuple[Tensor, int, int]:
    """(summed loss, correct predictions, real tokens) of ``generator`` on the decoder
    ``output`` (rows x d) against ``target`` (rows), padding rows skipped."""
    keep = target.ne(padding_idx).nonzero().squeeze(1)
    hidden, gold = output.index_select(0, keep), target.index_select(0, keep)
    need_grad = torch.is_grad_enabled() and any(
        x is not None and x.requires_grad for x in (hidden, generator.weight, generator.bias))
    loss, correct = LinearCrossEntropy.apply(hidden, generator.weight, generator.bias, gold,
                                             float(smoothing), chunk_rows(generator.weight.shape[0]),
                                             need_grad)
    return loss, int(correct), int(keep.numel())


def plain(compute) -> bool:
    """Whether OpenNMT-py's ``LossCompute`` is its plain case: a linear generator and the
    cross-entropy, nothing added (no copy attention, alignment, coverage or LM prior)."""
    return (not compute.copy_attn and not compute.lambda_align and not compute.lambda_coverage
            and compute.lm_generator is None and compute.lm_prior_model is None
            and type(compute.criterion) is torch.nn.CrossEntropyLoss
            and compute.criterion.reduction == "sum"
            and type(compute.generator) is torch.nn.Linear)


def applies(compute, output: Tensor) -> bool:
    """Whether OpenNMT-py's ``LossCompute`` here is the plain case this module replaces."""
    return (output.device.type == "cpu" and output.dtype == torch.float32
            and not torch.is_autocast_enabled("cpu")     # mixed precision: OpenNMT-py's own path
            and plain(compute))
