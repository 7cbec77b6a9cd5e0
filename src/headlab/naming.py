"""Model identity: the experiment grid and the path that names each model.

Shared by every layer (the engine's fine-tunes, syntax features, studies, report, and the
Snakefile), so it imports nothing of headlab but :mod:`headlab.errors`. A *model* is identified by corpus/pair/size/preset/variant/layers/heads/seed (``MODEL``);
a study of the config names a grid of them. Keeping the expansion here (not in the
Snakefile) lets table builders find their inputs exactly as the workflow produced them.

The path names everything that changes a model, so a changed option retrains exactly what
it affects:

* ``variant``: the OpenNMT-py options a study sets on top of the preset
  (:func:`variant_name`: ``default`` for none, else ``key=value`` pairs in key order, e.g.
  ``heads=4+transformer_ff=1024``): a hyper-parameter variant is part of the model.
* ``heads``: the head specs of all three attention sites (:func:`heads_name`): the encoder
  self-attention spec alone when decoder self- and cross-attention are stock ``8L``
  (paper A's paths), else ``ENC@dec=DEC@cross=CROSS``; ``|`` (a mixer) is written ``~``
  ``N*(LAYER)`` as ``N*LAYER`` and the group separator ``,`` as ``.`` in paths (the spec
  grammar reads all three), so that no shell sees a pipe or a parenthesis (rule shells run
  with globbing off: ``*`` is literal) and no wildcard value holds a comma (cluster jobs
  pass wildcards to snakemake's ``--target-jobs`` comma-separated); each spec in one
  spelling per architecture (:func:`canonical_spec`: ``*(8L)`` is ``8L``), so that two
  spellings of one model train it once.
* ``tune``: empty for a model trained from scratch; a fine-tune of model P is P's path
  plus one segment ``/ft_OPTIONS`` (:func:`finetune`, :func:`tune_segment`: the options
  that change it, e.g. ``/ft_gate=enc+lambda_l0=0.1+train_steps=250``), so the child's
  path names its parent, the parent's checkpoint is an input of the child's training, and
  a changed parent retrains exactly its children (any depth: a fine-tune of a fine-tune
  adds a second segment). ``/step_N`` after them names the checkpoint of step N of that
  fine-tune (0: its initial checkpoint, the parent with the new parameters;
  :func:`snapshot`), for curves over fine-tuning.
* ``size``: ``full``, a number of training pairs (a subsample drawn with the corpus's
  ``subsample_seed``), or ``N.sK``: N pairs drawn with seed K (paper B's "3 random
  subsamples" per size, :func:`size_count` / :func:`size_seed`).
"""
from __future__ import annotations

import json
import re
from typing import Any, Iterator, Mapping

MODEL = "{corpus}/{pair}/{size}/{preset}/{variant}/{layers}/{heads}/seed{seed}{tune}"
MODEL_KEYS = ("corpus", "pair", "size", "preset", "variant", "layers", "heads", "seed", "tune")
#: the ``tune`` wildcard: fine-tune segments, then optionally a checkpoint step
TUNE_PREFIX = "/ft_"
STEP_PREFIX = "/step_"
TUNE_SEGMENT = r"/ft_[A-Za-z0-9_.=+:~-]+"
TUNE_PATTERN = rf"(?:{TUNE_SEGMENT})*(?:/step_[0-9]+)?"
#: fine-tune options read back as text (a mask such as 1100.0011 is no number)
TUNE_STRINGS = frozenset({"gate", "enc_head_mask"})
DEFAULT_VARIANT = "default"
SITES = ("enc", "dec", "cross")
STOCK_HEADS = "8L"


def _short(value: Any) -> str:
    if isinstance(value, (list, tuple)) and len(value) == 1:
        value = value[0]
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))


