"""Everything about a workflow config that can be checked without running a job, checked
when snakemake builds the DAG (the Snakefile calls :func:`check` right after schema
validation), so that a bad value stops the workflow within seconds, before data
preparation, with one error naming the config key:

* corpora: the dataset is registered (or ``local`` with readable files), the configured
  train/valid/test splits exist;
* every study's models: the corpus is configured, the language pair exists in it (for
  every split it reads), the preset is known, the layers parse, and the model's training
  config builds as ``headlab onmt-config`` builds it (:func:`headlab.engine.config.train_config`):
  the head specs of all three sites parse for their depths, a non-``8L`` encoder spec has
  ``encoder_type: headlab``, option values such as ``lambda_kl`` are valid;
* subsample sizes not larger than the training split, for own corpora and for registered
  ones in plain text files already on disk (Multi30k in the mirror); for the others the
  count is only known once ``prepare`` has read them (archives, XML): that job fails then;
* every ``overrides`` mapping anywhere in the config: OpenNMT-py option names, with the
  did-you-mean suggestion of :func:`headlab.engine.config.validate_options`.

Seeds (``seeds``, ``headline_seeds``: positive, no repeats) are checked by the schema (seed
0 would leave OpenNMT-py unseeded: its ``set_random_seed`` seeds only values > 0); a seed
changes only OpenNMT-py's ``seed`` option, so each model is checked once, not per seed.
"""
from __future__ import annotations

import difflib
import functools
from pathlib import Path
from typing import Any, Iterator, Mapping

from headlab.errors import ConfigError, HeadlabError

#: option keys whose errors belong to the model's ``heads`` entry (all three sites)
SPEC_KEYS = {"enc_heads", "dec_heads", "cross_heads", "heads"}


def _message(err: HeadlabError) -> str:
    """The error's message without its own ``[key]`` / ``path:`` prefix."""
    text = str(err)
    if err.path is not None:
        text = text.split(": ", 1)[1] if ": " in text else text
    if err.key is not None and text.startswith(f"[{err.key}] "):
        text = text[len(err.key) + 3:]
    return text


def _rekey(err: HeadlabError, key: str) -> ConfigError:
    return ConfigError(_message(err), key=key)


def where(node: Any, value: Any, prefix: str) -> str | None:
    """The first key path under ``node`` holding ``value`` (as a scalar, a list item or a
    mapping key), e.g. ``studies.paper_A.heads[1]``; None when it is not there."""
    if isinstance(node, Mapping):
        for k, v in node.items():
            path = f"{prefix}.{k}"
            if k == value and isinstance(v, (list, Mapping)):
                return path
            found = where(v, value, path)
            if found:
                return found
    elif isinstance(node, list):
        for i, v in enumerate(node):
            found = where(v, value, f"{prefix}[{i}]")
            if found:
                return found
    elif str(node) == str(value):
        return prefix
    return None


def _overrides(node: Any, prefix: str) -> Iterator[tuple[str, Mapping]]:
    if isinstance(node, Mapping):
        for k, v in node.items():
            path = f"{prefix}.{k}" if prefix else str(k)
            if k == "overrides" and isinstance(v, Mapping):
                yield path, v
            else:
                yield from _overrides(v, path)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _overrides(v, f"{prefix}[{i}]")


def check_overrides(config: Mapping) -> None:
    from headlab.engine.config import validate_options

    for path, options in _overrides(config, ""):
        try:
            validate_options(options, kind="train", source=path)
        except HeadlabError as err:
            raise _rekey(err, f"{path}.{err.key}") from None


