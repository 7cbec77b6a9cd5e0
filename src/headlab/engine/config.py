"""OpenNMT-py training configs generated from named presets (``presets.yaml``).

A run is described by: preset, layers (``"6+6"`` = encoder+decoder), encoder head spec,
data files, vocabulary, output directory, seed and user overrides. Every key that ends up
in the YAML is checked against OpenNMT-py's own parser (with headlab's options added), so
a misspelled option is an error naming the key and the file it came from, never silently
ignored as ``onmt_train`` would do.

Precision (:func:`model_dtype`): a preset's ``model_dtype`` is its precision **on GPU**
(``base*``: ``fp16``, OpenNMT-py's mixed precision: float16 autocast with loss scaling,
float32 weights); the config key ``training.precision`` overrides it (``fp32``, ``fp16``,
``bf16``; ``preset``, the default, keeps it). CPU runs always train in ``fp32``: OpenNMT-py's
autocast and loss scaling are CUDA-only (on CPU ``fp16`` would only log warnings and pad
batches to multiples of 8). A model trained in mixed precision translates with
OpenNMT-py's ``-precision fp16`` (float16 weights, :func:`translate_precision`).
Precision is not part of a model's path (:mod:`headlab.naming`): the architecture,
hyper-parameters and the float32 checkpoint are the same, only rounding differs, as
between a CPU and a GPU run (neither is in the path either); a changed precision
regenerates the training config, so the model is retrained in place.
"""
from __future__ import annotations

import argparse
import difflib
import functools
import re
from importlib import resources
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from headlab.engine import option_values
from headlab.errors import ConfigError
from headlab.io import atomic_write
from headlab.naming import STOCK_HEADS, parse_heads_name

# keys that are not OpenNMT options but structure of the onmt YAML
_STRUCTURAL = {"data", "transforms_configs"}
#: values of the config key training.precision ("preset": the preset's own model_dtype)
PRECISIONS = ("preset", "fp32", "fp16", "bf16")
DEVICES = ("cpu", "gpu")
#: data-loading worker processes of a GPU training (at least; ``num_workers`` in the overrides wins)
GPU_DATA_WORKERS = 1


