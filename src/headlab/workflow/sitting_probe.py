"""A sitting's speed probes on the idle GPU (the later call, after the trainings).

    python -m headlab.workflow.sitting_probe --config MODEL/onmt.yaml --name 8L --out WORK/logs/speed-extra.json
        [--steps 60] [--profile-steps 20] [--compile MODE] [-- OPENNMT_OPTIONS]
    python -m headlab.workflow.sitting_probe --side-by-side 8 --config A/onmt.yaml --name A [--config B ...]
        --out WORK/logs/crowd [--steps 40] [--warmup 10] [-- OPENNMT_OPTIONS]

**Alone** (the first form): ``headlab train`` runs in this process with the sitting's clock
installed (:class:`headlab.engine.steptime.StepClock`): the steps before the trace give the
tokens/s alone (OpenNMT-py's own reports, read from the probe's log) and the wall time a step
alone (the steps between the first ``warmup`` and the trace, the device synchronised at both
ends: the plan's seconds a step with one model), the last ``profile_steps`` whole iterations
are traced (:class:`~headlab.engine.steptime.ProfileWindow`, as the trainings' own window side
by side); its summary, the tokens/s and the step time are merged into ``--out`` under
``profile``, ``alone`` and ``alone_step_ms`` (read by :mod:`headlab.workflow.sitting` into
``throughput.csv``).

**Side by side** (``--side-by-side K``): K copies of the given models (taken in turn) train at
once, each in a process of its own, as K trainings of a sitting would: the plan's seconds a
step with K models side by side, for a K no sitting has trained (one seed more a sitting).
Each copy, past its ``warmup`` steps, waits at a barrier (a file per copy in ``--out``) until
all K are there (at most :data:`BARRIER_S`), then times its next ``steps - warmup`` steps
(nothing traced) and writes ``--out/<model>.<copy>.json``: its step time, the Unix times of
its timed steps, and how many copies were at the barrier
(:func:`headlab.workflow.sitting_speed.crowd_summary` reads them).

**Compiled** (``--compile MODE``, alone): the same probe with the model trained through
``torch.compile`` (``headlab train -compile MODE``, :mod:`headlab.engine.compiled`), nothing
traced: its wall time a step past the warm-up (which holds the compile) and the seconds from
its start to that first timed step, under ``compiled`` in ``--out``; the probe alone writes
the same seconds (``alone_ready_s``), so their difference is what the compile costs a
training before its steps pay it back.

Options after ``--`` are OpenNMT-py's, after the config's (a CPU rehearsal's: one process,
fp32, small buckets and batches). Checkpoints go to a scratch folder: the sitting's models
are never touched.
"""
from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from headlab.engine.opts import COMPILE_MODES

#: the longest a copy waits at the barrier for the others of its crowd (they start together
#: from the same configs: their start-ups differ by seconds)
BARRIER_S = 20.0
POLL_S = 0.05


def _merge(out: Path, section: str, name: str, value) -> None:
    found = json.loads(out.read_text()) if out.is_file() else {}
    found.setdefault(section, {})[name] = value
    out.write_text(json.dumps(found, indent=1))


def _stopped(signum, frame) -> None:
    raise SystemExit(128 + signum)


