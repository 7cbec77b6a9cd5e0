"""Study builders: the paper A reference numbers, the grid, suite splits."""
from __future__ import annotations

from pathlib import Path

import pytest

from headlab.errors import ConfigError
from headlab.eval.suite_split import distil, mucow
from headlab.naming import model_path
from headlab.studies.paper_A import claims, grid, outputs

STUDY = dict(data={"multi30k": ["de-en", "en-de"]}, layers=["1+1", "2+1", "2+2"], shallow="2+1",
             deep="2+2", heads=["8L", "7Ftoken+1L", "7Fword+1L", "1L"], preset="mini",
             lowres=dict(data={"multi30k": ["fr-en"]}, preset="mini_lowres", overrides={"train_steps": 9}))


def test_reference_has_every_published_number():
    counts = {t: len(outputs.reference(t)) for t in ("T1", "T2", "T3", "T4", "T5", "T6")}
    assert counts == {"T1": 56, "T2": 20, "T3": 8, "T4": 64, "T5": 15, "T6": 12}
    t1 = outputs.reference("T1")
    cell = t1[(t1.pair == "de-en") & (t1.layers == "6+6") & (t1.system == "1L")].iloc[0]
    assert cell.value == 30.17 and cell.significantly_lower


def test_grid_covers_every_table():
    models = list(grid.models(STUDY))
    standard = [m for m, _ in models if m["preset"] == "mini"]
    # T1: 2 pairs x 3 layers x 4 specs, T5: + 8Ftoken at the deep setting for each pair
    assert len(standard) == 2 * 3 * 4 + 2
    assert {m["heads"] for m in standard if m["layers"] == "2+2"} == {"8L", "7Ftoken+1L", "7Fword+1L", "1L", "8Ftoken"}
    lowres = [(m, o) for m, o in models if m["preset"] == "mini_lowres"]
    assert len(lowres) == 4 and all(m["layers"] == "2+2" and o == {"train_steps": 9} for m, o in lowres)


def test_table5_trains_eight_fixed_in_the_chosen_lowres_pairs():
    study = {**STUDY, "lowres": {**STUDY["lowres"], "data": {"multi30k": ["fr-en", "cs-en"]}},
             "eight_fixed_lowres": ["cs-en"]}
    lowres = [(m, o) for m, o in grid.models(study) if m["preset"] == "mini_lowres"]
    # T2: 2 pairs x 4 specs; T5: 8Ftoken on cs-en only, with the low-resource overrides
    assert len(lowres) == 2 * 4 + 1
    eight = [(m, o) for m, o in lowres if m["heads"] == "8Ftoken"]
    assert [(m["pair"], m["layers"], o) for m, o in eight] == [("cs-en", "2+2", {"train_steps": 9})]
    inputs, _ = outputs.t5(outputs.Files({"corpora": {"multi30k": {"tests": ["t"]}}}, study, "r"))
    lowres_bleu = [i for i in inputs if "/mini_lowres/" in i]
    assert len(lowres_bleu) == 3 and all("/cs-en/" in i and i.endswith("/t.full.json") for i in lowres_bleu)


def test_table5_puts_lowres_columns_beside_the_papers_en_vi(tmp_path):
    import json
    study = {**STUDY, "data": {"multi30k": ["de-en"]}, "eight_fixed_lowres": ["fr-en"]}
    files = outputs.Files({"corpora": {"multi30k": {"tests": ["t"]}}}, study, str(tmp_path))
    inputs, build = outputs.t5(files)
    for path in inputs:   # BLEU: 30 + 1 per system index (+5 low-res); params: 2.5M
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        system = next(h for h in ("8Ftoken", "7Ftoken+1L", "8L") if f"/{h}/" in path)
        bleu = 30 + ["8L", "7Ftoken+1L", "8Ftoken"].index(system) + (5 if "mini_lowres" in path else 0)
        Path(path).write_text(json.dumps({"params": 2_500_000} if path.endswith("params.json") else {"bleu": bleu}))
    table, ours = build()
    v = table.values
    assert v.loc["8Ftoken", "de-en ours"] == 32 and v.loc["8Ftoken", "fr-en low-res ours"] == 37
    assert v.loc["8L", "#params (M) ours"] == 2.5
    assert v.loc["8Ftoken", "vi-en low-res paper"] == 28.97 and v.loc["8L", "de-en paper"] == 30.99
    assert v.loc["8Ftoken", "#params (M) paper"] == 88.5
    assert set(ours["column"]) == {"de-en", "fr-en low-res", "#params (M)"}


