"""Every change headlab makes to OpenNMT-py 3.5.1 and torch, in one place.

Applied once by :func:`apply` (``import headlab.engine.plugin`` calls it, and a spawned
data-loading worker when it unpickles its iterator: :func:`_rebuild_dataset_iter`): for OpenNMT-py
3.5.1 only (any other version is refused in one line, as its private names may have moved),
every patch or none, each upstream name replaced once (:func:`_replace` refuses a second).
Each patch says what upstream does, why it breaks here, and what we do instead; most wrap
upstream's function rather than replace it.

The only other places that change OpenNMT-py at run time:

* :func:`headlab.engine.run.train` sets ``onmt.bin.train.spawned_train`` for multi-GPU
  training (a spawned process must import the plugin first);
* :class:`headlab.engine.steptime.StepClock` wraps trainer methods with timers, in the
  processes it times only (a GPU sitting's trainings, ``make bench``'s training parts).
"""
from __future__ import annotations

import functools
import importlib.util
import sys
import types

_APPLIED = False


class _DeferredModule(types.ModuleType):
    """A module placeholder that imports the real module on its first unknown attribute
    (PEP 562 ``__getattr__``). It carries the real ``__spec__`` and ``__file__`` so that
    ``import spacy`` (which reads ``__spec__``) and torch's ``inspect.getmodule`` walk over
    ``sys.modules`` (which reads ``__file__``) leave it unloaded; the standard library's
    ``importlib.util.LazyLoader`` loads on *any* attribute, those two included."""

    def __getattr__(self, attr):
        real = sys.modules.get(self.__name__)
        if real is self:
            del sys.modules[self.__name__]
            real = importlib.import_module(self.__name__)
        return getattr(real, attr)


class _MissingModule(types.ModuleType):
    """Stands for an optional module that is not installed: its attributes are more such
    placeholders (so ``from rapidfuzz import fuzz`` at import time works), and calling one
    raises the ImportError the import would have raised."""

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _MissingModule(f"{self.__name__}.{attr}")

    def __call__(self, *args, **kwargs):
        package = self.__name__.split(".")[0]
        raise ImportError(f"{self.__name__}: the package {package!r} is not installed (OpenNMT-py imports it "
                          f"for its transforms {OPTIONAL_IMPORTS[package]}, which headlab does not use)")


#: what ``onmt/transforms/__init__.py`` imports at start-up (it imports every transform
#: module) for transforms headlab never uses -> those transforms
OPTIONAL_IMPORTS = {"spacy": "terminology", "ahocorasick": "terminology, inlinetags", "fasttext": "clean",
                    "rapidfuzz": "fuzzymatch"}


def defer_optional_imports(find_spec=importlib.util.find_spec) -> None:
    """OpenNMT-py imports every transform module at start-up, so every train/translate/score
    process paid for ``import spacy`` (terminology.py: 1.2 s of its 3.8 s start-up), and
    could not start at all where spaCy, fastText, RapidFuzz or pyahocorasick are missing
    (the GPU bundle carries none of them: 8 MB of wheels, and spaCy's parses are data).
    An installed spacy is bound to a :class:`_DeferredModule` (the real import happens on
    first use: the terminology transform, or headlab's parsers); a missing module of
    :data:`OPTIONAL_IMPORTS` to a :class:`_MissingModule` (an ImportError naming it on first
    use). Installed ones other than spacy are left alone. Called by
    ``headlab.engine``'s ``__init__``, so before any OpenNMT-py import of headlab's."""
    for name in OPTIONAL_IMPORTS:
        if name in sys.modules:
            continue
        spec = find_spec(name)
        if spec is None:
            sys.modules[name] = _MissingModule(name)
        elif name == "spacy":
            module = _DeferredModule(name)
            module.__spec__, module.__file__, module.__loader__ = spec, spec.origin, spec.loader
            sys.modules[name] = module


def _build_modules_directly() -> None:
    """OpenNMT-py builds embeddings, attention projections, feed-forward layers and the
    generator with ``torch.nn.utils.skip_init`` (allocate on the meta device, then
    ``to_empty``) to save the throw-away random init. ``to_empty`` runs torch's Python
    reference of ``empty_like``, whose first call imports sympy and the symbolic-shape
    machinery: 0.75 CPU-s of every process that builds a model (each training, translation,
    scoring job), far more than the init it saves. We construct the modules normally;
    their values are overwritten either way (``param_init``/Glorot for a new model, the
    checkpoint otherwise). Embeddings and attention projections have been built this way
    since the start; the feed-forward layers and the generator are built with the CPU
    random state restored afterwards, as ``skip_init`` left it, so that a seed gives the
    same initial model as before."""
    import onmt.model_builder
    import onmt.modules.embeddings
    import onmt.modules.multi_headed_attn
    import onmt.modules.position_ffn
    import torch

    def build(module_cls, *args, **kwargs):
        return module_cls(*args, **kwargs)

    def build_leaving_the_random_state(module_cls, *args, **kwargs):
        # on the CPU unless told otherwise, as skip_init, whatever ``torch.device`` context
        # is active (a meta-device build keeps a real generator: the loss modules move it)
        kwargs.setdefault("device", "cpu")
        with torch.random.fork_rng(devices=[]):
            return module_cls(*args, **kwargs)

    for module in (onmt.modules.embeddings, onmt.modules.multi_headed_attn):
        _replace(module, "skip_init", build)
    for module in (onmt.modules.position_ffn, onmt.model_builder):
        _replace(module, "skip_init", build_leaving_the_random_state)


