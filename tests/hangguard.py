"""How long a test's workflow run, training or build may take before it counts as hung.

A guard only stops a run that hangs, so that the test fails with its output instead of
holding the suite until CI's limit; it is never what a test asserts (speed is measured by
`make bench` and the snakemake benchmarks). Each guard is written in seconds for the 2-core
VM of the README's timing table, where a healthy run stays well under it, and
multiplied here by ``HEADLAB_TEST_SLACK`` (default 2.5): a VM of the same kind has run the
same tests at half that speed (`make test` 49 min 49 s, its CPU busy 5,676 core-seconds
against 2,911 the day before), and there the smoke run passed its unscaled 900 s and failed
as hung. Set it higher on a slower machine, never lower than 1.
"""
from __future__ import annotations

import os


def _slack(text: str) -> float:
    try:
        slack = float(text)
    except ValueError:
        slack = float("nan")
    if not 1 <= slack < float("inf"):  # NaN too: no timeout compares with it
        raise ValueError(f"HEADLAB_TEST_SLACK={text}: want a number of at least 1 (a hang guard below the "
                         "reference VM's own bound fails healthy runs)")
    return slack


SLACK = _slack(os.environ.get("HEADLAB_TEST_SLACK", "2.5"))


def hang_guard(seconds: float) -> float:
    """``seconds`` on the reference VM, scaled for this machine."""
    return seconds * SLACK
