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


def test_onmt_import_deprecations_silenced_and_nothing_else():
    # issue 24 item 7: OpenNMT-py's torch.cuda.amp.custom_fwd/bwd FutureWarnings were in every
    # job's log; any headlab module may import onmt first (toy_vocabs does, before the plugin)
    code = ("import warnings\nfrom headlab.engine.model import toy_vocabs\ntoy_vocabs(8)\n"
            "import onmt.modules.sru\nwarnings.warn('another FutureWarning', FutureWarning)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "custom_fwd" not in result.stderr and "custom_bwd" not in result.stderr
    assert "FutureWarning: another FutureWarning" in result.stderr
DETERMINISM_PROBE = """
import os, torch
import headlab.engine.plugin
print(torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.benchmark,
      os.environ.get("CUBLAS_WORKSPACE_CONFIG"))
"""


@pytest.mark.parametrize("value, expected", [
    (None, "False False None"), ("0", "False False None"), ("1", "True False :4096:8")])
def test_deterministic_switch(value, expected):
    """HEADLAB_DETERMINISTIC=1 (README "Same inputs, same numbers") turns on torch's
    deterministic algorithms and cuBLAS's fixed workspace; unset or 0 leaves torch as is."""
    import os
    env = {k: v for k, v in os.environ.items() if k not in ("HEADLAB_DETERMINISTIC", "CUBLAS_WORKSPACE_CONFIG")}
    if value is not None:
        env["HEADLAB_DETERMINISTIC"] = value
    result = subprocess.run([sys.executable, "-c", DETERMINISM_PROBE], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split("\n")[-2] == expected


MISSING_PROBE = """
import importlib.util, sys
real_find_spec = importlib.util.find_spec
hidden = {"spacy", "fasttext", "rapidfuzz", "ahocorasick"}
importlib.util.find_spec = lambda name, *a: None if name.split(".")[0] in hidden else real_find_spec(name, *a)
for name in hidden:                        # as on a machine without them
    sys.modules.pop(name, None)
import headlab.engine
importlib.util.find_spec = real_find_spec
import onmt.bin.train, onmt.transforms.clean as clean, onmt.transforms.fuzzymatch as fuzzymatch
try:
    clean.fasttext.load_model("lid.bin")
except ImportError as err:
    print("ImportError:", err)
"""


def test_onmt_starts_without_the_packages_of_transforms_headlab_does_not_use():
    """The GPU bundle carries no spaCy, fastText, RapidFuzz or pyahocorasick: OpenNMT-py still
    starts (its transforms import them at start-up), and using one says what is missing."""
    out = subprocess.run([sys.executable, "-c", MISSING_PROBE], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("ImportError: fasttext.load_model: the package 'fasttext' is not installed "
                                 "(OpenNMT-py imports it for its transforms clean")
