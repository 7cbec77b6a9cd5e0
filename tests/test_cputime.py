"""tests/cputime.py: a test's CPU counts the subprocesses it waited for, across xdist workers."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from hangguard import hang_guard

#: one test makes a child process burn half a CPU-second (measured by its own clock, so at
#: any machine speed), one sleeps (wall time, no CPU), one fails in its setup
CASES = '''
import subprocess, sys, time
import pytest

BURN = "import time\\nwhile time.process_time() < 0.5: pass"

def test_burner():
    subprocess.run([sys.executable, "-c", BURN], check=True)

def test_sleeper():
    time.sleep(0.5)

@pytest.fixture
def broken():
    subprocess.run([sys.executable, "-c", BURN], check=True)
    raise RuntimeError("setup fails")

def test_broken_setup(broken):
    pass
'''


def _run(tmp_path, *options):
    (tmp_path / "test_cases.py").write_text(CASES)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "cputime", *options,
               str(tmp_path / "test_cases.py")]
    env = {"PYTHONPATH": str(Path(__file__).parent), "PATH": "/usr/bin:/bin"}
    return subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=hang_guard(120))


def _listed(out: str) -> dict[tuple[str, str], float]:
    rows = re.findall(r"^ *([\d.]+) (setup|call|teardown) +\S+::(\w+)$", out, re.M)
    return {(name, when): float(seconds) for seconds, when, name in rows}


def test_a_child_s_cpu_is_the_test_s_and_sleep_is_none(tmp_path):
    result = _run(tmp_path, "-n", "2", "--cpu-durations=9")
    assert "2 passed" in result.stdout and "1 error" in result.stdout, result.stdout[-2000:]
    listed = _listed(result.stdout)
    assert listed[("test_burner", "call")] >= 0.5
    assert listed[("test_broken_setup", "setup")] >= 0.5     # a failed phase is counted too
    assert listed[("test_sleeper", "call")] < 0.25
    assert max(listed, key=listed.get)[1] in ("call", "setup") and len(listed) == 8   # no call after a failed setup
    assert re.search(r"^ *[\d.]+ in all, 8 phases$", result.stdout, re.M)


def test_no_list_without_the_option(tmp_path):
    result = _run(tmp_path)
    assert "passed" in result.stdout and "by CPU" not in result.stdout
