"""What a GPU pays for, counted on the CPU (headlab.bench.dispatch): aten ops (kernel launches)
and host syncs, for one attention layer on the fused path and for one whole training step.

* every kind and mixer, one encoder layer's forward + backward, with attention dropout 0.1
  and without: at most 3x ``8L``'s ops, the same count at every length and batch size (no
  loop over sentences, blocks or heads), and no host sync (``8L`` has none);
* one training step of a tiny model through headlab's patched OpenNMT-py trainer
  (``Trainer._gradient_accumulation``: forward, loss with the aux terms, backward, the
  optimizer's step): the ops do not grow with the number of parameter tensors (a fused
  Adam), and the host syncs are no more than stock OpenNMT-py's ``8L`` step's.
"""
from __future__ import annotations

import pytest
import torch

from headlab.bench.dispatch import SYNC_OPS, count, layer_count
from headlab.heads import HEAD_KINDS, HEAD_MIXERS
from headlab.heads.executor import PATH_VARIABLE

D, HEADS = 64, 8                  # op counts do not depend on the width: small and fast
SIZES = ((64, 2), (512, 2), (64, 16))
SPECS = [f"{1 if kind == 'Lwide' else 8}{kind}" for kind, cls in HEAD_KINDS.items() if "enc" in cls.sites
         and not kind.startswith("F")] + ["7Ftoken+1L", "7Fword+1L", "8Ftoken"] + [f"8L|{name}" for name in HEAD_MIXERS]


@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_every_kind_launches_at_most_three_times_8L_and_never_syncs(dropout):
    limits = {}
    for n, batch in SIZES:
        base = layer_count("8L", n, batch, dropout, d=D, heads=HEADS)
        assert base.syncs == 0
        for spec in SPECS:
            counted = layer_count(spec, n, batch, dropout, d=D, heads=HEADS)
            assert counted.syncs == 0, (spec, {k: v for k, v in counted.by_op.items() if "scalar" in k})
            assert counted.ops <= 3 * base.ops, (spec, n, batch, counted.ops, base.ops)
            limits.setdefault(spec, set()).add(counted.ops)
    growing = {spec: sorted(found) for spec, found in limits.items() if len(found) > 1}
    assert not growing, f"op counts that depend on the batch: {growing}"


def test_the_blocked_path_is_what_the_counts_are_against():
    # the blocked path loops over blocks and heads: its count grows with the batch (the
    # count above would catch a fused path that fell back to it)
    small = layer_count("8LPEA", 64, 2, path="blocked", d=D, heads=HEADS).ops
    large = layer_count("8LPEA", 512, 4, path="blocked", d=D, heads=HEADS).ops     # two blocks of sentences
    assert large > small


# -- one training step --------------------------------------------------------------------
def _trainer(enc_heads: str, layers: int, stock: bool = False, adam: str = "fused", upstream_step: bool = False):
    """One training step as a sitting runs it: the batch through the data worker's
    ``OnDeviceDatasetIter`` (here to the CPU), then ``Trainer._gradient_accumulation``
    (``upstream_step``: OpenNMT-py's own, as before headlab's patch)."""
    from headcases import FF, OPTIONS, make_batch, vocabs, feature_vocabs
    from headlab.engine import compat
    from headlab.engine.aux_loss import AuxLossCompute
    from headlab.engine.model import build_model, model_opt
    from headlab.heads.spec import feature_columns
    from onmt.inputters.dynamic_iterator import OnDeviceDatasetIter
    from onmt.trainer import Trainer
    from onmt.utils.optimizers import Optimizer

    torch.manual_seed(0)
    kinds = {} if stock else dict(decoder_type="headlab", dec_heads="4L", cross_heads="4L")
    opt = model_opt(encoder_type="transformer" if stock else "headlab", enc_heads=enc_heads, enc_layers=layers,
                    dec_layers=layers, hidden_size=32, heads=4, transformer_ff=FF, dropout=0.1,
                    attention_dropout=0.1, extra=[*OPTIONS, "-adam_impl", adam], **kinds)
    vocab = vocabs()
    columns = () if stock else feature_columns(opt.enc_heads)
    if columns:
        vocab = {**vocab, "src_feats": feature_vocabs(len(columns))}
    model = build_model(opt, vocab).train()
    src, src_len, tgt = make_batch(model, vocab)
    batch = {"src": src, "srclen": src_len, "tgt": tgt}
    if upstream_step:
        accumulate = compat.upstream(Trainer, "_gradient_accumulation")
    else:
        (batch, _), = OnDeviceDatasetIter([(batch, 0)], torch.device("cpu"))
        accumulate = Trainer._gradient_accumulation
    compute = AuxLossCompute.from_opts(opt, model, vocab["tgt"], train=True)
    trainer = Trainer(model, compute, compute, None, None, Optimizer.from_opt(model, opt), norm_method="tokens",
                      dropout=[0.1], attention_dropout=[0.1])
    normalization = int(tgt[:, 1:, 0].ne(1).sum())

    def step():
        import onmt.utils
        accumulate(trainer, [batch], normalization, onmt.utils.Statistics(), onmt.utils.Statistics())
    step()                       # Adam's state is created on the first step
    return step, model