def barrier(folder: Path, name: str, size: int, timeout: float = BARRIER_S) -> dict:
    """Say ``name`` is ready (a file in ``folder``) and wait until ``size`` copies are, or
    ``timeout`` s; returns how many were and how long it waited."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.ready").touch()
    began = time.monotonic()
    while True:
        ready = len(list(folder.glob("*.ready")))
        if ready >= size or time.monotonic() - began >= timeout:
            return {"ready": ready, "waited_s": round(time.monotonic() - began, 3)}
        time.sleep(POLL_S)


def probe(config: str, name: str, out: Path, steps: int, profile_steps: int, warmup: int = 10,
          crowd: tuple[Path, int] | None = None, options: tuple[str, ...] = (), compile_mode: str | None = None) -> None:
    """One probe's training (see the module doc); ``crowd``: (the barrier's folder, K) of a
    copy side by side, which writes its own JSON ``out`` and traces nothing; ``options``:
    OpenNMT-py's, after the config's; ``compile_mode``: the model trained through
    ``-compile`` (its results under ``compiled`` in ``out``)."""
    import headlab.engine.plugin  # noqa: F401  (the engine's patches first: the clock times what runs)
    from headlab.engine.run import train
    from headlab.engine.steptime import ProfileWindow, StepClock
    from headlab.workflow.sitting import throughput

    scratch = Path(tempfile.mkdtemp(prefix="headlab-probe."))
    log = out.with_name(f"probe.{name}.log")
    met: dict = {}
    before = None if crowd is None else (lambda: met.update(barrier(crowd[0], name, crowd[1])))
    # the window closes as the iteration after it begins: one step more than the probe's;
    # the steps between the warm-up and the window are timed: the plan's seconds a step alone
    window = ProfileWindow(steps - profile_steps + 1, profile_steps, lead=max(steps - profile_steps - warmup, 0),
                           before_lead=before)
    clock = StepClock(profile=window).install()
    started = time.time()
    if compile_mode:
        options = (*options, "-compile", compile_mode)
    if crowd is not None:
        # the runner stops the crowd at its cap with SIGTERM, which would end a copy without
        # `finally`: by then a copy is often past its timed steps, in OpenNMT-py's last save (a
        # base model's checkpoint with Adam's state, K copies at once); ended through `finally`,
        # it still writes what it timed. (The probe alone keeps the default: its tokens/s from
        # a cut log could be its warm-up's.)
        signal.signal(signal.SIGTERM, _stopped)
    try:
        train(["-config", config, *options, "-train_steps", str(steps + 1), "-save_model", str(scratch / "model"),
               "-save_checkpoint_steps", str(steps + 1), "-valid_steps", str(10**6), "-early_stopping", "0",
               "-model_selection", "last", "-report_every", "10", "-log_file", str(log)])
    finally:
        # (no `return` in here: it would swallow the exception in flight, a crash or the stop)
        clock.undo()
        if crowd is not None:
            if window.lead_step_ms:
                out.write_text(json.dumps({"name": name, "side_by_side": crowd[1], **met,
                                           "step_ms": window.lead_step_ms, "window": window.lead_window}, indent=1))
        elif compile_mode:
            if window.lead_step_ms:
                _merge(out, "compiled", name, {"mode": compile_mode, "step_ms": window.lead_step_ms,
                                               "ready_s": round(window.lead_window[0] - started, 1)})
        else:
            if window.summary:
                _merge(out, "profile", name, window.summary)
            if window.lead_step_ms:
                _merge(out, "alone_step_ms", name, window.lead_step_ms)
                # from the probe's start to its first timed step: start-up and warm-up (the
                # compiled probe's, less this, is what compiling costs before a step)
                _merge(out, "alone_ready_s", name, round(window.lead_window[0] - started, 1))
            speed = throughput(log)
            if speed["src_tok_s"]:
                _merge(out, "alone", name, [speed["src_tok_s"], speed["tgt_tok_s"]])


def copies(models: list[tuple[str, str]], size: int) -> list[tuple[str, str]]:
    """(copy name, config) of a crowd of ``size``: the models in turn, each copy numbered
    (``8L.1``, ``7Ftoken+1L.1``, ..., ``8L.2``)."""
    return [(f"{models[index % len(models)][0]}.{index // len(models) + 1}", models[index % len(models)][1])
            for index in range(size)]


def side_by_side(models: list[tuple[str, str]], size: int, folder: Path, steps: int, warmup: int,
                 options: tuple[str, ...] = ()) -> int:
    """The crowd (see the module doc): ``size`` copies of ``models`` ((name, config)) at once,
    each a process of its own in this one's process group (a runner that stops this probe
    stops them all); the number of copies that ended with an error."""
    folder.mkdir(parents=True, exist_ok=True)
    for stale in [*folder.glob("*.ready"), *folder.glob("*.json")]:
        stale.unlink()           # an earlier crowd's (a later call probing again)
    procs = []
    for name, config in copies(models, size):
        log = open(folder / f"{name}.console.log", "w")
        procs.append(subprocess.Popen([sys.executable, "-m", "headlab.workflow.sitting_probe", "--config", config,
                                       "--name", name, "--out", str(folder / f"{name}.json"), "--steps", str(steps),
                                       "--profile-steps", "0", "--warmup", str(warmup), "--barrier", str(folder),
                                       "--barrier-size", str(size), "--", *options],
                                      stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
    return sum(1 for proc in procs if proc.wait() != 0)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    split = argv.index("--") if "--" in argv else len(argv)
    options = tuple(argv[split + 1:])
    parser = argparse.ArgumentParser(prog="python -m headlab.workflow.sitting_probe", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, action="append", help="a model's onmt.yaml (several: a crowd's models)")
    parser.add_argument("--name", required=True, action="append", help="the model's name in the sitting (one a --config)")
    parser.add_argument("--out", required=True,
                        help="the JSON the results are merged into (side by side: the folder of the copies' JSONs)")
    parser.add_argument("--steps", type=int, default=None,
                        help="training steps of the probe (default 60 alone, 40 side by side)")
    parser.add_argument("--profile-steps", type=int, default=None,
                        help="steps traced by torch.profiler (top kernels, CPU and GPU time; default 20 alone, 0 side "
                             "by side)")
    parser.add_argument("--warmup", type=int, default=10,
                        help="first steps left out of the step time (the allocator's and kernels' warm-up)")
    parser.add_argument("--compile", default=None, choices=COMPILE_MODES[1:],
                        help="alone: train the model through torch.compile in this mode (headlab train -compile), "
                             "timed past the warm-up (which holds the compile), nothing traced by default")
    parser.add_argument("--side-by-side", type=int, default=1,
                        help="K > 1: K copies of the models train at once, each timed past the warm-up")
    # a copy of a crowd (started by --side-by-side): its barrier's folder and size
    parser.add_argument("--barrier", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--barrier-size", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv[:split])
    crowd = args.side_by_side > 1
    steps = args.steps if args.steps is not None else 40 if crowd or args.barrier else 60
    profile_steps = (args.profile_steps if args.profile_steps is not None else
                     0 if crowd or args.barrier or args.compile else 20)
    if len(args.config) != len(args.name):
        parser.error(f"one --name a --config: {len(args.config)} --config, {len(args.name)} --name")
    if args.side_by_side < 1:
        parser.error(f"--side-by-side must be 1 or more, not {args.side_by_side}")
    if not 0 <= args.warmup < steps - profile_steps:
        parser.error(f"--warmup must leave steps before the profile window: 0 .. {steps - profile_steps - 1}")
    if args.compile and (crowd or args.barrier):
        parser.error("--compile probes one model alone")
    if crowd:
        return 1 if side_by_side(list(zip(args.name, args.config)), args.side_by_side, Path(args.out), steps,
                                 args.warmup, options) else 0
    if len(args.config) > 1:
        parser.error("several --config are a crowd's: give --side-by-side K")
    barrier_at = (Path(args.barrier), args.barrier_size) if args.barrier else None
    probe(args.config[0], args.name[0], Path(args.out), steps, profile_steps, args.warmup, crowd=barrier_at,
          options=options, compile_mode=args.compile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
