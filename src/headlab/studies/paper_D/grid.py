"""Paper D's models: the converged baseline, its gated, pruned, inverted and control
fine-tunes, the lambda sweep and the fixed-head model; the gates stage's names; the config
checks. No pandas: planning a run imports only this."""
from __future__ import annotations

from typing import Any, Iterator, Mapping

from headlab.errors import ConfigError, DataError
from headlab.naming import finetune, heads_name, variant_name
from headlab.studies import common
from headlab.studies.common import corpus_pairs, first_seed, headline_seeds, seeds as study_seeds

OUTDIR = "paper_D"
#: Table 3's rows, in the paper's order
T3_ROWS = ("Baseline (converged)", "Baseline (fine-tuned, no pruning)", "Pruned (converged)",
           "Non-inverted (initial)", "Non-inverted (fine-tuned)", "Inverted (initial)", "Inverted (fine-tuned)")
STAGES = ("gates",)


def baseline(study, corpus, pair, heads=None, seed=None) -> dict[str, str]:
    """The converged baseline at ``seed`` (default: the first)."""
    return dict(corpus=corpus, pair=pair, size=str(study.get("size", "full")), preset=study["preset"],
                layers=study["layers"],
                heads=heads_name(heads or study.get("heads", "8L")), seed=str(seed or first_seed(study)),
                variant=variant_name(study.get("overrides")))


def finetune_options(study) -> dict:
    return dict(study.get("finetune") or {})


def gate_options(study, lam: float) -> dict:
    return {**finetune_options(study), "gate": study.get("gate_sites", "enc"), "lambda_l0": float(lam)}


def lambdas(study) -> list[float]:
    """The paper's lambda first, then the sweep's others."""
    main = float(study.get("lambda_l0", 0.1))
    return [main] + [float(value) for value in study.get("lambda_sweep", []) if float(value) != main]


def gated(study, corpus, pair, lam=None, heads=None, seed=None) -> dict[str, str]:
    return finetune(baseline(study, corpus, pair, heads, seed),
                    gate_options(study, lambdas(study)[0] if lam is None else lam))


def prune_options(study, mask: str) -> dict:
    return {**finetune_options(study), **(study.get("prune") or {}), "enc_head_mask": mask}


def control(study, corpus, pair, seed=None) -> dict[str, str]:
    """Beyond the paper: the baseline fine-tuned exactly like the pruned models, without a
    mask: what the extra training alone gives (a baseline that is not fully converged, as
    on the embedded default, gains BLEU from any fine-tune)."""
    return finetune(baseline(study, corpus, pair, seed=seed),
                    {**finetune_options(study), **(study.get("prune") or {})})


def stage_name(seed) -> str:
    """The gates stage of one seed (its masks come from that seed's gated model)."""
    return f"seed{seed}/gates"


def stage_seed(stage: str) -> str:
    """``seedN/gates`` -> ``N``."""
    head, sep, name = stage.partition("/")
    if not sep or not head.startswith("seed") or name != "gates":
        raise DataError(f"paper_D has stages seedN/gates, not {stage!r}")
    return head[len("seed"):]


def pruned(study, root, corpus, pair, seed=None) -> dict[str, dict] | None:
    """{"Non-inverted": model, "Inverted": model} at ``seed`` (default the first) once that
    seed's gates stage has run, else None."""
    seed = str(seed or first_seed(study))
    stage = common.read_stage(root, OUTDIR, corpus, pair, stage_name(seed))
    if stage is None:
        return None
    base = baseline(study, corpus, pair, seed=seed)
    return {"Non-inverted": finetune(base, prune_options(study, stage["mask"])),
            "Inverted": finetune(base, prune_options(study, stage["inverse"]))}


def later_models(study) -> list[dict[str, str]]:
    """The pruned and inverted fine-tunes of each seed's gates stage, their mask unknown
    until the stage has run (:data:`headlab.globs.HEAD_MASK`)."""
    from headlab.globs import HEAD_MASK

    stand_in = "MASK"       # a value a path may name; the placeholder is not one
    models = [finetune(baseline(study, corpus, pair, seed=seed), prune_options(study, stand_in))
              for corpus, pair in corpus_pairs(study) for seed in headline_seeds(study)]
    return [{**model, "tune": model["tune"].replace(f"enc_head_mask={stand_in}", f"enc_head_mask={HEAD_MASK}")}
            for model in models]


