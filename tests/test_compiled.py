"""``-compile`` (headlab.engine.compiled): every head kind, mixer and site traces into one graph,
and the compiled model trains as the eager one does.

The graphs are checked with ``torch._dynamo.explain`` (tracing only) and run with the
``aot_eager`` backend (the same forward and backward graphs, no generated code): what a GPU's
inductor compiles is exactly these graphs, and a graph break there is a return to Python in
every step. What compiling buys on a GPU is measured there, not here."""
from __future__ import annotations

import copy
import time

import pytest
import torch

from headcases import CASES, build_case, loss, loss_compute, make_batch

torch._dynamo = pytest.importorskip("torch._dynamo")


def _breaks(model, batch) -> list[str]:
    src, src_len, tgt = batch
    explained = torch._dynamo.explain(model)(src, tgt, src_len, with_align=False)
    return [f"{reason.reason.splitlines()[0][:160]} at "
            + " <- ".join(f"{frame.filename.rsplit('/', 1)[-1]}:{frame.lineno}" for frame in reason.user_stack[-3:])
            for reason in explained.break_reasons]


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_kind_mixer_and_site_traces_into_one_graph(case, monkeypatch):
    """Training and validation forwards of a model with every kind, mixer and site
    (headcases.CASES), on the fused path a GPU runs: no graph break (a break is a host
    round trip and an unfused stretch in every compiled step)."""
    from headlab.engine.compiled import prime
    from headlab.heads.executor import PATH_VARIABLE

    monkeypatch.setenv(PATH_VARIABLE, "fused")
    model, _, vocab = build_case(case)
    batch = make_batch(model, vocab)
    prime(model)
    assert _breaks(model.train(), batch) == []
    with torch.no_grad():
        assert _breaks(model.eval(), batch) == []


def test_a_pruned_model_traces_its_mask_into_the_graph(monkeypatch):
    """Paper D's pruned fine-tune: the encoder's head mask is worked out before tracing
    (compiled.prime), so the traced forward applies it and still has no break."""
    from headlab.engine.compiled import prime
    from headlab.heads.executor import PATH_VARIABLE

    monkeypatch.setenv(PATH_VARIABLE, "fused")
    model, _, vocab = build_case("learned")
    batch = make_batch(model, vocab)
    model.encoder.set_head_mask("1011.0111")
    prime(model)
    assert _breaks(model.train(), batch) == []
    src, src_len, tgt = batch
    model.eval()                        # the gates at their test-time value: no noise drawn
    with torch.no_grad():
        eager, _ = model(src, tgt, src_len)
    compiled = torch.compile(model, backend="aot_eager", dynamic=False)      # the mask, not the shapes
    with torch.no_grad():
        traced, _ = compiled(src, tgt, src_len)
    assert torch.allclose(traced, eager, rtol=1e-5, atol=1e-6)
    model.encoder.set_head_mask(None)
    prime(model)
    with torch.no_grad():
        unmasked, _ = model(src, tgt, src_len)
    assert not torch.allclose(unmasked, eager, rtol=1e-3, atol=1e-4)       # the mask mattered


