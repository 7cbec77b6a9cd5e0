"""Paper C study: the systems as head specs, model sharing (T1's Transformer is paper A's
model; T3's k=6, A2's [1-1], A3's default parser and F4's dynamic gate are T1's LPEA+RHE),
config errors, and a tiny end-to-end run of every table and figure."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from headlab.errors import ConfigError, DataError
from headlab.naming import heads_name, model_path
from headlab.studies.paper_A import grid as paper_A_grid
from headlab.studies.base import REGISTRY
from headlab.studies.paper_C import grid, outputs

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
    assert grid.enhanced_spec(kind, layers) == spec


@pytest.mark.parametrize("text, key", [("0-1", "k"), ("2-1", "k"), ("1-3", "k"), ("x", "k")])
def test_bad_layer_range_names_the_key(text, key):
    with pytest.raises(ConfigError, match=r"\[k\]"):
        grid.layer_range(text, 2, key)


def test_models_share_what_they_can():
    models = list(REGISTRY["paper_C"].models(STUDY))
    paths = [model_path(m) for m, _ in models]
    assert len(paths) == len(set(paths))
    # the en-de Transformer is paper A's 2+2 8L model
    paper_a = {model_path(m) for m, _ in paper_A_grid.models(
        {"data": {"multi30k": ["en-de"]}, "layers": ["2+2"], "shallow": "2+2", "deep": "2+2",
         "heads": ["8L", "7Ftoken+1L"], "preset": "mini"})}
    assert "multi30k/en-de/full/mini/default/2+2/8L/seed1" in paper_a & set(paths)
    by_heads = {}
    for m, o in models:
        by_heads.setdefault((m["pair"], m["heads"]), set()).add(m["variant"])
    # T1: 7 systems x 2 pairs, all the default variant (one compare-mt group per pair)
    for pair in ("en-de", "en-cs"):
        for kind in grid.T1_SYSTEMS.values():
            assert "default" in by_heads[(pair, heads_name(grid.enhanced_spec(kind, (1, 1))))]
    lpea_rhe = by_heads[("en-de", "8RHElpea.*8L")]
    # T3 k=0 (k=6 is the default), F4's two fixed gates; T2's pruning is T1's model at test time
    assert lpea_rhe == {"default", "lpea_k=0", "rhe_fgate=0.1", "rhe_fgate=0.5"}
    assert by_heads[("en-de", "8RHEdea.*8L")] == {"default"}
    # A2 [1-2] and [2-2]; [1-1] is T1's model
    assert ("en-de", "2*8RHElpea.*8L") in by_heads and ("en-de", "8L.8RHElpea.*8L") in by_heads
    # analyses only on the analysis pair
    assert not any(p == "en-cs" and v != "default" for (p, _), vs in by_heads.items() for v in vs)
    assert len(models) == 14 + 2 + 1 + 2 + 2   # T1; T2: Rel_Pos+RHE, Localness+RHE; T3 k=0; A2; F4


def test_headline_seeds_on_the_analysis_pair_share_paper_As_transformer():
    """headline_seeds [1, 2, 3]: T1's Transformer, +DEA+RHE and +LPEA+RHE on en-de at three
    seeds (the Transformer of each seed is paper A's 8L model of that seed), the rest at one."""
    study = {**STUDY, "headline_seeds": [1, 2, 3]}
    models = [m for m, _ in REGISTRY["paper_C"].models(study)]
    extra = {(m["pair"], m["heads"], m["variant"], m["seed"]) for m in models if m["seed"] != "1"}
    assert extra == {("en-de", h, "default", s) for h in ("8L", "8RHEdea.*8L", "8RHElpea.*8L") for s in "23"}
    assert len(models) == 14 + 2 + 1 + 2 + 2 + 6
    paper_a = {model_path(m) for m, _ in paper_A_grid.models(
        {"data": {"multi30k": ["en-de"]}, "layers": ["2+2"], "shallow": "2+2", "deep": "2+2",
         "heads": ["8L", "7Ftoken+1L"], "preset": "mini", "headline_seeds": [1, 2, 3]})}
    assert {f"multi30k/en-de/full/mini/default/2+2/8L/seed{s}" for s in "123"} <= paper_a & {
        model_path(m) for m in models}


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
        REGISTRY["paper_C"].check({**STUDY, **change})


def test_redundant_share_read_from_the_training_log(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("[2026 INFO] Step 50/250; acc: 10.0; ppl: 300.1\n"
                   "[2026 INFO] Step 50 aux: rhe_heads=8.0000 rhe_redundant=7.0000 rhe_share=0.8750\n"
                   "[2026 INFO] Validation aux: rhe_heads=8.0000 rhe_share=0.5000\n"
                   "[2026 INFO] Step 100 aux: kl=0.1000 rhe_share=0.2500\n")
    assert outputs.redundant_shares(str(log)) == {50: 0.875, 100: 0.25}
    # every RHE model of the tables has its row; one whose log has none is an error naming it, not a missing row
    files = outputs.Files({"corpora": {}}, STUDY, str(tmp_path / "results"))
    inputs, build = outputs.redundant(files)
    logs = [Path(checkpoint).with_name("train.log") for checkpoint in inputs]
    for index, path in enumerate(logs):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(log.read_text() if index else "[2026 INFO] Step 50/250; acc: 10.0; ppl: 300.1\n")
    assert len(logs) >= 2
    with pytest.raises(DataError, match=re.escape(f"no 'rhe_share' lines in {logs[0]} (the other RHE models' logs "
                                                  f"have them)")):
        build()
    logs[0].write_text(log.read_text())
    table, ours = build()
    assert len(set(ours["row"])) == len(logs)


def test_table1_marks_a_system_the_bootstrap_has_no_result_for_as_not_judged(tmp_path):
    """⇑ / ↑ / blank only where compare-mt judged the system; a system its CSV lacks, or
    whose win ratio is empty, is n/a (not judged), and the caption says so."""
    import json

    from headlab.report.tables import to_markdown

    (tmp_path / "published").mkdir()
    files = outputs.Files({"corpora": {"multi30k": {"tests": ["t"]}}}, STUDY, str(tmp_path / "results"),
                          published=str(tmp_path / "published"))
    inputs, build = outputs.t1(files)
    boot = ("system,win_system,significantly_higher\n8L.full,,False\n8RelPos.*8L.full,0.999,True\n"
            "8Local.*8L.full,0.97,True\n8DEA.*8L.full,0.6,False\n8RHEdea.*8L.full,,False\n8LPEA.*8L.full,0.5,False\n")
    for path in inputs:             # +LPEA+RHE is missing from the comparison, +DEA+RHE's win ratio is empty
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(boot if path.endswith(".csv") else json.dumps({"bleu": 25.0, "params": 1000}))
    table, ours = build()
    marks = table.marks.loc["multi30k en-de BLEU"]
    assert [marks[f"{system} ours"] for system in grid.T1_SYSTEMS] == ["", "⇑", "↑", "", "n/a", "", "n/a"]
    untested = ours.set_index(["row", "column"]).loc[("multi30k en-de BLEU", "+LPEA+RHE")]
    assert untested["mark"] == "n/a" and np.isnan(untested["p_value"])
    assert "| 25.00 (n/a) |" in to_markdown(table)
    assert " n/a: compare-mt's bootstrap has no result for the system, not judged (not 'not significant')." in \
        table.caption
    assert "). ⇑ / ↑: p < 0.01 / p < 0.05: better than the Transformer by paired bootstrap" in table.caption
    files.config["evaluation"] = {"significance": 0.01}        # the marks' level (the compare rule's --p)
    assert "). ⇑: p < 0.01: better than the Transformer by paired bootstrap" in build()[0].caption


def _paper_c_config(tmp_path, mirror):
    from test_workflow import write_config
    study = {"data": {"multi30k": ["en-de"]}, "layers": "1+1", "preset": "tiny", "size": 300,
             "k": [0], "layer_ranges": ["1-1"], "parsers": ["depconv"], "fixed_gates": [0.5],
             "average_last": 2,
             "figure_sentence": {"src": "Relations between Obama and Netanyahu have been strained for years.",
                                 "tgt": "Die Beziehungen zwischen Obama und Netanjahu sind seit Jahren angespannt."}}
    return write_config(tmp_path, mirror, studies={"paper_C": study})


@pytest.mark.slow
def test_end_to_end_paper_c(tmp_path, mirror):
    """Every table and figure from parses, featured sources, syntax models, checkpoint
    averaging (avg2), test-time pruning and the one-sentence Figure 5 split."""
    import csv

    from test_workflow import run_workflow

    config = _paper_c_config(tmp_path, mirror)
    result = run_workflow("--cores", "2", "--configfile", str(config), timeout=1500)
    assert result.returncode == 0, result.stderr[-5000:]
    out = tmp_path / "results/paper_C"
    for name in REGISTRY["paper_C"].tables:
        for ext in ("csv", "md", "tex"):
            assert (out / f"{name}.{ext}").stat().st_size > 0, name
    for name in [*REGISTRY["paper_C"].figures, "learning_curves"]:
        for ext in ("png", "pdf", "csv"):
            assert (out / f"{name}.{ext}").stat().st_size > 0, name
    with open(out / "T1.csv", encoding="utf-8") as handle:
        t1 = {row["row"]: row for row in csv.DictReader(handle)}
    assert float(t1["En-De (WMT16) BLEU"]["+LPEA+RHE paper"]) == 26.28
    # LPEA has parameters of its own, DEA has none (Table 1's #Para column)
    para = t1["multi30k en-de #Para (K)"]
    assert float(para["+DEA ours"]) == float(para["Transformer ours"]) < float(para["+LPEA ours"])
    models = tmp_path / "results/models/multi30k/en-de/300/tiny/default/1+1"
    assert (models / "8RHElpea.*8L/seed1/model.avg2.pt").is_file()
    scores = tmp_path / "results/scores/multi30k/en-de/300/tiny/default/1+1/8RHElpea.*8L/seed1"
    assert (scores / "test_2016_flickr.rhe-prune.json").is_file() and (scores / "test_2016_flickr.avg2.json").is_file()
    # the syntax model read a featured source: piece￨continues￨dep_head￨lp_lo￨lp_hi￨word_depth￨lp_depth
    featured = next((tmp_path / "results/data/multi30k/en-de/300/feat").rglob("test_2016_flickr.src"))
    assert all(len(tok.split("￨")) == 7 for tok in featured.read_text(encoding="utf-8").split())
    readme = (out / "README.md").read_text()
    assert "RHE lifts DEA" in readme and "average of the last 2 checkpoints" in readme
    import pandas as pd
    effects = pd.read_csv(out / "effects.csv")     # judged on the averaged checkpoints' translations
    assert {c.split(":")[0] for c in effects["claim"]} == {"§5.2", "§5.3.1", "§5.3.2"}   # one k, one range
    from headlab.studies.effects import against_its_paper
    assert not against_its_paper(effects).any(), effects[against_its_paper(effects)]["claim"].tolist()


# the embedded default's Figure 5 sentence, as the mini BPE splits it (27 pieces, 11 words)
F5_PIECES = ("Rel@@ ati@@ ons be@@ tw@@ een Ob@@ am@@ a an@@ d Net@@ an@@ y@@ ahu ha@@ ve be@@ en "
             "str@@ ai@@ ned for ye@@ ar@@ s .").split()


def test_f5_is_a_word_level_grid_readable_at_page_width(tmp_path):
    # issue 24 item 7: F5 was a 10,484 x 1,792 px strip of five panels over 27 BPE pieces
    from PIL import Image

    from headlab.report.figures import plot, save
    from headlab.syntax.profile import word_attention

    study = {"data": {"multi30k": ["en-de"]}, "layers": "2+2", "preset": "mini", "enhanced": "1-1"}
    files = outputs.Files({"corpora": {}}, study, str(tmp_path))
    n, rng = len(F5_PIECES), np.random.default_rng(0)
    kinds = {}
    for kind in ("RHElpea", "RelPos", "Local", "L"):
        att = rng.random((2, 8, n, n))
        att /= att.sum(-1, keepdims=True)
        kinds[kind] = att
        path = tmp_path / files.attention(grid.system_model(study, "multi30k", "en-de", kind))
        path.parent.mkdir(parents=True, exist_ok=True)
        arrays = {"tokens": np.array([" ".join(F5_PIECES)]), "att_000000": att}
        if kind == "RHElpea":
            arrays.update(raw_000000=att[::-1].copy(), rhe_000000=np.array([[0, 1, 1, 0, 1, 1, 1, 1]] * 2))
        np.savez(path, **arrays)
    _, build = outputs.f5(files)
    tidy, style = build()
    words, units = outputs.words(F5_PIECES)
    assert len(F5_PIECES) == 27 and words == "Relations between Obama and Netanyahu have been strained for years .".split()
    # (b): RHE's first redundant head (head 1), word level: pieces summed over keys, mean over queries
    panel = tidy[tidy["panel"] == "(b) LPEA+RHE-enlivened: head 1"]
    assert len(panel) == 11 * 11
    expected = word_attention(kinds["RHElpea"][0, 0], units)
    got = panel.pivot(index="query", columns="key", values="attention").loc["1 Relations", "3 Obama"]
    assert got == pytest.approx(expected[0, 2]) == pytest.approx(
        kinds["RHElpea"][0, 0][[0, 1, 2]][:, [6, 7, 8]].sum(1).mean())
    assert set(tidy["panel"]) >= {"(e) important head: head 2", "(a) redundant head: head 1"}
    png = save(plot(tidy, **style), str(tmp_path / "F5"))[0]
    width, height = Image.open(png).size
    # a grid (two panels a row, three rows), not a strip: at most 8 in wide at 200 dpi, so
    # 8-pt labels stay >= 6.5 pt on a 6.5 in page
    assert width <= 1600 and 1.0 <= height / width <= 2.0, (width, height)
    # every head important on this sentence: the redundant panels show the Transformer's head and say
    # which label was missing; no labels exported at all: one error naming the file, not head 1 drawn as if labelled
    rhe = tmp_path / files.attention(grid.system_model(study, "multi30k", "en-de", "RHElpea"))
    with np.load(rhe) as npz:
        arrays = dict(npz)
    np.savez(rhe, **{**arrays, "rhe_000000": np.ones((2, 8))})
    panels = set(build()[0]["panel"])
    assert {"(a) redundant head: head 1 (none labelled redundant: Transformer)", "(e) important head: head 1"} <= panels
    np.savez(rhe, **{key: value for key, value in arrays.items() if key != "rhe_000000"})
    with pytest.raises(DataError, match=r"RHElpea.*holds no RHE head labels \(rhe_000000\): Figure 5's panel \(a\)"):
        build()


def test_table_a3_without_parsers_has_the_papers_rows_alone(tmp_path):
    """`parsers` defaults to []: Table A3 has no model then, and its table is the paper's
    numbers beside empty columns of ours (it raised "no column 'row'" before)."""
    from headlab.report.tables import to_markdown
    from headlab.studies import builder

    config = {"corpora": {"multi30k": {"tests": ["test_2016_flickr"]}}, "studies": {"paper_C": {**STUDY, "parsers": []}}}
    inputs, build = builder(config, "paper_C", "A3", str(tmp_path))
    table, tidy = build()
    assert inputs == [] and tidy.empty
    assert table.values.filter(like="ours").isna().all().all() and table.values.filter(like="paper").notna().any().any()
    assert "Kitaev" in to_markdown(table)