def _optimizers_without_importing_dynamo() -> None:
    """torch imports torch._dynamo (1.5-2 CPU-s, more than torch itself) in every process
    that trains, for guards that only matter while torch.compile traces the optimizer:
    ``Adam.step`` (each optimizer's ``step``) is wrapped by ``_use_grad_for_differentiable``,
    which imports it at every call to mark graph breaks around the update, and the
    optimizers' bookkeeping (``add_param_group``, ``zero_grad``, ``state_dict``,
    ``load_state_dict``) by ``torch._disable_dynamo``, which imports it at the first call to
    build a ``torch._dynamo.disable`` of the method, cached on it as ``__dynamo_disable``.
    Nothing can be traced before torch._dynamo is imported, so while it is not loaded a
    ``step`` runs its update under the same grad mode without the graph breaks, and each
    bookkeeping method gets a stand-in cache that calls it directly; once torch._dynamo is
    loaded (by anything: torch.compile, a profiler), both are upstream's, the disable then
    built and cached as upstream does."""
    import torch
    import torch.optim

    optimizer_module = importlib.import_module("torch.optim.optimizer")    # not an attribute of torch.optim

    def stand_in(method, recursive: bool):
        def call(*args, **kwargs):
            if "torch._dynamo" not in sys.modules:
                return method(*args, **kwargs)
            import torch._dynamo
            disabled = torch._dynamo.disable(method, recursive, wrapping=False)
            setattr(method, DYNAMO_CACHE, disabled)
            return disabled(*args, **kwargs)
        return call

    def step_without_graph_breaks(upstream_step):
        update = upstream_step.__wrapped__

        @functools.wraps(update)
        def step(self, *args, **kwargs):
            if "torch._dynamo" in sys.modules:
                return upstream_step(self, *args, **kwargs)
            previous = torch.is_grad_enabled()
            try:
                torch.set_grad_enabled(self.defaults["differentiable"])
                return update(self, *args, **kwargs)
            finally:
                torch.set_grad_enabled(previous)
        return step

    # the wrappers carry their methods' names (functools.wraps): they are known by their code
    disable_code = torch._disable_dynamo(lambda: None).__code__
    grad_mode_code = optimizer_module._use_grad_for_differentiable(lambda: None).__code__
    classes = {torch.optim.Optimizer, *(value for value in vars(torch.optim).values()
                                        if isinstance(value, type) and issubclass(value, torch.optim.Optimizer))}
    for cls in sorted(classes, key=lambda cls: cls.__name__):
        for name, wrapper in list(vars(cls).items()):
            code = getattr(wrapper, "__code__", None)
            if code is grad_mode_code and name == "step":
                _replace(cls, name, step_without_graph_breaks(wrapper))
            elif code is disable_code:
                cells = dict(zip(code.co_freevars, (cell.cell_contents for cell in wrapper.__closure__)))
                method = cells["fn"]
                if getattr(method, DYNAMO_CACHE, None) is None:
                    _replace(method, DYNAMO_CACHE, stand_in(method, cells["recursive"]))


#: the attribute ``torch._disable_dynamo`` caches its ``torch._dynamo.disable`` of a method in
DYNAMO_CACHE = "__dynamo_disable"


def _patch_checkpoint_loading() -> None:
    """torch>=2.6 defaults ``torch.load(weights_only=True)``, which refuses the
    ``argparse.Namespace`` every OpenNMT-py checkpoint holds (``opt``): upstream's
    ``load_checkpoint`` fails. We wrap it, not replace it, so its fix-ups of older checkpoints
    (LayerNorm ``a_2``/``b_2`` keys, options added since: ``num_kv``, ``add_ffnbias``, ...)
    still apply: it runs with ``Namespace`` allowed in weights-only loading (torch's
    ``safe_globals``). A checkpoint holding other objects (an older OpenNMT-py's pickled
    ``Optimizer``) is loaded by upstream as torch<2.6 did (``weights_only=False``) with a
    warning: only load checkpoints you trust, as with any pickle. A file that is no
    checkpoint fails upstream deep inside (``KeyError: 'opt'``, pickle's ``Memo value not
    found``); it is refused first, in one line naming it
    (:func:`headlab.checkpoints.read_checkpoint`, the tensors mapped, not read)."""
    import argparse
    import os
    import pickle

    import torch
    import onmt.model_builder
    import onmt.models.model_saver as saver
    import onmt.train_single

    from headlab.checkpoints import read_checkpoint

    original = saver.load_checkpoint

    @functools.wraps(original)
    def load_checkpoint(ckpt_path):
        read_checkpoint(ckpt_path)
        try:
            with torch.serialization.safe_globals([argparse.Namespace]):
                return original(ckpt_path)
        except pickle.UnpicklingError as err:
            from onmt.utils.logging import logger
            logger.warning("%s holds objects beyond tensors and options (%s): loaded with weights_only=False",
                           ckpt_path, str(err).splitlines()[-1][:200])
        forced = os.environ.get("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD")
        os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"     # torch.load's default, read per call
        try:
            return original(ckpt_path)
        finally:
            if forced is None:
                del os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"]
            else:
                os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = forced

    # `from onmt.models.model_saver import load_checkpoint` bound the name in these modules
    for module in (saver, onmt.model_builder, onmt.train_single):
        _replace(module, "load_checkpoint", load_checkpoint)


