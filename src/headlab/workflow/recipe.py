"""A published GPU model's recipe: what trained it, so that its seeds are pooled only with
seeds trained the same way.

A sitting's model is known by its slice, table row and heads, and its seeds accumulate over
sittings run by different commits on different days. Between two sittings a session may
change what trains it (a learning rate of ``config/gpu-sitting.yaml``, the plan's stop rule,
the GPU config's BPE merges): the next seed is then another model under the same name. On the
CPU side such a model has another path (:mod:`headlab.naming`) and retrains; a published seed
cannot be retrained by the workflow, so the sitting records what trained it, and the tables
(:mod:`headlab.studies.published`) and the queue (:mod:`headlab.workflow.gpu_plan`) pool and
count only the seeds of a model's newest recipe; the others are shown apart and retrained.

The recipe (:func:`of`) is the model's training config as it ran (its ``onmt.yaml`` with the
options the runner added), less what changes no number of the model:

- where files go, how often they are written or reported (:data:`IGNORED`), the upper bound
  ``train_steps`` (a sitting's deadline or stop rule ends a training; the stop rule's
  options stay);
- the seed (the seeds are what is pooled), and what only orders the batches as a seed does:
  the data workers and the bucket the batches are drawn from;
- how the forward runs (``compile``: the same function in fused kernels, equal up to float
  rounding, as the attention path and the GPU are);

and with each file the config reads (corpora, vocabularies, the feature vocabularies
OpenNMT-py finds beside the source vocabulary) in place of its path: its sha256, so a changed
BPE or corpus is another recipe and a moved folder is not. A fine-tune of a model trained in
the same sitting (paper D's chain) starts from a checkpoint no other sitting reproduces bit
for bit and takes its head mask from that sitting's gates: in their place its recipe names
its parent's and its gated model's recipes and the mask's rule. The code is no part of it,
as on the CPU side (:mod:`headlab.engine.trained_code`): each sitting's commit is in its
folder's name.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Mapping

#: options that change no number of a trained model: file places, write and report cadence,
#: device placement, the steps' upper bound, and what orders the batches as the seed does
IGNORED = frozenset({"seed", "save_model", "save_data", "overwrite", "gpu_ranks", "train_steps",
                     "save_checkpoint_steps", "keep_checkpoint", "report_every", "valid_batch_size",
                     "num_workers", "bucket_size", "log_file", "tensorboard", "tensorboard_log_dir",
                     "compile"})
#: a chained fine-tune's options that hold what its sitting's parent made (its checkpoint,
#: its gated model's mask): the recipe names those models' recipes and the rule instead
DERIVED = frozenset({"train_from", "enc_head_mask"})
DIGEST_CHARS = 12


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest()[:16]


def _with_files(value: Any, root: Path) -> Any:
    """``value`` with each string naming a file under ``root`` (the checkout the training ran
    in) replaced by the file's sha256."""
    if isinstance(value, Mapping):
        return {key: _with_files(item, root) for key, item in sorted(value.items())}
    if isinstance(value, list):
        return [_with_files(item, root) for item in value]
    if isinstance(value, str) and value and (root / value).is_file():
        return file_digest(root / value)
    return value


def with_overrides(options: Mapping[str, Any], args: list[str]) -> dict:
    """``options`` with OpenNMT-py command-line options (``-key value ...``, ``-flag``) on top."""
    merged, key = dict(options), None
    for arg in args:
        if arg.startswith("-") and not _number(arg):
            key = arg.lstrip("-")
            merged[key] = []
        elif key is not None:
            value = _typed(arg)
            merged[key] = value if merged[key] == [] else [*_listed(merged[key]), value]
    return merged


def _number(text: str) -> bool:
    return not isinstance(_typed(text), str)


def _typed(text: str) -> Any:
    """A command-line value as the YAML config would hold it: an int, a float or the text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _listed(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def of(options: Mapping[str, Any], root: Path | str = ".", chain: Mapping[str, Any] | None = None) -> dict:
    """The recipe of a model trained with ``options`` (its training config; paths relative
    to ``root``). ``chain``: a fine-tune of the sitting's own models, what stands for its
    :data:`DERIVED` options (``parent``: the parent's recipe digest; ``mask_from`` and
    ``mask``: the gated model's digest and the mask's rule)."""
    root = Path(root)
    dropped = IGNORED | (DERIVED if chain else frozenset())
    recipe = {key: _with_files(value, root) for key, value in sorted(options.items()) if key not in dropped}
    # OpenNMT-py reads a source feature's vocabulary from beside the source vocabulary
    vocab, features = options.get("src_vocab"), options.get("n_src_feats")
    for index in range(features if isinstance(features, int) else 0):
        path = root / f"{vocab}_feat{index}"
        if vocab and path.is_file():
            recipe[f"src_vocab_feat{index}"] = file_digest(path)
    if chain:
        recipe["chain"] = dict(sorted(chain.items()))
    return recipe


def digest(recipe: Mapping[str, Any]) -> str:
    """A recipe's short name (``rows.csv``'s ``recipe``)."""
    text = json.dumps(recipe, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]


def _flat(recipe: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat = {}
    for key, value in recipe.items():
        if isinstance(value, Mapping):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def differences(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """What changed from one recipe to another, a phrase per option: ``learning_rate 2.0 ->
    1.0``, ``data.corpus_1.path_src: another file``, ``early_stopping: (none) -> 3``."""
    old, new = _flat(before), _flat(after)
    found = []
    for key in sorted(set(old) | set(new)):
        if old.get(key, None) == new.get(key, None) and (key in old) == (key in new):
            continue
        if str(old.get(key, "")).startswith("sha256:") and str(new.get(key, "")).startswith("sha256:"):
            found.append(f"{key}: another file")
        else:
            found.append(f"{key} {_shown(old, key)} -> {_shown(new, key)}")
    return found


def _shown(recipe: Mapping[str, Any], key: str) -> str:
    return json.dumps(recipe[key]) if key in recipe else "(none)"
