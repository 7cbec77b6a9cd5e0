"""Mixed precision, proven on CPU: every head kind, mixer and site under
``torch.autocast("cpu", bfloat16 / float16)`` and with float16 weights (OpenNMT-py's
``-precision fp16`` translation) stays finite and close to float32; the places that must
stay float32 do; a few OpenNMT-py optimizer steps lower the loss; and the precision
options reach OpenNMT-py (presets, ``training.precision``, ``-model_dtype bf16``).

Tolerances are in units of the half type's machine epsilon ``eps`` (bf16 2^-7, fp16 2^-10;
a rounding costs at most eps/2), on relative errors: max |half - fp32| / max |fp32| of
outputs over real positions, and ||half - fp32|| / ||fp32|| of gradient vectors.

* one layer (:func:`test_layer`): 8 eps. A layer chains ~6 roundings (query/key/value
  projections, scores, probabilities, weighted sum, output projection), and a logit error
  δ scales a probability by e^δ; measured at most 1.7 eps (bf16 and fp16).
* a whole 2+2 model's outputs and beam scores: 8 eps; its gradients: 32 eps. Forward and
  backward through 4 layers chain ~40 roundings, CPU autocast also runs LayerNorm and
  log-softmax in the half type (CUDA autocast keeps both in float32), and fp16 gradients
  here go without loss scaling; measured at most 1.3 eps (outputs), 3.6 eps (bf16 beam
  scores) and 17 eps (bf16 gradients of the fixed-pattern model; fp16: 14 eps).

A defect these tests are for (a sum accumulated in half precision, a position rounded to 8
significant bits, a float32 query meeting float16 weights) is a 10%+ error or a crash,
and the targeted tests below show the ones that were here failing before their fix.
Sizes are tiny (d = 32, 3 sentences of <= 9 tokens); the module takes ~10 s of CPU.
"""
from __future__ import annotations

import contextlib
import functools

import pytest
import torch

import headcases as hc

DTYPES = [torch.bfloat16, torch.float16]
IDS = {torch.bfloat16: "bf16", torch.float16: "fp16"}


def tol(dtype, eps: float) -> float:
    return eps * torch.finfo(dtype).eps


def autocast(dtype):
    return functools.partial(torch.autocast, "cpu", dtype=dtype)


pytestmark = pytest.mark.usefixtures("one_thread")


# -- coverage -----------------------------------------------------------------------------
def _specs(case: dict, site: str) -> str:
    return case.get(f"{site}_heads", "8L") if site == "enc" or case.get("decoder_type", "headlab") == "headlab" \
        else ""


def test_cases_cover_every_kind_mixer_and_site():
    """A kind or mixer added to the registry must be added to headcases.CASES (every test
    module that iterates over the cases then covers it)."""
    from headlab.heads import HEAD_KINDS, HEAD_MIXERS
    from headlab.heads.spec import parse_spec
    wanted = {(name, site) for name, cls in {**HEAD_KINDS, **HEAD_MIXERS}.items() for site in cls.sites}
    covered = set()
    for case in hc.CASES.values():
        for site in ("enc", "dec", "cross"):
            spec = _specs(case, site)
            if spec:
                for layer in parse_spec(spec, 2, site=site):
                    covered |= {(term.kind, site) for term in layer.terms} | {(m, site) for m in layer.mixers}
    assert wanted - covered == set()
    assert {(spec.split("|")[-1] if "|" in spec else spec.lstrip("0123456789"), site)
            for site, spec, _ in hc.layer_specs()} >= wanted


# -- one layer ----------------------------------------------------------------------------
LAYERS = [pytest.param(site, spec, options, id=f"{site}-{spec}{'-' + '-'.join(options.values()) if options else ''}")
          for site, spec, options in hc.layer_specs()]


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS.get)
@pytest.mark.parametrize("site, spec, options", LAYERS)
def test_layer(site, spec, options, dtype):
    """Forward and backward of one layer (padding, a one-token sentence, aux terms) under
    CPU autocast: finite everywhere (padded rows included), within 8 eps of float32."""
    layer = hc.build_layer(site, spec, options)
    x, ctx, memory = hc.layer_inputs(site)
    ref_out, ref_grad = hc.layer_run(layer, site, x, ctx, memory)
    out, grad = hc.layer_run(layer, site, x, ctx, memory, autocast(dtype))
    assert torch.isfinite(out).all() and torch.isfinite(grad).all()
    assert hc.relative_error(out, ref_out, ~ctx.pad_mask) <= tol(dtype, 8)
    assert hc.grad_error(grad, ref_grad) <= tol(dtype, 8)


