"""The trainings of a GPU-plan slice, checked when the plan is loaded
(:func:`headlab.workflow.gpu_plan.load`), so that a typo in ``config/gpu-plan.yaml`` is one
line naming its line there, not a failure on the GPU machine with the sitting's minutes
running: the pair in Multi30k, the preset, every model's training config as the bundle
builds it, and every chain link's fine-tune config as the sitting's chain builds it.

The bundle's config (:mod:`headlab.workflow.bundle`) is ``config/multi30k-gpu.yaml``, then
``config/gpu-sitting.yaml``, then the slice's overlay (:func:`headlab.workflow.bundle.slice_overlay`):
its stop rule in ``training.overrides``, its own ``overrides`` in the study, which win. A
chain link fine-tunes the parent's whole config with its options
(:func:`headlab.engine.finetune.child_config`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

import yaml

from headlab.errors import ConfigError, HeadlabError

REPO = Path(__file__).resolve().parents[3]
#: the configs a sitting's bundle is built from, in order (bundle.CONFIGS)
SITTING_CONFIGS = ("config/multi30k-gpu.yaml", "config/gpu-sitting.yaml")


def stop_overrides(stop: Mapping[str, int]) -> dict[str, Any]:
    """The training options of a slice's stop rule (as the bundle's overlay sets them)."""
    return {"valid_steps": stop["valid_steps"], "save_checkpoint_steps": stop["valid_steps"],
            "early_stopping": stop["patience"], "early_stopping_criteria": ["ppl"], "model_selection": "valid_loss"}


def sitting_overrides(repo: Path = REPO) -> dict[str, Any]:
    """``training.overrides`` of the configs every sitting's bundle starts from."""
    merged: dict[str, Any] = {}
    for name in SITTING_CONFIGS:
        path = repo / name
        if path.is_file():
            merged.update(((yaml.safe_load(path.read_text()) or {}).get("training") or {}).get("overrides") or {})
    return merged


def check_trainings(name: str, entry: Mapping[str, Any], chain: list[Mapping[str, Any]],
                    where: Callable[[list], dict]) -> None:
    """ConfigError for the first training of slice ``name`` that would not build.
    ``where(location)``: the ``path`` and ``line`` of a location under the slice's entry."""
    from headlab.data import registry
    from headlab.engine.config import check_values, resolve_preset, train_config, validate_options
    from headlab.engine.finetune import split_options
    from headlab.workflow.config_check import SPEC_KEYS

    def fail(err: HeadlabError, what: str, location: list, key: str) -> ConfigError:
        return ConfigError(f"slice {name}: {what}{err.message}", key=key, **where(location))

    try:
        registry.get("multi30k").pair_parts(entry["pair"], "train")
    except HeadlabError as err:
        raise fail(err, "", ["pair"], "pair") from None
    try:
        resolve_preset(entry["preset"])
    except HeadlabError as err:
        raise fail(err, "", ["preset"], "preset") from None
    overrides = dict(entry.get("overrides") or {})
    options = {**sitting_overrides(), **stop_overrides(entry["stop"]), **overrides}
    built = {}
    for number, model in enumerate(entry["models"]):
        try:
            built[model["heads"]] = train_config(
                preset=entry["preset"], layers=entry["layers"], heads=model["heads"], train_src="s", train_tgt="t",
                valid_src="vs", valid_tgt="vt", vocab="v", save_dir="m", device="gpu",
                overrides=options)
        except HeadlabError as err:
            key = "heads" if err.key in SPEC_KEYS else err.key or "models"
            location = ["overrides"] if key in overrides else ["models", number]
            raise fail(err, f"model {model['heads']}: ", location, key) from None
    for number, link in enumerate(chain):
        try:
            _, train = split_options(link["options"])
            child = {**built.get(link["parent"], {}), **train}
            validate_options(child, kind="train", source="chain")
            check_values(child, source="chain")
        except HeadlabError as err:
            raise fail(err, f"chain link {link['name']}: ", ["chain", number, "options"], err.key or "options") from None
