"""Training through ``torch.compile`` (``headlab train -compile MODE``): off by default.

Why: a sitting's step on an H100 was bound by the host, not the GPU (1.6-1.8% of its matrix
rate, ~3,500 aten ops a 6+6 step, each one kernel launched from Python). A compiled forward
and backward launches a few fused kernels instead (``default``, ``max-autotune-no-cudagraphs``),
or replays them as CUDA graphs (``reduce-overhead``). Whether that pays for its compile time
within one sitting is for a GPU to say: the sitting's probe measures a compiled model alone
beside the eager one (:mod:`headlab.workflow.sitting_probe`), and nothing trains compiled
until it has.

What it compiles: the model's forward (``nn.Module.compile``, in place, so the checkpoints'
keys, the optimizer and the saver see the same module), with dynamic shapes (batches of
tokens change both lengths every step; a static graph would recompile for each). The loss,
the optimizer and the data stay eager. The model traces into one graph for every head kind,
mixer and site (tests/test_compiled.py): nothing in a forward reads a tensor's value or
version. Its one piece of state read outside the graph, each layer's ablation scale
(``head_scale`` x ``head_mask``), is worked out before tracing
(:meth:`HeadlabAttention.prime_scale <headlab.heads.attention.HeadlabAttention.prime_scale>`); a
change to it later (test-time ablation) is an eager model's, never a training's.

The results are the eager model's up to float rounding (fused kernels sum in another order),
so ``-compile`` is not part of a model's recipe (:mod:`headlab.workflow.recipe`), as the
attention path is not.
"""
from __future__ import annotations

import torch
import torch.fx.experimental._config

from headlab.engine.opts import COMPILE_MODES as MODES
from headlab.heads.attention import HeadlabAttention


def prime(model: torch.nn.Module) -> None:
    """Work out every attention layer's ablation scale on the model's device, eagerly."""
    device = next(model.parameters()).device
    for module in model.modules():
        if isinstance(module, HeadlabAttention):
            module.prime_scale(device)


def compile_model(model: torch.nn.Module, mode: str, backend: str = "inductor") -> torch.nn.Module:
    """``model`` with its forward compiled in place (``mode`` ``off``: as it was).
    ``backend``: torch.compile's (the tests' ``aot_eager`` runs the same graphs without
    generating code)."""
    if mode not in MODES:
        raise ValueError(f"-compile {mode!r}: one of {', '.join(MODES)}")
    if mode == "off":
        return model
    prime(model)
    # OpenNMT-py's decoder keeps the last batch's source in its ``state`` (``init_state``):
    # empty before the first forward, a key after it. Dynamo guards on that dict, so the
    # first step's graph would not serve the second (one more compile): the key is there
    # from the start (None: what ``map_state``, the only reader outside a forward, skips)
    state = getattr(getattr(model, "decoder", None), "state", None)
    if isinstance(state, dict):
        state.setdefault("src", None)
    # sizes equal in the first batch (its source and target lengths, a length and the source's
    # feature columns) would otherwise be one symbol, and the next batch, where they differ,
    # a second compile: a training's sizes are independent of each other (process-wide: a
    # process that compiles a model is a training)
    torch.fx.experimental._config.use_duck_shape = False
    if backend == "inductor":
        model.compile(mode=mode, dynamic=True)
    else:
        model.compile(backend=backend, dynamic=True)
    return model
