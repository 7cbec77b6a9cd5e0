"""``headlab build-vocab | train | translate``: OpenNMT-py's own tools with the plugin loaded.

What the wrapper adds to the stock commands:
- headlab's encoder and compat fixes are in place (``import headlab.engine.plugin``);
- unknown options, on the command line or in the ``-config`` YAML, are errors naming the
  key (``onmt_train`` silently ignores them);
- ``train`` resumes an interrupted run (fine-tunes with ``-train_from`` included) from its
  newest readable checkpoint, exactly: the same data position and random states
  (:mod:`headlab.engine.resume`), its log (``train.log`` beside the checkpoints) appended
  to; on success it
  publishes ``<save_model>.pt`` (the final model) atomically;
- ``translate`` writes ``-output`` atomically (no partial hypothesis files).
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from headlab.errors import ConfigError, DataError, HeadlabError
from headlab.engine import train_lock
from headlab.engine.devices import check_cuda_device
from headlab.engine.option_values import TRANSLATE_RANGES, out_of_range


_STEP = re.compile(r"_step_(\d+)\.pt$")


#: what each OpenNMT-py wrapper's short help says first
_PURPOSE = {
    "train": "OpenNMT-py's onmt_train with headlab's head kinds, exact resume and one-line errors.",
    "translate": "OpenNMT-py's onmt_translate with headlab's head kinds and test-time head ablation.",
    "build_vocab": "OpenNMT-py's onmt_build_vocab with headlab's options accepted in the config.",
}


def _help(kind: str, argv: list[str], onmt_parser) -> bool:
    """``-h``/``--help``: headlab's own options of this command (OpenNMT-py's are over a
    thousand lines), and how to see those; ``--help-onmt``: OpenNMT-py's whole help."""
    command = "headlab " + kind.replace("_", "-")
    if "--help-onmt" in argv:
        onmt_parser.prog = command
        onmt_parser.print_help()
        return True
    if not {"-h", "--help"} & set(argv):
        return False
    from onmt.utils.parse import ArgumentParser

    from headlab.engine import opts as ours

    short = ArgumentParser(prog=command, description=_PURPOSE[kind], add_help=False,
                           epilog=f"OpenNMT-py's own options (data, model, optimiser, decoding, ...) are all "
                                  f"accepted too: `{command} --help-onmt` lists them.")
    short.add_argument("-config", "--config", help="a YAML of options (OpenNMT-py's and headlab's)")
    short.add_argument("-h", "--help", action="store_true", help="this help")
    short.add_argument("--help-onmt", action="store_true", help="OpenNMT-py's whole help")
    if kind in ("train", "build_vocab"):
        ours.model_opts(short)
    if kind == "train":
        ours.train_opts(short)
    if kind == "translate":
        ours.translate_opts(short)
    short.print_help()
    return True


def _parse(parser, argv: list[str], kind: str):
    """Parse like OpenNMT-py, but reject unknown options. A ``-config`` YAML is checked key
    by key first, so the error names its file and line. build_vocab reads the training
    config (model options included), so training options are accepted there."""
    from headlab.engine.config import one_line_errors, validate_yaml_file, yaml_key_lines

    one_line_errors(parser, kind)
    config = None
    for flag in ("-config", "--config"):
        if flag in argv[:-1]:
            config = argv[argv.index(flag) + 1]
            validate_yaml_file(config, kind=kind)
    try:
        opt, unknown = parser.parse_known_args(argv)
    except ConfigError as err:
        # a bad value from the YAML (not overridden on the command line): name its file and line
        line = yaml_key_lines(config).get(err.key) if config and err.key else None
        if line is None or any(a.lstrip("-").split("=")[0] == err.key for a in argv if a.startswith("-")):
            raise
        raise ConfigError(str(err).split("] ", 1)[-1], path=config, line=line, key=err.key) from None
    if unknown and kind != "build_vocab":
        import difflib
        known = [s for a in parser._actions for s in a.option_strings]
        bad = unknown[0].split("=")[0]
        close = difflib.get_close_matches(bad, known, n=1, cutoff=0.75)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"unknown OpenNMT-py {kind} option {bad!r}{hint}", key=bad.lstrip("-"))
    return opt