@functools.lru_cache(maxsize=None)
def load_presets() -> dict[str, dict[str, Any]]:
    text = resources.files("headlab").joinpath("presets.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def resolve_preset(name: str, presets: Mapping[str, Mapping] | None = None) -> dict[str, Any]:
    """The preset's options with its ``extends`` chain applied (child keys win)."""
    presets = dict(load_presets() if presets is None else presets)
    chain, seen = [], set()
    while name is not None:
        if name not in presets:
            close = difflib.get_close_matches(name, presets, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"unknown model preset {name!r}{hint}; known: {', '.join(sorted(presets))}",
                              key="preset")
        if name in seen:
            raise ConfigError(f"preset {name!r} extends itself", key="preset")
        seen.add(name)
        chain.append(dict(presets[name]))
        name = chain[-1].pop("extends", None)
    merged: dict[str, Any] = {}
    for layer in reversed(chain):
        merged.update(layer)
    return merged


def parse_layers(layers: str) -> tuple[int, int]:
    """``"6+1"`` -> (6, 1): encoder and decoder depth, as paper A Table 1 names them."""
    match = re.fullmatch(r"\s*(\d+)\s*\+\s*(\d+)\s*", str(layers))
    if not match or 0 in (int(match[1]), int(match[2])):
        raise ConfigError(f"layers must look like '6+6' (encoder+decoder, both >= 1), got {layers!r}",
                          key="layers")
    return int(match[1]), int(match[2])


@functools.lru_cache(maxsize=None)
def _known_options(kind: str) -> dict[str, argparse.Action]:
    """dest -> action of every option OpenNMT-py's train/translate parser accepts."""
    import headlab.engine.plugin  # noqa: F401  (adds headlab's options to the parsers)
    import onmt.opts
    from onmt.utils.parse import ArgumentParser

    if kind == "build_vocab":  # it reads training configs: their options are fine too
        parser = ArgumentParser()
        onmt.opts.data_prepare_opts(parser, build_vocab_only=True)
        known = {a.dest: a for a in parser._actions if a.dest != "help"}
        return {**_known_options("train"), **known}
    parser = ArgumentParser()
    {"train": onmt.opts.train_opts, "translate": onmt.opts.translate_opts}[kind](parser)
    return {action.dest: action for action in parser._actions if action.dest != "help"}


def _options_cache_file(kind: str) -> Path:
    """Where the options of this OpenNMT-py + headlab are kept: keyed by the installed
    OpenNMT-py version and the source of the headlab modules that add options or read them."""
    import hashlib
    import os
    from importlib import metadata

    digest = hashlib.sha256(metadata.version("OpenNMT-py").encode())
    # the modules that add options or transforms (whose names are choices), and the spec's reader
    for module in ("opts.py", "compat.py", "plugin.py", "words.py", "option_values.py"):
        digest.update(resources.files("headlab.engine").joinpath(module).read_bytes())
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "headlab"
    return root / f"onmt-options-{kind}-{digest.hexdigest()[:16]}.json"


@functools.lru_cache(maxsize=None)
def _option_specs(kind: str) -> dict[str, dict[str, Any]]:
    """Name -> type, list-ness and choices (:func:`headlab.engine.option_values.spec`) of the
    options OpenNMT-py's ``kind`` parser accepts. Building the parser imports torch and
    OpenNMT-py (3 s); a workflow generates one config per model, so they are cached on disk
    (the cache is only an optimisation: any failure rebuilds them)."""
    import json

    try:
        path = _options_cache_file(kind)
    except (OSError, ImportError):      # OpenNMT-py's metadata not found: no cache
        path = None
    if path is not None:
        try:
            specs = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(specs, dict) and all(isinstance(v, dict) and "kind" in v for v in specs.values()):
                return specs
        except (OSError, ValueError):
            pass
    specs = {name: option_values.spec(action) for name, action in sorted(_known_options(kind).items())}
    if path is not None:
        try:
            with atomic_write(path) as handle:
                json.dump(specs, handle)
        except OSError:
            pass
    return specs


def _option_names(kind: str) -> frozenset[str]:
    """Names of the options OpenNMT-py's ``kind`` parser accepts."""
    return frozenset(_option_specs(kind))


def validate_options(options: Mapping[str, Any], *, kind: str = "train",
                     source: str = "<config>", lines: Mapping[str, int] | None = None) -> None:
    """Raise ConfigError for the first key OpenNMT-py does not know (with a suggestion), or
    whose value its parser would reject when the job reads the YAML (a type or a choice:
    :func:`headlab.engine.option_values.problem`)."""
    specs = _option_specs(kind)
    for key, value in options.items():
        if key in _STRUCTURAL:
            continue
        line = (lines or {}).get(key)
        if key not in specs:
            close = difflib.get_close_matches(key, specs, n=1, cutoff=0.75)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"unknown OpenNMT-py {kind} option {key!r}{hint}", path=source, line=line, key=key)
        wrong = option_values.problem(key, value, specs[key])
        if wrong:
            raise ConfigError(wrong, path=source, line=line, key=key)


def one_line_errors(parser, kind: str):
    """Make ``parser`` raise a :class:`ConfigError` naming the option instead of argparse's
    ``error()``, which prints the whole usage (OpenNMT-py's is ~250 lines) before the message
    and exits: a bad value (``-lambda_kl -1``, from the command line or the ``-config`` YAML)
    becomes one line, ``[lambda_kl] bad value for -lambda_kl: must be >= 0, got -1``."""
    def error(message: str):
        match = re.match(r"argument ([^:]+): (.*)", message, re.S)
        if not match:
            raise ConfigError(f"OpenNMT-py {kind} options: {message}")
        names = match[1].split("/")
        short = min(names, key=len)
        raise ConfigError(f"bad value for {short}: {match[2]}", key=short.lstrip("-"))

    parser.error = error
    return parser


