"""Paper B study: the grid search as a data-dependent DAG (stage 2 derived from stage 1's
result), precise reruns of the grid, bad config, and a tiny end-to-end run of every
table and figure."""
from __future__ import annotations

import json

import pytest

from headlab.errors import ConfigError
from headlab.naming import model_path
from headlab.studies.common import stage_file
from headlab.studies.paper_B import grid
from test_workflow import run_workflow, snakemake, write_config

STUDY = {"data": {"multi30k": ["de-en"]}, "layers": "1+1", "preset": "mini_paper_B", "lambda_kl": 0.1,
         "grid": {"stage1": {"heads": [4, 8]}, "stage2": {"dropout": [0.0, 0.1], "label_smoothing": [0.1]}},
         "sizes": [150], "subsamples": 2, "figure_sentence": 1}


def _paper_b_config(tmp_path, mirror, **study):
    return write_config(tmp_path, mirror, **{"studies": {"paper_B": {**STUDY, **study}},
                                            "training.overrides.valid_steps": 3,
                                            "training.overrides.save_checkpoint_steps": 3})


def test_grid_before_and_after_stage_one(tmp_path):
    root = str(tmp_path)
    static = list(grid.models(STUDY, root))
    # without stage files: T-base (full and the 2 subsamples) and stage 1's two DHICM candidates
    assert len(static) == 5
    heads = {m["heads"] for m, _ in static}
    assert heads == {"8L", "*4L.4L~dhicm@dec=*4L.4L~dhicm@cross=*4L.4L~dhicm",
                     "*8L.8L~dhicm@dec=*8L.8L~dhicm@cross=*8L.8L~dhicm"}
    # preset values are left out of the variant: heads 8 is the preset's, so only lambda_kl
    assert {m["variant"] for m, _ in static} == {"default", "heads=4+lambda_kl=0.1", "lambda_kl=0.1"}
    stage1 = stage_file(root, grid.OUTDIR, "multi30k", "de-en", "stage1")
    (tmp_path / stage1).parent.mkdir(parents=True)
    (tmp_path / stage1).write_text(json.dumps({"chosen": {"heads": 4, "lambda_kl": 0.1}}))
    stage2 = grid.stage_models(STUDY, root, "multi30k", "de-en", "stage2")
    # stage 2 at stage 1's choice; dropout 0.1 and label smoothing 0.1 are the preset's
    assert [o for _, o in stage2] == [{"heads": 4, "lambda_kl": 0.1, "dropout": [0.0]},
                                      {"heads": 4, "lambda_kl": 0.1}]
    assert grid.final_models(STUDY, root, "multi30k", "de-en") is None


def test_search_once_finals_at_every_seed(tmp_path):
    """headline_seeds [1, 2]: the grid search stays at seed 1; T3's three systems on the full
    set at seeds 1 and 2 (seed 1's DHICM is stage 2's winner); the sweep at seed 1."""
    study = {**STUDY, "headline_seeds": [1, 2]}
    root = str(tmp_path)
    for stage, chosen in (("stage1", {"heads": 4, "lambda_kl": 0.1}),
                          ("stage2", {"heads": 4, "lambda_kl": 0.1, "dropout": [0.0]})):
        path = tmp_path / stage_file(".", grid.OUTDIR, "multi30k", "de-en", stage)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"chosen": chosen}))
    models = [m for m, _ in grid.models(study, root)]
    candidates = [m for stage in grid.STAGES for m, _ in grid.stage_models(study, root, "multi30k", "de-en", stage)]
    assert {m["seed"] for m in candidates} == {"1"}
    seed2 = {(m["size"], m["heads"].split("@")[0], m["variant"]) for m in models if m["seed"] == "2"}
    assert seed2 == {("full", "8L", "default"), ("full", "4L", "dropout=0.0+heads=4+lambda_kl=0.1"),
                     ("full", "*4L.4L~dhicm", "dropout=0.0+heads=4+lambda_kl=0.1")}
    winner = grid.final_models(study, root, "multi30k", "de-en")["DHICM"][0]
    assert winner in candidates
    assert {m["seed"] for m in models if m["size"] != "full"} == {"1"}
    # seed 1: T-base, 3 distinct candidates (the winner is the DHICM final), T-optimal; 2 subsamples
    # x 3 systems; seed 2: 3 systems
    assert len({model_path(m) for m in models}) == 5 + 6 + 3
    # the atlas's headline models: T3's finals on the full set at the first seed
    from headlab.studies.base import REGISTRY
    headline = REGISTRY["paper_B"].is_headline(study, root)
    assert {(m["seed"], m["heads"].split("@")[0]) for m in models if headline(m)} == {
        ("1", heads) for heads in ("8L", "4L", "*4L.4L~dhicm")}
    assert not any(headline(m) for m in models if m["size"] != "full")


