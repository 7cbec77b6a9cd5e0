"""The one path for model-side auxiliary loss terms (paper B's KL, paper D's L0).

Head kinds and mixers report named terms of their last forward (``aux_terms()``: DHICM
``kl``, hard-concrete gates ``l0``); the encoder and decoder sum them per name. This module
weighs them into OpenNMT-py's training loss:

    L = L_xent + Σ_name sign_name · λ_name · term_name          (λ from the options below)

=======  ==============  =====  ==========================================================
term     option          sign   why
=======  ==============  =====  ==========================================================
``kl``   ``-lambda_kl``  −1     paper B eq. 5: L = L_c − λ L_KL (KL to uniform maximised)
``l0``   ``-lambda_l0``  +1     Voita et al. 2019 / paper D: L = L_xent + λ L_C
=======  ==============  =====  ==========================================================

Normalisation. OpenNMT-py sums the cross-entropy over a sub-batch and divides the gradient
by ``normalization``, the token (or sentence) count of all accumulated sub-batches
(``Trainer._accum_batches``). Each term here is a mean (KL: over the real tokens of its
layer; L0: a property of the model), so it is multiplied by the sub-batch's ``share`` of
that count, computed exactly as the trainer does: the step then weighs λ·term against the
mean cross-entropy, for any ``accum_count`` and either ``normalization``.

A term without an entry in :data:`AUX_TERMS` has weight 0: a statistic, logged only (paper
C's ``rhe_redundant`` / ``rhe_heads`` from :mod:`headlab.heads.rhe`, with their ratio
``rhe_share``, the share of RHE heads labelled redundant: :data:`RATIOS`).

The terms' statistics, and on a GPU the loss statistics too (:mod:`headlab.engine.step`),
stay device tensors until a report reads them (one host sync per report, not one per term
and sub-batch). Terms are added **after** OpenNMT-py's own loss, so ``Statistics.loss`` (perplexity, the
early-stopping criterion, validation) stays pure cross-entropy; validation also drops label
smoothing (OpenNMT-py 3.5.1 would keep it), so validation cross-entropy is the true NLL,
comparable across models trained with different label smoothing. Each term is logged on its
own ``aux:`` line (mean per share, i.e. per target token with ``normalization tokens``)
beside every training report, and in validation; they never enter the loss in validation.
"""
from __future__ import annotations

import onmt.utils
import torch
from onmt.utils.loss import LossCompute
from onmt.utils.logging import logger
from onmt.utils.statistics import Statistics

from headlab.engine import xent

#: term name -> (option holding its weight, sign in the loss)
AUX_TERMS = {"kl": ("lambda_kl", -1.0), "l0": ("lambda_l0", 1.0)}
#: logged ratios of two terms' means (terms without an AUX_TERMS entry are statistics of
#: weight 0): paper C's share of RHE heads labelled redundant (headlab.heads.rhe)
RATIOS = {"rhe_share": ("rhe_redundant", "rhe_heads")}
#: ``Statistics`` sums that may stay on the device between reports (``n_src_words`` last:
#: ``update`` adds it only when asked, as upstream)
SUMMED = ("loss", "n_words", "n_correct", "n_src_words")


def model_terms(model) -> dict[str, torch.Tensor]:
    """Named terms of the model's last forward: encoder's and decoder's, added per name."""
    from headlab.heads.base import sum_terms
    parts = [part.aux_terms() for part in (getattr(model, "encoder", None), getattr(model, "decoder", None))
             if hasattr(part, "aux_terms")]
    return sum_terms(parts)


def weights(opt) -> dict[str, float]:
    """term -> signed weight from the options."""
    return {name: sign * float(getattr(opt, option, 0.0) or 0.0) for name, (option, sign) in AUX_TERMS.items()}


