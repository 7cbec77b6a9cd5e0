"""Fine-tunes of a converged model with new or fixed head parameters (paper D §3.2-3.6).

``headlab finetune-config --parent P/model.pt --parent-config P/onmt.yaml --tune /ft_... \
    --save-dir C --out C/onmt.yaml`` writes the child's initial checkpoint ``C/init.pt`` and
its OpenNMT-py training config; the generic ``train`` rule then trains it (``train_from:
C/init.pt``). The child's path is the parent's plus the ``/ft_OPTIONS`` segment
(:mod:`headlab.naming`), which this reads back:

* ``gate=enc``: hard-concrete gates (``|gate``, :class:`headlab.heads.mixers.HardConcreteGate`)
  on every encoder self-attention layer. Paper D §3 gates encoder heads only ("we focus on
  pruning attention heads in encoder layers"; its Table 2 is 6 encoder layers x 8 heads);
  ``gate=all`` also gates decoder self- and cross-attention (Voita et al. 2019 gate all).
* ``enc_head_mask=ROWS``: a fixed mask of kept encoder heads (:mod:`headlab.heads.prune`).
* anything else: an OpenNMT-py training option for the fine-tune (``lambda_l0``,
  ``train_steps``, ``learning_rate``, ...), validated like every option.

New parameters, no library patch (internals notes §4.2, "offline checkpoint surgery"): the
parent checkpoint's model options get the new head specs, the model is built from them, and
the parameters the parent lacks (only head-mixer parameters may be new: the gates' ``log_alpha``,
starting open) are added to the checkpoint with their constructor values. OpenNMT-py's
strict loader then still catches every real mismatch, and ``reset_optim: all`` starts a
fresh optimizer (the parent's Adam moments do not cover the new parameters; warm-up
restarts at step 1). An interrupted fine-tune resumes from its own last checkpoint with its
own optimizer state (``headlab train``, :func:`headlab.engine.run.train`), not from
``init.pt``. A parent checkpoint whose architecture differs from what its path says
(layers, sizes, heads) is a :class:`~headlab.errors.ConfigError` naming the file.
"""
from __future__ import annotations

import argparse
import copy
import os
from pathlib import Path
from typing import Any, Mapping

import yaml

from headlab.errors import ConfigError

#: fine-tune options that change the model (the rest are training options)
MODEL_CHANGES = ("gate", "enc_head_mask")
#: model options a parent checkpoint must share with the config its path names
ARCHITECTURE = ("encoder_type", "decoder_type", "enc_layers", "dec_layers", "hidden_size", "word_vec_size",
                "heads", "transformer_ff", "enc_heads", "dec_heads", "cross_heads", "enc_head_mask",
                "share_embeddings", "share_decoder_embeddings", "add_qkvbias", "position_encoding")
GATE_SITES = {"enc": ("enc",), "all": ("enc", "dec", "cross")}


def gated_spec(spec: str, num_layers: int, site: str) -> str:
    """``spec`` with a ``|gate`` mixer added to every layer (one group per layer)."""
    from headlab.heads.spec import parse_spec
    layers = parse_spec(spec, num_layers, site=site)
    out = []
    for layer in layers:
        text = str(layer)
        out.append(text if "gate" in layer.mixers else text + "|gate")
    return out[0] if len(set(out)) == 1 else ",".join(out)


def split_options(options: Mapping[str, Any]) -> tuple[dict, dict]:
    """(model changes, training overrides) of one fine-tune segment."""
    model = {k: v for k, v in options.items() if k in MODEL_CHANGES}
    train = {k: v for k, v in options.items() if k not in MODEL_CHANGES}
    if "gate" in model and str(model["gate"]) not in GATE_SITES:
        raise ConfigError(f"gate={model['gate']!r}: expected one of {sorted(GATE_SITES)}", key="gate")
    return model, train


def _value(opt, key):
    value = getattr(opt, key, None)
    return value[0] if isinstance(value, list) and len(value) == 1 else value


def check_architecture(ckpt_opt, expected: Mapping[str, Any], path: str) -> None:
    """ConfigError naming ``path`` when the checkpoint's model options differ from ``expected``
    (the parent's config, as its path names it) on an architecture option."""
    for key in ARCHITECTURE:
        if key not in expected or not hasattr(ckpt_opt, key):
            continue
        want, have = expected[key], _value(ckpt_opt, key)
        want = want[0] if isinstance(want, list) and len(want) == 1 else want
        if str(want or "") != str(have or ""):
            raise ConfigError(f"the fine-tune's parent checkpoint has another architecture: {key} is {have!r} "
                              f"there, {want!r} in the parent's config", path=path, key=key)


def new_model_opt(ckpt_opt, changes: Mapping[str, Any]):
    """The parent's model options with the fine-tune's model changes."""
    opt = copy.deepcopy(ckpt_opt)
    if "gate" in changes:
        for site in GATE_SITES[str(changes["gate"])]:
            kind = "encoder_type" if site == "enc" else "decoder_type"
            if getattr(opt, kind, None) != "headlab":
                raise ConfigError(f"gate={changes['gate']}: the parent's {kind} is {getattr(opt, kind, None)!r}; "
                                  f"head gates need 'headlab' (at 8L it is the stock model with the same "
                                  f"parameters)", key="gate")
            layers = opt.enc_layers if site == "enc" else opt.dec_layers
            setattr(opt, f"{site}_heads", gated_spec(getattr(opt, f"{site}_heads", None) or "8L", layers, site))
    if "enc_head_mask" in changes:
        if getattr(opt, "encoder_type", None) != "headlab":
            raise ConfigError("enc_head_mask needs encoder_type 'headlab'", key="enc_head_mask")
        opt.enc_head_mask = str(changes["enc_head_mask"])
    return opt


