"""Lint in CI: ``ruff check`` over src/ and tests/ with the rules in pyproject.toml."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is not installed: make setup installs it (the test extra)"
    result = subprocess.run([ruff, "check", "--no-cache", "src", "tests"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
