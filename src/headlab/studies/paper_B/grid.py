"""Paper B's models: the two-stage grid search's candidates, the final systems, the
data-size sweep, and what the finished search stages chose (read back from their JSON).

Planning a run imports this module alone: no pandas, numpy or output builders."""
from __future__ import annotations

import itertools
from typing import Any, Callable, Iterator, Mapping

from headlab.errors import ConfigError
from headlab.naming import heads_name, model_path, variant_name
from headlab.studies import common
from headlab.studies.common import corpus_pairs, first_seed, headline_seeds, seeds as study_seeds

OUTDIR = "paper_B"
STAGES = ("stage1", "stage2")
SYSTEMS = ("T-base", "T-optimal", "DHICM")


def preset(study) -> dict:
    """The preset's options (the "Default" column, and the values a candidate leaves out)."""
    from headlab.engine.config import resolve_preset
    return resolve_preset(study["preset"])


def plain(value):
    """A one-element list option (``dropout: [0.1]``) as its element."""
    return value[0] if isinstance(value, list) and len(value) == 1 else value


def _heads(study, overrides: Mapping, dhicm: bool) -> str:
    """Head configuration of a model with ``overrides`` (its number of heads) at all sites."""
    count = int(plain(overrides.get("heads", preset(study).get("heads", 8))))
    spec = f"*({count}L),{count}L|dhicm" if dhicm else f"{count}L"
    return heads_name(spec, spec, spec)


def _model(study, corpus, pair, overrides: Mapping, dhicm: bool, size="full", seed=None) -> dict[str, str]:
    """A model at ``seed`` (default: the first seed, where the grid search runs)."""
    return dict(corpus=corpus, pair=pair, size=str(size), preset=study["preset"], layers=study["layers"],
                heads=_heads(study, overrides, dhicm), seed=str(seed or first_seed(study)),
                variant=variant_name(overrides))


def size_seeds(study, size) -> list[str]:
    """Seeds of the final models at ``size``: the full set is Table 3 (the headline
    comparison, ``headline_seeds``), the sweep's subsamples use ``seeds``."""
    return headline_seeds(study) if str(size) == "full" else study_seeds(study)


def _grid(grid: Mapping[str, list]) -> list[dict]:
    keys = sorted(grid)
    return [dict(zip(keys, values)) for values in itertools.product(*(grid[key] for key in keys))]


def _canonical(study, overrides: Mapping) -> dict:
    """Overrides without the values the preset has already: a candidate that repeats the
    preset's value is the same model as one that leaves it out (same path, trained once)."""
    defaults = preset(study)
    out = {}
    for option, value in overrides.items():
        if option in defaults and plain(defaults[option]) == plain(value):
            continue
        # OpenNMT-py's list options (dropout schedules) stay lists
        out[option] = [value] if isinstance(defaults.get(option), list) and not isinstance(value, list) else value
    return out


def candidates(study, stage: str, before: Mapping | None = None) -> list[dict]:
    """The overrides of each candidate of ``stage`` (``before``: earlier stages' choice).

    The study-level ``lambda_kl`` is the default: a ``lambda_kl`` listed in a stage's grid
    is tuned like any option (its value is in the candidate's overrides, so its path names
    it), and stage 2 keeps stage 1's choice of it unless its own grid lists it again."""
    lambda_kl = {"lambda_kl": study.get("lambda_kl", 0.1)}
    return [_canonical(study, {**lambda_kl, **(before or {}), **combination})
            for combination in _grid(study["grid"][stage])]


def chosen(study, root: str | None, corpus: str, pair: str) -> dict | None:
    """The final hyper-parameters (stage 2's choice), or None while the search runs."""
    last = common.read_stage(root, OUTDIR, corpus, pair, STAGES[-1])
    return None if last is None else dict(last["chosen"])


def stage_models(study, root: str | None, corpus: str, pair: str, stage: str) -> list[tuple[dict, dict]] | None:
    """(model, overrides) of a stage's candidates; None while an earlier stage is open."""
    before = {}
    if stage != STAGES[0]:
        earlier = common.read_stage(root, OUTDIR, corpus, pair, STAGES[STAGES.index(stage) - 1])
        if earlier is None:
            return None
        before = earlier["chosen"]
    return [(_model(study, corpus, pair, overrides, dhicm=True), overrides)
            for overrides in candidates(study, stage, before)]