def yaml_key_lines(path: str | Path) -> dict[str, int]:
    """1-based line of every top-level key of a YAML file (for error messages)."""
    node = yaml.compose(Path(path).read_text(encoding="utf-8"))
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {k.value: k.start_mark.line + 1 for k, _ in node.value}


def validate_yaml_file(path: str | Path, kind: str = "train") -> dict[str, Any]:
    path = Path(path)
    try:
        options = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"not valid YAML: {err}", path=str(path)) from None
    if not isinstance(options, dict):
        raise ConfigError("an OpenNMT-py config must be a mapping of option: value", path=str(path))
    validate_options(options, kind=kind, source=str(path), lines=yaml_key_lines(path))
    return options


def model_dtype(options: Mapping[str, Any], device: str = "cpu", precision: str = "preset") -> str:
    """OpenNMT-py's ``-model_dtype`` of a run (module doc): ``fp32`` on CPU; on GPU
    ``precision`` (the config key ``training.precision``), or with ``preset`` the
    options' own ``model_dtype`` (OpenNMT-py's default: ``fp32``)."""
    if device not in DEVICES:
        raise ConfigError(f"training device must be one of {', '.join(DEVICES)}, got {device!r}",
                          key="training.device")
    if precision not in PRECISIONS:
        raise ConfigError(f"training precision must be one of {', '.join(PRECISIONS)}, got {precision!r}",
                          key="training.precision")
    if device == "cpu":
        return "fp32"
    dtype = options.get("model_dtype", "fp32") if precision == "preset" else precision
    if dtype not in PRECISIONS[1:]:
        raise ConfigError(f"model_dtype must be fp32, fp16 or bf16, got {dtype!r}", key="model_dtype")
    return dtype


def translate_precision(dtype: str) -> str:
    """OpenNMT-py's translation ``-precision`` for a model trained with ``-model_dtype
    dtype``: ``fp16`` (float16 weights) after mixed-precision training, else ``""``
    (the checkpoint's float32). bf16-trained models translate in float16 too: OpenNMT-py
    has no bf16 translation, and beam scores in bf16 would keep 8 significant bits."""
    return "fp16" if dtype in ("fp16", "bf16") else ""