def initial_checkpoint(parent: str, changes: Mapping[str, Any], expected: Mapping[str, Any] | None = None) -> dict:
    """The parent checkpoint with the model changes applied and the new parameters added."""
    import headlab.engine.plugin  # noqa: F401  (registers the head modules)
    from onmt.inputters.inputter import dict_to_vocabs
    from onmt.model_builder import build_base_model
    from onmt.utils.parse import ArgumentParser

    from headlab.checkpoints import read_checkpoint

    # read, not mapped: the child's checkpoint is the parent's, changed, and saved whole
    ckpt = read_checkpoint(parent, needs=("model", "opt", "vocab"), mmap=False)
    if expected:
        check_architecture(ckpt["opt"], expected, parent)
    opt = new_model_opt(ckpt["opt"], changes)
    model_opt = ArgumentParser.ckpt_model_opts(opt)
    ArgumentParser.update_model_opts(model_opt)
    ArgumentParser.validate_model_opts(model_opt)
    model = build_base_model(model_opt, dict_to_vocabs(ckpt["vocab"]))
    state = {k: v for k, v in model.state_dict().items() if not k.startswith("generator.")}
    for key, value in ckpt["model"].items():
        if key not in state:
            raise ConfigError(f"parameter {key} of the parent checkpoint is not in the fine-tuned model: "
                              f"another architecture", path=parent)
        if tuple(state[key].shape) != tuple(value.shape):
            raise ConfigError(f"parameter {key} has shape {tuple(value.shape)} in the parent checkpoint, "
                              f"{tuple(state[key].shape)} in the fine-tuned model: another architecture",
                              path=parent)
    for key, value in state.items():
        if key not in ckpt["model"]:
            if ".mixers." not in key:
                raise ConfigError(f"the fine-tuned model has a parameter {key} the parent checkpoint lacks; only "
                                  f"head-mixer parameters (gates) may be new", path=parent)
            ckpt["model"][key] = value.detach().clone()
    ckpt["opt"] = opt
    ckpt["optim"] = None            # reset_optim all: a fresh optimizer over the new parameter set
    return ckpt


def child_config(parent_config: Mapping[str, Any], train: Mapping[str, Any], model_opt, init: str,
                 save_dir: str) -> dict[str, Any]:
    """The child's OpenNMT-py training config: the parent's, its training overrides, and
    ``train_from`` its initial checkpoint with a fresh optimizer."""
    from headlab.engine.config import check_values, validate_options

    options = dict(parent_config)
    options.update(train)
    # documentation only: with train_from, OpenNMT-py takes the model options from the checkpoint
    sites = {"enc": options.get("encoder_type") == "headlab", "dec": options.get("decoder_type") == "headlab"}
    for key, site in (("enc_heads", "enc"), ("enc_head_mask", "enc"), ("dec_heads", "dec"), ("cross_heads", "dec")):
        if sites[site] and getattr(model_opt, key, None):
            options[key] = getattr(model_opt, key)
    options.update({"train_from": init, "reset_optim": "all", "save_model": f"{save_dir}/model",
                    "save_data": save_dir, "keep_checkpoint": -1})
    if "tensorboard_log_dir" in options:
        options["tensorboard_log_dir"] = f"{save_dir}/tb"
    validate_options(options, kind="train", source="fine-tune config")
    check_values(options, source="fine-tune config")
    return options


def write_finetune(parent: str, parent_config: str, options: Mapping[str, Any], save_dir: str, out: str) -> None:
    import torch

    from headlab.engine.config import write_yaml

    with open(parent_config, encoding="utf-8") as handle:
        parent_opts = yaml.safe_load(handle)
    changes, train = split_options(options)
    ckpt = initial_checkpoint(parent, changes, expected=parent_opts)
    init = f"{save_dir}/init.pt"
    # the child's options are checked before anything is written: a bad one leaves no init.pt
    child = child_config(parent_opts, train, ckpt["opt"], init, save_dir)
    Path(save_dir).mkdir(parents=True, exist_ok=True)
    tmp = f"{init}.tmp"
    torch.save(ckpt, tmp)
    os.replace(tmp, init)
    write_yaml(child, out)


def main(argv: list[str]) -> int:
    from headlab.naming import parse_tune

    parser = argparse.ArgumentParser(prog="headlab finetune-config", description=__doc__.split("\n\n")[0])
    parser.add_argument("--parent", required=True, help="the parent's checkpoint (model.pt)")
    parser.add_argument("--parent-config", required=True, help="the parent's OpenNMT-py config (onmt.yaml)")
    parser.add_argument("--tune", required=True, help="the child's tune path (its last /ft_ segment is read)")
    parser.add_argument("--save-dir", required=True, help="the child's model folder (init.pt, checkpoints)")
    parser.add_argument("--out", required=True, help="the child's OpenNMT-py YAML to write")
    args = parser.parse_args(argv)
    segments, step = parse_tune(args.tune)
    if not segments or step is not None:
        raise ConfigError(f"{args.tune!r} names no fine-tune (or a checkpoint of one)", key="tune")
    write_finetune(args.parent, args.parent_config, segments[-1], args.save_dir, args.out)
    return 0


main_finetune_config = main
