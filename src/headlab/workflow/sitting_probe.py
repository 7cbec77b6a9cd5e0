"""A sitting's speed probe on the idle GPU (the later call, after the trainings): one model
trains alone for a few steps, then 20 steps under ``torch.profiler``.

    python -m headlab.workflow.sitting_probe --config MODEL/onmt.yaml --name 8L --out WORK/logs/speed-extra.json
        [--steps 60] [--profile-steps 20]

``headlab train`` runs in this process with the sitting's clock installed
(:class:`headlab.engine.steptime.StepClock`): the steps before the trace give the tokens/s
alone (OpenNMT-py's own reports, read from the probe's log) and the wall time a step alone
(the steps between the first ``warmup`` and the trace, the device synchronised at both
ends: the plan's seconds a step with one model), the last ``profile_steps``
whole iterations are traced (:class:`~headlab.engine.steptime.ProfileWindow`, as the
trainings' own window side by side); its summary, the tokens/s and the step time are merged into ``--out`` under ``profile``,
``alone`` and ``alone_step_ms``
(read by :mod:`headlab.workflow.sitting` into ``throughput.csv``). Checkpoints go to a
scratch folder: the sitting's models are never touched.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

def _merge(out: Path, section: str, name: str, value) -> None:
    found = json.loads(out.read_text()) if out.is_file() else {}
    found.setdefault(section, {})[name] = value
    out.write_text(json.dumps(found, indent=1))


def probe(config: str, name: str, out: Path, steps: int, profile_steps: int, warmup: int = 10) -> None:
    import headlab.engine.plugin  # noqa: F401  (the engine's patches first: the clock times what runs)
    from headlab.engine.run import train
    from headlab.engine.steptime import ProfileWindow, StepClock
    from headlab.workflow.sitting import throughput

    scratch = Path(tempfile.mkdtemp(prefix="headlab-probe."))
    log = out.with_name(f"probe.{name}.log")
    # the window closes as the iteration after it begins: one step more than the probe's;
    # the steps between the warm-up and the window are timed: the plan's seconds a step alone
    window = ProfileWindow(steps - profile_steps + 1, profile_steps, lead=max(steps - profile_steps - warmup, 0))
    clock = StepClock(profile=window).install()
    try:
        train(["-config", config, "-train_steps", str(steps + 1), "-save_model", str(scratch / "model"),
               "-save_checkpoint_steps", str(steps + 1), "-valid_steps", str(10**6), "-early_stopping", "0",
               "-model_selection", "last", "-report_every", "10", "-log_file", str(log)])
    finally:
        clock.undo()
        if window.summary:
            _merge(out, "profile", name, window.summary)
        if window.lead_step_ms:
            _merge(out, "alone_step_ms", name, window.lead_step_ms)
        speed = throughput(log)
        if speed["src_tok_s"]:
            _merge(out, "alone", name, [speed["src_tok_s"], speed["tgt_tok_s"]])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m headlab.workflow.sitting_probe", description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the model's onmt.yaml")
    parser.add_argument("--name", required=True, help="the model's name in the sitting")
    parser.add_argument("--out", required=True, help="the JSON the results are merged into")
    parser.add_argument("--steps", type=int, default=60, help="training steps of the probe alone on the GPU")
    parser.add_argument("--profile-steps", type=int, default=20,
                        help="steps traced by torch.profiler (top kernels, CPU and GPU time)")
    parser.add_argument("--warmup", type=int, default=10,
                        help="first steps left out of the step time alone (the allocator's and kernels' warm-up)")
    args = parser.parse_args(argv)
    if not 0 <= args.warmup < args.steps - args.profile_steps:
        parser.error(f"--warmup must leave steps before the profile window: 0 .. {args.steps - args.profile_steps - 1}")
    probe(args.config, args.name, Path(args.out), args.steps, args.profile_steps, args.warmup)
    return 0


if __name__ == "__main__":
    sys.exit(main())
