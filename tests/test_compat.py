"""headlab.engine.compat: start-up cost of the plugin (in a fresh interpreter: pytest's own may
already have imported what is measured here)."""
from __future__ import annotations

import itertools
import subprocess
import sys

import pytest

PROBE = """
import sys
import headlab.engine.plugin
loaded_at_start = "spacy.errors" in sys.modules
import onmt.transforms.terminology as terminology   # onmt's own `import spacy`
from spacy.tokens import Doc                          # a submodule import loads the real spacy
print(loaded_at_start, Doc.__module__, callable(terminology.spacy.load), "spacy.errors" in sys.modules)
"""


def test_spacy_stays_unloaded_until_used():
    pytest.importorskip("spacy")
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    # torch's import-time inspect.getmodule walk and onmt's `import spacy` leave it unloaded;
    # the first real use gets the real module
    assert out.stdout.split() == ["False", "spacy.tokens.doc", "True", "True"]


def test_onmt_import_deprecations_silenced_and_nothing_else():
    # issue 24 item 7: OpenNMT-py's torch.cuda.amp.custom_fwd/bwd FutureWarnings were in every
    # job's log; any headlab module may import onmt first (toy_vocabs does, before the plugin)
    code = ("import warnings\nfrom headlab.engine.model import toy_vocabs\ntoy_vocabs(8)\n"
            "import onmt.modules.sru\nwarnings.warn('another FutureWarning', FutureWarning)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "custom_fwd" not in result.stderr and "custom_bwd" not in result.stderr
    assert "FutureWarning: another FutureWarning" in result.stderr
DETERMINISM_PROBE = """
import os, torch
import headlab.engine.plugin
print(torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.benchmark,
      os.environ.get("CUBLAS_WORKSPACE_CONFIG"))
"""


@pytest.mark.parametrize("value, expected", [
    (None, "False False None"), ("0", "False False None"), ("1", "True False :4096:8")])
def test_deterministic_switch(value, expected):
    """HEADLAB_DETERMINISTIC=1 (docs/statistics.md, "Same inputs, same numbers") turns on torch's
    deterministic algorithms and cuBLAS's fixed workspace; unset or 0 leaves torch as is."""
    import os
    env = {k: v for k, v in os.environ.items() if k not in ("HEADLAB_DETERMINISTIC", "CUBLAS_WORKSPACE_CONFIG")}
    if value is not None:
        env["HEADLAB_DETERMINISTIC"] = value
    result = subprocess.run([sys.executable, "-c", DETERMINISM_PROBE], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split("\n")[-2] == expected


MISSING_PROBE = """
import importlib.util, sys
real_find_spec = importlib.util.find_spec
hidden = {"spacy", "fasttext", "rapidfuzz", "ahocorasick"}
importlib.util.find_spec = lambda name, *a: None if name.split(".")[0] in hidden else real_find_spec(name, *a)
for name in hidden:                        # as on a machine without them
    sys.modules.pop(name, None)
import headlab.engine
importlib.util.find_spec = real_find_spec
import onmt.bin.train, onmt.transforms.clean as clean, onmt.transforms.fuzzymatch as fuzzymatch
try:
    clean.fasttext.load_model("lid.bin")
except ImportError as err:
    print("ImportError:", err)
"""


def test_onmt_starts_without_the_packages_of_transforms_headlab_does_not_use():
    """The GPU bundle carries no spaCy, fastText, RapidFuzz or pyahocorasick: OpenNMT-py still
    starts (its transforms import them at start-up), and using one says what is missing."""
    out = subprocess.run([sys.executable, "-c", MISSING_PROBE], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("ImportError: fasttext.load_model: the package 'fasttext' is not installed "
                                 "(OpenNMT-py imports it for its transforms clean")


SPAWN_PROBE = """
import multiprocessing, sys
import headlab.engine.plugin
from onmt.inputters.dynamic_iterator import DynamicDatasetIter
sys.path.insert(0, sys.argv[1])            # the worker's spaCy: a package that cannot import
data = DynamicDatasetIter.__new__(DynamicDatasetIter)
data.num_workers, data.batch_size = 1, 4096
# the worker unpickles `data` (headlab's deferral, then the patches) and prints what it got
shown = "print(data.__dict__, data); print(type(data).__iter__.__code__.co_name)"
worker = multiprocessing.get_context("spawn").Process(target=exec, args=(shown, {"data": data}))
worker.start()
worker.join()
print("worker exit", worker.exitcode)
"""


def test_a_spawned_data_worker_starts_without_spacy(tmp_path):
    """A GPU training (num_workers 1) hands its data iterator to a spawned worker, a fresh
    interpreter that unpickles it; on the GPU machine (no spaCy) the worker must not import
    OpenNMT-py's transforms before headlab's deferral has run."""
    (tmp_path / "spacy").mkdir()
    (tmp_path / "spacy/__init__.py").write_text("raise ImportError('no spaCy on this machine')\n")
    out = subprocess.run([sys.executable, "-c", SPAWN_PROBE, str(tmp_path)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "no spaCy on this machine" not in out.stderr, out.stderr[-2000:]
    assert out.stdout.splitlines()[-1] == "worker exit 0", out.stderr[-2000:]
    assert out.stdout.splitlines()[-3].startswith("{'num_workers': 1, 'batch_size': 4096} <onmt.inputters")
    # the worker iterates with the patched OpenNMT-py, as the trainer would
    assert out.stdout.splitlines()[-2] == "iter_pausing_gc"


CLI_PROBE = """
import sys
sys.path.insert(0, sys.argv[1])            # a spaCy that cannot import, as on the GPU machine
import headlab.cli
headlab.cli.COMMANDS["onmt-probe"] = ("onmt.inputters", "")
try:
    headlab.cli.main(["onmt-probe"])
except AttributeError:                     # onmt.inputters has no main: it imported
    print("imported")
"""


def test_every_headlab_command_defers_spacy_before_a_lazy_onmt_import(tmp_path):
    """Subcommands import OpenNMT-py inside functions (the head atlas, forced scoring), not
    always after headlab.engine: the command itself defers spaCy & co. first."""
    (tmp_path / "spacy").mkdir()
    (tmp_path / "spacy/__init__.py").write_text("raise ImportError('no spaCy on this machine')\n")
    out = subprocess.run([sys.executable, "-c", CLI_PROBE, str(tmp_path)], capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.split() == ["imported"], out.stderr[-2000:]


# -- the patch itself: guarded, once, all or nothing, wrapping upstream's loader ------------

def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_another_onmt_version_is_refused_in_one_line_before_any_patch():
    code = ("import sys, onmt\nonmt.__version__ = '3.6.0'\nupstream = onmt.trainer.Trainer.train\n"
            "from headlab.cli import main\ncode = main(['translate', '-model', 'm.pt', '-src', 's.txt'])\n"
            "print(code, onmt.trainer.Trainer.train is upstream)\n")
    result = _python("import onmt.trainer\n" + code)
    assert result.stdout.split() == ["1", "True"], result.stderr[-2000:]
    # (onmt's own import warnings come first here: the probe imports it before headlab)
    assert "Traceback" not in result.stderr and result.stderr.splitlines()[-1] == (
        "headlab translate: headlab patches OpenNMT-py 3.5.1, found 3.6.0: pip install --no-deps OpenNMT-py==3.5.1")


def test_a_failing_patch_leaves_opennmt_py_as_upstream_made_it():
    code = """
import onmt.trainer, onmt.models.model_saver as saver, onmt.utils.optimizers as optimizers, onmt.opts
before = {"train": onmt.trainer.Trainer.train, "load": saver.load_checkpoint,
          "from_opt": optimizers.Optimizer.__dict__["from_opt"], "opts": onmt.opts.model_opts}
from headlab.engine import compat
def broken():
    raise RuntimeError("a patch that no longer fits")
compat.PATCHES = compat.PATCHES[:-2] + (broken,) + compat.PATCHES[-2:]
try:
    compat.apply()
except RuntimeError as err:
    print("raised:", err)
after = {"train": onmt.trainer.Trainer.train, "load": saver.load_checkpoint,
         "from_opt": optimizers.Optimizer.__dict__["from_opt"], "opts": onmt.opts.model_opts}
print(all(after[k] is before[k] for k in before), compat._REPLACED, compat._APPLIED)
"""
    result = _python(code)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == ["raised: a patch that no longer fits", "True [] False"]


def test_each_upstream_name_is_replaced_once():
    import headlab.engine.plugin  # noqa: F401
    from headlab.engine import compat

    names = [(id(owner), name) for owner, name, _ in compat._REPLACED]
    assert len(names) == len(set(names)) and len(names) >= 25
    import onmt.utils.optimizers as optimizers
    with pytest.raises(RuntimeError, match="Optimizer.from_opt patched twice"):
        compat._replace(optimizers.Optimizer, "from_opt", None)
    assert callable(optimizers.Optimizer.from_opt)


def _checkpoint(tmp_path, old_format: bool):
    """A 3.5.1 checkpoint as stock OpenNMT-py writes it, or one of an older version (LayerNorm
    a_2/b_2, options added since missing, an FFN bias)."""
    import argparse
    import torch

    norm = ("a_2", "b_2") if old_format else ("weight", "bias")
    model = {f"encoder.layer_norm.{norm[0]}": torch.ones(4), f"encoder.layer_norm.{norm[1]}": torch.zeros(4),
             "encoder.transformer.0.feed_forward.w_1.weight": torch.eye(4),
             "encoder.transformer.0.feed_forward.w_1.bias": torch.arange(4.0)}
    opt = argparse.Namespace(encoder_type="transformer", hidden_size=4)
    if not old_format:
        opt.num_kv, opt.add_ffnbias, opt.parallel_residual = 0, True, False
    path = tmp_path / ("old.pt" if old_format else "stock.pt")
    torch.save({"model": model, "generator": {"weight": torch.ones(2, 4)}, "vocab": {"src": ["a"]},
                "opt": opt, "optim": None}, path)
    return path


@pytest.mark.parametrize("old_format", [False, True])
def test_checkpoints_load_as_upstream_loads_them(tmp_path, monkeypatch, old_format):
    import torch
    import headlab.engine.plugin  # noqa: F401
    import onmt.model_builder
    import onmt.models.model_saver as saver
    from headlab.engine import compat

    path = _checkpoint(tmp_path, old_format)
    upstream = compat.upstream(saver, "load_checkpoint")
    ours = onmt.model_builder.load_checkpoint(str(path))
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")       # upstream as on torch < 2.6
    reference = upstream(str(path))
    assert ours["model"].keys() == reference["model"].keys() == {
        "encoder.layer_norm.weight", "encoder.layer_norm.bias", "encoder.transformer.0.feed_forward.w_1.weight",
        "encoder.transformer.0.feed_forward.w_1.bias"}
    assert all(torch.equal(ours["model"][key], reference["model"][key]) for key in ours["model"])
    assert vars(ours["opt"]) == vars(reference["opt"])
    assert ours["opt"].num_kv == 0 and ours["opt"].add_ffnbias is True       # upstream's fix-ups
    assert ours["opt"].parallel_mode == "data_parallel"


# -- building a model: no meta-device machinery, the same initial weights --------------------

BUILD_PROBE = """
import sys, torch
from headlab.engine.model import model_opt, toy_vocabs
from onmt.model_builder import build_model
from onmt.modules.position_ffn import PositionwiseFeedForward
opt = model_opt(enc_heads="7Ftoken+1L", enc_layers=1, dec_layers=1, hidden_size=16, transformer_ff=32)
opt.gpu_ranks, opt.world_size, opt.train_from, opt.update_vocab, opt.gpu = [], 1, None, False, -1
torch.manual_seed(7)
before = torch.get_rng_state()
PositionwiseFeedForward(16, 32)               # upstream: skip_init, which draws nothing
unchanged = torch.equal(before, torch.get_rng_state())
model = build_model(opt, opt, toy_vocabs(12), None, 0)
print(unchanged, [name for name in ("sympy", "torch.fx.experimental.symbolic_shapes", "torch._dynamo")
                  if name in sys.modules])
"""


def test_a_model_is_built_without_the_meta_device_machinery_and_the_same_random_draws():
    """``skip_init``'s ``to_empty`` imported sympy and torch's symbolic shapes (0.75 CPU-s in
    every training, translation and scoring job); the modules it built are now constructed
    directly, the CPU random state restored as ``skip_init`` left it."""
    out = _python(BUILD_PROBE)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[0] == "True []"


def test_a_checkpoint_is_counted_without_torch_dynamo(tmp_path):
    """``headlab params --model`` built the model under ``torch.device("meta")``, whose first
    use imports torch._dynamo (1.0 CPU-s a job); it builds on the CPU, and counts the same."""
    code = f"""
import sys, torch
from headlab.engine.model import build_model, count_parameters, model_opt, save_checkpoint, toy_vocabs
from headlab.engine.params import count_checkpoint
opt = model_opt(enc_heads="8L", enc_layers=1, dec_layers=1, hidden_size=16, transformer_ff=32,
                share_embeddings=True)
vocabs = toy_vocabs(12, share=True)
model = build_model(opt, vocabs)
save_checkpoint(model, opt, vocabs, {str(tmp_path / "model.pt")!r})
print(count_checkpoint({str(tmp_path / "model.pt")!r}), count_parameters(model), "torch._dynamo" in sys.modules)
"""
    out = _python(code)
    assert out.returncode == 0, out.stderr[-2000:]
    counted, built, dynamo = out.stdout.split()
    assert counted == built and dynamo == "False"


OPTIMIZER_PROBE = """
import sys, torch
import headlab.engine.plugin
param = torch.nn.Parameter(torch.ones(3))
optimizer = torch.optim.Adam([param], lr=0.1, fused=True)
param.grad = torch.full((3,), 2.0)
optimizer.step()
state = optimizer.state_dict()
optimizer.zero_grad()
optimizer.load_state_dict(state)
optimizer.add_param_group({"params": [torch.nn.Parameter(torch.zeros(2))]})
print([round(value, 6) for value in param.tolist()], param.grad, len(optimizer.param_groups),
      "torch._dynamo" in sys.modules)
import torch._dynamo
optimizer.zero_grad()
param.grad = torch.full((3,), 2.0)
optimizer.step()
method = torch.optim.Optimizer.zero_grad.__wrapped__
print([round(value, 6) for value in param.tolist()], getattr(method.__dynamo_disable, "_torchdynamo_disable", None))
"""


def test_an_optimizer_works_without_importing_torch_dynamo():
    """torch's ``_disable_dynamo`` wrappers of the optimizers' methods imported torch._dynamo
    on their first call (1.5-2 CPU-s of every training); they call the methods directly until
    torch._dynamo is loaded, and upstream's guard after; ``step`` imported it at every call
    (graph breaks around the update). Adam's first step moves each weight by
    lr * g / (|g| + eps): 1 - 0.1 = 0.9; the second, with the same gradient (m = 0.38,
    v = 0.007996, bias-corrected 2 and 4), by 0.1 again."""
    out = _python(OPTIMIZER_PROBE)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines() == ["[0.9, 0.9, 0.9] None 2 False", "[0.8, 0.8, 0.8] True"]


# -- the data pipeline: upstream's batches, sooner -----------------------------------------

def _toy_train_iterator(folder):
    """OpenNMT-py's training iterator for the toy training of ``folder`` (no workers), built
    as ``onmt.train_single`` builds it, its shuffler seeded alike each time."""
    import random

    from onmt.bin.train import _get_parser
    from onmt.inputters.dynamic_iterator import build_dynamic_dataset_iter
    from onmt.train_single import _init_train
    from onmt.utils.parse import ArgumentParser
    from test_onmt_run import toy_training

    config = folder / "train.yaml"
    if not config.is_file():
        toy_training(folder, bucket_size=32, batch_size=24)
    opt, _ = _get_parser().parse_known_args(["-config", str(config)])
    ArgumentParser.validate_train_opts(opt)
    ArgumentParser.update_model_opts(opt)
    ArgumentParser.validate_model_opts(opt)
    _, vocabs, transforms_cls = _init_train(opt)
    random.seed(7)
    return build_dynamic_dataset_iter(opt, transforms_cls, vocabs)


def _same(first, second) -> bool:
    """Batches (nested dicts, lists and tuples of tensors and plain values) equal, dtypes too."""
    import torch

    if isinstance(first, torch.Tensor):
        return isinstance(second, torch.Tensor) and first.dtype == second.dtype and torch.equal(first, second)
    if isinstance(first, dict):
        return isinstance(second, dict) and first.keys() == second.keys() and all(
            _same(first[key], second[key]) for key in first)
    if isinstance(first, (list, tuple)):
        return type(first) is type(second) and len(first) == len(second) and all(
            _same(one, other) for one, other in zip(first, second))
    return first == second


def test_the_data_iterator_pauses_gc_while_it_batches_and_yields_upstreams_batches(tmp_path):
    """Collection is paused while the iterator fills, sorts and batches a bucket (seen from
    its sort key, called inside), on again while the trainer holds a batch and after the
    last; the batches, their order and every tensor are upstream's (the toy corpus: 60
    sentence pairs, buckets of 32, three passes)."""
    import gc

    import headlab.engine.plugin  # noqa: F401
    from headlab.engine import compat
    from onmt.inputters.dynamic_iterator import DynamicDatasetIter
    from onmt.inputters.text_utils import text_sort_key

    upstream = compat.upstream(DynamicDatasetIter, "__iter__")
    expected = list(itertools.islice(upstream(_toy_train_iterator(tmp_path)), 12))

    data = _toy_train_iterator(tmp_path)
    inside = []

    def sort_key(example):
        inside.append(gc.isenabled())
        return text_sort_key(example)

    data.sort_key = sort_key
    got, held = [], []
    assert gc.isenabled()
    for batch in itertools.islice(iter(data), 12):
        held.append(gc.isenabled())
        got.append(batch)
    assert gc.isenabled()
    assert len(got) == 12 and _same(got, expected)
    assert inside and not any(inside)
    assert all(held)
    # a trainer that runs with collection off keeps it off
    gc.disable()
    try:
        next(iter(data))
        assert not gc.isenabled()
    finally:
        gc.enable()


def _all_strings(alphabet: str, longest: int):
    for length in range(longest + 1):
        for letters in itertools.product(alphabet, repeat=length):
            yield "".join(letters)


@pytest.mark.parametrize("defaults", [None, "x"])
def test_plain_lines_skip_feature_parsing_and_parse_as_upstream(defaults):
    """Every string up to 7 characters of ``a``, space, newline and the feature delimiter,
    without features (``n_feats`` 0): the text, the features and any refusal are upstream's."""
    import headlab.engine.plugin  # noqa: F401
    import onmt.inputters.text_corpus as text_corpus
    from onmt.inputters.text_utils import parse_features as upstream

    def outcome(parse, line):
        try:
            return parse(line, n_feats=0, defaults=defaults)
        except AssertionError:
            return "refused"

    assert text_corpus.parse_features is not upstream
    lines = list(_all_strings("a \n\uffe8", 7))
    assert len(lines) == 21845
    differ = [line for line in lines if outcome(text_corpus.parse_features, line) != outcome(upstream, line)]
    assert differ == []
    assert outcome(text_corpus.parse_features, "ein Hund\n") == ("ein Hund", None)
    assert outcome(text_corpus.parse_features, "ein\uffe8A Hund\n") == "refused"


def test_upstream_names_what_a_patch_replaced_and_refuses_the_rest():
    import onmt.trainer
    import headlab.engine.plugin  # noqa: F401
    from headlab.engine import compat
    from headlab.engine.step import accum_batches

    assert onmt.trainer.Trainer._accum_batches is accum_batches
    assert compat.upstream(onmt.trainer.Trainer, "_accum_batches").__module__ == "onmt.trainer"
    with pytest.raises(KeyError, match="Trainer.train_step"):
        compat.upstream(onmt.trainer.Trainer, "train_step")
