"""headlab.engine.compat: start-up cost of the plugin (in a fresh interpreter: pytest's own may
already have imported what is measured here)."""
from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import sys
import headlab.engine.plugin
loaded_at_start = "spacy.errors" in sys.modules
import onmt.transforms.terminology as terminology   # onmt's own `import spacy`
from spacy.tokens import Doc                          # a submodule import loads the real spacy
print(loaded_at_start, Doc.__module__, callable(terminology.spacy.load), "spacy.errors" in sys.modules)
"""


def test_spacy_stays_unloaded_until_used():
    pytest.importorskip("spacy")
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    # torch's import-time inspect.getmodule walk and onmt's `import spacy` leave it unloaded;
    # the first real use gets the real module
    assert out.stdout.split() == ["False", "spacy.tokens.doc", "True", "True"]
