"""The GPU suite: float32 is float32 (no TF32); see gputargets.py for the targets.

For a GPU sitting (src/headlab/workflow/gpu_runner.py), two environment variables:
``HEADLAB_TEST_REPORT`` names a file to which each test's outcome is appended as one JSON
line the moment it is known (a sitting stopped at its deadline keeps every result so far),
and ``HEADLAB_TESTS_DONE`` a file of node ids (one a line) not to run again."""
from __future__ import annotations

import json
import os

import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def full_float32_matmuls():
    """fp32 means fp32: no TF32 matmuls (Ampere+ would round fp32 products to 10 bits)."""
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn


def pytest_collection_modifyitems(config, items):
    done_file = os.environ.get("HEADLAB_TESTS_DONE")
    if not done_file or not os.path.isfile(done_file):
        return
    with open(done_file) as handle:
        done = {line.strip() for line in handle if line.strip()}
    kept = [item for item in items if item.nodeid not in done]
    config.hook.pytest_deselected(items=[item for item in items if item.nodeid in done])
    items[:] = kept


def pytest_runtest_logreport(report):
    path = os.environ.get("HEADLAB_TEST_REPORT")
    # one line per test: its call's outcome, or a failed/skipped setup or teardown
    if not path or not (report.when == "call" or report.outcome != "passed"):
        return
    with open(path, "a") as handle:
        handle.write(json.dumps({"nodeid": report.nodeid, "when": report.when, "outcome": report.outcome,
                                 "seconds": round(report.duration, 3)}) + "\n")