def checkpoints(save_model: str) -> list[tuple[int, Path]]:
    """(step, path) of ``<save_model>_step_N.pt`` files, oldest first."""
    prefix = Path(save_model)
    found = []
    for path in prefix.parent.glob(prefix.name + "_step_*.pt"):
        match = _STEP.search(path.name)
        if match:
            found.append((int(match[1]), path))
    return sorted(found)


def _readable(path: Path) -> dict | None:
    import torch
    try:
        return torch.load(path, map_location="cpu", weights_only=False, mmap=True)
    except Exception:  # a checkpoint cut short by kill -9 while it was being written
        return None


def resume_point(save_model: str, newer_than: float = 0.0, max_step: int | None = None) -> Path | None:
    """The newest checkpoint that loads with its optimizer state; unreadable newer ones are
    moved aside.

    Checkpoints older than ``newer_than`` (the mtime of the training config) belong to an
    earlier configuration and are never resumed from. Only the newest checkpoint a training
    wrote keeps its optimizer state (older ones are stripped once the next is whole:
    :func:`headlab.engine.compat._patch_optimizer_state_in_newest_checkpoint`); one without it
    is kept (averaging reads it) but not resumed from."""
    from onmt.utils.logging import logger
    for step, path in reversed(checkpoints(save_model)):
        if path.stat().st_mtime < newer_than or (max_step is not None and step > max_step):
            logger.info("headlab: removing %s: written under another training config", path)
            path.unlink()
            continue
        ckpt = _readable(path)
        if ckpt is not None and ckpt.get("optim") is not None:
            return path
        if ckpt is not None:
            logger.warning("checkpoint %s holds no optimizer state: not resumed from", path)
            continue
        logger.warning("checkpoint %s is unreadable (interrupted write?): moved to %s.broken", path, path)
        os.replace(path, str(path) + ".broken")
    return None


def train(argv: list[str]) -> int:
    import headlab.engine.plugin  # noqa: F401
    from onmt.bin.train import _get_parser

    if _help("train", argv, _get_parser()):
        return 0
    parser = _get_parser()
    parser.set_defaults(compile=compile_default())      # the config and the command line win
    opt = _parse(parser, argv, "train")
    if opt.gpu_ranks:     # ranks, not device ids: process i trains on device i
        check_cuda_device(len(opt.gpu_ranks) - 1, "-gpu_ranks",
                          "train on the CPU without -gpu_ranks (training.device: cpu)",
                          named=f"-gpu_ranks {' '.join(map(str, opt.gpu_ranks))} needs "
                                f"{len(opt.gpu_ranks)} CUDA device{'s' if len(opt.gpu_ranks) > 1 else ''}")
    # one training per model folder, before anything in it is written: a second one (a run
    # started beside a killed run's orphan) would interleave checkpoints and the learning curve
    with train_lock.hold_model_folder(Path(opt.save_model).parent):
        return _train(opt)


def compile_default() -> str:
    """``-compile``'s default: ``$HEADLAB_COMPILE`` where set (one of the option's values),
    else off."""
    from headlab.engine.opts import COMPILE_MODES, COMPILE_VARIABLE

    value = os.environ.get(COMPILE_VARIABLE, "").strip() or "off"
    if value not in COMPILE_MODES:
        raise ConfigError(f"bad value for ${COMPILE_VARIABLE}: {value!r} (one of {', '.join(COMPILE_MODES)})",
                          key=COMPILE_VARIABLE)
    return value


