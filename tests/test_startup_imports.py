"""What a job that only reads results imports: torch costs 1 CPU-s a process, and the
tables, figures and READMEs of a study are most of a run's jobs (a fresh interpreter each:
pytest's own has torch loaded)."""
from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys, importlib.metadata
import headlab.engine.export, headlab.studies
from headlab.studies import provenance
facts = provenance({})
print("torch" in sys.modules, facts["torch"] == importlib.metadata.version("torch"), "GPU: " in facts["host"])
"""


def test_study_tables_read_exports_and_write_provenance_without_importing_torch():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "True", "True"]
