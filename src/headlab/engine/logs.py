"""Learning curves: every trained model's training and validation loss/accuracy over steps.

    headlab learning-curve --log MODEL_DIR/train.log --out SCORES/MODEL/learning_curve.csv

reads OpenNMT-py's own training log (the ``train`` rule's ``train.log``) into a tidy CSV
``step, split, xent, ppl, acc, lr`` (``split``: ``train`` or ``valid``):

* ``Step 50/  250; acc: 12.3; ppl: 310.2; xent: 5.7; lr: 0.00100; ...`` -> a ``train``
  row (OpenNMT-py's report every ``report_every`` steps; its numbers as printed);
* ``Validation perplexity: P`` + ``Validation accuracy: A`` -> a ``valid`` row; the log does
  not name their step: validation runs at every multiple of ``valid_steps`` (from ``Start
  training loop and validate every N steps``), counted from the checkpoint a resumed run
  starts at (``headlab: resuming interrupted training from checkpoint …model_step_N.pt``);
  ``xent`` = ln(P).

Loss is the pure cross-entropy OpenNMT-py reports; any other line (auxiliary loss terms,
``Train perplexity`` summaries, warnings) is ignored. Presets that never validate (the
CPU ``mini`` presets: ``valid_steps`` 10^6) give training rows only: set
``training.overrides.valid_steps`` to get validation points.

Each study's ``learning_curves`` figure draws the curves of all its models
(:mod:`headlab.studies.curves`). ``training.tensorboard: true`` in the config also switches
on OpenNMT-py's TensorBoard logging (:func:`tensorboard_options`).
"""
from __future__ import annotations

import argparse
import math
import re
from typing import Any, Mapping

from headlab.errors import DataError
from headlab.io import atomic_write

COLUMNS = ["step", "split", "xent", "ppl", "acc", "lr"]
_NUMBER = r"([-+0-9.eE]+|nan|inf)"
_STEP = re.compile(rf"\bStep\s+(\d+)(?:/\s*\d+)?;\s*acc:\s*{_NUMBER};\s*ppl:\s*{_NUMBER};\s*xent:\s*{_NUMBER};"
                   rf"\s*lr:\s*{_NUMBER};")
_VALID_PPL = re.compile(rf"\bValidation perplexity:\s*{_NUMBER}\s*$")
_VALID_ACC = re.compile(rf"\bValidation accuracy:\s*{_NUMBER}\s*$")
_START = re.compile(r"\bStart training loop and validate every (\d+) steps")
_RESUME = re.compile(r"headlab: resuming interrupted training from checkpoint \S*?model_step_(\d+)\.pt")


def parse_log(lines) -> list[dict[str, Any]]:
    """Tidy rows (see module doc) from the lines of an OpenNMT-py training log."""
    rows: list[dict[str, Any]] = []
    valid_steps, first, done, resumed_at = None, 0, 0, 0
    pending: dict[str, Any] | None = None
    for line in lines:
        if match := _RESUME.search(line):
            # the interrupted run's steps after the checkpoint are trained again: the resumed
            # run's rows replace them
            resumed_at = int(match[1])
            rows = [row for row in rows if row["step"] is None or row["step"] <= resumed_at]
        elif match := _START.search(line):
            valid_steps, first, done, resumed_at = int(match[1]), resumed_at, 0, 0
        elif match := _STEP.search(line):
            rows.append({"step": int(match[1]), "split": "train", "acc": float(match[2]), "ppl": float(match[3]),
                         "xent": float(match[4]), "lr": float(match[5])})
        elif match := _VALID_PPL.search(line):
            done += 1
            step = (first // valid_steps + done) * valid_steps if valid_steps else None
            ppl = float(match[1])
            pending = {"step": step, "split": "valid", "ppl": ppl,
                       "xent": round(math.log(ppl), 4) if ppl > 0 else float("nan"), "acc": float("nan"),
                       "lr": float("nan")}
            rows.append(pending)
        elif (match := _VALID_ACC.search(line)) and pending is not None:
            pending["acc"] = float(match[1])
            pending = None
    return rows


def read_curve(path):
    """The tidy curve (pandas DataFrame, :data:`COLUMNS`) of a training log."""
    import pandas as pd

    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            rows = parse_log(handle)
    except OSError as err:
        raise DataError(f"cannot read the training log: {err.strerror}", path=str(path)) from None
    return pd.DataFrame(rows, columns=COLUMNS)


def tensorboard_options(config: Mapping[str, Any], save_dir: str) -> dict[str, Any]:
    """OpenNMT-py options for ``training.tensorboard: true``: TensorBoard logging into
    ``<model dir>/tb`` (it adds a dated folder per run)."""
    if not config.get("training", {}).get("tensorboard"):
        return {}  # the generated configs stay as they were: nothing reruns
    return {"tensorboard": True, "tensorboard_log_dir": save_dir + "/tb"}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="headlab learning-curve", description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", required=True, help="OpenNMT-py training log (the train rule's train.log)")
    parser.add_argument("--out", required=True, help="tidy CSV: step, split, xent, ppl, acc, lr")
    args = parser.parse_args(argv)
    curve = read_curve(args.log)
    if curve.empty:     # an empty CSV would fail only in the figure, far from its cause
        raise DataError("no training step or validation in it: not an OpenNMT-py training log, or a training "
                        "that logged no step (train_steps below report_every)", path=args.log)
    with atomic_write(args.out) as handle:
        curve.to_csv(handle, index=False)
    print(f"headlab learning-curve: {len(curve)} rows ({(curve['split'] == 'valid').sum()} validation) -> {args.out}")
    return 0
