"""Exact resume: an interrupted training continues as if it had never stopped.

OpenNMT-py's ``-train_from`` restores the weights and the optimizer (moments, step, learning
rate schedule), but not the two other things step N+1 depends on:

* **the data position**: the training iterator starts again at the corpus's first bucket,
  so the resumed step N+1 trains on step 1's batch;
* **the random states**: ``set_random_seed`` seeds torch, Python and NumPy afresh, so the
  dropout masks after step N are those of step 1.

:class:`DataPosition` wraps the iterator the trainer draws batches from and counts them.
Every checkpoint's optimizer state carries the count and every random state at the moment
it was saved (:func:`record`). A training whose optimizer state holds such a record (only a
resume loads the optimizer: fine-tunes start with ``reset_optim: all``) draws that many
batches and throws them away (the iterator's own shuffling state advances as it did), then
restores the random states: step N+1 sees the batch and the dropout masks it would have
seen. On CPU with the same threads, the resumed checkpoints, optimizer state and
translations are byte-identical to an uninterrupted run's (``tests/test_exact_resume.py``).

Data-loading workers (``num_workers`` >= 1, GPU trainings: one) keep it exact: a worker's
stream of batches is fixed by the seed the trainer's random state gives it when the
iterator starts, which a resume reproduces (it starts from the same seed), so throwing
away the drawn batches lands on the same position (tested with one worker). Not covered:
``average_decay`` (the moving average is not in the checkpoint). A checkpoint written before
this record existed resumes as OpenNMT-py resumes, with a warning.

The patch that installs this lives with the others: :func:`headlab.engine.compat._patch_exact_resume`.
"""
from __future__ import annotations

import random
from typing import Any, Iterable, Iterator

RECORD_KEY = "headlab_resume"


def capture_rng() -> dict[str, Any]:
    """Every random state a training step can draw from (torch CPU and CUDA, Python, NumPy),
    as values ``torch.load(weights_only=True)`` accepts."""
    import numpy as np
    import torch

    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {"torch": torch.get_rng_state(), "python": random.getstate(),
             "numpy": (kind, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached))}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    import numpy as np
    import torch

    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class DataPosition:
    """The trainer's batch iterator, counted; on resume, fast-forwarded to where the
    checkpoint left it, after which the checkpoint's random states are restored (lazily, at
    the first batch: nothing between the trainer's start and its first batch draws a random
    number, as nothing between a save and the next batch does)."""

    def __init__(self, batches: Iterable, resume_record: dict[str, Any] | None = None):
        self.batches = batches
        self.resume_record = resume_record
        self.drawn = 0

    def __iter__(self) -> Iterator:
        source = iter(self.batches)
        if self.resume_record is not None:
            for _ in range(self.resume_record["batches"]):
                next(source)
            self.drawn = self.resume_record["batches"]
            restore_rng(self.resume_record["rng"])
        for batch in source:
            self.drawn += 1
            yield batch

    def record(self) -> dict[str, Any]:
        """What a checkpoint saved now needs to resume exactly."""
        return {"batches": self.drawn, "rng": capture_rng()}