def check_corpora(config: Mapping) -> None:
    from headlab.data import local, registry

    for name, c in config["corpora"].items():
        key = f"corpora.{name}"
        if local.is_local(c):
            local.check_corpus(c, key)
            continue
        if "files" in c:
            raise ConfigError("'files' is only read by corpora with dataset: local", key=f"{key}.files")
        try:
            data = registry.get(c["dataset"])
        except HeadlabError:
            close = difflib.get_close_matches(c["dataset"], [*registry.DATASETS, local.KIND], n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(f"unknown dataset {c['dataset']!r}; {hint}known: "
                              f"{', '.join(registry.DATASETS)}, or {local.KIND!r} for your own files",
                              key=f"{key}.dataset") from None
        for field, split in _splits(c):
            if split not in data.splits:
                close = difflib.get_close_matches(split, list(data.splits), n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise ConfigError(f"dataset {data.name!r} has no split {split!r}; {hint}splits: "
                                  f"{', '.join(data.splits)}", key=f"{key}.{field}")


def _splits(c: Mapping, tests=None) -> list[tuple[str, str]]:
    return [("train", c["train"]), ("valid", c["valid"])] + [
        (f"tests[{i}]", t) for i, t in enumerate(c["tests"]) if tests is None or t in tests]


def _check_pair(config: Mapping, corpus: str, pair: str, key: str, study: str) -> None:
    """The pair exists in every split the study reads (its scored test sets only)."""
    from headlab.data import local, registry
    from headlab.studies import scored_tests

    c = config["corpora"][corpus]
    if local.is_local(c):
        local.check_pair(c, pair, key)
        return
    data = registry.get(c["dataset"])
    for _, split in _splits(c, scored_tests(study, c)):
        try:
            data.pair_parts(pair, split)
        except HeadlabError as err:
            raise _rekey(err, key) from None


@functools.lru_cache(maxsize=None)
def _count(path: str) -> int:
    from headlab.io import open_maybe_gz

    with open_maybe_gz(path, "rb") as handle:
        return sum(1 for _ in handle)


def registered_lines(dataset: str, pair: str, split: str, roots: tuple[str, ...]) -> int | None:
    """Lines of a registered corpus's split where they can be counted without a job: plain
    text files (.gz ok) already in one of ``roots`` (the data mirror, the fetched raw data);
    None otherwise (archives, XML, TSV, not fetched yet)."""
    from headlab.data import registry

    src, _ = registry.get(dataset).pair_parts(pair, split)
    total = 0
    for part in src:
        if part.fmt != "text" or part.member or part.select:
            return None
        found = [p for p in (Path(root) / dataset / part.rel for root in roots) if p.is_file()]
        if not found:
            return None
        total += _count(str(found[0]))
    return total


def _check_size(config: Mapping, corpus: str, pair: str, size: str, key: str, roots: tuple[str, ...]) -> None:
    """A subsample larger than the corpus: checked here for own corpora and for registered
    ones whose files are plain text already on disk (Multi30k in the mirror); otherwise
    the prepare job checks it (the first job that has read the data)."""
    from headlab.data import local

    c = config["corpora"][corpus]
    if size == "full":
        return
    lines = (local.count_lines(c, c["train"]) if local.is_local(c)
             else registered_lines(c["dataset"], pair, c["train"], roots))
    from headlab.naming import size_count
    if lines is not None and size_count(size) > lines:
        raise ConfigError(f"a subsample of {size} pairs is larger than corpus {corpus!r}, whose training "
                          f"split has {lines} lines", key=key)


def check_study(config: Mapping, name: str, roots: tuple[str, ...] = ()) -> None:
    from headlab.engine.config import parse_layers, resolve_preset, train_config
    from headlab.studies import STUDIES

    study, prefix = config["studies"][name], f"studies.{name}"
    if hasattr(STUDIES[name], "check"):      # what the study's own module checks (paper B's grids)
        STUDIES[name].check(study)
    global_overrides = dict(config.get("training", {}).get("overrides", {}))
    # a study's model whose grid value equals the preset's has no override for it (same path
    # as the preset's model), so a global override of that option would silently replace
    # the value in it alone (paper B's transformer_ff 2048 candidate trained at the global value)
    varied = set(STUDIES[name].varied_options(study)) if hasattr(STUDIES[name], "varied_options") else set()
    clash = sorted(varied & set(global_overrides))
    if clash:
        raise ConfigError(f"training.overrides sets {clash[0]!r}, which study {name} varies: its models with the "
                          f"preset's value would train with the global one instead; set it in the study, or "
                          f"remove it from training.overrides", key=f"training.overrides.{clash[0]}")
    seen = set()
    for model, overrides in STUDIES[name].models(study):
        # a seed changes the `seed` option only: one check per model whatever its seeds
        ident = (tuple(sorted((k, v) for k, v in model.items() if k != "seed")),
                 tuple(sorted(map(str, overrides.items()))))
        if ident in seen:
            continue
        seen.add(ident)

        def key(field: str) -> str:
            return where(study, model[field], prefix) or f"{prefix}.{field}"

        if model["corpus"] not in config["corpora"]:
            close = difflib.get_close_matches(model["corpus"], list(config["corpora"]), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(f"corpus {model['corpus']!r} is not configured under corpora; {hint}"
                              f"configured: {', '.join(config['corpora'])}", key=key("corpus"))
        _check_pair(config, model["corpus"], model["pair"], key("pair"), name)
        _check_size(config, model["corpus"], model["pair"], model["size"], key("size"), roots)
        try:
            resolve_preset(model["preset"])
        except HeadlabError as err:
            raise _rekey(err, key("preset")) from None
        try:
            parse_layers(model["layers"])
        except HeadlabError as err:
            raise _rekey(err, key("layers")) from None
        # the model's whole training config as `headlab onmt-config` will write it: head
        # specs of all three sites against the depths, option names and values
        try:
            options = train_config(preset=model["preset"], layers=model["layers"], heads=model["heads"],
                                   train_src="train.src", train_tgt="train.tgt", valid_src="valid.src",
                                   valid_tgt="valid.tgt", vocab="vocab", save_dir="model",
                                   overrides={**global_overrides, **overrides})
        except HeadlabError as err:
            field = "heads" if err.key in SPEC_KEYS else None
            raise _rekey(err, key(field) if field else _override_key(err.key, overrides, global_overrides, prefix)) from None
        _check_reported(options, global_overrides, overrides, prefix, model)


def _override_key(option: str, overrides: Mapping, global_overrides: Mapping, prefix: str) -> str:
    """Where an option's bad value was set: the global overrides when only they set it,
    else the study's (which win over them)."""
    if option in global_overrides and option not in overrides:
        return f"training.overrides.{option}"
    return f"{prefix}.overrides.{option}"


def _check_reported(options: Mapping, global_overrides: Mapping, overrides: Mapping, prefix: str,
                    model: Mapping) -> None:
    """A model that trains fewer steps than OpenNMT-py's ``report_every`` logs no training
    step: its learning curve (every study's ``learning_curves`` figure) would be empty, and
    the workflow would fail only after training every model. Named where train_steps is set
    (the config's overrides), else at ``training.overrides.report_every``."""
    steps, every = int(options.get("train_steps", 100000)), int(options.get("report_every", 50))
    if steps >= every:
        return
    if "train_steps" in overrides:
        where = f"{prefix}.overrides.train_steps"
    elif "train_steps" in global_overrides:
        where = "training.overrides.train_steps"
    else:
        where = "training.overrides.report_every"
    raise ConfigError(f"train_steps {steps} is below report_every {every} (model {model['heads']} of preset "
                      f"{model['preset']!r}): OpenNMT-py would log no training step and the learning-curve "
                      f"figure would have nothing to draw; set training.overrides.report_every to at most "
                      f"{steps}", key=where)


def check(config: Mapping, mirror: str | None = None) -> None:
    """Raise one :class:`ConfigError` naming the config key of the first problem.
    ``mirror``: the data mirror, where registered corpora may already be countable."""
    check_overrides(config)
    check_corpora(config)
    roots = (f"{config.get('results', 'results')}/data/raw",) + ((str(mirror),) if mirror else ())
    for name in config["studies"]:
        check_study(config, name, roots)