@pytest.mark.parametrize("search, key", [
    ({"stage1": {}, "stage2": {"dropout": [0.1]}}, "studies.paper_B.grid.stage1"),
    ({"stage1": {"heads": []}, "stage2": {"dropout": [0.1]}}, "studies.paper_B.grid.stage1.heads"),
])
def test_empty_grid_names_the_key(search, key):
    with pytest.raises(ConfigError, match=rf"\[{key}\]"):
        grid.check({**STUDY, "grid": search})


def test_lambda_kl_in_the_grid_is_tuned(tmp_path):
    # issue 24 item 2: a grid's lambda_kl was replaced by the study-level value (identical
    # candidates); it is tuned like any option, the study's value being the default
    study = {**STUDY, "grid": {"stage1": {"lambda_kl": [0.0, 0.5]}, "stage2": {"dropout": [0.0]}}}
    stage1 = grid.candidates(study, "stage1")
    assert stage1 == [{"lambda_kl": 0.0}, {"lambda_kl": 0.5}]
    assert {m["variant"] for m, _ in grid.stage_models(study, None, "multi30k", "de-en", "stage1")} == {
        "lambda_kl=0.0", "lambda_kl=0.5"}
    # stage 2 keeps stage 1's choice of it; candidates without it in their grid get the study's
    assert grid.candidates(study, "stage2", {"lambda_kl": 0.5}) == [{"lambda_kl": 0.5, "dropout": [0.0]}]
    assert grid.candidates(STUDY, "stage1") == [{"heads": 4, "lambda_kl": 0.1}, {"lambda_kl": 0.1}]


@pytest.mark.parametrize("option, value", [("lambda_kl", -1), ("dhicm_dropout", -0.1)])
def test_bad_grid_value_names_its_key_when_the_dag_is_built(option, value):
    from headlab.workflow.config_check import check
    from test_config_check import _config

    config = _config(**{"studies.paper_B": {**STUDY, "grid": {"stage1": {option: [0.1, value]},
                                                               "stage2": {"dropout": [0.0]}}}})
    with pytest.raises(ConfigError, match=rf"^\[studies\.paper_B\.grid\.stage1\.{option}\] grid value "
                                          rf"{value}: {option} must be a number >= 0"):
        check(config)


@pytest.mark.parametrize("stage2, message", [
    # stage 2 is planned only after stage 1 has trained: its names and values are checked before
    ({"label_smothing": [0.1]}, r"\[studies\.paper_B\.grid\.stage2\.label_smothing\] unknown OpenNMT-py train "
                                r"option 'label_smothing'; did you mean 'label_smoothing'\?"),
    ({"label_smoothing": [0.1, 1.5]}, r"\[studies\.paper_B\.grid\.stage2\.label_smoothing\] grid value 1\.5: "
                                      r"label_smoothing must be a number in \[0, 1\)"),
    ({"optim": ["adam", "adamm"]}, r"\[studies\.paper_B\.grid\.stage2\.optim\] grid value 'adamm': optim must "
                                   r"be one of sgd, .*did you mean 'adam'"),
])
def test_stage_two_grid_is_checked_when_the_dag_is_built(stage2, message):
    from headlab.workflow.config_check import check
    from test_config_check import _config

    config = _config(**{"studies.paper_B": {**STUDY, "grid": {"stage1": {"heads": [4]}, "stage2": stage2}}})
    with pytest.raises(ConfigError, match=rf"^{message}"):
        check(config)


def test_importance_table_has_every_dhicm_site_and_a_bad_export_is_an_error_naming_it(tmp_path):
    """Every site of a DHICM model ends in a DHICM layer, so its export always holds the
    importance G: one without it is a stale or wrong file, an error naming it, not a row
    left out of the table."""
    import re
    from pathlib import Path

    import numpy as np

    from headlab.errors import DataError
    from headlab.studies.paper_B import outputs

    root = str(tmp_path)
    for stage in grid.STAGES:
        path = Path(stage_file(root, grid.OUTDIR, "multi30k", "de-en", stage))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"chosen": {"heads": 4, "lambda_kl": 0.1}}))
    files = outputs.Files({"corpora": {"multi30k": {"tests": ["test_2016_flickr"]}}}, STUDY, root)
    inputs, build = outputs.importance(files)
    assert len(inputs) == 3 * 3               # the full set and two subsamples of 150 pairs, three sites

    def export(path, importance=True):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        arrays = {"tokens": np.array(["a b c"]), "att_000000": np.full((2, 4, 3, 3), 1 / 3, dtype=np.float32)}
        if importance:      # the last layer's G: (layers, tokens, heads), NaN for the layer without DHICM
            arrays["imp_000000"] = np.stack([np.full((3, 4), np.nan), np.tile([0.1, 0.2, 0.3, 0.4], (3, 1))])
        np.savez(path, **arrays)

    for index, path in enumerate(inputs):
        export(path, importance=index != 1)
    with pytest.raises(DataError, match=re.escape(f"{inputs[1]}: no DHICM importance")):
        build()
    export(inputs[1])
    table, ours = build()
    assert len(table.values) == len(inputs) and ours.groupby("row").size().eq(4).all()
    assert list(table.values.loc["multi30k de-en full cross", ["head 1", "head 4"]]) == pytest.approx([0.1, 0.4])


