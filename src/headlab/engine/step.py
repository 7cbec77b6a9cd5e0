"""OpenNMT-py's training step, without waiting for the device for its report's numbers.

On a GPU, OpenNMT-py 3.5.1 makes the host wait for the device in every step, only to count
tokens and sum the loss for its reports:

* the batch's move to the GPU (``OnDeviceDatasetIter``: ``tensor.to(device)`` per tensor, a
  blocking copy, which waits for every kernel queued before it);
* the normalisation (``Trainer._accum_batches``, trainer.py:244: the target tokens, ``.item()``);
* the source words, twice per sub-batch (``_gradient_accumulation``, trainer.py:483-484);
* the loss statistics (loss.py:384, 400-401): the loss, the correct tokens (``masked_select``,
  whose output size is read back, then ``.item()``) and the target words.

Each wait empties the device's queue: the host stops launching until the device has caught
up, at the batch and again after the forward, so the device's work no longer runs under
the host's launching of the next kernels. Here none of them is left in a step:

* :func:`iter_on_device` moves the batch with ``non_blocking=True`` (upstream's
  ``DataLoader`` pins it) and keeps what the trainer counts on the host under
  :data:`HOST_KEY`: the target tensor as built on the CPU and the source words (an int);
* :func:`accum_batches` and :func:`gradient_accumulation` are upstream's, counting the
  normalisation and the source words there, the same integers;
* the loss statistics stay device tensors until a report reads them, once per report
  (:class:`headlab.engine.aux_loss.AuxLossCompute` and ``AuxStatistics``).

Without a data worker (``-num_workers 0``) OpenNMT-py builds the batch on the device
directly: no host tensors, and the step reads the counts back as upstream does. Nothing
that is trained changes: the same normalisation, the same loss ops, the same statistics.
"""
from __future__ import annotations

import sys
import traceback

import torch

#: the batch's key for what was counted on the host (the batch dict is OpenNMT-py's)
HOST_KEY = "headlab_host"
#: batch entries upstream's ``OnDeviceDatasetIter`` leaves on the host
STAYS_ON_HOST = ("src_ex_vocab", "cid", "ind_in_bucket", "cid_line_number", HOST_KEY)


def host_target(batch):
    """The batch's target as built on the host where it was kept, else where it is."""
    return batch.get(HOST_KEY, batch)["tgt"]


def source_words(batch) -> int:
    host = batch.get(HOST_KEY, {})
    if "src_words" in host:
        return host["src_words"]
    return batch["srclen"].sum().item()         # a host sync where the batch is on the device


def iter_on_device(self):
    """``OnDeviceDatasetIter.__iter__``: upstream's, with copies that do not wait and the
    host-side counts kept (module doc)."""
    for tensor_batch, bucket_idx in self.data_iter:
        host = {"tgt": tensor_batch["tgt"]} if "tgt" in tensor_batch else {}
        if tensor_batch.get("srclen") is not None:
            host["src_words"] = int(tensor_batch["srclen"].sum())
        for key in tensor_batch.keys():
            if key not in STAYS_ON_HOST:
                tensor_batch[key] = tensor_batch[key].to(self.device, non_blocking=True)
        tensor_batch[HOST_KEY] = host
        yield tensor_batch, bucket_idx


def accum_batches(self, iterator):
    """``Trainer._accum_batches`` of OpenNMT-py 3.5.1, the target tokens counted on the host."""
    batches = []
    normalization = 0
    self.accum_count = self._accum_count(self.optim.training_step)
    for batch, bucket_idx in iterator:
        batches.append(batch)
        if self.norm_method == "tokens":
            num_tokens = host_target(batch)[:, 1:, 0].ne(self.train_loss.padding_idx).sum()
            normalization += num_tokens.item()
            normalization -= len(batch["tgt"])  # don't count for EOS
        else:
            normalization += len(batch["tgt"])
        if len(batches) == self.accum_count:
            yield batches, normalization
            self.accum_count = self._accum_count(self.optim.training_step)
            batches = []
            normalization = 0
    if batches:
        yield batches, normalization


def gradient_accumulation(self, true_batches, normalization, total_stats, report_stats):
    """``Trainer._gradient_accumulation`` of OpenNMT-py 3.5.1, the source words counted on
    the host (:func:`source_words`); everything else as upstream wrote it."""
    import onmt.utils
    from onmt.utils.logging import logger

    if self.accum_count > 1:
        self.optim.zero_grad(set_to_none=True)

    for batch in true_batches:
        target_size = batch["tgt"].size(1)
        # Truncated BPTT: reminder not compatible with accum > 1
        trunc_size = self.trunc_size if self.trunc_size else target_size

        src = batch["src"]
        src_len = batch["srclen"]
        if src_len is not None:
            words = source_words(batch)
            report_stats.n_src_words += words
            total_stats.n_src_words += words

        tgt_outer = batch["tgt"]

        bptt = False
        for j in range(0, target_size - 1, trunc_size):
            # 1. Create truncated target.
            tgt = tgt_outer[:, j: j + trunc_size, :]

            # 2. F-prop all but generator.
            if self.accum_count == 1:
                self.optim.zero_grad(set_to_none=True)
            try:
                with torch.cuda.amp.autocast(enabled=self.optim.amp):
                    model_out, attns = self.model(src, tgt, src_len, bptt=bptt, with_align=self.with_align)
                    bptt = True

                    # 3. Compute loss.
                    if self.zero_out_prompt_loss:
                        # The loss of the prompt will be set to zero.
                        batch = self.train_loss.ignore_prompt(batch)
                    loss, batch_stats = self.train_loss(batch, model_out, attns, trunc_start=j,
                                                        trunc_size=trunc_size)
                if loss is not None:
                    loss /= normalization
                    self.optim.backward(loss)

                total_stats.update(batch_stats)
                report_stats.update(batch_stats)

            except Exception as exc:
                trace_content = traceback.format_exc()
                if "CUDA out of memory" in trace_content:
                    logger.info("Step %d, cuda OOM - batch removed", self.optim.training_step)
                    torch.cuda.empty_cache()
                    if self.n_gpu > 1 and self.parallel_mode == "tensor_parallel":
                        torch.distributed.destroy_process_group()
                        sys.exit()
                else:
                    traceback.print_exc()
                    raise exc

            # If truncated, don't backprop fully.
            if self.model.decoder.state != {}:
                self.model.decoder.detach_state()

    # in case of multi step gradient accumulation,
    # update only after accum batches
    if self.n_gpu > 1 and self.parallel_mode == "data_parallel":
        grads = [p.grad.data for p in self.model.parameters() if p.requires_grad and p.grad is not None]
        onmt.utils.distributed.all_reduce_and_rescale_tensors(grads, float(self.n_gpu))

    self.optim.step()
