"""Everything about a workflow config that can be checked without running a job, checked
when snakemake builds the DAG (the Snakefile calls :func:`check` right after schema
validation), so that a bad value stops the workflow within seconds, before data
preparation, with one error naming the config key:

* corpora: the dataset is registered (or ``local`` with readable, line-aligned files),
  the configured train/valid/test splits exist;
* every study's models: the corpus is configured, the language pair exists in it (for
  every split it reads), the preset is known, the layers parse, and the model's training
  config builds as ``headlab onmt-config`` builds it (:func:`headlab.engine.config.train_config`):
  the head specs of all three sites parse for their depths, a non-``8L`` encoder spec has
  ``encoder_type: headlab``, option values such as ``lambda_kl`` are valid, ``heads``
  divides the model width; no list of head specs names one model twice (``8L,4L`` and
  ``8L.4L``, ``*(8L)`` and ``8L``: one path name), and no two specs with different path
  names give a model the same heads at its depth (``2*(4L|gate)`` and ``4L|gate`` at 2+2);
* subsample sizes not larger than the training split, for own corpora and for registered
  ones in plain text files already on disk (Multi30k in the mirror); for the others the
  count is only known once ``prepare`` has read them (archives, XML): that job fails then;
* every ``overrides`` mapping anywhere in the config: OpenNMT-py option names, with the
  did-you-mean suggestion of :func:`headlab.engine.config.validate_options`, and their values
  as ``onmt_train`` would check them (types, choices; ranges: :mod:`headlab.engine.option_values`);
* what jobs after training would otherwise find: syntax head kinds on a non-English source,
  a study reading more checkpoints than a training keeps and saves (paper C's
  ``average_last``) or more exported attention sentences than ``evaluation.attention_sentences``
  (paper B's ``figure_sentence``), the profile's gold trees (paper D's and the atlas's
  ``treebank``), paper A's Table 6 (``evaluation.mucow_domains`` and a ``wsd_pair`` with
  MuCoW items from TED and Tatoeba, whose average it reports), the atlas's model patterns
  (``atlas.models``: each matches a model), and what each study checks itself
  (:meth:`headlab.studies.base.Study.check`: paper A's suite pairs, paper B's grids, paper
  D's fine-tune options).

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


def _rekey(err: HeadlabError, key: str) -> ConfigError:
    return ConfigError(err.message, key=key)


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
        local.check_name(name, key)
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
    STUDIES[name].check(study)      # what the study itself checks (paper B's grids)
    STUDIES[name].check_in(study, config, roots)    # and what it needs of the rest (paper A's MuCoW)
    read, read_key = STUDIES[name].attention_sentences_read(study)
    exported = int(config.get("evaluation", {}).get("attention_sentences", 100))
    if read > exported:
        raise ConfigError(f"sentence {read - 1} (0-based) of the attention export is read, but "
                          f"evaluation.attention_sentences exports {exported}: raise it to {read} or more",
                          key=read_key)
    global_overrides = dict(config.get("training", {}).get("overrides", {}))
    # a study's model whose grid value equals the preset's has no override for it (same path
    # as the preset's model), so a global override of that option would silently replace
    # the value in it alone (paper B's transformer_ff 2048 candidate trained at the global value)
    varied = set(STUDIES[name].varied_options(study))
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
            if field == "heads":     # the model names the spec by its path name
                return _written(config, name, model["heads"])[0] or f"{prefix}.heads"
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
            # the spec as written, so that an error quotes what the config says
            heads = _written(config, name, model["heads"])[1] or model["heads"]
            options = train_config(preset=model["preset"], layers=model["layers"], heads=heads,
                                   train_src="train.src", train_tgt="train.tgt", valid_src="valid.src",
                                   valid_tgt="valid.tgt", vocab="vocab", save_dir="model",
                                   overrides={**global_overrides, **overrides})
        except HeadlabError as err:
            field = "heads" if err.key in SPEC_KEYS else None
            raise _rekey(err, key(field) if field else _override_key(err.key, overrides, global_overrides, study, prefix)) from None
        _check_syntax_source(model, heads, key("heads"))     # after train_config: the spec parses
        _check_checkpoints(options, *STUDIES[name].checkpoints_read(study))
        _check_reported(options, global_overrides, overrides, prefix, model)
        _check_width(options, global_overrides, study, prefix, key("preset"))


def _check_syntax_source(model: Mapping, written: str, key: str) -> None:
    """Syntax head kinds (paper C's DEA, LPEA, RHE) read parses of the English source (the
    parser, spaCy's English model): another source language fails when snakemake plans the
    parse job (an InputFunctionException), named here at the model's head spec."""
    from headlab.heads.spec import needs_syntax

    source = model["pair"].split("-")[0]
    if source != "en" and needs_syntax(model["heads"]):
        raise ConfigError(f"head spec {written!r} has syntax heads, which read parses of the English source; "
                          f"pair {model['pair']} translates from {source!r}: train it on an en-XX pair", key=key)


def _check_checkpoints(options: Mapping, needed: int, key: str | None) -> None:
    """A study that averages a model's last ``needed`` checkpoints (paper C §A.1) fails in
    its averaging job, after training, when OpenNMT-py keeps (``keep_checkpoint``) or saves
    (one every ``save_checkpoint_steps``, and the last step) fewer."""
    if needed <= 1:
        return
    def value(option: str, default: int) -> int:     # a null keeps OpenNMT-py's default
        return default if options.get(option) is None else int(options[option])

    kept = value("keep_checkpoint", -1)
    steps, every = value("train_steps", 100000), value("save_checkpoint_steps", 5000)
    saved = steps // every + (1 if steps % every else 0)
    if 0 < kept < needed:
        raise ConfigError(f"averaging the last {needed} checkpoints needs as many kept: keep_checkpoint is {kept} "
                          f"(the preset's, or training.overrides'); raise it or average fewer", key=key)
    if saved < needed:
        raise ConfigError(f"averaging the last {needed} checkpoints needs as many saved: train_steps {steps} with "
                          f"save_checkpoint_steps {every} saves {saved}; average fewer or save more often", key=key)


def _written(config: Mapping, study: str, heads: str) -> tuple[str, str] | tuple[None, None]:
    """(key, spec as written) of the head spec that a model's path name ``heads`` comes from."""
    from headlab.naming import heads_name
    from headlab.studies import head_spec_keys

    for name, field, index in head_spec_keys({"studies": {study: config["studies"][study]}}):
        value = config["studies"][name][field]
        spec = value if index is None else value[index]
        if heads_name(spec) == heads:
            return f"studies.{name}.{field}" + ("" if index is None else f"[{index}]"), spec
    return None, None


def check_head_names(config: Mapping) -> None:
    """Two specs of one list that name the same model (``8L,4L`` and ``8L.4L``, the path
    name of both): it would be trained once but stand twice in the study's tables."""
    from headlab.naming import heads_name
    from headlab.studies import head_spec_keys

    seen: dict[tuple[str, str, str], str] = {}     # (study, key, path name) -> spec as written
    for name, field, index in head_spec_keys(config):
        if index is None:
            continue
        spec = config["studies"][name][field][index]
        ident = (name, field, heads_name(spec))
        if ident in seen:
            raise ConfigError(f"{spec!r} names the same model as {seen[ident]!r} (both are {ident[2]!r} in "
                              f"model paths); list it once", key=f"studies.{name}.{field}[{index}]")
        seen[ident] = spec


def _treebank_problem(config: Mapping, treebank: str, corpora: list[str]) -> str | None:
    """Why the syntactic profile cannot read ``treebank`` (``ud-PREFIX``: an English UD test
    file of the ``ud`` dataset; ``spacy-SPLIT``: a split of each corpus, parsed with spaCy)."""
    from headlab.data import local, registry

    kind, name = treebank.split("-", 1)
    if kind == "ud":
        files = registry.get("ud").files
        english = [prefix for prefix in registry.UD_COMMITS
                   if prefix.startswith("en_") and f"{prefix}-ud-test.conllu.gz" in files]
        if name not in english:
            return (f"treebank {treebank!r}: the profile needs English gold trees (the models' source) with a test "
                    f"file in the ud dataset: {', '.join('ud-' + prefix for prefix in english)}")
        return None
    for corpus in corpora:
        c = config["corpora"][corpus]
        splits = ([c["train"], c["valid"], *c["tests"]] if local.is_local(c)
                  else list(registry.get(c["dataset"]).splits))
        if name not in splits:
            return f"treebank {treebank!r}: corpus {corpus} has no split {name!r}; splits: {', '.join(splits)}"
    return None


def check_treebanks(config: Mapping) -> None:
    """Paper D's and the atlas's gold trees: an unknown UD prefix or split would fail only
    in the profile job, after training."""
    from headlab.atlas.select import settings
    from headlab.studies.common import corpus_pairs

    paper_d = config["studies"].get("paper_D")
    if paper_d:
        corpora = sorted({corpus for corpus, _ in corpus_pairs(paper_d) if corpus in config["corpora"]})
        problem = _treebank_problem(config, paper_d.get("treebank", "ud-en_ewt"), corpora)
        if problem:
            raise ConfigError(problem, key="studies.paper_D.treebank")
    atlas = settings(config)
    if atlas and atlas.get("treebank"):     # profiled: the English-source models of every study
        english = sorted({corpus for study in config["studies"].values() for corpus, pair in corpus_pairs(study)
                          if pair.startswith("en-") and corpus in config["corpora"]})
        problem = _treebank_problem(config, atlas["treebank"], english)
        if problem:
            raise ConfigError(problem, key="atlas.treebank")


def check_same_models(config: Mapping) -> None:
    """Two head specs with different path names that give every layer of every site the
    same heads at the depth a model uses them (``2*(4L|gate)`` and ``4L|gate`` at 2+2, in
    one study or two): one model, which would be trained twice and shown twice."""
    from headlab.engine.config import parse_layers
    from headlab.heads.spec import parse_spec
    from headlab.naming import parse_heads_name, with_variant
    from headlab.studies import STUDIES

    seen: dict[tuple, tuple[str, str]] = {}     # (model but heads, layers' heads) -> (study, path name)
    for name in config["studies"]:
        for model, overrides in STUDIES[name].models(config["studies"][name]):
            model = with_variant(model, overrides)
            try:
                depths = dict(zip(("enc", "dec"), parse_layers(model["layers"])))
                layout = tuple((site, tuple(parse_spec(spec, depths.get(site, depths["dec"]), site)))
                               for site, spec in parse_heads_name(model["heads"]).items())
            except HeadlabError:
                continue        # check_study names the bad spec or layers
            ident = (tuple(sorted((k, str(v)) for k, v in model.items() if k != "heads")), layout)
            first = seen.setdefault(ident, (name, model["heads"]))
            if first[1] != model["heads"]:
                key, spec = _written(config, name, model["heads"])
                first_key, first_spec = _written(config, first[0], first[1])
                raise ConfigError(f"{spec or model['heads']!r} is the same model as {first_spec or first[1]!r} "
                                  f"({first_key or 'studies.' + first[0]}) at layers {model['layers']}: every "
                                  f"layer has the same heads; write one spelling",
                                  key=key or f"studies.{name}.heads")


def _option_key(option: str, value: Any, study: Mapping, prefix: str, global_overrides: Mapping) -> str | None:
    """Where the config sets ``option`` to ``value``: one of the study's ``overrides``
    mappings, the global ones, or a search grid's candidates (paper B's stages)."""
    for path, options in _overrides(study, prefix):
        if option in options and str(options[option]) == str(value):
            return f"{path}.{option}"
    if option in global_overrides and str(global_overrides[option]) == str(value):
        return f"training.overrides.{option}"
    found = where(study, option, prefix)
    return found if found and found != f"{prefix}.heads" else None   # the study's head specs are no option


def _check_width(options: Mapping, global_overrides: Mapping, study: Mapping, prefix: str, preset_key: str) -> None:
    """OpenNMT-py splits the model width (``hidden_size``, else ``enc_hid_size`` /
    ``dec_hid_size``) into ``heads`` equal parts; a count that does not divide it fails only
    when the job builds the model. Named where the head count is set, else the width, else
    the preset that sets both."""
    heads, hidden = options.get("heads", 8), options.get("hidden_size", -1)
    widths = {"hidden_size": hidden} if isinstance(hidden, int) and hidden > 0 else {
        name: options.get(name, 500) for name in ("enc_hid_size", "dec_hid_size")}
    if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1:
        raise ConfigError(f"heads must be an integer >= 1, got {heads!r}",
                          key=_option_key("heads", heads, study, prefix, global_overrides) or preset_key)
    for name, width in widths.items():
        if isinstance(width, int) and width % heads:
            key = (_option_key("heads", heads, study, prefix, global_overrides)
                   or _option_key(name, width, study, prefix, global_overrides) or preset_key)
            raise ConfigError(f"heads {heads} does not divide the model width ({name} {width}): each head gets "
                              f"{name} / heads dimensions; use a head count that divides {width}", key=key)


def _override_key(option: str, overrides: Mapping, global_overrides: Mapping, study: Mapping, prefix: str) -> str:
    """Where an option's bad value was set: the study's overrides mapping (or grid) that sets
    it, since the study's win over the global ones; the global overrides when only they set it."""
    if option in overrides:
        return (_option_key(option, overrides[option], study, prefix, {})
                or f"{prefix}.overrides.{option}")
    if option in global_overrides:
        return f"training.overrides.{option}"
    if option is None:          # an error of the preset's whole config, no one option's
        return f"{prefix}.preset"
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
    from headlab.atlas.select import check_patterns

    check_overrides(config)
    check_corpora(config)
    check_head_names(config)
    check_same_models(config)
    check_treebanks(config)
    roots = (f"{config.get('results', 'results')}/data/raw",) + ((str(mirror),) if mirror else ())
    for name in config["studies"]:
        check_study(config, name, roots)
    check_patterns(config)      # the atlas's model patterns

