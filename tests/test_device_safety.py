"""Device-safe head kinds, proven on CPU: every kind, mixer and site (training step,
incremental decoding with beam tiling, OpenNMT-py's beam search, attention export,
``headlab profile-heads``) runs on a simulated accelerator that fails on any operation
mixing device and CPU tensors, and computes exactly what the CPU computes.

Mechanism (:mod:`simdevice`): tensors "on cuda" are wrappers that report a non-CPU device
and carry real CPU data; a ``TorchDispatchMode`` runs every operation on the data after
the check CUDA makes (all tensors on one device, except CPU scalars, indexing indices and
cross-device copies), and raises ``Expected all tensors to be on the same device`` where
CUDA would. Chosen over torch's own tools, which were tried (the tests at the end keep the
evidence):

* ``FakeTensorMode`` with a fake ``cuda`` device catches mixing, but fake tensors have no
  values: ``bool()``/``.item()``/``torch.unique`` raise, i.e. the head-ablation check,
  the syntax-column check, LPEA's depth table and all of beam search; and on a CPU-only
  torch its **backward aborts the process** (autograd asks for a CUDA device guard;
  ``python -c "...FakeTensorMode(): x = torch.randn(2, device='cuda', requires_grad=True);
  x.sum().backward()"`` dies with ``PyTorch is not linked with support for cuda devices``).
* the ``meta`` device catches mixing and runs backward, but has no values either.

A simulated tensor reports the device ``meta`` (the one non-CPU device whose device guard
every torch build has, so autograd works); ``torch.device("cuda")``, ``-gpu 0`` and
``.cuda()`` all land on it.

What a planted CPU tensor does (:func:`test_planted_cpu_tensor_is_caught`): a kind that
builds a mask without ``device=``, or keeps a lookup table in a plain attribute (left
behind by ``model.to``), fails the check.
"""
from __future__ import annotations

import pytest
import torch

import headcases as hc
from simdevice import DeviceTensor, MixedDeviceError, SimulatedDevice, on_device, values
from hangguard import hang_guard


pytestmark = pytest.mark.usefixtures("one_thread")


# -- the mechanism itself -------------------------------------------------------------------
def test_simulated_device_computes_and_rejects_mixing():
    cpu = torch.randn(3, 4)
    with SimulatedDevice() as mode:
        x = cpu.to("cuda")
        assert on_device(x) and on_device(torch.ones(4, device=x.device) + x) and on_device(x.cuda())
        assert torch.equal(values(x * 2), cpu * 2)
        assert (x + torch.tensor(2.0)).tolist() == (cpu + 2).tolist()     # CPU scalars are fine
        assert torch.equal(values(x[torch.tensor([2, 0])]), cpu[[2, 0]])   # so are CPU indices
        assert float(x.sum()) == pytest.approx(float(cpu.sum())) and bool(x.abs().sum() > 0)
        assert not on_device(x.cpu()) and torch.equal(x.cpu(), cpu)
        with pytest.raises(MixedDeviceError, match="cuda:0 and cpu"):
            x + torch.ones(4)
        with pytest.raises(MixedDeviceError, match="cuda:0 and cpu"):
            x.masked_fill(torch.ones(3, 4, dtype=torch.bool), 0.0)
        with pytest.raises(MixedDeviceError, match="generator"):
            torch.randn(3, device="cuda", generator=torch.Generator().manual_seed(0))
        with pytest.raises(TypeError, match="cpu"):
            x.numpy()                          # as a CUDA tensor: .cpu() first
        layer = torch.nn.Linear(4, 2).to("cuda")
        layer(x).sum().backward()
        assert isinstance(layer.weight.grad, DeviceTensor)
    assert mode.checked > 10


# -- every kind, mixer and site on the simulated device -----------------------------------
@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cpu")
    return {name: hc.run_all(name, "cpu", folder) for name in hc.CASES}


def _compare(result: dict, ref: dict, rtol: float = 1e-5):
    for key in ("out", "logp", "steps", "loss", "grads", "scores"):
        assert hc.relative_error(result[key], ref[key]) <= rtol, key
    # Adam's first step is lr * g / (|g| + 1e-8): a sign for every gradient, rounding noise
    # included (key biases have an exactly-zero gradient in exact arithmetic): compare it
    # where the gradient is not noise
    real = ref["grads"].abs() > 1e-4 * ref["grads"].abs().max()
    assert hc.relative_error(result["update"], ref["update"], real) <= rtol
    assert result["preds"] == ref["preds"]
    assert result["export"].keys() == ref["export"].keys()
    for site, arrays in result["export"].items():
        for a, b in zip(arrays, ref["export"][site], strict=True):
            assert a.shape == b.shape and torch.allclose(a, b, atol=1e-6), site


@pytest.mark.parametrize("name", list(hc.CASES))
def test_every_kind_mixer_and_site_runs_on_the_device(name, reference, tmp_path):
    """Training step (OpenNMT-py loss with aux terms, backward, Adam step), incremental
    decoding with beam tiling, beam search through OpenNMT-py's Translator with -gpu 0,
    attention export at every site: no mixed-device operation, the CPU's numbers."""
    mode = SimulatedDevice()
    result = hc.run_all(name, "cuda", tmp_path, context=mode)
    assert mode.checked > 1000
    assert torch.isfinite(result["train_loss"])
    _compare(result, reference[name])