def train_config(*, preset: str, layers: str, heads: str, train_src: str, train_tgt: str,
                 valid_src: str, valid_tgt: str, vocab: str | Sequence[str], save_dir: str, seed: int = 1,
                 overrides: Mapping[str, Any] | None = None,
                 presets: Mapping[str, Mapping] | None = None, device: str = "cpu",
                 precision: str = "preset", gpus: int | None = None) -> dict[str, Any]:
    """The full OpenNMT-py training config for one model of the experiment grid.

    ``vocab``: one shared vocabulary (joint BPE), or (source, target) vocabularies.
    ``device`` (``cpu``/``gpu``: GPU 0 unless the overrides set ``gpu_ranks``) and
    ``precision`` (``training.precision``) give ``model_dtype`` (:func:`model_dtype`);
    ``gpus`` (``training.gpus``): 0 trains on the CPU, N >= 1 on GPUs 0..N-1 (:func:`gpu_options`);
    None: 1 on ``device`` gpu, else 0.
    """
    if gpus is None:
        gpus = 1 if device == "gpu" else 0
    elif gpus > 0:
        device = "gpu"
    enc_layers, dec_layers = parse_layers(layers)
    vocabs = [vocab] if isinstance(vocab, (str, Path)) else list(vocab)
    if len(vocabs) not in (1, 2):
        raise ConfigError(f"expected one shared or two (source, target) vocabularies, got {len(vocabs)}")
    options = resolve_preset(preset, presets)
    options.update({
        "enc_layers": enc_layers,
        "dec_layers": dec_layers,
        "seed": seed,
        "data": {
            "corpus_1": {"path_src": train_src, "path_tgt": train_tgt},
            "valid": {"path_src": valid_src, "path_tgt": valid_tgt},
        },
        "src_vocab": str(vocabs[0]),
        "tgt_vocab": str(vocabs[-1]),
        "share_vocab": len(vocabs) == 1,
        "save_model": f"{save_dir}/model",
        "save_data": save_dir,
        "overwrite": True,
        "world_size": 1,
    })
    options.setdefault("gpu_ranks", [])
    if len(vocabs) == 2:
        # two vocabularies: the encoder and decoder embeddings cannot be one matrix; the
        # decoder's input and output embeddings stay tied where the preset says so
        options["share_embeddings"] = False
    overrides = dict(overrides or {})
    if device == "gpu":
        options["gpu_ranks"] = [0]
        # the data pipeline (transforms, numericalisation, batching) in a worker process, off
        # the thread that launches the GPU's kernels; exact resume holds with it
        # (tests/test_exact_resume.py). On the CPU a worker only competes for the cores.
        options["num_workers"] = max(int(options.get("num_workers") or 0), GPU_DATA_WORKERS)
    options.update(overrides)
    options["model_dtype"] = model_dtype(options, device, precision)
    # the head specs go in last: the encoder/decoder types are known only with the overrides
    specs = parse_heads_name(heads)
    if options.get("encoder_type") == "headlab":
        options["enc_heads"] = specs["enc"]
    elif specs["enc"] != STOCK_HEADS:
        raise ConfigError(f"head spec {specs['enc']!r} needs encoder_type 'headlab', but preset {preset!r} "
                          f"with its overrides has {options.get('encoder_type')!r}", key="heads")
    if specs["dec"] != STOCK_HEADS or specs["cross"] != STOCK_HEADS:
        # stock and headlab decoders are the same model at 8L: switch only when needed, so
        # that 8L decoders keep stock checkpoints
        if "decoder_type" in overrides and overrides["decoder_type"] != "headlab":
            raise ConfigError(f"decoder head specs {specs['dec']!r} / {specs['cross']!r} need decoder_type "
                              f"'headlab', but the overrides set {overrides['decoder_type']!r}", key="heads")
        options["decoder_type"] = "headlab"
    if options.get("decoder_type") == "headlab":
        options["dec_heads"], options["cross_heads"] = specs["dec"], specs["cross"]
    syntax_options(options, heads)
    if gpus > 1:
        gpu_options(options, gpus, source=f"preset {preset!r} + overrides")
    validate_options(options, kind="train", source=f"preset {preset!r} + overrides")
    check_values(options, source=f"preset {preset!r} + overrides")
    return options


