"""Paper C study: the systems as head specs, model sharing (T1's Transformer is paper A's
model; T3's k=6, A2's [1-1], A3's default parser and F4's dynamic gate are T1's LPEA+RHE),
config errors, and a tiny end-to-end run of every table and figure."""
from __future__ import annotations

import pytest

from headlab.errors import ConfigError
from headlab.studies import paper_A, paper_C

STUDY = {"data": {"multi30k": ["en-de", "en-cs"]}, "layers": "2+2", "preset": "mini",
         "analysis_pair": "multi30k/en-de", "k": [0, 6], "layer_ranges": ["1-1", "1-2", "2-2"],
         "parsers": [], "fixed_gates": [0.1, 0.5]}


@pytest.mark.parametrize("kind, layers, spec", [
    ("L", (1, 1), "8L"),
    ("DEA", (1, 1), "8DEA,*(8L)"),
    ("RHElpea", (1, 2), "2*(8RHElpea),*(8L)"),
    ("LPEA", (2, 3), "8L,2*(8LPEA),*(8L)"),
    ("Local", (3, 3), "2*(8L),8Local,*(8L)"),
])
def test_enhanced_spec(kind, layers, spec):
    assert paper_C.enhanced_spec(kind, layers) == spec


@pytest.mark.parametrize("text, key", [("0-1", "k"), ("2-1", "k"), ("1-3", "k"), ("x", "k")])
def test_bad_layer_range_names_the_key(text, key):
    with pytest.raises(ConfigError, match=r"\[k\]"):
        paper_C.layer_range(text, 2, key)


def test_models_share_what_they_can():
    models = list(paper_C.models(STUDY))
    paths = [paper_C.model_path(m) for m, _ in models]
    assert len(paths) == len(set(paths))
    # the en-de Transformer is paper A's 2+2 8L model
    paper_a = {paper_C.model_path(m) for m, _ in paper_A.models(
        {"data": {"multi30k": ["en-de"]}, "layers": ["2+2"], "shallow": "2+2", "deep": "2+2",
         "heads": ["8L", "7Ftoken+1L"], "preset": "mini"})}
    assert "multi30k/en-de/full/mini/default/2+2/8L/seed1" in paper_a & set(paths)
    by_heads = {}
    for m, o in models:
        by_heads.setdefault((m["pair"], m["heads"]), set()).add(m["variant"])
    # T1: 7 systems x 2 pairs, all the default variant (one compare-mt group per pair)
    for pair in ("en-de", "en-cs"):
        for kind in paper_C.T1_SYSTEMS.values():
            assert "default" in by_heads[(pair, paper_C.heads_name(paper_C.enhanced_spec(kind, (1, 1))))]
    lpea_rhe = by_heads[("en-de", "8RHElpea.*8L")]
    # T3 k=0 (k=6 is the default), F4's two fixed gates; T2's pruning is T1's model at test time
    assert lpea_rhe == {"default", "lpea_k=0", "rhe_fgate=0.1", "rhe_fgate=0.5"}
    assert by_heads[("en-de", "8RHEdea.*8L")] == {"default"}
    # A2 [1-2] and [2-2]; [1-1] is T1's model
    assert ("en-de", "2*8RHElpea.*8L") in by_heads and ("en-de", "8L.8RHElpea.*8L") in by_heads
    # analyses only on the analysis pair
    assert not any(p == "en-cs" and v != "default" for (p, _), vs in by_heads.items() for v in vs)
    assert len(models) == 14 + 2 + 1 + 2 + 2   # T1; T2: Rel_Pos+RHE, Localness+RHE; T3 k=0; A2; F4


@pytest.mark.parametrize("change, key", [
    ({"k": [-1]}, "studies.paper_C.k"),
    ({"fixed_gates": [0.0]}, "studies.paper_C.fixed_gates"),
    ({"fixed_gates": [1.5]}, "studies.paper_C.fixed_gates"),
    ({"enhanced": "3-3"}, "studies.paper_C.enhanced"),
    ({"layer_ranges": ["1-4"]}, "studies.paper_C.layer_ranges"),
    ({"analysis_pair": "multi30k/de-en"}, "studies.paper_C.analysis_pair"),
    ({"data": {"multi30k": ["de-en"]}, "analysis_pair": "multi30k/de-en"}, "studies.paper_C.data.multi30k"),
])
def test_bad_config_names_the_key(change, key):
    with pytest.raises(ConfigError, match=rf"\[{key}\]"):
        paper_C.check({**STUDY, **change})
