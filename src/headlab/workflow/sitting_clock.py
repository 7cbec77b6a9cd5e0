"""A sitting's training, timed from inside (the GPU runner starts every model through this):

    python -m headlab.workflow.sitting_clock --out WORK/logs/clock.8L.json --name 8L \\
        [--profile-from 151 --profile-steps 20] -- -config MODEL/onmt.yaml [...]

``headlab train`` with the arguments after ``--``, exactly as the ``headlab`` command runs
it (optional imports deferred, the same entry point), with
:class:`headlab.engine.steptime.StepClock` installed: where each loop iteration's time goes,
and for one model of the sitting a ``torch.profiler`` window of whole iterations side by
side with the others (the trace the idle-GPU probe never had time for). ``--out`` is
rewritten every few seconds, so a training stopped at the sitting's deadline leaves it;
:mod:`headlab.workflow.sitting` reads it into ``throughput.csv``.
"""
from __future__ import annotations

import argparse
import sys
import time


def main(argv: list[str] | None = None) -> int:
    began = time.perf_counter()
    argv = list(sys.argv[1:] if argv is None else argv)
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(prog="python -m headlab.workflow.sitting_clock",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="the clock's JSON (rewritten while the training runs)")
    parser.add_argument("--name", default="", help="the model's name in the sitting")
    parser.add_argument("--profile-from", type=int, default=None,
                        help="profile whole loop iterations from this one (1-based, this process's count)")
    parser.add_argument("--profile-steps", type=int, default=20, help="iterations in the profile window")
    parser.add_argument("--mark-every", type=int, default=0,
                        help="mark the Unix time of every N-th iteration (0: never), to tell the steps that "
                             "shared the machine with the sitting's suite and bench")
    args = parser.parse_args(argv[:split])
    from headlab.engine.compat import defer_optional_imports

    defer_optional_imports()               # as the headlab command does before any subcommand
    import headlab.engine.plugin  # noqa: F401  (the engine's patches first: the clock times what runs)
    from headlab.engine import run, steptime
    from headlab.errors import HeadlabError

    window = None if args.profile_from is None else steptime.ProfileWindow(args.profile_from, args.profile_steps)
    clock = steptime.StepClock(args.out, window, args.name, began, args.mark_every).install()
    try:
        return int(run.train(argv[split + 1:]) or 0)
    except HeadlabError as err:
        print(f"headlab train: {err}", file=sys.stderr)
        return 1
    finally:
        clock.flush(force=True)
        clock.undo()


if __name__ == "__main__":
    sys.exit(main())