@pytest.mark.parametrize("dtype", [torch.float32, *DTYPES], ids=lambda d: IDS.get(d, "fp32"))
@pytest.mark.parametrize("site, spec", [(site, spec) for site in ("dec", "cross")
                                        for spec in ("4L", "2Lwide", "4L|gate", "4L|dhicm")])
def test_fully_masked_query_row_gives_zeros_not_nan(site, spec, dtype):
    """No site builds a query row that may attend nothing (every real query attends
    itself or a real source token; padded queries attend the real keys), but torch's SDPA
    is what keeps such a row finite if one comes: its heads output 0, forward and backward."""
    layer = hc.build_layer(site, spec, {})
    x, ctx, memory = hc.layer_inputs(site, fully_masked=True)
    out, grad = hc.layer_run(layer, site, x, ctx, memory, autocast(dtype) if dtype != torch.float32 else None)
    assert torch.isfinite(out).all() and torch.isfinite(grad).all()
    if "|" not in spec:                       # heads output 0: the row is final_linear's bias
        assert torch.allclose(out[0, 2], layer.final_linear.bias, atol=tol(dtype, 1))


# -- the float32 places (each failed before its fix) ------------------------------------
@pytest.mark.parametrize("precision", ["bf16-autocast", "fp16-autocast", "fp16-weights"])
def test_localness_centre_and_window_are_float32(precision):
    """Yang et al.'s centre P and window D are positions: under bf16 autocast they were up
    to 3 positions off at n = 1024, and float16 weights crashed (float query, half W_p)."""
    from headlab.heads.base import HeadContext
    from headlab.heads.localness import Local
    torch.manual_seed(0)
    group = Local(2, 32, 16)
    q = torch.randn(1, 2, 1024, 16)
    ctx = HeadContext(torch.zeros(1, 1024, dtype=torch.bool), torch.tensor([1024]))
    ref_centre, ref_window = group.centre_window(q, ctx)
    ref_bias = group.logit_bias(q, ctx)
    if precision == "fp16-weights":
        group, q, context = group.half(), q.half(), contextlib.nullcontext()
    else:
        context = autocast(torch.bfloat16 if precision.startswith("bf16") else torch.float16)()
    with context:
        centre, window = group.centre_window(q, ctx)
        bias = group.logit_bias(q, ctx)
    assert centre.dtype == window.dtype == bias.dtype == torch.float32
    if precision == "fp16-weights":           # the weights themselves were rounded
        assert (centre - ref_centre).abs().max() < 0.5 and (window - ref_window).abs().max() < 0.5
    else:
        assert (centre - ref_centre).abs().max() < 1e-3 and (window - ref_window).abs().max() < 1e-3
        assert torch.allclose(bias, ref_bias, rtol=1e-5, atol=1e-3)


@pytest.fixture
def cuda_like_half_scatter_add(monkeypatch):
    """scatter_add_ as CUDA computes it for half types (atomics: one rounding per added
    term). CPU's kernel accumulates in float32 and would hide a half-precision sum."""
    original = torch.Tensor.scatter_add_

    def scatter_add_(self, dim, index, src):
        if self.dtype not in (torch.bfloat16, torch.float16):
            return original(self, dim, index, src)
        for j in range(src.size(dim)):
            original(self, dim, index.narrow(dim, j, 1), src.narrow(dim, j, 1))
        return self

    monkeypatch.setattr(torch.Tensor, "scatter_add_", scatter_add_)


def test_relpos_value_term_sums_buckets_in_float32(cuda_like_half_scatter_add):
    """Shaw's value term sums the attention of every key beyond the clipping distance into
    one bucket; summed in bf16 (CUDA's atomics) the value term was 7.7% off at n = 512."""
    from headlab.heads.relpos import RelPos
    torch.manual_seed(0)
    group = RelPos(1, 32, 16, k=4)
    att = torch.rand(1, 1, 512, 512).softmax(-1)
    ref = group.value_term(att)
    out = group.value_term(att.to(torch.bfloat16))
    assert out.dtype == torch.bfloat16
    assert hc.relative_error(out, ref) <= tol(torch.bfloat16, 2)