def _train(opt) -> int:
    from onmt.bin.train import train as onmt_train
    from onmt.utils.logging import init_logger, logger

    from headlab.engine import selection, trained_code
    from headlab.heads.spec import SITES

    # this run's own checkpoints win over -train_from: a fine-tune (train_from: init.pt,
    # reset_optim: all) interrupted at step N resumes at N with its own optimizer state,
    # as every other training does, instead of starting again from init.pt
    config = getattr(opt, "config", None)
    last = resume_point(opt.save_model, os.path.getmtime(config) if config else 0.0, opt.train_steps)
    # the learning curve's log: beside the checkpoints, started afresh with a training and
    # appended to by a resume (a workflow log would be emptied by the rerun job)
    if not opt.log_file:
        opt.log_file = str(Path(opt.save_model).parent / "train.log")
    if last is None:
        Path(opt.log_file).parent.mkdir(parents=True, exist_ok=True)
        open(opt.log_file, "w").close()
    init_logger(opt.log_file)
    train_lock.stop_with_snakemake(logger.warning)
    resume_step = 0
    if last is not None:
        logger.info("headlab: resuming interrupted training from checkpoint %s", last)
        opt.train_from = str(last)
        opt.reset_optim = "none"
        resume_step = int(_STEP.search(last.name)[1])
    # the code this training runs, before its first step (a resume by other code adds an entry)
    trained_code.record(Path(opt.save_model).parent, from_step=resume_step,
                        heads={site: getattr(opt, name) for site, name in SITES.items() if getattr(opt, name, None)})
    tracker = selection.start(opt, resume_step)
    if opt.world_size > 1:
        # OpenNMT-py trains each GPU in a process of its own, started with "spawn": a fresh
        # interpreter that would lack headlab's plugin (no -encoder_type headlab there) and
        # this run's model selection; the children start in spawned_train below instead
        import onmt.bin.train
        onmt.bin.train.spawned_train = spawned_train
    onmt_train(opt)
    done = [(step, path) for step, path in checkpoints(opt.save_model) if step <= opt.train_steps]
    if tracker is not None:
        step, chosen = selection.finish(tracker)
        logger.info("headlab: best validation cross-entropy %.4f at step %d", tracker.best["xent"], step)
    elif opt.early_stopping > 0 and done:
        step, chosen = done[-1]          # stopped early: the last step it saved
    else:
        # the final model is this run's last step, never a newer-numbered stray checkpoint
        step, chosen = opt.train_steps, dict(done).get(opt.train_steps)
        if chosen is None:
            raise HeadlabError(f"training stopped before step {opt.train_steps}: "
                               f"no {opt.save_model}_step_{opt.train_steps}.pt")
    final = Path(opt.save_model + ".pt")
    tmp = final.with_suffix(".pt.tmp")
    shutil.copyfile(chosen, tmp)
    os.replace(tmp, final)
    logger.info("headlab: final model %s (step %d)", final, step)
    # a resumed run leaves the interrupted run's checkpoints behind: keep the newest ones
    # (and the chosen one)
    keep = opt.keep_checkpoint if opt.keep_checkpoint > 0 else len(done)
    for _, path in done[:-keep]:
        if path != chosen:
            path.unlink()
    return 0


def spawned_train(process_fn, opt, device_id, error_queue):
    """OpenNMT-py's ``spawned_train`` (one GPU of a ``world_size`` > 1 training) in a spawned
    process, after what ``train`` sets up in its own: the plugin (compat patches, head
    kinds) and model selection, which records validations and protects the best checkpoint
    on the process that validates and saves (rank 0); the parent reads its CSV back."""
    import headlab.engine.plugin  # noqa: F401
    from onmt.utils.distributed import spawned_train as onmt_spawned_train

    from headlab.engine import selection

    if opt.gpu_ranks[device_id] == 0:
        resumed = _STEP.search(Path(opt.train_from).name) if opt.train_from else None
        selection.start(opt, int(resumed[1]) if resumed else 0)
    onmt_spawned_train(process_fn, opt, device_id, error_queue)


def _check_translate_inputs(src: str, models: list[str]) -> None:
    """Missing or unreadable inputs as one line naming the file, before any output exists
    (OpenNMT-py would fail deep inside with a long traceback)."""
    from headlab.checkpoints import read_checkpoint

    if src != "-" and not os.path.isfile(src):
        raise DataError("no such source file", path=src, key="src")
    for model in models:
        if not os.path.isfile(model):
            raise DataError("no such model file", path=model, key="model")
        read_checkpoint(model, key="model")


def translate(argv: list[str]) -> int:
    import headlab.engine.plugin  # noqa: F401
    from onmt.bin.translate import _get_parser, translate as onmt_translate
    from onmt.utils.parse import ArgumentParser

    if _help("translate", argv, _get_parser()):
        return 0
    opt = _parse(_get_parser(), argv, "translate")
    ArgumentParser.validate_translate_opts(opt)
    _check_translate_inputs(opt.src, opt.models)
    bad = out_of_range(vars(opt), TRANSLATE_RANGES)
    if bad:
        raise ConfigError(f"-{bad[1]}", key=bad[0])
    check_cuda_device(opt.gpu, "-gpu", "-gpu -1 runs on the CPU")
    final = Path(opt.output)
    final.parent.mkdir(parents=True, exist_ok=True)
    opt.output = str(final.with_name(f".{final.name}.tmp"))
    try:
        onmt_translate(opt)
        os.replace(opt.output, final)
    finally:
        if os.path.exists(opt.output):
            os.unlink(opt.output)
    return 0