def test_export_with_a_sentence_lacking_importance_is_an_error_naming_it(tmp_path):
    """A partial export (some sentences without imp_*) would shrink the importance table's
    token count without a word: an error naming the file and the first sentence lacking it."""
    import re

    import numpy as np

    from headlab.engine.export import load_importance
    from headlab.errors import DataError

    path = tmp_path / "att.npz"
    importance = np.tile([0.25, 0.75], (1, 2, 1))             # (layers, tokens, heads)
    np.savez(path, tokens=np.array(["a b", "c d", "e f"]), imp_000000=importance,
             imp_000002=importance)
    with pytest.raises(DataError, match=re.escape(f"{path}: ") + r".*sentence 1\b"):
        load_importance(str(path))


def test_dry_run_stage_two_waits_for_stage_one(tmp_path, mirror):
    config = _paper_b_config(tmp_path, mirror)
    result = snakemake("-n", "--configfile", str(config))
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout + result.stderr
    assert "study_stage" in out and "DAG of jobs will be updated after completion" in out
    assert "stages/multi30k/de-en/stage1.json" in out
    assert "stage2.json" not in out           # named only once stage 1 has chosen


@pytest.mark.slow
def test_end_to_end_paper_b(tmp_path, mirror):
    # Table 3 at two seeds (issue 22): mean ± sd, and the seed-aware tests of effects.csv
    config = _paper_b_config(tmp_path, mirror, headline_seeds=[1, 2])
    result = run_workflow("--cores", "2", "--configfile", str(config), timeout=1500)
    assert result.returncode == 0, result.stderr[-5000:]
    out = tmp_path / "results/paper_B"
    for name in ("T2", "T2grid", "T3", "T4", "importance"):
        for ext in ("csv", "md", "tex"):
            assert (out / f"{name}.{ext}").stat().st_size > 0, name
    for name in ("F1", "F2", "F3", "learning_curves"):
        for ext in ("png", "pdf", "csv"):
            assert (out / f"{name}.{ext}").stat().st_size > 0, name
    stage1 = json.loads((out / "stages/multi30k/de-en/stage1.json").read_text())
    stage2 = json.loads((out / "stages/multi30k/de-en/stage2.json").read_text())
    assert len(stage1["candidates"]) == 2 and len(stage2["candidates"]) == 2
    best1 = min(stage1["candidates"], key=lambda c: c["valid_xent"])
    assert stage1["chosen"] == best1["overrides"]
    assert all(c["overrides"]["heads"] == stage1["chosen"].get("heads", 8) or "heads" not in stage1["chosen"]
               for c in stage2["candidates"])
    import csv
    with open(out / "T3.csv", encoding="utf-8") as handle:
        t3 = {row["row"]: row for row in csv.DictReader(handle)}
    assert float(t3["WMT17-CS"]["DHICM paper"]) == 25.68
    assert 0.0 <= float(t3["multi30k de-en"]["DHICM ours"]) <= 100.0
    readme = (out / "README.md").read_text()
    assert "DHICM >= T-optimal" in readme and "T-optimal > T-base" in readme
    assert "± " in (out / "T3.md").read_text() and "(n=2)" in (out / "T3.md").read_text()
    assert int(t3["multi30k de-en"]["DHICM ours n"]) == 2 and float(t3["multi30k de-en"]["DHICM ours sd"]) >= 0
    import pandas as pd
    effects = pd.read_csv(out / "effects.csv")
    table3 = effects[effects["claim"].str.startswith("§5 (T3)")]
    # T-optimal > T-base, DHICM > T-base (the abstract's headline), DHICM > T-optimal
    assert len(table3) == 3 and list(table3["runs"]) == ["2/2", "2/2", "2/2"]
    assert any("DHICM − T-base" in compared for compared in table3["compared"])
    assert set(table3["interval"]) == {"seeds and test sentences"}
    assert (table3["ci_low"] < table3["ours"]).all() and (table3["ours"] < table3["ci_high"]).all()
    gain = effects[effects["claim"].str.startswith("§5 (T4)")].iloc[0]
    assert gain["runs"] == "2/2/2/2"     # DHICM, T-optimal: 2 subsamples of 150 pairs (seed 1); the full set: seeds 1, 2
    for _, row in effects.iterrows():           # every verdict in the README, as effects.csv has it
        assert f"| {row['claim']} | {row['compared']} |" in readme
    assert "## paper_B" in (tmp_path / "results/effects.md").read_text()
    from headlab.studies.effects import against_its_paper
    assert not against_its_paper(effects).any(), effects[against_its_paper(effects)]["claim"].tolist()
    # the DHICM model of stage 2's choice is the final one: not trained twice
    trained = list((tmp_path / "results/models").rglob("model.pt"))
    assert len(trained) == len({p.parent for p in trained})
    again = snakemake("-n", "--configfile", str(config))
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    # one grid value changed: only the models it affects train (the new stage-2 candidate,
    # and the finals if the choice moves); stage 1 and T-base are not retrained
    before = {p: p.stat().st_mtime for p in (tmp_path / "results/models").rglob("model.pt")}
    changed = write_config(tmp_path, mirror, **{
        "studies": {"paper_B": {**STUDY, "headline_seeds": [1, 2], "grid": {**STUDY["grid"], "stage2": {"dropout": [0.0, 0.2],
                                                                             "label_smoothing": [0.1]}}}},
        "training.overrides.valid_steps": 3, "training.overrides.save_checkpoint_steps": 3})
    rerun = run_workflow("--cores", "2", "--configfile", str(changed), timeout=1500)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    after = {p: p.stat().st_mtime for p in (tmp_path / "results/models").rglob("model.pt")}
    assert any("dropout=0.2" in str(p) for p in set(after) - set(before))
    stage1_models = {c["model"] for c in stage1["candidates"]}
    kept = [p for p in before if any(m in str(p) for m in stage1_models) or "/default/" in str(p)]
    # stage 1's two candidates, T-base on the full set (seeds 1, 2) and on the two subsamples
    assert len(kept) == 2 + 2 + 2 and all(after[p] == before[p] for p in kept)