def curve_steps(study, config: Mapping[str, Any] | None = None) -> list[int]:
    """Checkpoint steps of the pruned fine-tunes on the BLEU curve: 0 and every save (the
    options as the child's config has them: preset, training overrides, the study's)."""
    from headlab.engine.config import resolve_preset
    options = {**resolve_preset(study["preset"]), **((config or {}).get("training", {}).get("overrides") or {}),
               **(study.get("overrides") or {}), **prune_options(study, "")}
    steps, every = int(options["train_steps"]), int(options["save_checkpoint_steps"])
    return [0] + list(range(every, steps + 1, every))


def models(study: Mapping[str, Any], root: str | None = None) -> Iterator[tuple[dict, dict]]:
    """(model, OpenNMT overrides) of every model the study trains. Fine-tunes carry their
    parent's overrides (their own options are in their path). Table 3's models at
    ``headline_seeds``, the lambda sweep at ``seeds``, the fixed-head model at the first seed."""
    parent_overrides = dict(study.get("overrides") or {})
    main, others = lambdas(study)[0], lambdas(study)[1:]
    for corpus, pair in corpus_pairs(study):
        for seed in headline_seeds(study):
            yield baseline(study, corpus, pair, seed=seed), parent_overrides
            yield gated(study, corpus, pair, main, seed=seed), parent_overrides
            yield control(study, corpus, pair, seed), parent_overrides
            for model in (pruned(study, root, corpus, pair, seed) or {}).values():
                yield model, parent_overrides
        for seed in study_seeds(study):
            for lam in others:
                yield gated(study, corpus, pair, lam, seed=seed), parent_overrides
        if study.get("fixed_heads"):
            yield baseline(study, corpus, pair, study["fixed_heads"]), parent_overrides
            yield gated(study, corpus, pair, heads=study["fixed_heads"]), parent_overrides


def stage_keys(study) -> list[dict[str, str]]:
    """One gates stage per pair and seed of Table 3."""
    return [dict(corpus=corpus, pair=pair, stage=stage_name(seed))
            for corpus, pair in corpus_pairs(study) for seed in headline_seeds(study)]


def check(study) -> None:
    """Config errors the schema cannot express, naming the key."""
    for key in ("lambda_l0",):
        if float(study.get(key, 0.1)) < 0:
            raise ConfigError(f"{key} must be >= 0 (eq. 7 adds lambda * L_C)", key=f"studies.paper_D.{key}")
    for value in study.get("lambda_sweep", []):
        if float(value) < 0:
            raise ConfigError(f"lambda_sweep value {value} must be >= 0", key="studies.paper_D.lambda_sweep")
    for corpus, pairs in study.get("data", {}).items():
        for pair in pairs:
            if not pair.startswith("en-"):
                raise ConfigError(f"{corpus} {pair}: paper D profiles heads against English trees, so the source "
                                  f"must be English (en-XX)", key="studies.paper_D.data")
    if not (study.get("finetune") or {}).get("train_steps"):
        raise ConfigError("give the fine-tunes' length: finetune.train_steps", key="studies.paper_D.finetune.train_steps")
    for part, owned in (("finetune", ("gate", "enc_head_mask", "lambda_l0")), ("prune", ("gate", "enc_head_mask"))):
        for bad in owned:
            if bad in (study.get(part) or {}):
                raise ConfigError(f"{bad} is set by the study, not in {part}", key=f"studies.paper_D.{part}.{bad}")
    _check_training_options(study)


def _check_training_options(study) -> None:
    """The fine-tunes' OpenNMT-py options (``finetune``, then ``prune`` over it): names, values
    and ranges as the parents' are checked, since the fine-tunes are planned only once their
    parent (and, for the pruned ones, the gates stage) has trained. Values that depend on
    each other (``model_selection`` and the checkpoint steps) are checked on the child's
    options: the parent's preset and overrides with the fine-tune's."""
    from headlab.engine.config import check_values, parse_layers, resolve_preset, validate_options

    try:
        enc_layers, dec_layers = parse_layers(str(study["layers"]))
        preset = resolve_preset(study["preset"])
    except ConfigError:     # named at its own key by the workflow's check of the models
        return
    parent = {**preset, **(study.get("overrides") or {}), "enc_layers": enc_layers, "dec_layers": dec_layers}
    child = dict(parent)
    for part in ("finetune", "prune"):
        options = study.get(part) or {}
        child.update(options)
        try:
            validate_options(options, kind="train", source=f"studies.paper_D.{part}")
            check_values(child, source=f"studies.paper_D.{part}")
        except ConfigError as err:
            key = f"studies.paper_D.{part}.{err.key}" if err.key in options else f"studies.paper_D.{part}"
            raise ConfigError(err.message, key=key) from None