def test_table5_prints_params_that_differ_differently(tmp_path):
    """Embedded-default checkpoints (de-en 2+2 mini): 0.44 / 0.42 / 0.42 M at two decimals."""
    import json
    study = {**STUDY, "data": {"multi30k": ["de-en"]}}
    files = outputs.Files({"corpora": {"multi30k": {"tests": ["t"]}}}, study, str(tmp_path))
    inputs, build = outputs.t5(files)
    counts = {"8L": 437_328, "7Ftoken+1L": 422_768, "8Ftoken": 420_688}
    for path in inputs:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        system = next(h for h in ("8Ftoken", "7Ftoken+1L", "8L") if f"/{h}/" in path)
        Path(path).write_text(json.dumps({"params": counts[system]} if path.endswith("params.json") else {"bleu": 1}))
    from headlab.report.tables import to_csv
    rows = {line.split(",")[0]: line.split(",") for line in to_csv(build()[0]).splitlines()}
    col = rows["system"].index("#params (M) ours")
    assert [rows[h][col] for h in counts] == ["0.437", "0.423", "0.421"]
    assert rows["8Ftoken"][rows["system"].index("#params (M) paper")] == "88.5"


def test_table1_marks_a_system_the_bootstrap_has_no_result_for_as_not_judged(tmp_path):
    """compare-mt's CSV without a system's row, or with its flag empty: n/a (not judged), not
    the blank of "not significantly lower"; the caption says what n/a means."""
    import json

    from headlab.report.tables import to_latex, to_markdown

    study = {**STUDY, "data": {"multi30k": ["de-en"]}, "layers": ["2+2"],
             "heads": ["8L", "7Ftoken+1L", "1L", "7Fword+1L"]}
    (tmp_path / "published").mkdir()
    files = outputs.Files({"corpora": {"multi30k": {"tests": ["t"]}}}, study, str(tmp_path / "results"),
                          published=str(tmp_path / "published"))
    inputs, build = outputs.t1(files)
    for path in inputs:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        # 1L below 8L, 7Fword+1L's flag empty, 7Ftoken+1L missing from the comparison
        Path(path).write_text("system,significantly_lower\n8L.full,False\n1L.full,True\n7Fword+1L.full,\n"
                              if path.endswith(".csv") else json.dumps({"bleu": 25.0}))
    table, ours = build()
    marks = table.marks["2+2 ours"]
    assert (marks["DE-EN 8L"], marks["DE-EN 1L"]) == ("", "*")
    assert marks["DE-EN 7Ftoken+1L"] == marks["DE-EN 7Fword+1L"] == "n/a"
    judged = ours.set_index("system")["significantly_lower"]
    assert judged["7Ftoken+1L"] is None and judged["7Fword+1L"] is None and judged["8L"] is False
    assert "| DE-EN 7Ftoken+1L | toy | 25.00 (n/a) |" in to_markdown(table) and "25.00\\*" in to_markdown(table)
    assert "25.00 (n/a)" in to_latex(table) and "25.00$^{*}$" in to_latex(table)
    assert "). n/a: compare-mt's bootstrap has no result for the system, not judged (not 'not significant')." \
        in table.caption


@pytest.mark.parametrize("evaluation, level", [({}, "0.05"), ({"significance": 0.01}, "0.01")])
def test_table1_caption_says_the_configured_level_of_its_marks(tmp_path, evaluation, level):
    """The * marks are compare-mt's at ``evaluation.significance`` (the compare rule's --p):
    the caption says that level, not a fixed 0.05, beside the paper's own."""
    import json

    (tmp_path / "published").mkdir()
    files = outputs.Files({"corpora": {"multi30k": {"tests": ["t"]}}, "evaluation": evaluation}, STUDY,
                          str(tmp_path / "results"), published=str(tmp_path / "published"))
    inputs, build = outputs.t1(files)
    for path in inputs:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text("system,significantly_lower\n" if path.endswith(".csv") else json.dumps({"bleu": 25.0}))
    table, _ = build()
    assert f"(paired bootstrap, compare-mt, p < {level}; the paper's: p < 0.05; ours: seed 1 alone" in table.caption