# every mixer and site; every syntax kind; OpenNMT-py's own decoder (most presets')
@pytest.mark.parametrize("case", ["learned", "syntax", "stock_decoder"])
def test_the_compiled_model_trains_as_the_eager_one(case, monkeypatch):
    """One training loss (OpenNMT-py's, with the aux terms) and every parameter's gradient
    through the compiled model (``compile_model``, dynamic shapes; aot_eager) against the
    eager model, on two batches whose sizes all differ (sentences, source and target
    lengths), with one graph: nothing in a forward fixes a size (a per-batch constant keyed
    by a length, a slice of the batch's bounds, OpenNMT-py's decoder state filled after the
    first step, the first batch's source length equal to its target's and, for syntax, to
    its source's feature columns), or every new length of a training would compile anew."""
    from torch._dynamo.utils import counters

    from headlab.engine import compiled
    from headlab.heads.executor import PATH_VARIABLE

    monkeypatch.setenv(PATH_VARIABLE, "fused")
    eager, opt, vocab = build_case(case)
    eager.train()
    ours = compiled.compile_model(copy.deepcopy(eager), "default", backend="aot_eager")
    assert ours._compiled_call_impl is not None
    graphs = counters["stats"]["unique_graphs"]
    for seed, lengths, tgt_len in ((1, (7, 1, 4), 7), (2, (5, 9, 3, 2), 8)):
        batch = make_batch(eager, vocab, seed=seed, lengths=lengths, tgt_len=tgt_len)
        values = []
        for model in (eager, ours):
            model.zero_grad(set_to_none=True)
            torch.manual_seed(seed)                 # the gates' noise: the same draws
            values.append(loss(model, opt, vocab, batch, loss_compute(model, opt, vocab)))
            values[-1].backward()
        assert torch.allclose(values[1], values[0], rtol=1e-5)
        grads = dict(ours.named_parameters())
        for name, param in eager.named_parameters():
            if param.grad is None:
                assert grads[name].grad is None, name
                continue
            scale = float(param.grad.norm()) or 1.0
            assert float((grads[name].grad - param.grad).norm()) / scale <= 1e-5, name
    assert counters["stats"]["unique_graphs"] - graphs == 1
    assert set(ours.state_dict()) == set(eager.state_dict())     # checkpoints keep their keys


def test_off_leaves_the_model_eager_and_a_bad_mode_is_refused():
    from headlab.engine.compiled import compile_model

    model, _, _ = build_case("fixed")
    assert compile_model(model, "off") is model and model._compiled_call_impl is None
    with pytest.raises(ValueError, match="-compile 'fast': one of off, default"):
        compile_model(model, "fast")


def test_headlab_train_compile_trains_the_same_model(tmp_path, monkeypatch):
    """``headlab train -compile default`` compiles the model the trainer holds (here with
    dynamo's ``eager`` backend: the graph captured and its guards kept, run as captured; the
    forward and backward graphs a compiler gets are the test above's) and writes
    the checkpoint an eager training writes, up to float rounding: same keys, same values
    within 1e-4 after 6 steps (dropout included, drawn in the same order), the key biases
    excepted (below)."""
    from test_onmt_run import toy_training

    from headlab.engine import run as onmt_run

    modes = _record_compiles(monkeypatch)
    trained = {}
    for mode in ("off", "default"):
        config = toy_training(tmp_path, name=mode, model=mode, train_steps=6, save_checkpoint_steps=6, seed=3)
        assert onmt_run.train(["-config", str(config), "-compile", mode]) == 0
        trained[mode] = torch.load(tmp_path / mode / "model.pt", map_location="cpu", weights_only=False)
    assert [mode for mode in modes if mode != "off"] == ["default"]
    assert trained["default"]["opt"].compile == "default"
    eager, ours = trained["off"]["model"], trained["default"]["model"]
    assert set(ours) == set(eager)
    # a key bias adds the same to every score of a query's row: softmax cancels it, so its
    # gradient is rounding noise alone, which Adam scales up to steps of the learning rate
    noise = [name for name in eager if name.endswith("linear_keys.bias")]
    assert noise
    differ = {name: float((ours[name] - value).norm() / value.norm()) for name, value in eager.items()
              if name not in noise and not torch.allclose(ours[name], value, rtol=1e-4, atol=1e-6)}
    assert not differ, differ


def _record_compiles(monkeypatch, backend="eager", then=None):
    """The modes :func:`headlab.engine.compiled.compile_model` is asked for, each compiled
    with dynamo's ``backend`` (the plumbing, not a compiler's speed); ``then``: called after a
    compile (a stop arriving while compiling)."""
    from headlab.engine import compiled

    modes = []
    real = compiled.compile_model

    def compile_model(model, mode, backend_asked="inductor"):
        modes.append(mode)
        real(model, mode, backend=backend)
        if then is not None and mode != "off":
            then()
        return model

    monkeypatch.setattr(compiled, "compile_model", compile_model)
    return modes