def _patch_average_models() -> None:
    """``onmt.bin.average_models.average_models`` updates each state-dict entry in place
    (``avg.mul_(i).add_(w).div_(i + 1)``), but tied weights are one tensor under several
    names (``share_embeddings`` + ``share_decoder_embeddings``: the encoder's and decoder's
    embeddings and the generator, three names, every preset): that tensor was updated three
    times per checkpoint, a wrong weighting towards the newest. Here each tensor is updated
    once (the first name that holds it), the rest is upstream's code; the ties stay ties in
    the averaged file."""
    import torch
    import onmt.bin.average_models as averaging

    def average_models(model_files, fp32=False):
        avg = None
        for i, model_file in enumerate(model_files):
            m = torch.load(model_file, map_location="cpu", weights_only=False)
            parts = [m["model"], m["generator"] or {}]
            if fp32:
                for part in parts:
                    for k, v in part.items():
                        part[k] = v.float()
            if i == 0:
                avg, avg_parts = m, parts
                continue
            done = set()
            for avg_part, part in zip(avg_parts, parts):
                for k, v in avg_part.items():
                    if v.data_ptr() in done:
                        continue            # a tied weight, already averaged under another name
                    done.add(v.data_ptr())
                    v.mul_(i).add_(part[k]).div_(i + 1)
        return {"vocab": avg["vocab"], "opt": avg["opt"], "optim": None,
                "generator": avg["generator"], "model": avg["model"]}

    _replace(averaging, "average_models", average_models)


def _patch_with_score() -> None:
    """OpenNMT-py 3.5.1 ``-with_score`` calls ``score.item()`` but the beam search now
    stores plain floats in ``Translation.pred_scores``: AttributeError. We make the
    scores 0-d tensors again right where translations are built."""
    import torch
    from onmt.translate.translation import TranslationBuilder

    original = TranslationBuilder.from_batch

    @functools.wraps(original)
    def from_batch(self, translation_batch):
        translations = original(self, translation_batch)
        for trans in translations:
            trans.pred_scores = [s if torch.is_tensor(s) else torch.tensor(float(s))
                                 for s in trans.pred_scores]
        return translations

    _replace(TranslationBuilder, "from_batch", from_batch)


def _extend(original, *extras):
    """``original(parser, ...)`` (an OpenNMT-py option builder), then each ``extra(parser)``."""
    @functools.wraps(original)
    def wrapped(parser, *args, **kwargs):
        original(parser, *args, **kwargs)
        for extra in extras:
            extra(parser)
    return wrapped


def _bf16_choice(parser) -> None:
    """``-model_dtype bf16`` (:func:`_patch_bf16_training`), added to OpenNMT-py's choices."""
    for action in parser._actions:
        if action.dest == "model_dtype" and "bf16" not in action.choices:
            action.choices = [*action.choices, "bf16"]
            action.help += " bf16: bfloat16 autocast without loss scaling (headlab)."


def _patch_options() -> None:
    """Add headlab's options to OpenNMT-py's own parsers, so that stock ``onmt_train`` /
    ``onmt_translate`` accept them after the plugin is imported, and checkpoints keep them.
    ``train_opts`` looks ``model_opts`` up at call time, so patching the module is enough;
    ``onmt.bin.translate`` imported ``translate_opts`` by name, so it is patched too."""
    import onmt.opts
    from headlab.engine import opts as ours

    _replace(onmt.opts, "model_opts", _extend(onmt.opts.model_opts, ours.model_opts, _bf16_choice))
    _replace(onmt.opts, "_add_train_general_opts", _extend(onmt.opts._add_train_general_opts, ours.train_opts))
    _replace(onmt.opts, "translate_opts", _extend(onmt.opts.translate_opts, ours.translate_opts))
    # translate_opts does not include model_opts: our model options must still parse
    # from a translate config (they are ignored there; the checkpoint's values win).
    import onmt.bin.translate
    _replace(onmt.bin.translate, "translate_opts", onmt.opts.translate_opts)


def _patch_fresh_init() -> None:
    """``build_model`` initialises every parameter uniformly (``-param_init``) or with
    Glorot; head modules with their own initialisation (hard-concrete gates start open)
    re-apply it afterwards, for new models only (a checkpoint's values win)."""
    import onmt.model_builder as builder
    import onmt.train_single

    original = builder.build_model

    @functools.wraps(original)
    def build_model(model_opt, opt, vocabs, checkpoint, device_id):
        model = original(model_opt, opt, vocabs, checkpoint, device_id)
        if checkpoint is not None:
            return model
        encoder = getattr(model, "encoder", None)
        for part in (encoder, getattr(model, "decoder", None)):
            if hasattr(part, "reset_head_parameters"):
                part.reset_head_parameters()
        if getattr(model_opt, "embeddings_init", "onmt") == "normal":
            import torch
            std = model_opt.word_vec_size ** -0.5
            for part in (encoder, getattr(model, "decoder", None)):
                lut = getattr(getattr(part, "embeddings", None), "word_lut", None)
                if lut is not None:  # shared embeddings: the same tensor, drawn twice
                    torch.nn.init.normal_(lut.weight, 0.0, std)
        return model

    _replace(builder, "build_model", build_model)
    _replace(onmt.train_single, "build_model", build_model)  # imported by name there