@pytest.mark.parametrize("bootstrap, mark", [
    ("system,win_system,p_value,significantly_higher\nT.full,,,False\nD.full,0.995,0.005,True\n", "⇑"),
    ("system,win_system,p_value,significantly_higher\nT.full,,,False\nD.full,0.6,0.4,False\n", ""),
    ("system,win_system,p_value,significantly_higher\nT.full,,,False\nD.full,,,\n", "n/a"),      # empty cells
    ("system,win_system,p_value,significantly_higher\nT.full,,,False\n", "n/a"),                # no DHICM row
], ids=["better", "not-better", "empty-cells", "no-row"])
def test_table3_marks_dhicm_only_where_the_bootstrap_judged_it(tmp_path, bootstrap, mark):
    """⇑ / ↑ / blank where compare-mt judged DHICM against T-optimal; where its CSV has no
    result (an empty cell was read as True: an arrow; no row: an IndexError), n/a, and the
    caption says so."""
    from pathlib import Path

    import pandas as pd

    from headlab.report.tables import to_markdown
    from headlab.studies.paper_B import outputs

    root = str(tmp_path / "results")
    for stage in grid.STAGES:
        path = Path(stage_file(root, grid.OUTDIR, "multi30k", "de-en", stage))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"chosen": {"heads": 4, "lambda_kl": 0.1}}))
    (tmp_path / "published").mkdir()
    files = outputs.Files({"corpora": {"multi30k": {"tests": ["test_2016_flickr"]}}}, STUDY, root,
                          published=str(tmp_path / "published"))
    inputs, build = outputs.t3(files)
    dhicm = files.finals("multi30k", "de-en")["DHICM"][0]["heads"]
    for path in inputs:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(bootstrap.replace("D.full", f"{dhicm}.full") if path.endswith(".csv")
                              else json.dumps({"bleu": 25.0}))
    table, ours = build()
    marks = table.marks.loc["multi30k de-en"]
    assert [marks[f"{system} ours"] for system in ("T-base", "T-optimal", "DHICM")] == ["", "", mark]
    dhicm_row = ours[(ours["column"] == "DHICM") & (ours["scale"] == "toy")].iloc[0]
    assert pd.isna(dhicm_row["p_value"]) == (mark == "n/a")
    untested = " n/a: compare-mt's bootstrap has no result for DHICM, not judged (not 'not significant')."
    assert (untested in table.caption) == (mark == "n/a")
    assert ("| 25.00 (n/a) |" in to_markdown(table)) == (mark == "n/a")
    assert "). ⇑ / ↑: p < 0.01 / p < 0.05: DHICM better than T-optimal by paired bootstrap" in table.caption