def variant_name(overrides: Mapping[str, Any] | None) -> str:
    """The path name of a set of OpenNMT-py overrides: ``default`` for none, else the sorted
    ``key=value`` pairs (one-element lists written as their element: OpenNMT-py's list
    options such as ``dropout: [0.3]`` mean the same as ``0.3``)."""
    if not overrides:
        return DEFAULT_VARIANT
    # no commas: snakemake's --target-jobs (how cluster jobs name their wildcards) splits on them
    name = "+".join(f"{k}={_short(v).replace(',', ':')}" for k, v in sorted(overrides.items()))
    for bad in "/ \t\n'\"":
        name = name.replace(bad, "_")
    return name


def heads_name(enc: str = STOCK_HEADS, dec: str = STOCK_HEADS, cross: str = STOCK_HEADS) -> str:
    """Path name of the head specs of the three sites (see the module docstring), each in
    its canonical spelling (:func:`canonical_spec`): two spellings of one architecture
    (``*(8L)`` and ``8L``) name one model."""
    enc, dec, cross = (canonical_spec(spec) for spec in (enc, dec, cross))
    parts = [enc] + [f"{site}={spec}" for site, spec in (("dec", dec), ("cross", cross))
                     if spec != STOCK_HEADS]
    return "@".join(parts)


_SPEC_GROUP = re.compile(r"^(?:(\d*)\*)?(?:\(([^()]*)\)|([^()]*))$")
_SPEC_TERM = re.compile(r"^(\d*)([A-Za-z_][A-Za-z0-9_]*)$")


def _path_form(spec: str) -> str:
    """A spec written as paths write it, without reading it: no space, ``~`` for ``|``, no
    parentheses, ``.`` for ``,``."""
    return spec.replace(" ", "").replace("|", "~").replace("(", "").replace(")", "").replace(",", ".")


def _layer_name(body: str) -> str | None:
    """One layer's canonical name: every term with its count (``Ftoken`` is ``1Ftoken``),
    ``~`` before each mixer; None where the grammar does not read it."""
    terms, *mixers = body.replace("|", "~").split("~")
    names = []
    for term in terms.split("+"):
        match = _SPEC_TERM.match(term)
        if not match:
            return None
        names.append(f"{int(match.group(1) or 1)}{match.group(2)}")
    if not all(mixers):
        return None
    return "+".join(names) + "".join(f"~{mixer}" for mixer in mixers)


def canonical_spec(spec: str) -> str:
    """The one spelling (in path form) of the architecture a head spec describes, whatever
    the depth it is used at (headlab.heads.spec's grammar): a spec for every layer is the
    layer alone (``*(8L)`` and ``8L``: ``8L``), equal neighbouring groups are one repeated
    group (``8L,8L`` and ``2*(8L)``: ``2*8L``), a group used once has no repeat count in a
    spec of several (``1*8L,4L``: ``8L.4L``), every term has its count (``Ftoken+7L``:
    ``1Ftoken+7L``). A spec the grammar does not read keeps its path form (the config check
    names its error)."""
    text = re.sub(r"\s+", "", str(spec))
    groups: list[list] = []     # [repeat (None: every layer left), layer name]
    texts = re.split(r"[,.](?![^(]*\))", text)
    for group in texts:
        match = _SPEC_GROUP.match(group)
        layer = match and _layer_name(match.group(2) if match.group(2) is not None else match.group(3))
        if not layer:
            return _path_form(text)
        digits = match.group(1)
        # a lone group without "*" is used for every layer, as a "*(LAYER)" group is
        repeat = None if digits == "" or (digits is None and len(texts) == 1) else int(digits or 1)
        if groups and repeat is not None and groups[-1][0] is not None and groups[-1][1] == layer:
            groups[-1][0] += repeat
        else:
            groups.append([repeat, layer])
    if len(groups) == 1 and groups[0][0] is None:
        return groups[0][1]
    return ".".join(layer if repeat == 1 and len(groups) > 1 else f"{'' if repeat is None else repeat}*{layer}"
                    for repeat, layer in groups)