def _patch_test_model_loading() -> None:
    """Test-time head ablation (paper A §4.3): the translate options ``-disable_enc_heads``,
    ``-disable_dec_heads`` and ``-disable_cross_heads`` reach the model loaded from the
    checkpoint; so does ``-rhe_prune`` (paper C Table 2)."""
    import onmt.model_builder as builder

    original = builder.load_test_model

    @functools.wraps(original)
    def load_test_model(opt, device_id=0, model_path=None):
        vocabs, model, model_opt = original(opt, device_id, model_path)
        from headlab.errors import ConfigError
        for site, part, kind in (("enc", "encoder", "encoder_type"), ("dec", "decoder", "decoder_type"),
                                 ("cross", "decoder", "decoder_type")):
            disabled = list(getattr(opt, f"disable_{site}_heads", None) or [])
            module = getattr(model, part, None)
            if not disabled:
                continue
            if not hasattr(module, "disable_heads"):
                raise ConfigError(f"-disable_{site}_heads needs a model trained with -{kind} headlab",
                                  key=f"disable_{site}_heads")
            if site == "enc":
                module.disable_heads(disabled)
            else:
                module.disable_heads(site, disabled)
        if getattr(opt, "rhe_prune", False):
            # paper C Table 2 "+RHE (Prune)": redundant RHE heads output 0 (headlab.heads.rhe)
            groups = [m for m in model.modules() if hasattr(m, "prune") and hasattr(m, "fgate")]
            if not groups:
                raise ConfigError("-rhe_prune needs a model with RHE heads (-enc_heads with RHEdea, "
                                  "RHElpea, RHErel or RHEloc)", key="rhe_prune")
            for group in groups:
                group.prune = True
        return vocabs, model, model_opt

    _replace(builder, "load_test_model", load_test_model)
    # build_translator looks it up as onmt.model_builder.load_test_model at call time,
    # onmt.utils.loss imported the name.
    import onmt.utils.loss
    _replace(onmt.utils.loss, "load_test_model", load_test_model)


def _patch_aux_loss() -> None:
    """OpenNMT-py has no hook for model-side loss terms (internals note §2). ``build_trainer``
    looks ``LossCompute`` up as a module global at call time, and every ``Statistics`` is
    created as ``onmt.utils.Statistics(...)``: replacing those two names installs
    :mod:`headlab.engine.aux_loss` (weighted KL / L0 terms, logged apart, perplexity kept
    pure cross-entropy)."""
    import onmt.trainer
    import onmt.utils
    import onmt.utils.statistics
    from headlab.engine.aux_loss import AuxLossCompute, AuxStatistics

    _replace(onmt.trainer, "LossCompute", AuxLossCompute)
    _replace(onmt.utils, "Statistics", AuxStatistics)
    _replace(onmt.utils.statistics, "Statistics", AuxStatistics)


def _patch_model_selection() -> None:
    """Model selection by validation loss (:mod:`headlab.engine.selection`): each validation
    result is recorded where the trainer reports it (``Trainer._report_step``), and
    ``ModelSaver._rm_checkpoint`` (the ``-keep_checkpoint`` rotation) spares the best
    checkpoint. Both are no-ops unless ``-model_selection valid_loss`` started a tracker."""
    import onmt.models.model_saver as saver
    import onmt.trainer
    from headlab.engine import selection

    report = onmt.trainer.Trainer._report_step

    @functools.wraps(report)
    def _report_step(self, learning_rate, step, valid_stats=None, train_stats=None):
        if valid_stats is not None:
            if selection.TRACKER is not None:
                selection.TRACKER.record(step, valid_stats)
            if getattr(valid_stats, "aux", None):
                from onmt.utils.logging import logger
                logger.info("Validation aux: %s", valid_stats.aux_line())
        return report(self, learning_rate, step, valid_stats=valid_stats, train_stats=train_stats)

    _replace(onmt.trainer.Trainer, "_report_step", _report_step)
    remove = saver.ModelSaver._rm_checkpoint

    @functools.wraps(remove)
    def _rm_checkpoint(self, name):
        if selection.TRACKER is not None and selection.TRACKER.protects(name):
            return
        remove(self, name)

    _replace(saver.ModelSaver, "_rm_checkpoint", _rm_checkpoint)


def _patch_optimizer_state_in_newest_checkpoint() -> None:
    """Every checkpoint OpenNMT-py saves carries the optimizer (Adam's two moments: twice the
    model), though only the newest is ever resumed from; the older ones kept for averaging
    (paper C: the last 10) and model selection need the weights only. A base model's
    checkpoint is ~0.6 GB, a third of it weights: ten kept per model fill a GPU machine's
    disk. Once ``ModelSaver.save`` has written step N, the checkpoint this saver wrote before
    it is rewritten with ``optim: None`` (written aside and renamed over: an interrupted
    rewrite leaves the full file). So the newest checkpoint on disk always has its optimizer
    state, even if the process dies while writing the next one (that file is then
    unreadable and resuming skips it: :func:`headlab.engine.run.resume_point`). The final
    ``<save_model>.pt`` is a copy of the chosen checkpoint, stripped or not; translation,
    averaging and fine-tunes (``reset_optim: all``) read no optimizer state."""
    import os

    import torch
    import onmt.models.model_saver as saver

    save = saver.ModelSaverBase.save

    @functools.wraps(save)
    def save_and_strip_previous(self, step, moving_average=None):
        done_before = self.last_saved_step
        save(self, step, moving_average=moving_average)
        if self.save_format != "pytorch" or self.last_saved_step == done_before:
            return                          # nothing written (or safetensors: optimizer apart)
        if torch.distributed.is_initialized() and torch.distributed.get_rank() != 0:
            return                          # rank 0 writes (and rewrites) the checkpoints
        written = f"{self.base_path}_step_{step}.pt"
        previous = getattr(self, "headlab_previous", None)
        if previous is None:                # this process's first save: a resumed run's is the
            from headlab.engine.run import checkpoints     # checkpoint it resumed from
            older = [path for done, path in checkpoints(self.base_path) if done < step]
            previous = str(older[-1]) if older else None
        self.headlab_previous = written
        if previous is None or previous == written or not os.path.exists(previous):
            return                          # the first checkpoint, or rotated away by keep_checkpoint
        ckpt = torch.load(previous, map_location="cpu", weights_only=False)
        if ckpt.get("optim") is None:
            return
        ckpt["optim"] = None
        tmp = previous + ".tmp"
        torch.save(ckpt, tmp)
        os.replace(tmp, previous)

    _replace(saver.ModelSaverBase, "save", save_and_strip_previous)