@pytest.mark.parametrize("level, meaning", [(0.05, "⇑ / ↑: p < 0.01 / p < 0.05"), (0.1, "⇑ / ↑: p < 0.01 / p < 0.1"),
                                            (0.01, "⇑: p < 0.01"), (0.001, "⇑: p < 0.001")])
def test_the_arrows_of_papers_b_and_c_mean_the_configured_level(level, meaning):
    from headlab.studies.common import arrows
    assert arrows(level) == meaning


def test_table5_lowres_pair_must_be_a_lowres_pair():
    study = {**STUDY, "eight_fixed_lowres": ["en-vi"]}
    with pytest.raises(ConfigError, match=r"\[paper_A.eight_fixed_lowres\] pair\(s\) en-vi are not in "
                                          r"paper_A.lowres.data \(it has: fr-en\)"):
        list(grid.models(study))


def test_headline_seeds_train_only_the_headline_comparison():
    """seeds [1] + headline_seeds [1, 2, 3]: T1's deep 8L / 7Ftoken+1L / 8Ftoken and T2's 8L /
    7Ftoken+1L at three seeds, everything else at one."""
    study = {**STUDY, "seeds": [1], "headline_seeds": [1, 2, 3]}
    models = [m for m, _ in grid.models(study)]
    assert len(models) == len({model_path(m) for m in models})
    extra = [m for m in models if m["seed"] != "1"]
    # 2 pairs x (8L, 7Ftoken+1L, 8Ftoken) at 2+2, 1 low-res pair x (8L, 7Ftoken+1L); x 2 more seeds
    assert len(extra) == (2 * 3 + 1 * 2) * 2
    assert {(m["preset"], m["layers"], m["heads"]) for m in extra} == {
        ("mini", "2+2", "8L"), ("mini", "2+2", "7Ftoken+1L"), ("mini", "2+2", "8Ftoken"),
        ("mini_lowres", "2+2", "8L"), ("mini_lowres", "2+2", "7Ftoken+1L")}
    assert len(models) - len(extra) == len(list(grid.models(STUDY)))
    everywhere = [m for m, _ in grid.models({**STUDY, "seeds": [1, 2]})]
    assert len(everywhere) == 2 * len(list(grid.models(STUDY)))


def test_distil_split_puts_correct_then_incorrect(mirror):
    src, tgt = distil(mirror, "subj_verb_agreement", "en-de", limit=3)
    assert len(src) == len(tgt) == 6 and src[:3] == src[3:]
    assert tgt[0] != tgt[3]  # correct vs incorrect variant of the same source
    with pytest.raises(ConfigError, match="EN->DE"):
        distil(mirror, "subj_verb_agreement", "de-en")


def test_mucow_split_keeps_requested_domains(mirror):
    src, ref, keys = mucow(mirror, "de-en", ["ted", "tatoeba"])
    assert len(src) == len(ref) == len(keys) == 769 + 445  # the mirror's de-en key file
    assert {k.split("\t")[1] for k in keys} == {"ted", "tatoeba"}
    assert len(mucow(mirror, "de-en", ["ted"], limit=5)[0]) == 5


def test_mucow_split_of_no_items_is_an_error_and_writes_nothing(mirror, tmp_path):
    """Corpora the pair has no items from wrote three empty files, and the translation and
    scoring jobs ran on them."""
    from headlab.eval.suite_split import main

    prefix = str(tmp_path / "mucow")
    with pytest.raises(ConfigError) as caught:
        main(["--suite", "mucow", "--pair", "de-en", "--root", str(mirror), "--domains", "news,europarl",
              "--out-prefix", prefix])
    assert str(caught.value) == ("[domains] MuCoW's de-en suite has no items from news, europarl "
                                 "(its corpora: books, eubooks, opensubs, tatoeba, ted)")
    with pytest.raises(ConfigError, match=r"MuCoW's en-cs suite has no items from ted \(its corpora: "):
        main(["--suite", "mucow", "--pair", "en-cs", "--root", str(mirror), "--domains", "ted",
              "--out-prefix", prefix])
    assert not list(tmp_path.glob("mucow*"))


def test_the_mucow_corpora_table_is_that_of_the_key_files(mirror):
    """The config check falls back on this table before the suite is fetched."""
    from headlab.eval.mucow import CORPORA, load_keys

    folder = mirror / "mucow" / "translation"
    on_disk = {path.name.split(".")[0]: tuple(sorted({key.corpus for key in load_keys(path)}))
               for path in folder.glob("*.key.txt")}
    assert on_disk == {pair: tuple(sorted(corpora)) for pair, corpora in CORPORA.items()}


