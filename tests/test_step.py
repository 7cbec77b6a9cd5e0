"""The training step that reads nothing back from the device (headlab.engine.step, the loss
statistics of headlab.engine.aux_loss): the same loss, normalisation and statistics as
OpenNMT-py 3.5.1, with the device's values read once per report. Whole-step counts of host
syncs: tests/test_dispatch_counts.py."""
from __future__ import annotations

import pickle

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import headcases as hc
from headlab.bench.dispatch import DispatchCount


class Copies(TorchDispatchMode):
    """Every tensor copy (``aten._to_copy``) with its target device and ``non_blocking``."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten._to_copy.default:
            self.seen.append((kwargs.get("device"), kwargs.get("non_blocking", False)))
        return func(*args, **kwargs)


def _case(name: str = "learned"):
    model, opt, vocab = hc.build_case(name)
    src, src_len, tgt = hc.make_batch(model, vocab)
    return model.train(), opt, vocab, {"src": src, "srclen": src_len, "tgt": tgt}


def test_the_batch_moves_without_waiting_and_keeps_its_host_counts():
    """OnDeviceDatasetIter: every tensor to the device with non_blocking (the DataLoader pins
    it), upstream's host-only entries left alone, and the target and the source words kept
    on the host for the trainer."""
    import headlab.engine.plugin  # noqa: F401
    from headlab.engine.step import HOST_KEY
    from onmt.inputters.dynamic_iterator import OnDeviceDatasetIter

    *_, batch = _case()
    tgt = batch["tgt"]
    batch["cid"] = ["corpus_1"] * 3
    with Copies() as copies:
        (moved, bucket), = OnDeviceDatasetIter([(dict(batch), 7)], torch.device("meta"))
    assert bucket == 7 and sorted(copies.seen, key=str) == [(torch.device("meta"), True)] * 3
    assert {key: value.device.type for key, value in moved.items() if key in ("src", "srclen", "tgt")} == \
        {"src": "meta", "srclen": "meta", "tgt": "meta"}
    assert moved["cid"] == ["corpus_1"] * 3
    assert moved[HOST_KEY]["tgt"] is tgt and moved[HOST_KEY]["src_words"] == 7 + 1 + 4


def test_the_normalisation_is_counted_on_the_host_as_upstream_counts_it():
    """Trainer._accum_batches: with the host tensors kept, the device's target is never read
    (here it has no values: a read would raise); the same normalisation as upstream's, for
    tokens and sentences, with accumulation."""
    import onmt.trainer
    from headlab.engine import compat
    from headlab.engine.step import HOST_KEY

    model, opt, vocab, batch = _case()
    opt.data = {}                       # build_trainer reads the validation transforms there
    trainer = onmt.trainer.build_trainer(opt, -1, model, vocab, hc.optimizer(model, opt))
    upstream = compat.upstream(onmt.trainer.Trainer, "_accum_batches")
    second = dict(batch, tgt=batch["tgt"][:2])
    # by hand: targets of 5, 2 and 5 tokens after BOS (headcases.make_batch), the first two
    # again, minus one EOS per sentence; or the 3 + 2 sentences
    for norm_method, by_hand in (("tokens", 12 - 3 + 7 - 2), ("sents", 3 + 2)):
        trainer.norm_method = norm_method
        trainer.accum_count_l = [2]
        expected = list(upstream(trainer, [(batch, 0), (second, 0)]))
        on_device = [({**b, "tgt": b["tgt"].to("meta"), HOST_KEY: {"tgt": b["tgt"]}}, 0) for b in (batch, second)]
        found = list(trainer._accum_batches(on_device))
        assert [norm for _, norm in found] == [norm for _, norm in expected]
        assert [len(group) for group, _ in found] == [2] and found[0][1] == by_hand


def test_the_device_loss_is_upstreams_loss_with_upstreams_statistics():
    """AuxLossCompute off the CPU fast path: OpenNMT-py's ops, so the same loss bit for bit;
    its statistics (device tensors until read) equal upstream's ``.item()`` values exactly;
    with label smoothing too."""
    from headlab.engine import xent
    from onmt.utils.loss import LossCompute

    model, opt, vocab, batch = _case()
    compute = hc.loss_compute(model, opt, vocab)
    out, attns = model(batch["src"], batch["tgt"], batch["srclen"])
    for smoothing, trunc in ((0.0, (0, None)), (0.1, (0, None))):
        compute.criterion.label_smoothing = smoothing
        assert xent.plain(compute)
        loss, stats = compute._device_xent(batch, out, *trunc)
        reference, expected = LossCompute.forward(compute, batch, out, attns, *trunc)
        assert torch.equal(loss, reference)
        assert isinstance(stats._sums["loss"], torch.Tensor)           # not read back yet
        assert (stats.loss, stats.n_words, stats.n_correct, stats.n_sents, stats.n_batchs) == \
            (expected.loss, expected.n_words, expected.n_correct, expected.n_sents, expected.n_batchs)
        assert type(stats.n_words) is int and type(stats.loss) is float


def test_device_sums_add_up_without_a_read_and_are_read_back_once():
    """Statistics.update adds device tensors without reading them; the first read of any sum
    reads them all in one transfer (one ``stack``, no scalar read); the sums equal upstream's
    Python sums of the same values, in the same order, exactly; pickling (another process's
    report) reads them first."""
    import onmt.utils
    from headlab.engine.aux_loss import AuxStatistics
    from onmt.utils.statistics import Statistics as Upstream

    torch.manual_seed(0)
    losses = (torch.rand(40) * 1e3).float()
    words = torch.randint(1, 500, (40,))
    report, reference = onmt.utils.Statistics(), Upstream()
    assert type(report) is AuxStatistics
    batches = [onmt.utils.Statistics(loss=loss.double(), n_batchs=1, n_sents=3, n_words=n, n_correct=n // 2)
               for loss, n in zip(losses, words)]
    with DispatchCount() as adding:
        for stats in batches:
            report.update(stats)
    assert adding.syncs == 0
    for loss, n in zip(losses, words):
        reference.update(Upstream(loss=loss.item(), n_batchs=1, n_sents=3, n_words=n.item(),
                                  n_correct=(n // 2).item()))
    with DispatchCount() as reading:
        found = (report.xent(), report.ppl(), report.accuracy(), report.n_sents, report.n_batchs)
    assert reading.syncs == 0 and reading.by_op.get("aten.stack.default") == 1
    assert found == (reference.xent(), reference.ppl(), reference.accuracy(), 120, 40)
    pending = onmt.utils.Statistics(loss=torch.tensor(2.5, dtype=torch.float64), n_words=torch.tensor(4))
    restored = pickle.loads(pickle.dumps(pending))
    assert restored._sums["loss"] == 2.5 and restored.n_words == 4 and not isinstance(restored._sums["n_words"],
                                                                                      torch.Tensor)


@pytest.mark.parametrize("update_n_src_words", [False, True])
def test_update_adds_source_words_only_when_asked_as_upstream(update_n_src_words):
    import onmt.utils
    total, part = onmt.utils.Statistics(), onmt.utils.Statistics(n_words=torch.tensor(3))
    part.n_src_words = 11
    total.update(part, update_n_src_words)
    assert (total.n_src_words, total.n_words) == (11 if update_n_src_words else 0, 3)



def _train_on_the_device(steps: int, upstream: bool, case: str, head_mask: str = ""):
    """``steps`` optimizer steps (after a first one) of a tiny model on the simulated device
    as the trainer runs them (the data worker's batches through ``OnDeviceDatasetIter``, ``_accum_batches``,
    ``_gradient_accumulation``), then one report's read of its statistics. ``upstream``:
    OpenNMT-py 3.5.1's three functions and its loss statistics; ``head_mask``: the encoder's
    pruned heads (``-enc_head_mask``, paper D's pruned fine-tune). Returns the waits of the
    steps, the waits of the report, and the report's numbers."""
    import onmt.trainer
    import onmt.utils
    from simdevice import SimulatedDevice
    from headlab.engine import compat, xent
    from onmt.inputters.dynamic_iterator import OnDeviceDatasetIter

    model, opt, vocab, batch = _case(case)
    model.encoder.set_head_mask(head_mask)
    opt.data = {}
    batches = [(dict(batch), 0) for _ in range(1 + steps)]
    Trainer = onmt.trainer.Trainer
    functions = {"iterate": OnDeviceDatasetIter.__iter__, "accumulate": Trainer._accum_batches,
                 "step": Trainer._gradient_accumulation}
    if upstream:
        functions = {"iterate": compat.upstream(OnDeviceDatasetIter, "__iter__"),
                     "accumulate": compat.upstream(Trainer, "_accum_batches"),
                     "step": compat.upstream(Trainer, "_gradient_accumulation")}
    plain = xent.plain
    xent.plain = (lambda compute: False) if upstream else plain
    mode = SimulatedDevice()
    try:
        with mode:
            model.to("cuda")
            # torch's default Adam (fused Adam refuses the simulated device); the step
            # counters it reads stay on the host, as on CUDA
            optim = hc.optimizer(model, opt)
            trainer = onmt.trainer.build_trainer(opt, -1, model, vocab, optim)
            model.to("cuda")        # the loss's generator, moved to the CPU by build_trainer here
            total, report = onmt.utils.Statistics(), onmt.utils.Statistics()
            iterator = OnDeviceDatasetIter(batches, torch.device("cuda"))
            for number, (group, normalization) in enumerate(
                    functions["accumulate"](trainer, functions["iterate"](iterator))):
                functions["step"](trainer, group, normalization, total, report)
                if number == 0:
                    # the model's move and the first step's once-per-device constants (the
                    # fixed heads' span table, Adam's state) are not the steps' waits
                    del mode.waits[:]
            stepping = list(mode.waits)
            numbers = (report.xent(), report.accuracy(), report.n_words, report.n_src_words)
            reading = mode.waits[len(stepping):]
    finally:
        xent.plain = plain
    return stepping, reading, numbers


@pytest.mark.parametrize("case", ["learned", "fixed", "syntax", "lpea_learned", "stock_decoder"])
def test_a_training_step_on_the_device_never_waits_for_it(case, monkeypatch):
    """On the simulated CUDA device (tests/simdevice.py: every operation that would make the
    host wait is recorded), three training steps as a sitting's trainer runs them:
    OpenNMT-py 3.5.1 waits ten times a step (three blocking batch copies, the normalisation,
    the source words twice, four loss statistics); headlab's never, and its report reads
    every sum in one transfer. The report's numbers are upstream's, exactly. Cases
    (tests/headcases.py): learned heads; fixed and syntax heads at every site, with the
    encoder's source-feature columns (word boundaries, parses); the fused attention path,
    a GPU's."""
    from headlab.heads.executor import PATH_VARIABLE

    monkeypatch.setenv(PATH_VARIABLE, "fused")
    upstream_steps, upstream_report, upstream_numbers = _train_on_the_device(3, upstream=True, case=case)
    steps, report, numbers = _train_on_the_device(3, upstream=False, case=case)
    assert len(upstream_steps) == 3 * 10, upstream_steps
    assert sorted(set(upstream_steps)) == ["aten._local_scalar_dense.default", "aten.masked_select.default",
                                           "blocking copy to the device"]
    assert steps == [] and report == ["tolist"]
    assert upstream_report == []
    assert numbers == upstream_numbers


def test_a_pruned_models_training_step_on_the_device_never_waits_for_it(monkeypatch):
    """Paper D's pruned fine-tune (``-enc_head_mask``: the pruned heads' parameters put back
    after every optimizer step, headlab.heads.prune.FrozenHeads) on the simulated CUDA device:
    its steps wait for the device no more than the same model's without a mask (never). That
    they stay frozen: tests/test_paper_D.py, under every optimizer OpenNMT-py builds."""
    from headlab.heads.executor import PATH_VARIABLE

    monkeypatch.setenv(PATH_VARIABLE, "fused")
    steps, report, _ = _train_on_the_device(3, upstream=False, case="stock_decoder", head_mask="1100.0011")
    assert steps == [] and report == ["tolist"]


#: ``headlab train`` with OpenNMT-py's own batch move, accumulation and step put back
UPSTREAM_STEP_TRAIN = """
import sys
import headlab.engine.plugin
import onmt.trainer
from headlab.engine import compat
from onmt.inputters.dynamic_iterator import OnDeviceDatasetIter
for owner, name in ((OnDeviceDatasetIter, "__iter__"), (onmt.trainer.Trainer, "_accum_batches"),
                    (onmt.trainer.Trainer, "_gradient_accumulation")):
    setattr(owner, name, compat.upstream(owner, name))
from headlab.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_training_with_a_data_worker_logs_and_learns_what_upstreams_step_does(tmp_path):
    """``headlab train`` of the toy model with a data worker (``OnDeviceDatasetIter``, the
    host counts) against the same training with OpenNMT-py's three functions: every training
    and validation line of the log (throughput aside) and every weight are the same."""
    import re
    import subprocess
    import sys

    from test_onmt_run import toy_training

    logged, weights = {}, {}
    for label, command in (("headlab", ["-m", "headlab.cli"]), ("upstream", ["-c", UPSTREAM_STEP_TRAIN])):
        config = toy_training(tmp_path, name=label, model=label, train_steps=6, report_every=1, valid_steps=3,
                              num_workers=1, save_checkpoint_steps=6)
        result = subprocess.run([sys.executable, *command, "train", "-config", str(config)],
                                capture_output=True, text=True)
        assert result.returncode == 0, result.stderr[-2000:]
        logged[label] = [re.sub(r"; *[0-9]+/ *[0-9]+ tok/s.*", "", line.split("]", 1)[1])
                         for line in (result.stdout + result.stderr).splitlines()
                         if " Step " in line or "Validation" in line]
        weights[label] = torch.load(tmp_path / label / "model_step_6.pt", weights_only=False)["model"]
    assert len(logged["headlab"]) == 6 + 2 * 2 and logged["headlab"] == logged["upstream"]
    assert weights["headlab"].keys() == weights["upstream"].keys()
    assert all(torch.equal(weights["headlab"][name], weights["upstream"][name]) for name in weights["headlab"])