def _patch_optimizer_from_opt() -> None:
    """Every optimizer OpenNMT-py builds goes through ``Optimizer.from_opt`` (which sees the
    model and the options); two things are set there: the model is remembered, for
    :func:`_patch_optimizer_freezes_pruned_heads`; with ``-model_dtype bf16``, the optimizer
    takes OpenNMT-py's AMP code path with a *disabled* GradScaler (its
    scale/unscale/step/update are then plain backward and step) and records ``amp_dtype``
    for :func:`_patch_bf16_training`."""
    import torch
    import onmt.utils.optimizers as optimizers

    from_opt = optimizers.Optimizer.from_opt.__func__

    @functools.wraps(from_opt)
    def from_opt_keeping_model(cls, model, opt, checkpoint=None):
        optim = from_opt(cls, model, opt, checkpoint=checkpoint)
        optim.headlab_model = model
        if getattr(opt, "model_dtype", "fp32") == "bf16":
            optim._fp16 = "amp"
            optim._scaler = torch.amp.GradScaler("cuda", enabled=False)
            optim.amp_dtype = torch.bfloat16
        return optim

    _replace(optimizers.Optimizer, "from_opt", classmethod(from_opt_keeping_model))


def _patch_fused_adam() -> None:
    """Upstream builds ``-optim adam`` as ``torch.optim.Adam(params, lr, betas, eps=1e-8)``:
    torch's default implementation, which updates one parameter tensor at a time on the CPU
    (about ten ops each) and in a few multi-tensor launches per group on CUDA, where the
    GradScaler of ``-model_dtype fp16`` also reads ``found_inf`` back every step (a host
    sync). headlab builds the same optimizer with ``fused=True`` (torch's single-kernel Adam,
    on CPU and CUDA alike): the same update (within 1e-6 over 20 steps,
    tests/test_fused_adam.py), a fixed number of ops per step whatever the number of
    parameter tensors, and the scaler's unscale and inf check inside the kernel. The option
    ``-adam_impl torch`` keeps torch's default (a model option, recorded in onmt.yaml)."""
    import torch
    import onmt.utils.optimizers as optimizers

    build = optimizers.build_torch_optimizer

    @functools.wraps(build)
    def build_fused_adam(model, opt):
        optimizer = build(model, opt)
        if type(optimizer) is not torch.optim.Adam or getattr(opt, "adam_impl", "fused") != "fused":
            return optimizer
        params = [p for group in optimizer.param_groups for p in group["params"]]
        if not params or any(p.device.type not in ("cpu", "cuda") or not p.is_floating_point() for p in params):
            return optimizer
        defaults = optimizer.defaults
        return torch.optim.Adam(params, lr=defaults["lr"], betas=defaults["betas"], eps=defaults["eps"],
                                fused=True)

    _replace(optimizers, "build_torch_optimizer", build_fused_adam)


def _rebuild_dataset_iter(cls):
    """Unpickling target of :func:`_patch_spawned_data_workers` (module level: pickle finds
    it by name, and importing this module is the point). The worker then applies the
    patches, so it runs the OpenNMT-py the trainer runs (the data iterator's among them);
    pickle has imported the iterator's module already, which is all apply needs first.
    It also asks to die with the trainer (:func:`_die_with_parent`)."""
    _die_with_parent()
    apply()
    return cls.__new__(cls)


#: Linux's prctl option: the signal the calling process gets when its parent ends
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """A data worker outlives a trainer killed with SIGKILL (the OOM killer's, a lost
    session's): upstream's worker notices a dead parent only between two requests, and one
    blocked writing its prefetched batches to the dead trainer's pipe never gets there (after
    the resume test one slept on, holding its shared-memory batches, until killed by hand). On
    Linux the kernel now sends the worker SIGKILL when the trainer ends; a trainer gone
    while this is set up is caught by its pid. Elsewhere, and in a main process, nothing
    changes.

    This runs while the worker unpickles its task, before multiprocessing records the parent
    (``parent_process()`` is still None then): the parent is ``getppid()``, and the process's
    name, which spawn has set already, tells a worker from a main process."""
    import multiprocessing
    if multiprocessing.current_process().name == "MainProcess" or not sys.platform.startswith("linux"):
        return
    import ctypes
    import os
    import signal
    trainer = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0 and os.getppid() != trainer:
        os.kill(os.getpid(), signal.SIGKILL)


def _patch_spawned_data_workers() -> None:
    """With ``-num_workers`` >= 1 upstream's ``DataLoader`` starts its workers with
    ``multiprocessing_context="spawn"``: a fresh interpreter that unpickles the
    ``DynamicDatasetIter``, and so imports ``onmt`` (every transform module, spaCy's
    ``terminology`` too) before anything of headlab's has run. Where spaCy is not installed
    (the GPU machine: the bundle never carries it) the worker dies on ``import spacy`` and
    the training with it ("DataLoader worker exited unexpectedly"). The iterator now pickles
    through :func:`_rebuild_dataset_iter` here, so the worker imports
    :mod:`headlab.engine` (its :func:`defer_optional_imports`) before the first OpenNMT-py
    module the pickle names; the iterator's state is upstream's ``__dict__``, unchanged."""
    from onmt.inputters.dynamic_iterator import DynamicDatasetIter

    def reduce_ex(self, protocol):
        return _rebuild_dataset_iter, (type(self),), self.__dict__

    _replace(DynamicDatasetIter, "__reduce_ex__", reduce_ex)