def final_models(study, root: str | None, corpus: str, pair: str, size="full",
                 seed=None) -> dict[str, tuple[dict, dict]] | None:
    """system -> (model, overrides) at ``size`` and ``seed`` (default the first); None while
    the search runs."""
    best = chosen(study, root, corpus, pair)
    if best is None:
        return None
    return {"T-base": (_model(study, corpus, pair, {}, dhicm=False, size=size, seed=seed), {}),
            "T-optimal": (_model(study, corpus, pair, best, dhicm=False, size=size, seed=seed), best),
            "DHICM": (_model(study, corpus, pair, best, dhicm=True, size=size, seed=seed), best)}


def later_models(study) -> list[dict[str, str]]:
    """The models the search may name: stage 2's candidates at each choice stage 1 can make,
    and the T-optimal and DHICM finals at each choice stage 2 can make (its candidates'
    overrides), at every size and seed."""
    out = {}
    for corpus, pair in corpus_pairs(study):
        for first in candidates(study, STAGES[0]):
            for second in candidates(study, STAGES[1], first):
                later = [_model(study, corpus, pair, second, dhicm=True)] + [
                    _model(study, corpus, pair, second, dhicm=dhicm, size=size, seed=seed)
                    for size in ["full", *sweep_sizes(study, corpus, pair)] for seed in size_seeds(study, size)
                    for dhicm in (False, True)]
                out.update((model_path(model), model) for model in later)
    return list(out.values())


def sweep_sizes(study, corpus: str, pair: str) -> list[str]:
    """Table 4's size wildcards (``N.sK``) for a corpus pair (all of ``data`` unless ``sweep_data``)."""
    if pair not in study.get("sweep_data", study["data"]).get(corpus, []):
        return []
    return [f"{count}.s{subsample}" for count in study.get("sizes", [])
            for subsample in range(1, study.get("subsamples", 3) + 1)]


def models(study: Mapping[str, Any], root: str | None = None) -> Iterator[tuple[dict, dict]]:
    """(model, OpenNMT overrides) of every model the study trains. Without ``root``, or
    before the stage files exist, only what is known without the search: T-base and the
    stage-1 candidates."""
    for corpus, pair in corpus_pairs(study):
        for size in ["full", *sweep_sizes(study, corpus, pair)]:
            for seed in size_seeds(study, size):
                yield _model(study, corpus, pair, {}, dhicm=False, size=size, seed=seed), {}
        for stage in STAGES:
            yield from stage_models(study, root, corpus, pair, stage) or []
        for size in ["full", *sweep_sizes(study, corpus, pair)]:
            for seed in size_seeds(study, size):
                yield from (final_models(study, root, corpus, pair, size, seed) or {}).values()


def is_headline(study, root: str) -> Callable[[Mapping[str, str]], bool]:
    """Table 3's systems (T-base, T-optimal, DHICM on the full set, first seed) once the
    search has chosen; no model before."""
    finals = [model_path(model) for corpus, pair in corpus_pairs(study)
              for model, _ in (final_models(study, root, corpus, pair) or {}).values()]
    return lambda model: model_path(model) in finals


def varied_options(study) -> set[str]:
    """The OpenNMT-py options the grid search varies (a global override of one is a config error)."""
    return {option for stage in STAGES for option in (study["grid"].get(stage) or {})}


def stage_keys(study) -> list[dict[str, str]]:
    """One search per language pair: its stages in order."""
    return [dict(corpus=corpus, pair=pair, stage=stage) for corpus, pair in corpus_pairs(study) for stage in STAGES]


def check(study) -> None:
    """Config errors the schema cannot express, naming the key. Every grid value is checked
    as the option's value (headlab's range checks: ``lambda_kl`` and the dropouts >= 0, ...),
    since a grid value becomes a candidate's training option."""
    from headlab.engine.config import check_values, validate_options

    for stage in STAGES:
        grid = study["grid"].get(stage) or {}
        if not grid:
            raise ConfigError(f"the {stage} grid is empty: give at least one option with values",
                              key=f"studies.paper_B.grid.{stage}")
        for option, values in grid.items():
            key = f"studies.paper_B.grid.{stage}.{option}"
            if not values:
                raise ConfigError(f"no values for {option!r}", key=key)
            try:    # both stages' option names, before stage 1 trains (stage 2 is planned after it)
                validate_options({option: None}, kind="train", source="paper_B grid")
            except ConfigError as err:
                raise ConfigError(err.message, key=key) from None
            for value in values:
                try:
                    validate_options({option: value}, kind="train", source="paper_B grid")
                    check_values({option: value}, source="paper_B grid")
                except ConfigError as err:
                    raise ConfigError(f"grid value {value!r}: {err.message}", key=key) from None
    if study.get("lambda_kl", 0.1) < 0:
        raise ConfigError("lambda_kl must be >= 0 (eq. 5 subtracts lambda * KL)", key="studies.paper_B.lambda_kl")