def gpu_options(options: dict[str, Any], gpus: int, source: str = "<config>") -> None:
    """One model on ``gpus`` GPUs: OpenNMT-py's data parallelism (``world_size`` processes,
    ``gpu_ranks`` 0..N-1, each reading every N-th batch and all-reducing the gradients).
    A step then sums N batches, so ``accum_count`` is divided by N: the tokens per step, and
    with them the model its path names, stay those of one GPU (paper C's 4 GPUs x 4,096
    tokens = ``base_paper_C``'s 4 accumulated batches on one). An ``accum_count`` that N does
    not divide is an error: the model would silently change."""
    if gpus <= 0:
        return
    if gpus > 1:
        accum = options.get("accum_count", [1])
        accum = list(accum) if isinstance(accum, (list, tuple)) else [accum]
        if any(int(a) % gpus for a in accum):
            raise ConfigError(f"training.gpus {gpus} must divide accum_count {accum} (the batches summed per "
                              f"step on one GPU): with N GPUs each step sums N batches more, which would change "
                              f"the model without its path saying so; use 1 GPU or a preset whose accum_count "
                              f"N divides", path=source, key="accum_count")
        options["accum_count"] = [int(a) // gpus for a in accum]
    options["world_size"] = gpus
    options["gpu_ranks"] = list(range(gpus))


def feature_options(columns: tuple[str, ...]) -> dict[str, Any]:
    """OpenNMT-py options of a model reading the source-feature ``columns``
    (:func:`headlab.heads.side.model_columns`): the feature count, the transforms
    (``inferfeats``, required by OpenNMT-py with source features, is a no-op on pre-expanded
    ones; ``headlab_words`` writes the word boundaries from the text) and, for the word
    column alone (stock BPE files without feature columns), the placeholder the transform
    overwrites. Featured files (syntax models) carry every column. OpenNMT-py reads one
    vocabulary per column, ``{src_vocab}_feat{i}``."""
    from headlab.engine.opts import WORDS_TRANSFORM
    from headlab.heads.side import UNFILLED, WORD_COLUMN

    if not columns:
        return {}
    options: dict[str, Any] = {"n_src_feats": len(columns), "transforms": ["inferfeats", WORDS_TRANSFORM]}
    if tuple(columns) == (WORD_COLUMN,):
        options["src_feats_defaults"] = UNFILLED
    return options


def feature_args(columns: tuple[str, ...]) -> str:
    """:func:`feature_options` as ``headlab translate`` arguments (translation takes the source
    options from its command line, not from the model's training config)."""
    options = feature_options(columns)
    if not options:
        return ""
    args = [f"-n_src_feats {options['n_src_feats']}", "-transforms " + " ".join(options["transforms"])]
    if "src_feats_defaults" in options:
        args.append(f"-src_feats_defaults {options['src_feats_defaults']}")
    return " ".join(args)


def syntax_options(options: dict[str, Any], heads: str) -> None:
    """Source features of models whose head kinds read words or syntax: syntax models
    (``needs_syntax``, paper C) train on featured source files (the workflow passes them as
    ``train_src``/``valid_src``), word-based models (``needs_words``: Fword) on the stock BPE
    files; both get the word-boundary column from the text (:func:`feature_options`).
    Other models are left exactly as they were."""
    from headlab.heads.spec import feature_columns, needs_syntax

    if not needs_syntax(heads) and options.get("syntax_parser", "depconv") != "depconv":
        raise ConfigError(f"syntax_parser {options['syntax_parser']!r} is set, but head spec {heads!r} has "
                          f"no head kind that reads syntax", key="syntax_parser")
    columns = feature_columns(heads)
    if not columns:
        return
    if options.get("encoder_type") != "headlab":
        raise ConfigError(f"head spec {heads!r} reads words or syntax: it needs encoder_type 'headlab'", key="heads")
    wanted = feature_options(columns)
    transforms = [t for t in options.get("transforms") or [] if t not in wanted["transforms"]]
    options.update(wanted)
    options["transforms"] = transforms + wanted["transforms"]


def _check_training_values(options: Mapping[str, Any], source: str) -> None:
    """The bounds of :data:`headlab.engine.option_values.RANGES` (values OpenNMT-py takes
    but fails on later: ``report_every`` 0 divides by zero inside the job), after headlab's
    own rule that ``train_steps`` and ``report_every`` are YAML integers: ``onmt_train``
    would take ``"300"``, but the workflow counts steps with them (checkpoints saved, the
    GPU plan's cost, fine-tune lengths), so a string there would fail far from the key."""
    for key in ("train_steps", "report_every"):
        value = options.get(key, 1)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(f"{key} must be an integer >= 1, got {value!r}", path=source, key=key)
    bad = option_values.out_of_range(options)
    if bad:
        raise ConfigError(bad[1], path=source, key=bad[0])


def check_values(options: Mapping[str, Any], source: str = "<config>") -> None:
    """Values headlab can check before training starts: head specs of every site against
    the layer counts, non-negative auxiliary weights, model selection against the
    validation and checkpoint steps."""
    from headlab.heads.spec import parse_spec

    if options.get("encoder_type") == "headlab":
        layers = parse_spec(str(options.get("enc_heads", STOCK_HEADS)), int(options["enc_layers"]), site="enc")
        from headlab.heads.prune import parse_head_mask
        parse_head_mask(options.get("enc_head_mask"), [layer.num_heads for layer in layers])
    elif options.get("enc_head_mask"):
        raise ConfigError("enc_head_mask needs encoder_type 'headlab'", path=source, key="enc_head_mask")
    if options.get("decoder_type") == "headlab":
        for site in ("dec", "cross"):
            parse_spec(str(options.get(f"{site}_heads", STOCK_HEADS)), int(options["dec_layers"]), site=site)
    for key in ("lambda_kl", "lambda_l0", "dhicm_dropout", "dhicm_dm"):
        value = options.get(key, 0)
        value = value[0] if isinstance(value, list) else value
        if not isinstance(value, (int, float)) or value < 0:
            raise ConfigError(f"{key} must be a number >= 0, got {value!r}", path=source, key=key)
    for key, low in (("lpea_k", 0), ("relpos_k", 1)):
        value = options.get(key, low)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"{key} must be an integer >= {low}, got {value!r}", path=source, key=key)
    _check_training_values(options, source)
    gate = options.get("rhe_fgate", 0.0)
    if isinstance(gate, bool) or not isinstance(gate, (int, float)) or not 0.0 <= gate <= 1.0:
        raise ConfigError(f"rhe_fgate must be 0 (dynamic) or a fixed gate in (0, 1], got {gate!r}",
                          path=source, key="rhe_fgate")
    if options.get("model_selection", "last") == "valid_loss":
        valid, save = int(options.get("valid_steps", 10000)), int(options.get("save_checkpoint_steps", 5000))
        if valid % save:
            raise ConfigError(f"model_selection valid_loss needs a checkpoint at every validation: "
                              f"valid_steps ({valid}) must be a multiple of save_checkpoint_steps ({save})",
                              path=source, key="valid_steps")


