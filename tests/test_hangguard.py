"""The tests' hang guards (hangguard.py): scaled by HEADLAB_TEST_SLACK, never below the
reference VM's own bound."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


def _guard(slack: str | None) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "HEADLAB_TEST_SLACK"}
    if slack is not None:
        env["HEADLAB_TEST_SLACK"] = slack
    return subprocess.run([sys.executable, "-c", "from hangguard import hang_guard; print(hang_guard(900))"],
                          capture_output=True, text=True, env=env, cwd=TESTS, timeout=60)


@pytest.mark.parametrize(("slack", "seconds"), [(None, "2250.0"), ("1", "900.0"), ("4", "3600.0")])
def test_a_guard_is_the_reference_vms_seconds_times_the_slack(slack, seconds):
    result = _guard(slack)
    assert result.returncode == 0 and result.stdout.strip() == seconds, result.stderr


@pytest.mark.parametrize("slack", ["0.5", "fast", "nan", "inf"])
def test_a_slack_below_one_or_not_a_number_is_refused_naming_the_variable(slack):
    result = _guard(slack)
    assert result.returncode != 0 and f"HEADLAB_TEST_SLACK={slack}: want a number" in result.stderr.splitlines()[-1]