def test_the_probe_alone_then_compiled_reaches_the_published_speed_rows(tmp_path, monkeypatch):
    """The probe alone with ``--compile`` (in process on a toy model): the eager figures are
    those of the steps before the compile (the log's later reports are the compiled model's),
    then the same model, compiled in place mid-training, timed past its warm-up; and the
    published speed row's compile columns from hand-set figures (993e600's folder)."""
    import json
    import re

    from test_onmt_run import toy_training
    from test_steptime import refreshed_993e600_rows

    from headlab.workflow import sitting_probe

    modes = _record_compiles(monkeypatch)
    config = toy_training(tmp_path, name="probe", model="probe", train_steps=4)
    extra = tmp_path / "logs" / "speed-extra.json"
    extra.parent.mkdir()
    common = ["--config", str(config), "--name", "8L", "--out", str(extra), "--steps", "12", "--warmup", "2",
              "--profile-steps", "0"]
    began = time.perf_counter()
    assert sitting_probe.main([*common, "--compile", "default", "--compiled-warmup", "2", "--compiled-steps",
                               "9"]) == 0
    probe_s = time.perf_counter() - began
    # compat's build_trainer (-compile off: the probe trains eagerly), then the probe's own
    assert modes == ["off", "default"]
    found = json.loads(extra.read_text())
    probed = found["compiled"]["8L"]
    assert probed["mode"] == "default" and probed["step_ms"] > 0 and probed["warmup_steps"] == 2
    assert isinstance(probed["compile_s"], float) and probed["graphs_in_lead"] >= 0
    # the toy model's start-up and warm-up take under 0.05 s on a fast CPU: 0.0 at the
    # figure's tenths of a second (a GPU's ~55 s need no more), so bounded, not positive
    assert found["alone_step_ms"]["8L"] > 0 and 0.0 <= found["alone_ready_s"]["8L"] <= probe_s
    # 12 eager steps + 2 + 9 compiled: reports at steps 10 (eager) and 20 (compiled); "alone"
    # is the eager one's alone
    log = (extra.parent / "probe.8L.log").read_text()
    reports = re.findall(r"Step (\d+)/\s*\d+;.*?;\s*(\d+)/\s*(\d+) tok/s", log)
    assert [int(step) for step, _, _ in reports] == [10, 20]
    assert found["alone"]["8L"] == [int(reports[0][1]), int(reports[0][2])]
    with pytest.raises(SystemExit):
        sitting_probe.main([*common, "--compile", "default", "--side-by-side", "2"])
    with pytest.raises(SystemExit):
        sitting_probe.main([*common, "--compile", "default", "--compiled-warmup", "0"])

    found["compiled"] = {"8L": {"mode": "default", "step_ms": 41.5, "compile_s": 76.2, "warmup_steps": 5,
                                "graphs_in_lead": 0},
                         "7Ftoken+1L": {"mode": "default", "cut_s": 120.4}}
    extra.write_text(json.dumps(found))
    rows = refreshed_993e600_rows(tmp_path, extra.parent)
    assert (rows["8L"]["compile_mode"], rows["8L"]["step_ms_alone_compiled"], rows["8L"]["compile_s"]) == (
        "default", "41.5", "76.2")
    # stopped while compiling: no step time, and how long it had compiled (a lower bound)
    assert (rows["7Ftoken+1L"]["step_ms_alone_compiled"], rows["7Ftoken+1L"]["compile_s"]) == ("", "120.4")
    assert rows["8Ftoken"]["compile_mode"] == rows["8Ftoken"]["compile_s"] == ""