def _left_behind(name: str, run: bool = True) -> list[str]:
    """Tensors a module of case ``name`` holds off the device after model.to(device) and a
    forward (parameters, buffers, plain attributes: cached masks, lookup tables), except
    the listed ones, each moved where it is used."""
    allowed = {
        "head_scale",     # (H,) ablation scale: read with .to(x.device); on CPU so that its
                          # all-ones test costs no device synchronisation
        "head_mask",      # (H,) -enc_head_mask, the same way
        "layer_cache",    # OpenNMT-py's decoder cache: empty placeholders until decoding
        "continuation",   # the encoder's "@@" flags per vocabulary id: moved on first use, by
                          # a model with word-based kinds (HeadlabEncoder.context)
    }
    model, _, vocab = hc.build_case(name)
    batch = hc.make_batch(model, vocab)
    with SimulatedDevice():                            # built on the CPU, then moved
        model.to("cuda")
        if run:
            with torch.no_grad():
                hc.forward(model, hc.to(batch, "cuda"))
        left = []
        for module_name, module in model.named_modules():
            for attr, value in vars(module).items():
                tensors = [value] if isinstance(value, torch.Tensor) else \
                    [v for v in value.values() if isinstance(v, torch.Tensor)] if isinstance(value, dict) else []
                if any(not on_device(t) for t in tensors) and attr not in allowed:
                    left.append(f"{module_name}.{attr}")
    return left


@pytest.mark.parametrize("name", ["learned", "syntax"])
def test_no_tensor_left_behind_by_model_to(name):
    assert _left_behind(name) == []


@pytest.mark.parametrize("name", ["learned", "fixed", "stock_decoder"])
def test_profile_heads_on_the_device(name, tmp_path):
    model, opt, vocab = hc.build_case(name)
    path = hc.save(model, opt, vocab, tmp_path / "model.pt")
    ref = hc.profile(path, tmp_path, gpu=-1)
    with SimulatedDevice() as mode:
        result = hc.profile(path, tmp_path, gpu=0)
    assert mode.checked > 100
    assert result["heads"].equals(ref["heads"])
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(result["attention"], ref["attention"]))


# -- a planted CPU tensor fails the check ---------------------------------------------------
def _plant_mask(monkeypatch):
    """A kind that builds its mask without device= (here: every learned head's bias)."""
    from headlab.heads.kinds import LearnedHeads

    def score_bias(self, ctx):
        return torch.zeros(ctx.key_mask.shape)         # on the CPU whatever the model's device
    monkeypatch.setattr(LearnedHeads, "score_bias", score_bias)


def _plant_table(monkeypatch):
    """A kind that keeps a lookup table in a plain attribute: model.to() leaves it behind."""
    from headlab.heads.kinds import _FixedHeads
    original_init, original_forward = _FixedHeads.__init__, _FixedHeads.forward

    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        self.table = torch.ones(self.d_head)

    def forward(self, x, values, ctx, keys=None):
        return original_forward(self, x, values, ctx, keys) * self.table
    monkeypatch.setattr(_FixedHeads, "__init__", __init__)
    monkeypatch.setattr(_FixedHeads, "forward", forward)


@pytest.mark.parametrize("plant, name", [(_plant_mask, "learned"), (_plant_table, "fixed")])
def test_planted_cpu_tensor_is_caught(plant, name, monkeypatch, tmp_path):
    plant(monkeypatch)
    hc.run_all(name, "cpu", tmp_path)                  # fine on the CPU
    with pytest.raises(MixedDeviceError, match="cuda:0 and cpu"):
        hc.run_all(name, "cuda", tmp_path, context=SimulatedDevice())


def test_plain_attribute_left_behind_is_found(monkeypatch):
    _plant_table(monkeypatch)
    assert _left_behind("fixed", run=False) == ["encoder.transformer.0.self_attn.heads.0.table",
                                     "encoder.transformer.1.self_attn.heads.0.table"]


# -- why not torch's own mechanisms --------------------------------------------------------
def test_fake_tensor_mode_cannot_run_a_headlab_encoder():
    """FakeTensorMode catches mixing but does not run the encoder: on a CPU-only torch some
    kernels ask for a CUDA device guard (and recording autograd aborts the process: next
    test); the data-dependent checks (``bool(scale.all())``, the syntax columns, LPEA's
    ``torch.unique``, beam search) have no values to read on any build."""
    from torch._subclasses.fake_tensor import DataDependentOutputException, FakeTensorMode
    model, _, vocab = hc.build_case("fixed")
    src, src_len, _ = hc.make_batch(model, vocab)
    cuda = torch.device("cuda", 0)
    with FakeTensorMode(allow_non_fake_inputs=True):
        with pytest.raises(RuntimeError, match="same device"):
            torch.ones(2, device=cuda) + torch.ones(2)
        with pytest.raises(DataDependentOutputException):
            bool(torch.ones(2, device=cuda).all())
        model.to(cuda)
        with torch.no_grad(), pytest.raises(RuntimeError):
            model.encoder(src.to(cuda), src_len.to(cuda))


def test_fake_cuda_autograd_aborts_a_cpu_only_torch():
    import subprocess
    import sys
    if torch.cuda.is_available():
        pytest.skip("a CUDA build has the device guard")
    script = ("import torch\nfrom torch._subclasses.fake_tensor import FakeTensorMode\n"
              "with FakeTensorMode():\n    x = torch.randn(2, device='cuda', requires_grad=True)\n"
              "    (x * 2).sum().backward()\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=hang_guard(300))
    assert result.returncode != 0 and "not linked with support for cuda devices" in result.stderr


def test_meta_device_has_no_values_for_beam_search_or_lpea():
    model, _, vocab = hc.build_case("syntax")
    src, src_len, _ = hc.make_batch(model, vocab)
    with pytest.raises(RuntimeError, match="meta"):
        torch.ones(2, device="meta") + torch.ones(2)
    model.to("meta")
    with pytest.raises((RuntimeError, NotImplementedError), match="meta"):
        model.encoder(src.to("meta"), src_len.to("meta"))