@pytest.mark.parametrize("training", [True, False])
def test_gates_and_l0_are_float32_with_float16_weights(training):
    from headlab.heads.mixers import HardConcreteGate
    gate = HardConcreteGate(8, 32)
    with torch.no_grad():
        gate.log_alpha.copy_(torch.linspace(-3, 3, 8))
    half = HardConcreteGate(8, 32).half()
    half.load_state_dict(gate.state_dict())
    gate.train(training), half.train(training)
    torch.manual_seed(1)
    ref = gate.gates()
    torch.manual_seed(1)
    out = half.gates()
    assert out.dtype == half.expected_l0().dtype == torch.float32
    assert torch.allclose(out, ref, atol=2e-3) and torch.allclose(half.expected_l0(), gate.expected_l0(), atol=1e-2)


def test_lpea_bias_values_are_float32_under_autocast():
    from headlab.heads.sea import PhraseBias
    torch.manual_seed(0)
    phrase = PhraseBias(4, 16)
    ref = phrase.values()
    with autocast(torch.bfloat16)():
        values = phrase.values()
    assert values.dtype == torch.float32 and torch.allclose(values, ref, atol=1e-6)


# -- whole models -----------------------------------------------------------------------
CASES = list(hc.CASES)


@functools.lru_cache(maxsize=None)
def _case(name):
    model, opt, vocab = hc.build_case(name)
    return model, opt, vocab, hc.make_batch(model, vocab)


def _fresh(name):
    model, opt, vocab, batch = _case(name)
    return hc.build_case(name)[0] if model.training else model, opt, vocab, batch


def _loss_and_grads(model, opt, vocab, batch, context=None):
    model.zero_grad(set_to_none=True)
    torch.manual_seed(5)                      # the same gate samples in both runs
    with (context or contextlib.nullcontext)():
        value = hc.loss(model, opt, vocab, batch)
    value.backward()
    return float(value), torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS.get)
@pytest.mark.parametrize("name", CASES)
def test_model_forward_backward(name, dtype):
    """Teacher forcing through OpenNMT-py's model and loss (aux terms weighted in):
    outputs, log-probabilities and loss within 8 eps of float32, gradients within 32 eps."""
    model, opt, vocab, batch = _case(name)
    real = batch[2][:, 1:, 0].ne(hc.PAD)
    with torch.no_grad():
        ref_out, ref_lp = hc.forward(model, batch)
        with autocast(dtype)():
            out, lp = hc.forward(model, batch)
    assert torch.isfinite(out).all() and torch.isfinite(lp).all()
    assert hc.relative_error(out, ref_out, real) <= tol(dtype, 8)
    assert hc.relative_error(lp, ref_lp, real) <= tol(dtype, 8)
    model.train()
    try:
        ref_loss, ref_grad = _loss_and_grads(model, opt, vocab, batch)
        loss, grad = _loss_and_grads(model, opt, vocab, batch, autocast(dtype))
    finally:
        model.eval().zero_grad(set_to_none=True)
    assert torch.isfinite(grad).all()
    assert abs(loss - ref_loss) <= tol(dtype, 8) * abs(ref_loss)
    assert hc.grad_error(grad, ref_grad) <= tol(dtype, 32)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS.get)
@pytest.mark.parametrize("name", CASES)
def test_incremental_decoding_with_beam_tiling(name, dtype):
    """Step-by-step decoding through the KV cache, hypotheses tiled and reordered at every
    step as beam search does, under autocast: within 8 eps of float32 teacher forcing."""
    from onmt.utils.misc import tile
    model, _, _, batch = _case(name)
    with torch.no_grad():
        ref, _ = model(batch[0], batch[2], batch[1])
        with autocast(dtype)():
            steps = hc.stepwise(model, batch)
    real = tile(batch[2], 2)[:, :, 0].ne(hc.PAD)
    ref = tile(torch.cat([ref, ref[:, -1:]], 1), 2)          # model() drops the last input
    real[:, -1] = False
    assert torch.isfinite(steps).all()
    assert hc.relative_error(steps, ref, real) <= tol(dtype, 8)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    folder = tmp_path_factory.mktemp("amp")
    return {name: hc.save(*_case(name)[:3], folder / f"{name}.pt") for name in CASES}