def test_a_probe_stopped_while_compiling_keeps_its_eager_figures_and_says_how_long(tmp_path, monkeypatch):
    """The runner stops a probe at its cap with SIGTERM. Arriving during the compile, the stop
    ends the probe through ``finally``: the eager figures (written before the compile) stay,
    the compiled entry holds ``cut_s``, and the process's own SIGTERM handler is back."""
    import json
    import os
    import signal

    from test_onmt_run import toy_training

    from headlab.workflow import sitting_probe

    _record_compiles(monkeypatch, then=lambda: os.kill(os.getpid(), signal.SIGTERM))
    config = toy_training(tmp_path, name="probe", model="probe", train_steps=4)
    extra = tmp_path / "speed-extra.json"
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as stopped:
        sitting_probe.main(["--config", str(config), "--name", "8L", "--out", str(extra), "--steps", "8",
                            "--warmup", "2", "--profile-steps", "2", "--compile", "default"])
    assert stopped.value.code == 128 + signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before
    found = json.loads(extra.read_text())
    assert found["alone_step_ms"]["8L"] > 0 and found["profile"]["8L"]
    assert set(found["compiled"]["8L"]) == {"mode", "cut_s"} and found["compiled"]["8L"]["cut_s"] >= 0


def test_a_probe_whose_compile_fails_keeps_its_eager_figures_and_says_why(tmp_path, monkeypatch):
    """A compile that raises (the compiler's error, pages long) is no stop: the probe exits
    with it, its eager figures stay, and the compiled entry says the error's first line, not
    a ``cut_s`` that would read as a compile still under way (a lower bound to wait on); the
    speed row carries it as ``compile_error``."""
    import json

    from test_onmt_run import toy_training

    from headlab.workflow import sitting_probe
    from headlab.workflow.sitting_speed import compiled_columns

    from headlab.engine import compiled

    def compile_model(model, mode, backend="inductor"):
        # as torch.compile fails: lazily, at the compiled model's first forward
        def fail(*args, **kwargs):
            raise RuntimeError("backend='inductor' raised:\nLoweringException: no lowering for aten.foo\n  (more)")
        if mode != "off":
            model.forward = fail
        return model

    monkeypatch.setattr(compiled, "compile_model", compile_model)
    config = toy_training(tmp_path, name="probe", model="probe", train_steps=4)
    extra = tmp_path / "speed-extra.json"
    with pytest.raises(RuntimeError):
        sitting_probe.main(["--config", str(config), "--name", "8L", "--out", str(extra), "--steps", "8",
                            "--warmup", "2", "--profile-steps", "2", "--compile", "default"])
    found = json.loads(extra.read_text())
    assert found["alone_step_ms"]["8L"] > 0
    entry = found["compiled"]["8L"]
    assert set(entry) == {"mode", "error", "failed_after_s"} and entry["failed_after_s"] >= 0
    assert entry["error"] == "RuntimeError: backend='inductor' raised:"
    assert compiled_columns(entry) == {"compile_mode": "default", "step_ms_alone_compiled": "", "compile_s": "",
                                       "compile_error": "RuntimeError: backend='inductor' raised:"}
    assert len(sitting_probe.error_line(ValueError("x" * 500))) == sitting_probe.ERROR_CHARS

    # refused at the call itself: the clock drops the probe's window and trains on eager, the
    # process ends well, and the entry still says the compile failed
    def refuse(model, mode, backend="inductor"):
        if mode != "off":
            raise RuntimeError("torch.compile is not supported here")
        return model

    monkeypatch.setattr(compiled, "compile_model", refuse)
    extra.unlink()
    assert sitting_probe.main(["--config", str(config), "--name", "8L", "--out", str(extra), "--steps", "8",
                               "--warmup", "2", "--profile-steps", "2", "--compile", "default"]) == 0
    entry = json.loads(extra.read_text())["compiled"]["8L"]
    assert entry["error"] == "RuntimeError: torch.compile is not supported here" and "cut_s" not in entry
    # an interrupt is a stop, not an error of the compile's
    from headlab.workflow.sitting_probe import ThenCompiled

    phases = ThenCompiled(eager=None, mode="default", warmup=5, steps=30, eager_done=None, model=None)
    phases.compile_began = 0.0
    assert set(phases.result(100.0, KeyboardInterrupt())) == {"mode", "cut_s"}
    assert set(phases.result(100.0, SystemExit(143))) == {"mode", "cut_s"}