def test_suite_split_by_hand_names_what_is_missing(mirror, tmp_path, capsys):
    """Run by hand before the suite is fetched, mucow was a FileNotFoundError traceback, and a
    misspelt DistilLingEval suite said "missing src.en[.gz]"; --limit -1 kept all but the last item."""
    from headlab.errors import DataError
    from headlab.eval.suite_split import main

    with pytest.raises(DataError) as caught:
        mucow(tmp_path, "de-en", ["ted"])
    assert str(caught.value) == (f"{tmp_path}/mucow/translation/de-en.text.txt: missing; get it with: "
                                 f"headlab fetch --dataset mucow --dest {tmp_path}/mucow")
    with pytest.raises(DataError) as caught:
        distil(tmp_path, "subj_verb_agreement", "en-de")
    assert str(caught.value).endswith(f"missing; get it with: headlab fetch --dataset distil-lingeval "
                                      f"--dest {tmp_path}/distil-lingeval")
    with pytest.raises(DataError, match=r"subj_verb_agrement.mt: no suite 'subj_verb_agrement' here \(suites: "
                                        r"clause_omission, .*subj_verb_agreement\)$"):
        distil(mirror, "subj_verb_agrement", "en-de")
    with pytest.raises(SystemExit):
        main(["--suite", "mucow", "--pair", "de-en", "--root", str(mirror), "--limit", "-1",
              "--out-prefix", str(tmp_path / "mucow")])
    assert capsys.readouterr().err.splitlines()[-1] == "headlab suite-split: error: argument --limit: -1: must be at least 1"
    assert not list(tmp_path.glob("mucow.*"))


def test_training_time_sums_the_benchmark_files(tmp_path):
    from headlab.studies.timing import training_time
    every = [m for m, _ in grid.models(STUDY)]
    trained = every[:3]
    for m, seconds in zip(trained, (60.0, 120.0, 300.0)):
        folder = tmp_path / "models" / model_path(m)
        folder.mkdir(parents=True)
        (folder / "train.benchmark.tsv").write_text(f"s\th:m:s\tmax_rss\n{seconds}\t0:01:00\t700\n")
    line = training_time(every, str(tmp_path))
    assert line.startswith("3 models, 8.0 min of training wall time in all")
    # the other 27: the sum is not the study's whole training time, and the line says so
    assert line.endswith(f"longest 5.0 min ({model_path(trained[2])}) (27 more without a benchmark file: trained "
                         f"elsewhere or before benchmarks existed)")
    assert training_time(trained, str(tmp_path)).endswith(f"longest 5.0 min ({model_path(trained[2])})")
    assert training_time(every, str(tmp_path / "none")) == "30 models (no benchmark files)"


def test_effects_are_declared_outputs():
    """Each paper study's effects.csv is one of its final outputs (snakemake, publish, the
    report build it); results/effects.md only where some configured study judges claims."""
    from headlab.studies import outputs, study_outputs

    assert {"r/paper_A/effects.csv", "r/paper_A/T1.tidy.csv"} <= set(study_outputs("paper_A", "r"))
    assert not [p for p in study_outputs("baseline", "r") if "effects" in p]
    assert "r/effects.md" in outputs({"studies": {"baseline": {}, "paper_D": {}}}, "r")
    assert "r/effects.md" not in outputs({"studies": {"baseline": {}}}, "r")


def test_mucow_items_give_table_6s_average_precision(tmp_path):
    """Per-sentence MuCoW outcomes -> (hit, hit or miss) for TED and Tatoeba; their summed
    precision average is Table 6's number: TED 1 hit / 2 decided, Tatoeba 2 / 2 -> 0.75."""
    (tmp_path / "key").write_text("".join(f"{i}\t{c}\tw\ta\tb\n" for i, c in
                                          enumerate(["ted", "ted", "ted", "tatoeba", "tatoeba", "books"])))
    (tmp_path / "details").write_text("hit\nmiss\nother\nhit\nhit\nmiss\n")
    stats = claims.mucow_stats(str(tmp_path / "details"), str(tmp_path / "key"))
    assert stats.tolist() == [[1, 1, 0, 0], [0, 1, 0, 0], [0, 0, 0, 0], [0, 0, 1, 1], [0, 0, 1, 1], [0, 0, 0, 0]]
    assert claims.mean_precision(stats.sum(0))[0] == pytest.approx(0.75)