def to_yaml(options: Mapping[str, Any]) -> str:
    """The YAML text of an OpenNMT-py config, keys in their order."""
    return yaml.safe_dump(dict(options), sort_keys=False)


def write_yaml(options: Mapping[str, Any], path: str | Path) -> None:
    with atomic_write(path) as handle:
        handle.write(to_yaml(options))


def main(argv: list[str]) -> int:
    from headlab.options import bounded

    parser = argparse.ArgumentParser(prog="headlab onmt-config", description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", required=True, help="a preset of src/headlab/presets.yaml (mini, base, ...)")
    parser.add_argument("--layers", required=True, help="encoder+decoder layers, e.g. 6+6")
    parser.add_argument("--heads", default="8L",
                        help="head specs: the encoder's (e.g. 7Ftoken+1L), or all three sites as a "
                             "model path names them, ENC[@dec=SPEC][@cross=SPEC]")
    parser.add_argument("--train", nargs=2, required=True, metavar=("SRC", "TGT"), help="training source and target (BPE)")
    parser.add_argument("--valid", nargs=2, required=True, metavar=("SRC", "TGT"), help="validation source and target (BPE)")
    parser.add_argument("--vocab", required=True, nargs="+", metavar="VOCAB",
                        help="one shared vocabulary, or source and target vocabularies")
    parser.add_argument("--save-dir", required=True, help="the model folder (checkpoints, train.log)")
    parser.add_argument("--seed", type=bounded(int, 1), default=1,
                        help="training seed (OpenNMT-py seeds nothing at 0 or below)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=YAML",
                        help="override an option (repeatable), value parsed as YAML")
    parser.add_argument("--gpus", type=bounded(int, 0), default=0, metavar="N",
                        help="train on GPUs 0..N-1 (OpenNMT-py world_size N; accum_count divided by N)")
    parser.add_argument("--gpu", dest="gpus", action="store_const", const=1, help="train on GPU 0 (--gpus 1)")
    parser.add_argument("--precision", default="preset", choices=PRECISIONS,
                        help="GPU training precision (config key training.precision): preset = the "
                             "preset's model_dtype; CPU always trains in fp32")
    parser.add_argument("--out", required=True, help="the OpenNMT-py YAML to write")
    args = parser.parse_args(argv)
    overrides = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        overrides[key.strip()] = yaml.safe_load(value)
    options = train_config(preset=args.preset, layers=args.layers, heads=args.heads,
                           train_src=args.train[0], train_tgt=args.train[1],
                           valid_src=args.valid[0], valid_tgt=args.valid[1], vocab=args.vocab,
                           save_dir=args.save_dir, seed=args.seed, overrides=overrides,
                           precision=args.precision, gpus=args.gpus)
    write_yaml(options, args.out)
    return 0
