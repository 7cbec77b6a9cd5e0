"""A sitting's speed probes on the idle GPU (the later call, after the trainings).

    python -m headlab.workflow.sitting_probe --config MODEL/onmt.yaml --name 8L --out WORK/logs/speed-extra.json
        [--steps 60] [--profile-steps 20] [--compile MODE [--compiled-warmup 5] [--compiled-steps 30]]
        [-- OPENNMT_OPTIONS]
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

**Then compiled** (``--compile MODE``, alone): the same process goes on once the probe alone
has written its figures: the model is compiled in place (``torch.compile`` as ``headlab train
-compile MODE`` does it: :mod:`headlab.engine.compiled`), trains ``--compiled-warmup`` steps
(which hold the compile) and ``--compiled-steps`` timed ones, nothing traced. Under
``compiled`` in ``--out``: its wall time a step, ``compile_s`` (the warm-up's wall time less
as many eager steps: what compiling costs a training before its steps pay it back) and the
graphs dynamo compiled during the timed steps (a recompile there would make the step look
slower than it is). One process for both saves a second start-up (~55 s of a GPU call:
imports, data, vocabulary, model), and both figures come from the same batches, model and
machine state. A probe stopped while compiling (SIGTERM: the runner's cap) writes how long it
had compiled, ``cut_s``: a lower bound of the compile; one whose compile (or compiled steps)
raised writes the error's first line, ``error``, and exits with it (the eager figures stay).

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
#: a failed compile's error, as much of its first line as a speed row keeps
ERROR_CHARS = 200


def _merge(out: Path, section: str, name: str, value) -> None:
    found = json.loads(out.read_text()) if out.is_file() else {}
    found.setdefault(section, {})[name] = value
    out.write_text(json.dumps(found, indent=1))


def _stopped(signum, frame) -> None:
    raise SystemExit(128 + signum)


def error_line(failure: BaseException) -> str:
    """An exception as one line of a speed row: its type and its message's first line (a
    compiler's errors run to pages; the probe's log keeps them whole)."""
    text = str(failure).strip()
    return f"{type(failure).__name__}: {text.splitlines()[0] if text else ''}".strip()[:ERROR_CHARS]


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


class ThenCompiled:
    """The probe alone's two phases as one profile window of the clock
    (:class:`~headlab.engine.steptime.StepClock` asks it at every iteration): ``eager``
    first; as it closes, ``eager_done()`` (the eager figures written), then ``model()``
    compiled in place in ``mode``, ``warmup`` iterations that hold the compile, and ``steps``
    timed (:attr:`compiled`'s lead)."""

    def __init__(self, eager, mode: str, warmup: int, steps: int, eager_done, model):
        self.eager, self.mode, self.warmup, self.steps = eager, mode, warmup, steps
        self.eager_done, self.model = eager_done, model
        self.compiled = None
        #: the compile's own call raised this (torch.compile refusing the model or the mode)
        self.failure: Exception | None = None
        #: Unix time the compile began (the device synchronised first), None: not yet
        self.compile_began: float | None = None
        self.graphs_at_lead: int | None = None

    @property
    def summary(self) -> dict:
        return self.eager.summary

    @property
    def tables(self) -> str:
        return self.eager.tables

    @staticmethod
    def graphs() -> int:
        """Graphs dynamo has compiled in this process so far."""
        from torch._dynamo.utils import counters
        return int(counters["stats"]["unique_graphs"])

    def at_iteration(self, number: int) -> bool:
        from headlab.engine import compiled
        from headlab.engine.steptime import ProfileWindow

        if self.compiled is not None:
            if number == self.compiled.first - self.compiled.lead:
                self.graphs_at_lead = self.graphs()
            return self.compiled.at_iteration(number)
        closed = self.eager.at_iteration(number)
        if closed:
            self.eager_done()
            ProfileWindow._synchronize()            # the eager steps' kernels are not the compile's
            self.compile_began = time.time()
            # a stop from here on ends through `finally`, which says how long it had compiled
            signal.signal(signal.SIGTERM, _stopped)
            try:
                compiled.compile_model(self.model(), self.mode)
            except Exception as err:
                # the clock drops a profile that raises and the training goes on eager: the
                # entry must still say that the compile failed, not that it was cut
                self.failure = err
                raise
            self.compiled = ProfileWindow(number + self.warmup + self.steps, 0, lead=self.steps)
        return closed

    def result(self, eager_step_ms: float | None, failure: BaseException | None = None) -> dict | None:
        """The ``compiled`` entry: mode, step_ms, compile_s and graphs_in_lead, or (stopped
        before its timed steps ended: the runner's SIGTERM, an interrupt) ``cut_s``, the
        seconds it had compiled, or (an error ended it: ``failure`` out of the training, the
        compile, or the compiled model's steps, or the compile's own call) ``error``, its
        first line, and ``failed_after_s``; None: never began."""
        if self.compile_began is None:
            return None
        lead = self.compiled.lead_step_ms if self.compiled is not None else None
        if lead is None:
            seconds = round(time.time() - self.compile_began, 1)
            failure = self.failure or failure
            if not isinstance(failure, Exception):         # none, a stop or an interrupt
                return {"mode": self.mode, "cut_s": seconds}
            return {"mode": self.mode, "error": error_line(failure), "failed_after_s": seconds}
        warmup_s = self.compiled.lead_window[0] - self.compile_began
        cost = round(warmup_s - self.warmup * eager_step_ms / 1000, 1) if eager_step_ms else None
        return {"mode": self.mode, "step_ms": lead, "compile_s": cost, "warmup_steps": self.warmup,
                "graphs_in_lead": self.graphs() - (self.graphs_at_lead or 0)}


def probe(config: str, name: str, out: Path, steps: int, profile_steps: int, warmup: int = 10,
          crowd: tuple[Path, int] | None = None, options: tuple[str, ...] = (), compile_mode: str | None = None,
          compiled_warmup: int = 5, compiled_steps: int = 30) -> None:
    """One probe's training (see the module doc); ``crowd``: (the barrier's folder, K) of a
    copy side by side, which writes its own JSON ``out`` and traces nothing; ``options``:
    OpenNMT-py's, after the config's; ``compile_mode``: alone, then the model compiled
    (:class:`ThenCompiled`; its results under ``compiled`` in ``out``)."""
    import headlab.engine.plugin  # noqa: F401  (the engine's patches first: the clock times what runs)
    import onmt.train_single
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
    written = []

    def eager_figures() -> None:
        """The probe alone's figures, merged into ``out`` once (before a compile: the log's
        later reports are the compiled model's)."""
        if written:
            return
        written.append(True)
        if window.summary:
            _merge(out, "profile", name, window.summary)
        if window.lead_step_ms:
            _merge(out, "alone_step_ms", name, window.lead_step_ms)
            # from the probe's start to its first timed step: start-up and warm-up
            _merge(out, "alone_ready_s", name, round(window.lead_window[0] - started, 1))
        speed = throughput(log)
        if speed["src_tok_s"]:
            _merge(out, "alone", name, [speed["src_tok_s"], speed["tgt_tok_s"]])

    built: dict = {}
    build_trainer = onmt.train_single.__dict__["build_trainer"]

    def build_trainer_held(opt, device_id, model, *args, **kwargs):
        built["model"] = model                  # the model the trainer trains, for the compile
        return build_trainer(opt, device_id, model, *args, **kwargs)

    phases = window
    total = steps + 1
    if compile_mode:
        phases = ThenCompiled(window, compile_mode, compiled_warmup, compiled_steps, eager_figures,
                              lambda: built["model"])
        onmt.train_single.build_trainer = build_trainer_held
        total = steps + 1 + compiled_warmup + compiled_steps
    clock = StepClock(profile=phases).install()
    started = time.time()
    stop_handler = signal.getsignal(signal.SIGTERM)     # put back after: a probe run in process
    if crowd is not None:
        # the runner stops the crowd at its cap with SIGTERM, which would end a copy without
        # `finally`: by then a copy is often past its timed steps, in OpenNMT-py's last save (a
        # base model's checkpoint with Adam's state, K copies at once); ended through `finally`,
        # it still writes what it timed. (The probe alone keeps the default until its figures
        # are written: its tokens/s from a cut log could be its warm-up's.)
        signal.signal(signal.SIGTERM, _stopped)
    failure: list[BaseException] = []
    try:
        # eager whatever $HEADLAB_COMPILE says: the probe's eager figures are the baseline
        train(["-config", config, *options, "-compile", "off", "-train_steps", str(total),
               "-save_model", str(scratch / "model"),
               "-save_checkpoint_steps", str(total), "-valid_steps", str(10**6), "-early_stopping", "0",
               "-model_selection", "last", "-report_every", "10", "-log_file", str(log)])
    except BaseException as err:
        failure.append(err)     # the stop, or a compile that failed: which, the compiled entry says
        raise
    finally:
        # (no `return` in here: it would swallow the exception in flight, a crash or the stop)
        clock.undo()
        onmt.train_single.build_trainer = build_trainer
        signal.signal(signal.SIGTERM, stop_handler)
        if crowd is not None:
            if window.lead_step_ms:
                out.write_text(json.dumps({"name": name, "side_by_side": crowd[1], **met,
                                           "step_ms": window.lead_step_ms, "window": window.lead_window}, indent=1))
        else:
            eager_figures()
            found = phases.result(window.lead_step_ms, *failure) if compile_mode else None
            if found:
                _merge(out, "compiled", name, found)


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
                        help="alone: once the eager figures are written, compile the model in place in this mode "
                             "(headlab train -compile) and time it past its warm-up, which holds the compile")
    parser.add_argument("--compiled-warmup", type=int, default=5,
                        help="with --compile: steps that hold the compile (its cost: their wall time less as "
                             "many eager steps)")
    parser.add_argument("--compiled-steps", type=int, default=30, help="with --compile: compiled steps timed")
    parser.add_argument("--side-by-side", type=int, default=1,
                        help="K > 1: K copies of the models train at once, each timed past the warm-up")
    # a copy of a crowd (started by --side-by-side): its barrier's folder and size
    parser.add_argument("--barrier", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--barrier-size", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv[:split])
    crowd = args.side_by_side > 1
    steps = args.steps if args.steps is not None else 40 if crowd or args.barrier else 60
    profile_steps = args.profile_steps if args.profile_steps is not None else 0 if crowd or args.barrier else 20
    if len(args.config) != len(args.name):
        parser.error(f"one --name a --config: {len(args.config)} --config, {len(args.name)} --name")
    if args.side_by_side < 1:
        parser.error(f"--side-by-side must be 1 or more, not {args.side_by_side}")
    if not 0 <= args.warmup < steps - profile_steps:
        parser.error(f"--warmup must leave steps before the profile window: 0 .. {steps - profile_steps - 1}")
    if args.compile and (crowd or args.barrier):
        parser.error("--compile probes one model alone")
    if args.compiled_warmup < 1 or args.compiled_steps < 1:
        parser.error("--compiled-warmup and --compiled-steps must be 1 or more (the first compiled step compiles)")
    if crowd:
        return 1 if side_by_side(list(zip(args.name, args.config)), args.side_by_side, Path(args.out), steps,
                                 args.warmup, options) else 0
    if len(args.config) > 1:
        parser.error("several --config are a crowd's: give --side-by-side K")
    barrier_at = (Path(args.barrier), args.barrier_size) if args.barrier else None
    probe(args.config[0], args.name[0], Path(args.out), steps, profile_steps, args.warmup, crowd=barrier_at,
          options=options, compile_mode=args.compile, compiled_warmup=args.compiled_warmup,
          compiled_steps=args.compiled_steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