def _patch_bucketing_pauses_gc() -> None:
    """``DynamicDatasetIter.__iter__`` fills a bucket (``bucket_size`` examples: 262,144 in a
    GPU sitting, ~9 passes over Multi30k) with several dicts, lists and strings per example,
    then numericalises, sorts and batches it, all before the first batch. Python's cyclic
    garbage collector runs every 700 new container objects and scans the young ones (the
    whole growing bucket, again and again as it ages into the older generations), though
    nothing there is cyclic: on this 2-core VM the first batch of a sitting's model took
    16-19 s, 9-10 s with collection paused. The iterator now pauses collection while it
    computes each next batch and restores it before handing the batch over, so the
    trainer's own code runs as before; refcounting frees everything as usual, and cyclic
    garbage made meanwhile (none is known) waits for the next collection. Batches, their
    order and every value are upstream's."""
    import gc
    from onmt.inputters.dynamic_iterator import DynamicDatasetIter

    upstream = DynamicDatasetIter.__iter__

    @functools.wraps(upstream)
    def iter_pausing_gc(self):
        batches = upstream(self)
        while True:
            was_enabled = gc.isenabled()
            gc.disable()
            try:
                batch = next(batches)
            except StopIteration:
                return
            finally:
                if was_enabled:
                    gc.enable()
            yield batch

    _replace(DynamicDatasetIter, "__iter__", iter_pausing_gc)


def _patch_step_without_host_syncs() -> None:
    """On a GPU, OpenNMT-py 3.5.1's training step waits for the device ten times, for numbers
    only its reports use: the batch's three blocking copies to the device, the
    normalisation's and the source words' (twice) ``.item()``, and four reads in the loss
    statistics. Each empties the device's queue, so the host's launching and the device's
    work stop overlapping. We move the batch without waiting and count on the host
    (:mod:`headlab.engine.step`: the iterator, ``_accum_batches`` and
    ``_gradient_accumulation``, upstream's otherwise; the loss statistics in
    :mod:`headlab.engine.aux_loss`). The step then reads nothing back; a report reads its
    sums once. Same batches, normalisation, loss and statistics."""
    import onmt.trainer
    from onmt.inputters.dynamic_iterator import OnDeviceDatasetIter
    from headlab.engine import step

    _replace(OnDeviceDatasetIter, "__iter__", step.iter_on_device)
    _replace(onmt.trainer.Trainer, "_accum_batches", step.accum_batches)
    _replace(onmt.trainer.Trainer, "_gradient_accumulation", _with_amp_dtype(step.gradient_accumulation))


def _patch_plain_lines_skip_feature_parsing() -> None:
    """``ParallelCorpus.load`` passes every source line through ``parse_features``, which
    splits each token on the feature delimiter ``￨`` and rejoins the tokens, for corpora
    without source features too (``n_src_feats`` 0): 1.4 s of a sitting's 262,144-example
    first bucket on this VM. For ``n_feats`` 0 and a line without the delimiter whose only
    newlines lead or trail, upstream returns the line without them and no features; that is
    returned directly (equal to upstream on every string up to 7 characters of ``a``, space,
    newline and ``￨``: tests/test_compat.py). Any other line goes to upstream."""
    import onmt.inputters.text_corpus as text_corpus

    upstream = text_corpus.parse_features

    @functools.wraps(upstream)
    def parse_features(line, n_feats=0, defaults=None):
        if n_feats == 0 and FEATURE_DELIMITER not in line:
            text = line.strip("\n")
            if "\n" not in text:
                return text, None
        return upstream(line, n_feats=n_feats, defaults=defaults)

    _replace(text_corpus, "parse_features", parse_features)  # imported by name there


def _patch_optimizer_freezes_pruned_heads() -> None:
    """Pruned heads (``-enc_head_mask``) are frozen, but a zero gradient freezes nothing under
    weight decay (``adamw8bit``, the paged optimizers) or moments from earlier steps (Adam,
    Adafactor). Each ``Optimizer.step`` puts the pruned heads' parameters
    (:class:`headlab.heads.prune.FrozenHeads` of the model ``from_opt`` remembered,
    :func:`_patch_optimizer_from_opt`) back to their values before it, without reading
    anything back from a GPU. Models without a head mask are untouched."""
    import onmt.utils.optimizers as optimizers
    from headlab.heads.prune import FrozenHeads

    step = optimizers.Optimizer.step

    @functools.wraps(step)
    def step_keeping_pruned_heads(self):
        model = getattr(self, "headlab_model", None)
        if model is None:
            return step(self)
        frozen = getattr(self, "headlab_frozen", None)
        if frozen is None:
            frozen = self.headlab_frozen = FrozenHeads(model)
        frozen.refresh()
        step(self)
        frozen.restore()

    _replace(optimizers.Optimizer, "step", step_keeping_pruned_heads)