def _step_count(enc_heads: str, layers: int, **kwargs):
    step, model = _trainer(enc_heads, layers, **kwargs)
    return count(step), len(list(model.parameters()))


STEP_SPECS = ["4L", "3Ftoken+1L", "3Fword+1L", "4L|dhicm", "4L|gate", "4DEA", "4LPEA", "4RelPos", "4Local",
              "4RHEdea", "4RHElpea", "4RHErel", "4RHEloc"]


def test_a_training_step_syncs_no_more_than_stock_opennmt(monkeypatch):
    monkeypatch.setenv(PATH_VARIABLE, "fused")          # the GPU's path
    stock, _ = _step_count("4L", 2, stock=True, adam="torch")
    # torch's default Adam reads every step counter back on the CPU (90 of its 91 syncs
    # here; on CUDA the counters stay on the host): the fair baseline is stock with the
    # same fused Adam, i.e. the trainer's own reads (source lengths, loss statistics)
    trainer_only, _ = _step_count("4L", 2, stock=True, adam="fused")
    assert trainer_only.syncs < stock.syncs
    for spec in STEP_SPECS:
        ours, model = _trainer(spec, 2)
        counted = count(ours)
        # the source-feature checks read their verdict back on the CPU only (on a GPU the
        # device asserts it: headlab.engine.encoder.side_inputs)
        checks = 2 if model.encoder.columns else 0
        assert counted.syncs <= trainer_only.syncs + checks, (spec, counted.syncs, trainer_only.syncs)
        assert counted.syncs <= stock.syncs


@pytest.mark.parametrize("spec", ["4L", "4LPEA", "4RHErel"])
def test_a_training_step_does_not_launch_per_parameter_tensor(monkeypatch, spec):
    """One more layer on each side adds its forward and backward ops, but (fused Adam) no
    optimizer op per parameter tensor: the growth is the same as the layers' own."""
    monkeypatch.setenv(PATH_VARIABLE, "fused")
    two, params_two = _step_count(spec, 2)
    three, params_three = _step_count(spec, 3)
    four, params_four = _step_count(spec, 4)
    assert params_four - params_three == params_three - params_two > 20
    per_layer = three.ops - two.ops
    assert four.ops - three.ops == per_layer
    optimizer_ops = {name: n for name, n in four.by_op.items() if "adam" in name}
    assert sum(optimizer_ops.values()) == 1, optimizer_ops          # one fused step for every tensor
    unfused_two, _ = _step_count(spec, 2, adam="torch")
    unfused_three, _ = _step_count(spec, 3, adam="torch")
    # torch's default Adam on the CPU: ops per parameter tensor (what this test guards against)
    assert (unfused_three.ops - unfused_two.ops) - per_layer >= 5 * (params_three - params_two)


#: OpenNMT-py 3.5.1's own host reads in a step on a GPU (its loss path, not the CPU's fused
#: cross-entropy): the source words twice for the reports (trainer.py:483-484), the loss,
#: the correct-token count (a masked_select, then its sum) and the target words
#: (loss.py:384, 400-401); outside this count, the normalisation (trainer.py:244) and the
#: batch's blocking copies to the device (headlab.engine.step)
UPSTREAM_GPU_PATH_SYNCS = 6