def size_count(size: str | int) -> int | None:
    """Training pairs of a size wildcard (``full``: None; ``5000``, ``5000.s2``: 5000)."""
    size = str(size)
    return None if size == "full" else int(size.split(".s")[0])


def size_seed(size: str | int, default: int) -> int:
    """Subsample seed of a size wildcard: K of ``N.sK``, else the corpus's ``default``."""
    size = str(size)
    return int(size.split(".s")[1]) if ".s" in size else default


def parse_heads_name(name: str) -> dict[str, str]:
    """``heads_name`` backwards: {"enc": ..., "dec": ..., "cross": ...} (``~`` kept: the
    spec grammar reads it as ``|``)."""
    enc, *rest = name.split("@")
    specs = {"enc": enc, "dec": STOCK_HEADS, "cross": STOCK_HEADS}
    for part in rest:
        site, sep, spec = part.partition("=")
        if not sep or site not in ("dec", "cross") or not spec:
            from headlab.errors import ConfigError
            raise ConfigError(f"bad head configuration {name!r}: expected ENC[@dec=SPEC][@cross=SPEC]",
                              key="heads")
        specs[site] = spec
    return specs


def with_variant(model: Mapping[str, str], overrides: Mapping[str, Any] | None) -> dict[str, str]:
    """The model dict with its ``variant`` set from the overrides that train it."""
    return {**model, "variant": variant_name(overrides)}


def study_models(study: Mapping[str, Any]) -> Iterator[dict[str, str]]:
    """Every model (a dict of wildcard values) of a study's grid, in config order.

    ``study["data"]`` maps corpus -> language pairs; the other grid axes are lists."""
    for corpus, pairs in study["data"].items():
        for pair in pairs:
            for size in study.get("sizes", ["full"]):
                for layers in study["layers"]:
                    for heads in study["heads"]:
                        for seed in study.get("seeds", [1]):
                            yield dict(corpus=corpus, pair=pair, size=str(size),
                                       preset=study["preset"], layers=layers, heads=heads_name(heads),
                                       seed=str(seed),
                                       variant=variant_name(study.get("overrides")))


def model_path(model: Mapping[str, str]) -> str:
    """corpus/pair/size/preset/variant/layers/heads/seedN of a model dict (a dict without
    ``variant`` is a model trained with the preset alone)."""
    defaults = {"variant": DEFAULT_VARIANT, "tune": ""}
    return MODEL.format(**{k: model.get(k, defaults[k]) if k in defaults else model[k]
                           for k in MODEL_KEYS})


# -- fine-tunes ---------------------------------------------------------------------------

def tune_segment(options: Mapping[str, Any]) -> str:
    """``/ft_k=v+k=v`` (sorted keys) of a fine-tune's options: model options the fine-tune
    changes (``gate``, ``enc_head_mask``) and OpenNMT-py training options. Values must be
    scalars without ``+``, ``=``, ``/`` (the name is read back by :func:`parse_tune`)."""
    from headlab.errors import ConfigError

    if not options:
        raise ConfigError("a fine-tune needs at least one option", key="tune")
    parts = []
    for key, value in sorted(options.items()):
        text = _short(value)
        if isinstance(value, bool):
            text = "true" if value else "false"
        if not re.fullmatch(r"[A-Za-z0-9_.:~-]+", text) or not re.fullmatch(r"[A-Za-z0-9_]+", key):
            raise ConfigError(f"fine-tune option {key}={value!r} cannot be named in a path "
                              f"(letters, digits and _.:~- only)", key=key)
        parts.append(f"{key}={text}")
    return TUNE_PREFIX + "+".join(parts)


