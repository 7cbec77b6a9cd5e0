"""Model selection by validation loss (paper B §4.3: "select the best checkpoint based on
the lowest validation loss"; early stopping after ``-early_stopping`` validations without
improvement is OpenNMT-py's own).

With ``-model_selection valid_loss`` every validation is recorded in
``<save_model>.valid.csv`` (step, xent, ppl, acc: pure cross-entropy, see
:mod:`headlab.engine.aux_loss`), the checkpoint of the best step is never deleted by
``-keep_checkpoint``, and ``headlab train`` publishes it as the final model with
``<save_model>.best.json``. Validation must fall on checkpoint steps (``valid_steps`` a
multiple of ``save_checkpoint_steps``). A resumed run reads the earlier rows back (those
up to the step it resumes from), so the best is chosen over the whole training.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

from headlab.errors import ConfigError
from headlab.io import atomic_write

FIELDS = ("step", "xent", "ppl", "acc")


class Tracker:
    """Validation history of the one training run of this process."""

    def __init__(self, save_model: str, resume_step: int = 0):
        self.save_model = save_model
        history = read_history(self.csv_path)
        self.rows: list[dict] = [r for r in history if r["step"] <= resume_step]
        if len(self.rows) < len(history):  # the interrupted run's validations after the resume point
            self._write()

    @property
    def csv_path(self) -> Path:
        return Path(self.save_model + ".valid.csv")

    @property
    def best(self) -> dict | None:
        return min(self.rows, key=lambda r: (r["xent"], r["step"])) if self.rows else None

    def checkpoint(self, step: int) -> str:
        return f"{self.save_model}_step_{step}.pt"

    def record(self, step: int, stats) -> None:
        self.rows = [r for r in self.rows if r["step"] != step]
        self.rows.append({"step": step, "xent": stats.xent(), "ppl": stats.ppl(), "acc": stats.accuracy()})
        self._write()

    def _write(self) -> None:
        with atomic_write(self.csv_path) as handle:
            writer = csv.DictWriter(handle, FIELDS)
            writer.writeheader()
            writer.writerows(sorted(self.rows, key=lambda r: r["step"]))

    def protects(self, path: str) -> bool:
        best = self.best
        return best is not None and Path(path) == Path(self.checkpoint(best["step"]))


#: the tracker of the training run in this process (None: no selection by validation)
TRACKER: Tracker | None = None


def read_history(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    with open(path, newline="", encoding="utf-8") as handle:
        return [{"step": int(r["step"]), "xent": float(r["xent"]), "ppl": float(r["ppl"]),
                 "acc": float(r["acc"])} for r in csv.DictReader(handle)]


def start(opt, resume_step: int = 0) -> Tracker | None:
    """Set up selection for this run from its options (None when it selects the last step)."""
    global TRACKER
    TRACKER = None
    if getattr(opt, "model_selection", "last") != "valid_loss":
        return None
    if opt.valid_steps % opt.save_checkpoint_steps:
        raise ConfigError(f"model_selection valid_loss needs a checkpoint at every validation: "
                          f"valid_steps ({opt.valid_steps}) must be a multiple of "
                          f"save_checkpoint_steps ({opt.save_checkpoint_steps})", key="valid_steps")
    TRACKER = Tracker(opt.save_model, resume_step)
    return TRACKER


def finish(tracker: Tracker) -> tuple[int, Path]:
    """(step, checkpoint) of the best validation; writes ``<save_model>.best.json``.

    The rows are read back from the CSV, which holds every validation of this training
    (``record`` rewrites it each time), also those a multi-GPU run's rank-0 process
    recorded in its own tracker."""
    tracker.rows = read_history(tracker.csv_path)
    best = tracker.best
    if best is None:
        raise ConfigError("model_selection valid_loss, but training never validated: "
                          "valid_steps larger than the steps trained, or no valid corpus", key="valid_steps")
    path = Path(tracker.checkpoint(best["step"]))
    if not path.is_file():
        raise ConfigError(f"the best validation step {best['step']} has no checkpoint {path}",
                          key="save_checkpoint_steps")
    with atomic_write(tracker.save_model + ".best.json") as handle:
        json.dump(best, handle, indent=1)
    return best["step"], path