def build_vocab(argv: list[str]) -> int:
    import headlab.engine.plugin  # noqa: F401
    from onmt.bin.build_vocab import _get_parser, build_vocab_main

    if _help("build_vocab", argv, _get_parser()):
        return 0
    opt = _parse(_get_parser(), argv, "build_vocab")
    build_vocab_main(opt)
    return 0


def main_train(argv: list[str]) -> int:
    return train(argv)


def main_translate(argv: list[str]) -> int:
    return translate(argv)


def main_build_vocab(argv: list[str]) -> int:
    return build_vocab(argv)


def main_average(argv: list[str]) -> int:
    """``headlab average --save-model PREFIX --last N --output FILE``: OpenNMT-py's
    ``average_models`` (tied weights fixed: :mod:`headlab.engine.compat`) over the last N checkpoints ``PREFIX_step_*.pt`` (paper C §A.1
    averages the last 10), written atomically."""
    import headlab.engine.plugin  # noqa: F401  (average_models with tied weights fixed: compat)
    from onmt.bin.average_models import average_models
    import torch

    from headlab.io import atomic_write

    from headlab.options import CommandParser

    parser = CommandParser("average", main_average.__doc__.split("\n\n")[0])
    parser.add_argument("--save-model", required=True, help="the training's -save_model prefix")
    parser.add_argument("--last", type=int, required=True, help="average the newest N checkpoints")
    parser.add_argument("--output", required=True, help="the averaged checkpoint to write")
    args = parser.parse_args(argv)
    found = checkpoints(args.save_model)
    if args.last < 1:
        raise ConfigError(f"--last must be >= 1, got {args.last}", key="average_last")
    if len(found) < args.last:
        raise ConfigError(f"averaging the last {args.last} checkpoints needs as many: {args.save_model}_step_*.pt "
                          f"has {len(found)} (raise the preset's keep_checkpoint, or average fewer)",
                          path=args.save_model, key="keep_checkpoint")
    averaged = average_models([str(p) for _, p in found[-args.last:]])
    with atomic_write(args.output, "wb") as handle:
        torch.save(averaged, handle)
    return 0


main = main_train


def vocab(argv: list[str]) -> int:
    """``headlab vocab --train SRC TGT --out VOCAB [--out-tgt TGT_VOCAB]``: the vocabulary
    built by OpenNMT-py's build_vocab over the whole training corpus, written atomically:
    one shared by both sides (joint BPE), or with ``--out-tgt`` one per side (separate BPE
    models, paper A §4.2 for Korean-English)."""
    import argparse
    import tempfile

    import yaml

    parser = argparse.ArgumentParser(prog="headlab vocab")
    parser.add_argument("--train", nargs=2, required=True, metavar=("SRC", "TGT"), help="training source and target (BPE)")
    parser.add_argument("--out", required=True, help="the shared (or, with --out-tgt, source) vocabulary")
    parser.add_argument("--out-tgt", help="a separate target vocabulary")
    args = parser.parse_args(argv)
    for path in args.train:     # OpenNMT-py's own check raises a bare IOError without the path
        if not Path(path).is_file():
            raise DataError("cannot read the training file: no such file", path=path)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    shared = args.out_tgt is None
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".vocab.") as tmp:
        config = Path(tmp) / "build_vocab.yaml"
        config.write_text(yaml.safe_dump({
            "data": {"corpus_1": {"path_src": args.train[0], "path_tgt": args.train[1]}},
            "save_data": tmp, "src_vocab": f"{tmp}/vocab.src", "tgt_vocab": f"{tmp}/vocab.tgt",
            "share_vocab": shared, "n_sample": -1, "overwrite": True, "num_threads": 1,
        }))
        build_vocab(["-config", str(config)])
        if not shared:
            Path(args.out_tgt).parent.mkdir(parents=True, exist_ok=True)
            os.replace(f"{tmp}/vocab.tgt", args.out_tgt)
        os.replace(f"{tmp}/vocab.src", out)
    return 0


main_vocab = vocab