@pytest.mark.parametrize("mode", ["bf16-autocast", "fp16-autocast", "fp16-weights"])
@pytest.mark.parametrize("name", CASES)
def test_beam_search(name, mode, checkpoints):
    """OpenNMT-py's beam search (Translator.translate_batch) under autocast and with
    -precision fp16 (float16 weights, what GPU translation of a mixed-precision model
    uses): every best score finite and within 8 eps of the float32 search's best score
    (hypotheses may differ where two are within rounding of each other)."""
    _, _, _, batch = _case(name)
    ref, _ = hc.beam_search(hc.translator(checkpoints[name]), batch)
    dtype = torch.bfloat16 if mode.startswith("bf16") else torch.float16
    if mode == "fp16-weights":
        trans = hc.translator(checkpoints[name], precision="fp16")
        assert next(trans.model.parameters()).dtype == torch.float16
        scores, _ = hc.beam_search(trans, batch)
    else:
        with autocast(dtype)():
            scores, _ = hc.beam_search(hc.translator(checkpoints[name]), batch)
    assert torch.isfinite(scores).all()
    assert ((scores - ref).abs() <= tol(dtype, 8) * ref.abs()).all(), (scores, ref)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS.get)
@pytest.mark.parametrize("name", CASES)
def test_optimizer_steps_lower_the_loss(name, dtype):
    """Four steps of OpenNMT-py's Optimizer (Adam, noam) under autocast lower the loss;
    float16 takes OpenNMT-py's AMP path (a GradScaler, here torch's CPU one), as
    -model_dtype fp16 does on GPU."""
    model, opt, vocab = hc.build_case(name)
    batch = hc.make_batch(model, vocab)
    optim = hc.optimizer(model, opt)
    if dtype == torch.float16:
        optim._fp16, optim._scaler = "amp", torch.amp.GradScaler("cpu", init_scale=2.0 ** 10)
    before, losses, after = hc.losses_before_and_after(model, opt, vocab, batch, optim, 4, autocast(dtype))
    assert all(torch.isfinite(torch.tensor(losses)))
    assert after < before - 0.02 * abs(before), (before, losses, after)
    assert all(torch.isfinite(p).all() for p in model.parameters())


# -- options --------------------------------------------------------------------------------
PATHS = dict(train_src="t.src", train_tgt="t.tgt", valid_src="v.src", valid_tgt="v.tgt", vocab="vocab",
             save_dir="out")


@pytest.mark.parametrize("preset, device, precision, dtype, translate", [
    ("base", "gpu", "preset", "fp16", "fp16"),          # base*: mixed precision on GPU
    ("base_paper_C", "gpu", "preset", "fp16", "fp16"),
    ("base", "gpu", "fp32", "fp32", ""),                # fp32 one option away
    ("base", "gpu", "bf16", "bf16", "fp16"),
    ("base", "cpu", "preset", "fp32", ""),              # CPU: always fp32 (AMP is CUDA-only)
    ("base", "cpu", "bf16", "fp32", ""),
    ("tiny", "gpu", "preset", "fp32", ""),              # the CPU presets keep OpenNMT-py's default
    ("mini", "gpu", "fp16", "fp16", "fp16"),
])
def test_precision_of_presets_devices_and_training_precision(preset, device, precision, dtype, translate):
    from headlab.engine.config import train_config, translate_precision
    options = train_config(preset=preset, layers="2+2", heads="8L", device=device, precision=precision, **PATHS)
    assert options["model_dtype"] == dtype
    assert options["gpu_ranks"] == ([0] if device == "gpu" else [])
    assert translate_precision(dtype) == translate


def test_bad_precision_is_an_error_naming_the_key():
    from headlab.engine.config import train_config
    from headlab.errors import ConfigError
    with pytest.raises(ConfigError, match=r"training\.precision.*fp8"):
        train_config(preset="base", layers="2+2", heads="8L", device="gpu", precision="fp8", **PATHS)
    with pytest.raises(ConfigError, match=r"model_dtype.*fp64"):
        train_config(preset="base", layers="2+2", heads="8L", device="gpu", overrides={"model_dtype": "fp64"},
                     **PATHS)