@pytest.mark.parametrize("spec", ["8L", "7Ftoken+1L", "8Ftoken"])
def test_a_sitting_models_step_on_the_gpu_loss_path_reads_nothing_back(monkeypatch, spec):
    """The sitting's models at 6+6 through the loss a GPU runs (OpenNMT-py's ops): headlab's
    step reads nothing back from the device, where OpenNMT-py's reads six values (stock 6+6
    ``8L`` keeps one: its encoder's mask reads the longest source back)."""
    from headlab.engine import xent

    monkeypatch.setenv(PATH_VARIABLE, "fused")
    monkeypatch.setattr(xent, "applies", lambda compute, output: False)
    stock, _ = _step_count("8L", 6, stock=True)
    ours, _ = _step_count(spec, 6)
    assert stock.syncs == 1
    assert ours.syncs == 0, {name: n for name, n in ours.by_op.items() if name in SYNC_OPS}
    monkeypatch.setattr(xent, "plain", lambda compute: False)          # OpenNMT-py's loss and statistics
    upstream, _ = _step_count(spec, 6, upstream_step=True)
    assert upstream.syncs == UPSTREAM_GPU_PATH_SYNCS
    assert upstream.by_op["aten.masked_select.default"] == 1



def _plan_models() -> list[tuple[str, str, str]]:
    """(slice, heads, layers) of every model the shipped GPU plan's ready slices train."""
    from headlab.workflow import gpu_plan
    return [(entry.name, model["heads"], entry.entry["layers"]) for entry in gpu_plan.load().slices
            if entry.entry.get("ready") for model in entry.entry["models"]]


def _measured_models() -> list[str]:
    """The heads of the models the plan's seconds a step were measured on: the newest
    published sitting's rows of ``results/published/throughput.csv``."""
    import csv
    from pathlib import Path

    with open(Path(__file__).resolve().parents[1] / "results/published/throughput.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    newest = max(rows, key=lambda row: row["date"])["sitting"]
    return [row["model"] for row in rows if row["sitting"] == newest]


@pytest.mark.parametrize("slice_name,spec,layers", _plan_models())
def test_every_model_the_shipped_gpu_plan_trains_launches_no_more_than_the_measured_ones(
        monkeypatch, slice_name, spec, layers):
    """The GPU plan costs every slice at the seconds a step its newest sitting measured, the
    slowest of the models trained there (``throughput.seconds_per_step``: N models side by
    side, whatever their heads). On a launch-bound step (the H100's: 1.6-1.8% of its matrix
    rate) that holds only while a model dispatches no more aten ops a step than the measured
    models do, within the plan's tolerance for a stale figure. At 993e600 those were paper
    A's 8L, 7Ftoken+1L and 8Ftoken (3,080-3,692 ops at 6+6; 7Ftoken+1L, the most, was the
    slowest); paper C's syntax models add to 8L's in their first encoder layer (3,585-3,732),
    paper B's DHICM in its last (3,669). On a GPU, no model of the plan reads a value back in
    its step (the CPU's two are the source-feature checks, which the device asserts there)."""
    from headlab.engine import xent
    from headlab.workflow.gpu_plan import SPEED_TOLERANCE

    monkeypatch.setenv(PATH_VARIABLE, "fused")
    monkeypatch.setattr(xent, "applies", lambda compute, output: False)     # the loss a GPU runs
    encoder, decoder = (int(part) for part in layers.split("+"))
    assert encoder == decoder, "the step counted here has as many decoder layers as encoder ones"
    measured = {heads: _step_count(heads, encoder)[0].ops for heads in _measured_models()}
    ours, model = _trainer(spec, encoder)
    counted = count(ours)
    checks = 2 if model.encoder.columns else 0
    assert counted.syncs == checks, {name: n for name, n in counted.by_op.items() if name in SYNC_OPS}
    assert counted.ops <= (1 + SPEED_TOLERANCE) * max(measured.values()), (
        f"{slice_name}'s {spec} dispatches {counted.ops} aten ops a step against at most {max(measured.values())} "
        f"for the models the plan's seconds a step were measured on ({measured}): they do not apply to it; "
        f"measure it (the sitting's probe side by side) and cost its slice apart")