def _patch_corpus_logging_keeps_log_file() -> None:
    """``WeightedMixer._logging`` (each time a training corpus starts again) calls
    ``init_logger()`` with no file, "to log stdout of spawned processes of the dataloader":
    that replaces the logger's handlers, so ``-log_file`` (headlab's ``train.log``, the
    learning curve's source) stops before the first training step. In the process that
    already has handlers we log with them; a data-loading worker (no handlers yet) gets
    upstream's console logger."""
    import onmt.inputters.dynamic_iterator as dynamic_iterator
    from onmt.utils.logging import init_logger, logger

    @functools.wraps(init_logger)
    def init_logger_unless_set(*args, **kwargs):
        return logger if logger.handlers and not args and not kwargs else init_logger(*args, **kwargs)

    _replace(dynamic_iterator, "init_logger", init_logger_unless_set)


def _patch_exact_resume() -> None:
    """OpenNMT-py resumes weights and optimizer but restarts the data stream and reseeds
    every random generator, so an interrupted-and-resumed training becomes another model.
    Three wraps carry :mod:`headlab.engine.resume`'s record through the optimizer state (the
    part of a checkpoint only a resume reads): ``Trainer.train`` draws its batches through a
    :class:`~headlab.engine.resume.DataPosition` (fast-forwarded when the optimizer came with
    a record), ``Optimizer.state_dict`` adds the record of that position and of every random
    state, ``Optimizer.load_state_dict`` keeps the record it finds."""
    import onmt.trainer
    import onmt.utils.optimizers as optimizers
    from onmt.utils.logging import logger

    from headlab.engine.resume import RECORD_KEY, DataPosition

    train = onmt.trainer.Trainer.train
    state_dict = optimizers.Optimizer.state_dict
    load_state_dict = optimizers.Optimizer.load_state_dict

    @functools.wraps(train)
    def train_from_position(self, train_iter, train_steps, *args, **kwargs):
        record = getattr(self.optim, "headlab_resume_record", None)
        if record is None and self.optim.training_step > 1:
            logger.warning("headlab: this checkpoint has no data position or random states: "
                           "the resumed training will differ from an uninterrupted one")
        position = DataPosition(train_iter, record)
        self.optim.headlab_position = position
        return train(self, position, train_steps, *args, **kwargs)

    @functools.wraps(state_dict)
    def state_dict_with_position(self):
        state = state_dict(self)
        position = getattr(self, "headlab_position", None)
        if position is not None:
            state[RECORD_KEY] = position.record()
        return state

    @functools.wraps(load_state_dict)
    def load_state_dict_keeping_position(self, state):
        self.headlab_resume_record = state.get(RECORD_KEY)
        load_state_dict(self, state)

    _replace(onmt.trainer.Trainer, "train", train_from_position)
    _replace(optimizers.Optimizer, "state_dict", state_dict_with_position)
    _replace(optimizers.Optimizer, "load_state_dict", load_state_dict_keeping_position)


def _patch_feature_embeddings() -> None:
    """Source features carry per-word syntax to the encoder (paper C; internals note §3.5),
    not embeddings: stock ``build_embeddings`` gives each feature a lookup table merged
    into the word embedding (``concat`` breaks d_model), so the encoder's embeddings are
    built without ``vocabs["src_feats"]`` (kept in ``vocabs`` itself: numericalisation
    needs it). ``HeadlabEncoder`` reads the columns back as raw integers. Models without
    source features have no ``src_feats`` and are built exactly as before."""
    import onmt.model_builder as builder

    original = builder.build_embeddings

    @functools.wraps(original)
    def build_embeddings(opt, vocabs, for_encoder=True):
        if for_encoder and "src_feats" in vocabs:
            vocabs = {k: v for k, v in vocabs.items() if k != "src_feats"}
        return original(opt, vocabs, for_encoder)

    # build_src_emb / build_tgt_emb look the name up as a module global at call time
    _replace(builder, "build_embeddings", build_embeddings)


def _with_amp_dtype(method):
    """``method`` run with ``torch.cuda.amp.autocast`` bound to the optimizer's autocast dtype
    (:func:`_patch_bf16_training`); as upstream where the optimizer has none."""
    import torch

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        dtype = getattr(self.optim, "amp_dtype", None)
        if dtype is None:
            return method(self, *args, **kwargs)
        fp16_autocast = torch.cuda.amp.autocast
        torch.cuda.amp.autocast = functools.partial(torch.amp.autocast, "cuda", dtype=dtype)
        try:
            return method(self, *args, **kwargs)
        finally:
            torch.cuda.amp.autocast = fp16_autocast
    return run


def _patch_bf16_training() -> None:
    """OpenNMT-py 3.5.1's mixed precision is ``-model_dtype fp16``: torch AMP, i.e. float16
    autocast around the forward pass and the loss (``Trainer._gradient_accumulation`` and
    ``validate`` call ``torch.cuda.amp.autocast(enabled=optim.amp)``, CUDA only) and a
    ``GradScaler`` for the backward (``Optimizer``); weights and checkpoints stay float32.
    We add ``-model_dtype bf16``: the same autocast in bfloat16, which has float32's
    exponent range, so no loss scaling (Ampere and later GPUs). Three pieces: the option
    value (:func:`_bf16_choice`, with headlab's options in :func:`_patch_options`); the
    optimizer (:func:`_patch_optimizer_from_opt`); here, the two trainer methods run with
    ``torch.cuda.amp.autocast`` bound to bfloat16 autocast (OpenNMT-py passes no dtype, and
    its default is float16): ``validate``, and the training step, which
    :func:`_patch_step_without_host_syncs` replaces and wraps so."""
    import onmt.trainer

    _replace(onmt.trainer.Trainer, "validate", _with_amp_dtype(onmt.trainer.Trainer.validate))