def test_onmt_config_cli_precision(tmp_path):
    import yaml
    from headlab.engine.config import main
    args = ["--preset", "base", "--layers", "1+1", "--train", "s", "t", "--valid", "s", "t", "--vocab", "v",
            "--save-dir", str(tmp_path)]
    for extra, dtype in (([], "fp32"), (["--gpu"], "fp16"), (["--gpu", "--precision", "fp32"], "fp32"),
                         (["--gpu", "--precision", "bf16"], "bf16")):
        assert main(args + extra + ["--out", str(tmp_path / "c.yaml")]) == 0
        assert yaml.safe_load((tmp_path / "c.yaml").read_text())["model_dtype"] == dtype


def test_bf16_training_takes_onmt_amp_path_in_bfloat16(monkeypatch):
    """-model_dtype bf16: OpenNMT-py's own training step (Trainer._gradient_accumulation)
    enters its autocast in bfloat16 with a disabled GradScaler (no loss scaling); fp16
    keeps OpenNMT-py's float16 autocast and GradScaler. (On CPU the CUDA autocast is
    recorded, then replaced by a disabled one.)"""
    import onmt.trainer
    from onmt.utils.statistics import Statistics
    import headlab.engine.plugin  # noqa: F401
    seen = []

    def recorder(device_type="cuda", dtype=torch.float16, enabled=True, **_):
        seen.append((device_type, dtype, enabled))
        return torch.autocast("cpu", enabled=False)

    monkeypatch.setattr(torch.amp, "autocast", recorder)
    monkeypatch.setattr(torch.cuda.amp, "autocast", recorder)
    for dtype, expected in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        seen.clear()
        opt = hc.case_opt("learned")
        opt.model_dtype, opt.data = dtype, {}
        model, _, vocab = hc.build_case("learned")
        optim = hc.optimizer(model, opt)
        assert optim.amp and optim._scaler.is_enabled() is (dtype == "fp16" and torch.cuda.is_available())
        trainer = onmt.trainer.build_trainer(opt, -1, model, vocab, optim)
        src, src_len, tgt = hc.make_batch(model, vocab)
        batch = {"src": src, "srclen": src_len, "tgt": tgt}
        trainer._gradient_accumulation([batch], 10, Statistics(), Statistics())
        assert seen == [("cuda", expected, True)]
        assert torch.cuda.amp.autocast is recorder           # restored after the step


def test_model_dtype_bf16_is_a_valid_option():
    opt = hc.model_opt(extra=["-model_dtype", "bf16"], enc_layers=1, dec_layers=1, hidden_size=16, heads=2,
                       transformer_ff=16)
    assert opt.model_dtype == "bf16"


@pytest.mark.parametrize("precision, model_dtype, translate", [
    (None, "fp16", "-gpu 0 -precision fp16"),              # base on GPU: mixed precision
    ("fp32", "fp32", "-gpu 0  "),                          # one option away
])
def test_workflow_passes_precision_to_onmt_config_and_translate(precision, model_dtype, translate, tmp_path):
    """The GPU config's jobs: the model's OpenNMT-py config (written by the workflow's own
    process, printed by the dry run) trains on GPU 0 with that ``model_dtype``, and `headlab
    translate -gpu 0 -precision fp16` for models trained in mixed precision."""
    import re
    import yaml
    from test_workflow import ROOT, snakemake
    config = yaml.safe_load((ROOT / "config/multi30k-gpu.yaml").read_text())
    config["studies"] = {"baseline": {"data": {"multi30k": ["de-en"]}, "layers": ["1+1"], "heads": ["8L"],
                                      "preset": "base"}}
    if precision:
        config["training"]["precision"] = precision
    (tmp_path / "gpu.yaml").write_text(yaml.safe_dump(config))
    result = snakemake("-n", "-p", str(tmp_path / "r" / "tables" / "baseline.md"), "--configfile",
                       str(tmp_path / "gpu.yaml"), "--config", f"results={tmp_path / 'r'}")
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout + result.stderr
    assert re.search(rf"model_dtype: {model_dtype}\n", out) and re.search(r"gpu_ranks:\s*- 0\n", out)
    commands = re.findall(r"headlab translate .*", out)
    assert commands and all(f"-max_length 250 {translate}" in c for c in commands), commands[:1]