class AuxLossCompute(LossCompute):
    """OpenNMT-py's LossCompute plus the weighted auxiliary terms (see module doc)."""

    @classmethod
    def from_opts(cls, opt, model, vocab, train=True):
        compute = super().from_opts(opt, model, vocab, train)
        object.__setattr__(compute, "_model", model)     # not a sub-module of the loss
        if not train and hasattr(compute.criterion, "label_smoothing"):
            # OpenNMT-py 3.5.1 validates with the training criterion, label smoothing
            # included: validation cross-entropy and perplexity would then depend on the
            # label-smoothing value, and model selection across a grid of them (paper B
            # Table 2) would favour the least smoothing. Validation is the true NLL.
            compute.criterion.label_smoothing = 0.0
        compute.norm_method = getattr(opt, "normalization", "sents")
        compute.aux_weights = weights(opt)
        return compute

    def _cpu_xent(self, batch, output, trunc_start, trunc_size):
        """``LossCompute.forward`` of the plain case (:func:`xent.applies`): the same loss
        and statistics, computed by :mod:`headlab.engine.xent` on the real target tokens."""
        if trunc_size is None:
            trunc_size = batch["tgt"].size(1) - trunc_start
        first, last = trunc_start + self.tgt_shift_index, trunc_start + trunc_size
        target = batch["tgt"][:, first:last, 0].reshape(-1)
        output = output[:, trunc_start:last, :].reshape(-1, output.size(2))
        loss, correct, words = xent.generator_xent(self.generator, output, target, self.padding_idx,
                                                   self.criterion.label_smoothing)
        n_sents = len(batch["srclen"]) if trunc_start == 0 else 0
        stats = onmt.utils.Statistics(loss=loss.item(), n_batchs=1 if n_sents else 0, n_sents=n_sents,
                                      n_words=words, n_correct=correct)
        return loss, stats

    def share(self, batch) -> torch.Tensor | int:
        """This sub-batch's part of the trainer's ``normalization`` (same count): a count of
        sentences, or a device tensor of target tokens (never read back here: a host sync)."""
        if self.norm_method == "tokens":
            return batch["tgt"][:, 1:, 0].ne(self.padding_idx).sum() - len(batch["tgt"])
        return len(batch["tgt"])

    def _device_xent(self, batch, output, trunc_start, trunc_size):
        """``LossCompute.forward`` of the plain case (:func:`xent.plain`) elsewhere (a GPU):
        upstream's ops for the loss, its statistics left as device tensors: upstream reads
        four values back here (the loss, ``masked_select``'s size, the correct and the real
        tokens), each a wait for the device in every sub-batch."""
        if trunc_size is None:
            trunc_size = batch["tgt"].size(1) - trunc_start
        first, last = trunc_start + self.tgt_shift_index, trunc_start + trunc_size
        flat_tgt = batch["tgt"][:, first:last, 0].contiguous().view(-1)
        scores = self.generator(self._bottle(output[:, trunc_start:last, :].contiguous()))
        loss = self.criterion(scores.to(torch.float32), flat_tgt)
        n_sents = len(batch["srclen"]) if trunc_start == 0 else 0
        non_padding = flat_tgt.ne(self.padding_idx)
        correct = scores.max(1)[1].eq(flat_tgt).logical_and(non_padding).sum()
        # float64: the device sums what upstream sums as Python floats, in the same order
        stats = onmt.utils.Statistics(loss=loss.detach().double(), n_batchs=1 if n_sents else 0, n_sents=n_sents,
                                      n_words=non_padding.sum(), n_correct=correct)
        return loss, stats

    def forward(self, batch, output, attns, trunc_start=0, trunc_size=None):
        if xent.applies(self, output):
            loss, stats = self._cpu_xent(batch, output, trunc_start, trunc_size)
        elif xent.plain(self):
            loss, stats = self._device_xent(batch, output, trunc_start, trunc_size)
        else:
            loss, stats = super().forward(batch, output, attns, trunc_start, trunc_size)
        terms = model_terms(self._model)
        if not terms:
            return loss, stats
        share = self.share(batch)
        for name, value in terms.items():
            weight = self.aux_weights.get(name, 0.0)
            if weight and self._model.training and loss is not None:
                loss = loss + weight * value * share
            # kept on the device until a report reads it (AuxStatistics.aux_means): a float()
            # here would wait for the device on every sub-batch
            stats.aux[name] = stats.aux.get(name, 0.0) + value.detach().float() * share
        stats.aux_share += share
        return loss, stats


def _summed(name: str) -> property:
    """A statistic that may hold a device tensor: reading one reads every pending one back
    (reading one already on the host, as the trainer's source words, reads nothing)."""
    def get(self):
        if isinstance(self._sums[name], torch.Tensor):
            self.settle()
        return self._sums[name]

    def put(self, value):
        self._sums[name] = value
    return property(get, put, doc=f"``Statistics.{name}``, read back from the device when read")


class AuxStatistics(Statistics):
    """Statistics that also sum the auxiliary terms (per share) and log them apart, and whose
    sums may be device tensors (:meth:`AuxLossCompute._device_xent`): :meth:`update` adds
    them on the device; the first read of any (a report, validation's scores, pickling for
    another process) reads them all back in one transfer."""

    loss, n_words, n_correct, n_src_words = (_summed(name) for name in SUMMED)

    def __init__(self, *args, **kwargs):
        self._sums = {}
        super().__init__(*args, **kwargs)
        self.aux: dict[str, float] = {}
        self.aux_share = 0

    def settle(self) -> None:
        """Every device sum read back at once (one host sync), as Python numbers."""
        pending = [name for name, value in self._sums.items() if isinstance(value, torch.Tensor)]
        if not pending:
            return
        values = torch.stack([self._sums[name].double() for name in pending]).tolist()
        for name, value in zip(pending, values):
            # counts are exact in float64 (below 2**53)
            self._sums[name] = value if name == "loss" else int(value)

    def __getstate__(self):
        self.settle()
        return self.__dict__

    def update(self, stat, update_n_src_words=False):
        """``Statistics.update``, adding device sums without reading them back."""
        sums = getattr(stat, "_sums", None) or {name: getattr(stat, name) for name in SUMMED}
        for name in SUMMED[:-1] + (("n_src_words",) if update_n_src_words else ()):
            self._sums[name] = self._sums[name] + sums[name]       # never in place: sums are shared
        self.n_batchs += stat.n_batchs
        self.n_sents += stat.n_sents
        self.computed_metrics = stat.computed_metrics
        for name, value in getattr(stat, "aux", {}).items():
            self.aux[name] = self.aux.get(name, 0.0) + value
        self.aux_share += getattr(stat, "aux_share", 0)

    def aux_means(self) -> dict[str, float]:
        """Per-share means of the terms, read back from the device here, once per report."""
        share = max(float(self.aux_share), 1.0)
        means = {name: float(value) / share for name, value in self.aux.items()}
        for name, (num, den) in RATIOS.items():
            if means.get(den):
                means[name] = means.get(num, 0.0) / means[den]
        return dict(sorted(means.items()))

    def aux_line(self) -> str:
        return " ".join(f"{name}={value:.4f}" for name, value in self.aux_means().items())

    def output(self, step, num_steps, learning_rate, start):
        super().output(step, num_steps, learning_rate, start)
        if self.aux:
            logger.info("Step %d aux: %s", step, self.aux_line())

    def log_tensorboard(self, prefix, writer, learning_rate, patience, step):
        super().log_tensorboard(prefix, writer, learning_rate, patience, step)
        for name, value in self.aux_means().items():
            writer.add_scalar(f"{prefix}/aux_{name}", value, step)