def _patch_compiled_training() -> None:
    """Upstream trains the model as built, eagerly: each aten op of the step is launched from
    Python, which bounds a GPU's step by the host (a sitting's H100 ran at 1.6-1.8% of its
    matrix rate). ``-compile MODE`` (default ``off``: upstream's) compiles the model's
    forward in place (:mod:`headlab.engine.compiled`) just before upstream builds the
    trainer, once the model is on its device and the optimizer and saver hold it."""
    import onmt.train_single

    build = onmt.train_single.build_trainer

    @functools.wraps(build)
    def build_trainer_compiling(opt, device_id, model, *args, **kwargs):
        from headlab.engine.compiled import compile_model
        compile_model(model, getattr(opt, "compile", "off"))
        return build(opt, device_id, model, *args, **kwargs)

    _replace(onmt.train_single, "build_trainer", build_trainer_compiling)    # imported by name there


#: environment switch for deterministic GPU training (docs/statistics.md, "Same inputs, same numbers")
DETERMINISTIC_ENV = "HEADLAB_DETERMINISTIC"


def _deterministic_gpu() -> None:
    """``HEADLAB_DETERMINISTIC=1``: the torch settings a GPU needs for bit-identical reruns,
    which OpenNMT-py 3.5.1 does not make. Its ``-seed`` (``onmt.utils.misc.set_random_seed``)
    seeds torch (CPU and CUDA), ``random`` and numpy and sets ``cudnn.deterministic``; here
    also ``torch.use_deterministic_algorithms(True)`` (atomic-add kernels such as
    ``index_add``/``scatter_add`` backward switch to deterministic ones, SDPA's flash and
    memory-efficient backward included; an op without one raises, naming itself),
    ``cudnn.benchmark = False`` and cuBLAS's fixed workspace (``CUBLAS_WORKSPACE_CONFIG``,
    read when CUDA starts, which is later in this process). Meant for GPUs: CPU runs are
    reproducible without it (with it, a few CPU kernels switch to other deterministic ones,
    so the last bits may differ from a run without it). No model path changes."""
    import os
    if os.environ.get(DETERMINISTIC_ENV, "") in ("", "0"):
        return
    import torch
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False


#: the OpenNMT-py these patches were written against (private names, line numbers)
ONMT_VERSION = "3.5.1"

#: OpenNMT-py's token feature delimiter (``onmt.inputters.text_utils.parse_features``)
FEATURE_DELIMITER = "\uffe8"

#: upstream's value of an attribute a patch added (removed again by :func:`_undo`)
_ABSENT = object()

#: what :func:`apply` replaced: (owner, attribute, upstream's value), in order
_REPLACED: list[tuple[object, str, object]] = []

#: the patches, in the order :func:`apply` runs them
PATCHES = (_build_modules_directly, _optimizers_without_importing_dynamo, _patch_checkpoint_loading,
           _patch_average_models, _patch_with_score, _patch_options, _patch_fresh_init, _patch_test_model_loading,
           _patch_aux_loss,
           _patch_model_selection, _patch_optimizer_state_in_newest_checkpoint, _patch_feature_embeddings,
           _patch_optimizer_from_opt, _patch_fused_adam, _patch_spawned_data_workers, _patch_bucketing_pauses_gc,
           _patch_plain_lines_skip_feature_parsing, _patch_step_without_host_syncs,
           _patch_optimizer_freezes_pruned_heads, _patch_exact_resume,
           _patch_corpus_logging_keeps_log_file, _patch_bf16_training, _patch_compiled_training)


def _replace(owner, name: str, value) -> None:
    """Set ``owner.name``, remembering upstream's value; a second patch of the same name is a
    bug (two wrappers in an order nobody chose)."""
    if any(done is owner and done_name == name for done, done_name, _ in _REPLACED):
        raise RuntimeError(f"headlab.engine.compat: {getattr(owner, '__name__', owner)}.{name} patched twice")
    _REPLACED.append((owner, name, owner.__dict__.get(name, getattr(owner, name, _ABSENT))))
    setattr(owner, name, value)


def _undo() -> None:
    while _REPLACED:
        owner, name, original = _REPLACED.pop()
        if original is _ABSENT:
            delattr(owner, name)
        else:
            setattr(owner, name, original)


def upstream(owner, name: str):
    """Upstream's value of ``owner.name``, which a patch replaced (tests compare against it)."""
    for done, done_name, original in _REPLACED:
        if done is owner and done_name == name:
            return original
    raise KeyError(f"headlab.engine.compat: no patch replaced {getattr(owner, '__name__', owner)}.{name}")


def check_version(version: str | None = None) -> None:
    """One line, before anything is patched, for an OpenNMT-py these patches do not fit."""
    if version is None:
        import onmt
        version = onmt.__version__
    if version != ONMT_VERSION:
        from headlab.errors import HeadlabError
        raise HeadlabError(f"headlab patches OpenNMT-py {ONMT_VERSION}, found {version}: "
                           f"pip install --no-deps OpenNMT-py=={ONMT_VERSION}")


def apply() -> None:
    """Every patch or none: one that raises undoes the ones before it (OpenNMT-py is left as
    upstream made it, not half-patched) and the error propagates."""
    global _APPLIED
    if _APPLIED:
        return
    check_version()
    defer_optional_imports()
    try:
        for patch in PATCHES:
            patch()
    except BaseException:
        _undo()
        raise
    _deterministic_gpu()
    _APPLIED = True