def parse_tune(tune: str) -> tuple[list[dict[str, Any]], int | None]:
    """``tune`` wildcard -> (options of each fine-tune segment, checkpoint step or None)."""
    import yaml
    from headlab.errors import ConfigError

    if not re.fullmatch(TUNE_PATTERN, tune):
        raise ConfigError(f"bad fine-tune path {tune!r}: expected (/ft_K=V+K=V)*(/step_N)?", key="tune")
    step = None
    if STEP_PREFIX in tune:
        tune, _, number = tune.rpartition(STEP_PREFIX)
        step = int(number)
    segments = []
    for seg in [s for s in tune.split(TUNE_PREFIX) if s]:
        options = {}
        for item in seg.split("+"):
            key, sep, value = item.partition("=")
            if not sep:
                raise ConfigError(f"bad fine-tune option {item!r} in {tune!r}: expected KEY=VALUE", key="tune")
            options[key] = value if key in TUNE_STRINGS else yaml.safe_load(value)
        segments.append(options)
    return segments, step


def finetune(model: Mapping[str, str], options: Mapping[str, Any]) -> dict[str, str]:
    """The model fine-tuned from ``model`` with ``options`` (its path names the parent)."""
    if STEP_PREFIX in model.get("tune", ""):
        model = parent(model)
    return {**model, "tune": model.get("tune", "") + tune_segment(options)}


def snapshot(model: Mapping[str, str], step: int) -> dict[str, str]:
    """A fine-tune's checkpoint at ``step`` (0: its initial checkpoint) as a model."""
    return {**model, "tune": model.get("tune", "") + f"{STEP_PREFIX}{int(step)}"}


def parent(model: Mapping[str, str]) -> dict[str, str]:
    """The model a fine-tune (or a checkpoint snapshot) starts from: its path minus the last segment."""
    tune = model.get("tune", "")
    cut = tune.rfind(STEP_PREFIX) if STEP_PREFIX in tune else tune.rfind(TUNE_PREFIX)
    if cut < 0:
        from headlab.errors import ConfigError
        raise ConfigError(f"{model_path(model)} is not a fine-tune: it has no parent", key="tune")
    return {**model, "tune": tune[:cut]}


# -- the artifact paths -------------------------------------------------------------------