def test_the_compile_cost_is_the_warmup_less_as_many_eager_steps():
    """``compile_s``: from the compile's start to the first timed compiled step, less the
    warm-up's steps at the eager step time: 90 s - 5 x 0.12 s = 89.4 s."""
    from types import SimpleNamespace

    from headlab.workflow.sitting_probe import ThenCompiled

    phases = ThenCompiled(eager=None, mode="default", warmup=5, steps=30, eager_done=None, model=None)
    assert phases.result(120.0) is None                             # never began
    phases.compile_began = 1000.0
    phases.compiled = SimpleNamespace(lead_step_ms=None, lead_window=None)
    assert phases.result(120.0)["mode"] == "default" and "step_ms" not in phases.result(120.0)
    phases.compiled = SimpleNamespace(lead_step_ms=41.5, lead_window=(1090.0, 1091.3))
    phases.graphs_at_lead = phases.graphs()
    assert phases.result(120.0) == {"mode": "default", "step_ms": 41.5, "compile_s": 89.4, "warmup_steps": 5,
                                    "graphs_in_lead": 0}
    assert phases.result(None)["compile_s"] is None                 # no eager step time to compare with


def test_every_documented_mode_is_an_option_value_and_a_bad_one_is_one_line(tmp_path, capsys):
    """The modes docs/heads.md shows (``-compile default|reduce-overhead|max-autotune-no-cudagraphs``)
    are the option's values; another is one line naming the option, before anything trains."""
    import re
    from pathlib import Path

    from test_onmt_run import toy_training

    from headlab.cli import main
    from headlab.engine.opts import COMPILE_MODES

    docs = (Path(__file__).resolve().parents[1] / "docs" / "heads.md").read_text()
    shown = re.search(r"`headlab train -compile ([a-z|-]+)`", docs).group(1).split("|")
    assert ["off", *shown] == list(COMPILE_MODES)
    config = toy_training(tmp_path, train_steps=2)
    assert main(["train", "-config", str(config), "-compile", "fast"]) == 1
    error = capsys.readouterr().err.splitlines()
    assert len(error) == 1 and error[0].startswith("headlab train: [compile] bad value for -compile: invalid choice: 'fast'")
    assert not list((tmp_path / "model").glob("*.pt"))


def test_headlab_compile_in_the_environment_is_the_default_and_an_option_wins(tmp_path, monkeypatch, capsys):
    """``$HEADLAB_COMPILE`` (what the workflow's ``training.compile`` sets for every training
    job) is ``-compile``'s default: the model trains compiled and its checkpoint says so; a
    ``-compile`` on the command line wins; a value that is not a mode is one line naming the
    variable, before anything trains."""
    from test_onmt_run import toy_training

    from headlab.cli import main

    modes = _record_compiles(monkeypatch)
    monkeypatch.setenv("HEADLAB_COMPILE", "default")
    for name, extra, expected in (("env", [], "default"), ("option", ["-compile", "off"], "off")):
        config = toy_training(tmp_path, name=name, model=name, train_steps=2, save_checkpoint_steps=2)
        assert main(["train", "-config", str(config), *extra]) == 0
        assert torch.load(tmp_path / name / "model.pt", map_location="cpu", weights_only=False)["opt"].compile == expected
    assert modes == ["default", "off"]
    capsys.readouterr()
    monkeypatch.setenv("HEADLAB_COMPILE", "fast")
    config = toy_training(tmp_path, name="bad", model="bad", train_steps=2)
    assert main(["train", "-config", str(config)]) == 1
    error = capsys.readouterr().err.splitlines()
    assert len(error) == 1 and error[0].startswith(
        "headlab train: [HEADLAB_COMPILE] bad value for $HEADLAB_COMPILE: 'fast' (one of off, default,"), error
    assert not (tmp_path / "bad").exists()