def test_a_job_sees_the_config_the_dag_saw():
    """The generic rules pass a study its config slices as JSON; its figures take the first
    pair of ``data``. The slices were written with sorted keys, so on paper.yaml's overlay
    paper B's F1 named iwslt14-de-en-b10k's models as inputs (the DAG, config order) and read
    hindencorp-hi-en's in the job (sorted order): FileNotFoundError. Order now survives."""
    import yaml

    from headlab import studies
    root = Path(__file__).resolve().parents[1]
    config = yaml.safe_load((root / "config" / "config.yaml").read_text())
    study = config["studies"]["paper_B"]
    pair = next(iter(study["data"].items()))
    study["data"] = {"zz-late": [pair[1][0]], **study["data"]}          # a first key out of order
    config["corpora"]["zz-late"] = config["corpora"][pair[0]]
    slices = studies.config_slices(config, "paper_B")
    merged = studies.merge_config([slices["study"], slices["corpora"], slices["settings"]])
    assert list(merged["studies"]["paper_B"]["data"]) == list(study["data"]) != sorted(study["data"])
    assert list(merged["corpora"]) == [c for c in config["corpora"] if c in merged["corpora"]]
    assert merged["studies"]["paper_B"] == study


def test_a_search_stage_reads_no_evaluation_setting():
    """Paper D's gates stage (a Snakemake checkpoint) got every setting as a param: raising
    evaluation.profile_figure_sentences reran it (seen on the GPU config's overlay), and
    every job reading its gates.json after it. A stage's slice names training and
    translation only (the paths it reads); evaluation settings reach it through its input
    files."""
    import copy
    import json

    import yaml

    from headlab import studies
    root = Path(__file__).resolve().parents[1]
    config = yaml.safe_load((root / "config" / "config.yaml").read_text())
    changed = copy.deepcopy(config)
    changed.setdefault("evaluation", {})["profile_figure_sentences"] = 37
    before, after = studies.config_slices(config, "paper_D"), studies.config_slices(changed, "paper_D")
    assert before["settings"] != after["settings"]                  # tables and figures rerun
    assert before["stage_settings"] == after["stage_settings"]      # the gates stage does not
    assert set(json.loads(before["stage_settings"])) == {"training", "translation"}
    # and the stage rule takes that slice as its settings
    rules = (root / "rules" / "tables.smk").read_text()
    stage_rule = rules[rules.index("checkpoint study_stage:"):rules.index("rule study_table:")]
    assert "**STAGE_SLICES" in stage_rule and 'cfg_settings=_slice("stage_settings")' in rules


def test_stage_state_changes_when_a_search_stage_is_written_or_rewritten(tmp_path):
    """The DAG's index of which study trains which model (rules/common.smk: trained_by) is
    kept while this state stays the same: a stage's choice must change it."""
    import os

    import yaml

    import headlab.studies
    from headlab.studies.common import stage_file

    config = yaml.safe_load(Path("config/config.yaml").read_text())
    root = str(tmp_path)
    assert headlab.studies.stage_state(config, "paper_B", root) == ()
    assert headlab.studies.stage_keys(config, "paper_C") == [] and headlab.studies.stage_state(config, "paper_C", root) == ()
    [first, *_] = headlab.studies.stage_keys(config, "paper_B")
    file = Path(stage_file(root, "paper_B", first["corpus"], first["pair"], first["stage"]))
    file.parent.mkdir(parents=True)
    file.write_text("{}")
    written = headlab.studies.stage_state(config, "paper_B", root)
    assert [name for name, _ in written] == [str(file)]
    os.utime(file, ns=(0, 0))
    assert headlab.studies.stage_state(config, "paper_B", root) not in ((), written)


def test_study_stage_names_an_unconfigured_study_in_one_line(tmp_path):
    """A study no config holds was a KeyError traceback from the registry."""
    import json

    from headlab.studies import main_study_stage

    with pytest.raises(ConfigError) as caught:
        main_study_stage(["--study", "paper_Q", "--corpus", "multi30k", "--pair", "de-en", "--stage", "stage1",
                          "--results", str(tmp_path), "--out", str(tmp_path / "stage.json"),
                          "--config-json", json.dumps({"studies": {"paper_B": {}}})])
    assert str(caught.value) == "[studies] --study 'paper_Q': not a configured study (configured: paper_B)"
    assert not (tmp_path / "stage.json").exists()