#: Every file the workflow writes, as a template under the results folder: the rules write
#: to these and the studies, the atlas and the publisher read from them, so the layout is
#: changed here once (``tests/test_paths.py`` renames every folder of this table and builds
#: the shipped DAG). ``{model}`` stands for a model's path (:data:`MODEL`); ``{data}`` for
#: its data folder ``corpus/pair/size``; other fields are the rules' wildcards.
PATHS: dict[str, str] = {
    # data: fetched releases, then per corpus/pair/size each stage of the pipeline
    "fetched": "data/raw/{dataset}/.verified",
    "release_file": "data/raw/{dataset}/{file}",  # a file of a fetched release (suite, treebank)
    "distil_parses": "data/raw/distil-lingeval/{suite}.parses{limit}.json",
    "raw": "data/{data}/raw/{split}.{side}",
    "raw_report": "data/{data}/raw/{split}.report.json",
    "mucow_key": "data/{data}/raw/mucow.key",
    "tokenized": "data/{data}/tok/{split}.{side}",
    "truecase_model": "data/{data}/truecase.{side}",
    "truecased": "data/{data}/tc/{split}.{side}",
    "bpe_codes": "data/{data}/bpe.codes",
    "bpe_side_codes": "data/{data}/bpe.{side}.codes",
    "bpe": "data/{data}/bpe/{split}.{side}",
    "vocab": "data/{data}/vocab.txt",
    "vocab_side": "data/{data}/vocab.{side}.txt",
    "feature_vocab": "data/{data}/{vocab}_feat{index}",
    "parse": "data/{data}/parse/{parser}/{split}.jsonl",
    "features": "data/{data}/feat/{parser}/{split}.src",
    "gold_parse": "data/{data}/gold/{split}.spacy.conllu",
    # models: a training's folder (its config, checkpoints, log and benchmark)
    "model_dir": "models/{model}",
    "onmt_config": "models/{model}/onmt.yaml",
    "checkpoint": "models/{model}/model.pt",
    "initial_checkpoint": "models/{model}/init.pt",
    "step_checkpoint": "models/{model}/model_step_{step}.pt",
    "averaged_checkpoint": "models/{model}/model.avg{n}.pt",
    "best_checkpoint": "models/{model}/model.best.json",
    "train_log": "models/{model}/train.log",
    "train_benchmark": "models/{model}/train.benchmark.tsv",
    # the code a training ran (headlab.engine.trained_code): no declared output
    "trained_code": "models/{model}/code.json",
    # translations and what is measured of a model (publish copies its scores folder)
    "model_scores": "scores/{model}",
    "translation_bpe": "translations/{model}/{split}.{ablation}.bpe",
    "translation": "translations/{model}/{split}.{ablation}.txt",
    "score": "scores/{model}/{split}.{ablation}.json",
    "logprob": "scores/{model}/{split}.{ablation}.logprob.tsv",
    "gates": "scores/{model}/gates.csv",
    "learning_curve": "scores/{model}/learning_curve.csv",
    "params": "scores/{model}/params.json",
    "attention": "scores/{model}/{split}.{site}.attention.npz",
    "distil_accuracy": "scores/{model}/distil_{suite}.{ablation}.accuracy.csv",
    "mucow_accuracy": "scores/{model}/mucow.{ablation}.mucow.csv",
    "mucow_details": "scores/{model}/mucow.{ablation}.mucow.details.txt",
    "profile": "scores/{model}/profile/{treebank}.{part}",
    # compare-mt over a group of systems that differ in their heads (and ablations)
    "compare": "scores/compare/{corpus}/{pair}/{size}/{preset}/{variant}/{layers}/seed{seed}/{split}/{systems}.{part}.csv",
    # a study's own folder: its search stages, parser scores, tables, figures, README
    "stage": "{outdir}/stages/{corpus}/{pair}/{stage}.json",
    "parser_f1": "{outdir}/parsers/{parser}.f1.csv",
    "study_output": "{outdir}/{name}.{ext}",
    "effects_summary": "effects.md",
    # the configs of the models trained by other code, for --forcerun (headlab.engine.trained_code)
    "stale_models": "stale-models.txt",
    "published": "published/{outdir}{tag}",
    # the head atlas
    "atlas_model": "atlas/{model}/{part}",
    "atlas_index": "atlas/{part}",
}


def path(kind: str, root: str, model: Mapping[str, str] | None = None, **fields: Any) -> str:
    """The file ``kind`` of :data:`PATHS` under ``root``: ``model`` (a model dict) fills
    ``{model}``, ``{data}`` and its own keys (``{corpus}``, ``{seed}``…), ``fields`` the
    rest; a field left out is an error."""
    if model is not None:
        fields = {"variant": DEFAULT_VARIANT, "tune": "", **model, "model": model_path(model),
                  "data": data_path(model), **fields}
    return f"{root}/" + PATHS[kind].format(**fields)


def data_path(model: Mapping[str, str]) -> str:
    """corpus/pair/size: the data folder a model's corpus pair and size name."""
    return f"{model['corpus']}/{model['pair']}/{model['size']}"


def pattern(kind: str, root: str, **fields: str) -> str:
    """The file ``kind`` as a Snakemake pattern under ``root``: ``{model}`` and ``{data}``
    spelled as their wildcards (``{corpus}/{pair}/…/seed{seed}{tune}``), the other fields
    wildcards unless given (a rule fixes one, e.g. ``part="heads.csv"``)."""
    template = PATHS[kind].replace("{model}", MODEL).replace("{data}", "{corpus}/{pair}/{size}")
    fields = {name: fields.get(name, "{" + name + "}") for name in re.findall(r"{(\w+)}", template)}
    return f"{root}/" + template.format(**fields)
