"""glibc allocator settings: those every workflow job runs with, and the memory probe's.

``JOB_MALLOC``: glibc returns freed memory to the kernel eagerly, so every training step of
a small model re-faults its large buffers (logits, attention): 21% of a CPU training run was
kernel time. Keeping allocations up to 32 MB on the heap and not trimming it takes that to
<4% (-18% wall time). rules/common.smk puts them in the environment of every job (a user's
own settings win); the benchmarks time under them too, as the jobs run.

``PROBE_MALLOC``: the opposite, for measuring memory: every allocation of 64 KiB or more is
a mapping of its own, unmapped when freed (a fixed threshold also switches off glibc's
dynamic one), so the resident set follows the tensors in use, the workspaces inside ops
included, and not what the allocator keeps for reuse (headlab.bench.attention).
"""
from __future__ import annotations

import os

JOB_MALLOC = {"MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "4294967296",
              "MALLOC_TOP_PAD_": "268435456"}
PROBE_MALLOC = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "131072",
                "MALLOC_TOP_PAD_": "131072"}


def job_environ(base: dict | None = None) -> dict:
    """``base`` (default os.environ) with :data:`JOB_MALLOC` where it sets none of its own."""
    env = dict(os.environ if base is None else base)
    for key, value in JOB_MALLOC.items():
        env.setdefault(key, value)
    return env


def probe_environ(base: dict | None = None) -> dict:
    """``base`` (default os.environ) with :data:`PROBE_MALLOC` (these always win)."""
    return {**(os.environ if base is None else base), **PROBE_MALLOC}
