"""A fine-tune of a model trained earlier in the same sitting: paper D's chain on one GPU.

    python -m headlab.workflow.sitting_chain --manifest M --model NAME --out RESOLVED.json

A checkpoint cannot come back from a sitting (16 MiB a returned file), so a slice whose
models start from another of its models (paper D: the gated and pruned fine-tunes of a
parent 8L) trains the chain on the GPU machine, stage by stage (the runner,
:mod:`headlab.workflow.gpu_runner`, starts a stage when the one before it has ended). A
chained model of the bundle's manifest has no config yet, only its ``chain`` entry (from the
GPU plan's ``chain:``, :func:`headlab.workflow.bundle.chain_models`):

- ``parent``: the manifest model it starts from, at that model's best validation checkpoint
  (:func:`headlab.workflow.sitting.eval_checkpoint`: the checkpoint the sitting evaluates it
  at; the workflow's fine-tunes start from the parent's ``model.pt``, the same selection);
- ``options``: the fine-tune's options (:mod:`headlab.engine.finetune`: ``gate``,
  ``lambda_l0``, OpenNMT-py training options);
- ``mask_from`` (optional): a gated model of the chain; its gates at its best checkpoint
  (``headlab gates``) give the encoder head mask (paper D's stage, the same functions:
  ``kept`` = test-time gate >= 0.5), ``mask: inverse`` the inverted one (§3.6);
- ``initial_row`` (optional): the fine-tune's initial checkpoint (the parent with the mask,
  untrained: paper D's "Non-inverted (initial)") is evaluated too, as a model of its own
  with that row (``evaluate_only``; the workflow's ``/step_0`` snapshot), its checkpoint
  linked as ``<folder>/initial/model_step_0.pt``.

What this writes is what the workflow's ``finetune_config`` rule writes for the same model:
the child's folder is the parent's plus the fine-tune's ``/ft_...`` segment
(:func:`headlab.naming.tune_segment`), its ``init.pt`` and ``onmt.yaml`` beside. The model's
manifest entry, completed (``dir``, ``config``, ``save_model``, the parent's step, the mask),
is the JSON written to ``--out`` (a list: the model, then its initial checkpoint's entry
where asked for); the runner trains the first and the evaluation reads them all.
A parent with no loadable checkpoint, or a gated model without gates, is one line naming it.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from headlab.errors import DataError, HeadlabError


def _checkpoint(model: dict, role: str) -> dict:
    from headlab.workflow.sitting import eval_checkpoint

    found = eval_checkpoint(model)
    if found is None:
        raise DataError(f"the {role} {model['name']} has no checkpoint that loads", path=model["dir"])
    return found


def mask_of(gated: dict, out: Path, which: str = "mask") -> dict:
    """The encoder head mask of a gated model at its best checkpoint; its gates CSV at ``out``."""
    import pandas as pd

    from headlab.heads.gates import encoder_mask, read_gates
    from headlab.heads.prune import invert, mask_string

    found = _checkpoint(gated, "gated model")
    table = read_gates(found["path"])
    if table.empty:
        raise DataError("the gated model's checkpoint has no head gates", path=found["path"])
    out.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(out, index=False)
    rows = encoder_mask(pd.read_csv(out))
    chosen = invert(rows) if which == "inverse" else rows
    return {"mask": mask_string(chosen), "kept": sum(map(sum, chosen)), "heads": sum(map(len, rows)),
            "gates": str(out), "gated_step": found["step"]}


def prepare(manifest: dict, name: str) -> list[dict]:
    """The manifest entries of chained model ``name``: itself, completed with its config
    written, and its initial checkpoint's where the link asks for it."""
    import yaml

    from headlab.engine.finetune import write_finetune
    from headlab.naming import tune_segment

    models = {model["name"]: model for model in manifest["models"]}
    if name not in models or "chain" not in models[name]:
        raise HeadlabError(f"{name!r} is not a chained model of the manifest (chained: "
                           f"{', '.join(n for n, m in models.items() if 'chain' in m) or 'none'})")
    entry, chain = models[name], models[name]["chain"]
    parent = models[chain["parent"]]
    start = _checkpoint(parent, "parent")
    options = dict(chain.get("options") or {})
    resolved = {**entry, "parent_step": start["step"], "parent_checkpoint": start["path"]}
    if chain.get("mask_from"):
        gated = models[chain["mask_from"]]
        if "config" not in gated:
            raise HeadlabError(f"the gated model {gated['name']} was never trained: no mask for {name}")
        found = mask_of(gated, Path(gated["dir"]) / "gates.csv", chain.get("mask", "mask"))
        options["enc_head_mask"] = found["mask"]
        resolved["mask"] = found
    segment = tune_segment(options)
    folder = Path(parent["dir"]) / segment.lstrip("/")
    config = folder / "onmt.yaml"
    write_finetune(start["path"], parent["config"], options, str(folder), str(config))
    written = yaml.safe_load(config.read_text())
    resolved.update(dir=str(folder), config=str(config), tune=segment, save_model=written["save_model"],
                    save_every=written.get("save_checkpoint_steps"),
                    model_dtype=written.get("model_dtype", parent.get("model_dtype", "fp32")))
    entries = [resolved]
    if chain.get("initial_row"):
        initial = folder / "initial"
        initial.mkdir(exist_ok=True)
        step_0 = initial / "model_step_0.pt"
        step_0.unlink(missing_ok=True)
        try:
            os.link(written["train_from"], step_0)
        except OSError:              # another file system: a copy
            shutil.copyfile(written["train_from"], step_0)
        entries.append({**resolved, "name": f"{name}-initial", "row": chain["initial_row"], "dir": str(initial),
                        "save_model": str(initial / "model"), "evaluate_only": True,
                        "chain": {**chain, "initial_of": name}})
    return entries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m headlab.workflow.sitting_chain", description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", required=True, help="the sitting's manifest (with the models resolved so far)")
    parser.add_argument("--model", required=True, help="the chained model to prepare")
    parser.add_argument("--out", required=True, help="its completed manifest entry (JSON)")
    args = parser.parse_args(argv)
    try:
        resolved = prepare(json.loads(Path(args.manifest).read_text()), args.model)
    except HeadlabError as err:
        print(f"sitting_chain: {err}", file=sys.stderr)
        return 2
    Path(args.out).write_text(json.dumps(resolved, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
