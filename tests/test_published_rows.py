"""GPU-scale rows: what the sittings published (``results/published/<slice>/<sitting>/rows.csv``)
read once, rendered in the papers' tables beside the toy rows (a ``scale`` column) and judged
with the toy claims' seed-aware tests."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from headlab.errors import DataError

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "results" / "published"
STUDY = dict(data={"multi30k": ["de-en"]}, layers=["2+2"], shallow="2+1", deep="2+2",
             heads=["8L", "7Ftoken+1L"], eight_fixed="8Ftoken", preset="mini",
             lowres=dict(data={"multi30k": ["fr-en"]}, preset="mini_lowres"))
CONFIG = {"corpora": {"multi30k": {"tests": ["test_2016_flickr"]}}}
COLUMNS = ("slice,sitting,study,table,row,heads,layers,pair,seed,test,step,best_step,stop_reason,status,bleu,"
           "bleu_ci_low,bleu_ci_high,chrf,src_tok_s,tgt_tok_s,gpu,commit,date").split(",")


def _files(tmp_path, published):
    from headlab.studies.paper_A import outputs
    return outputs.Files(CONFIG, STUDY, str(tmp_path / "results"), published=str(published))


def _fake_toy_inputs(inputs, published, bleu=25.0):
    """The toy models' scores and compare-mt's bootstrap, written where T1/T2 read them."""
    for file in inputs:
        if str(file).startswith(str(published)):
            continue    # published rows are read as they are
        Path(file).parent.mkdir(parents=True, exist_ok=True)
        if file.endswith(".csv"):
            Path(file).write_text("system,significantly_lower\n8L.full,False\n7Ftoken+1L.full,False\n")
        else:
            Path(file).write_text(json.dumps({"bleu": bleu}))


def _sitting(published, sitting, rows, slice_="A-T1-deep", columns=COLUMNS):
    folder = Path(published) / slice_ / sitting
    folder.mkdir(parents=True)
    with open(folder / "rows.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({"slice": slice_, "sitting": sitting, "study": "paper_A", "table": "T1", "row": "T1 deep",
                             "layers": "6+6", "pair": "de-en", "test": "test_2016_flickr", "step": 5000,
                             "best_step": 4000, "stop_reason": "validation BLEU stopped improving",
                             "chrf": 50, "src_tok_s": 10000, "tgt_tok_s": 11000, "gpu": "NVIDIA H100",
                             "commit": "65e2124", "date": sitting[:10], **row})
    return folder


def _hypotheses(folder, ref, seed):
    """A seed's translations of ``ref``: the fixed-head models' as the reference has them, 8L's
    each a word or two short (a lower BLEU, varying with the seed)."""
    for heads in ("8L", "7Ftoken+1L", "8Ftoken"):
        hyp = [" ".join(line.split()[:-1 - (index + seed) % 2]) if heads == "8L" else line
               for index, line in enumerate(ref)]
        (folder / f"{heads}.seed{seed}.test_2016_flickr.txt").write_text("\n".join(hyp) + "\n")


def test_the_shipped_sittings_render_in_paper_As_T1_with_a_scale_column(tmp_path):
    from headlab.report.tables import to_markdown
    from headlab.studies.paper_A import outputs

    files = _files(tmp_path, SHIPPED)
    inputs, build = outputs.t1(files)
    assert {str(p) for p in SHIPPED.glob("*/*/rows.csv")} <= set(inputs)   # a new sitting re-renders T1
    _fake_toy_inputs(inputs, SHIPPED)
    table, ours = build()
    values = table.values
    assert values.columns[0] == "scale" and values.loc["DE-EN 8L", "scale"] == "toy"
    gpu = "DE-EN 8L (GPU A-T1-deep)"
    # every shipped sitting of the slice that neither diverged nor was evaluated at the
    # clock's step (seed 1 of 65e2124: step 1,000, no validation), one seed each: their mean
    shipped = [row for path in sorted(SHIPPED.glob("A-T1-deep/*/rows.csv"))
               for row in csv.DictReader(path.open()) if row["heads"] == "8L" and row["status"] != "diverged"]
    chosen = [row for row in shipped if row["best_step"]]
    assert {row["seed"] for row in shipped} >= {"1", "2"} and {row["seed"] for row in chosen} >= {"2"}
    mean = sum(float(row["bleu"]) for row in chosen) / len(chosen)
    assert values.loc[gpu, "6+6 ours"] == pytest.approx(mean) and table.runs(gpu, "6+6 ours")[1] == len(chosen)
    assert round(mean, 2) == 36.09 or len(chosen) > 1           # seed 2 at its best validation, step 2,200
    assert "A-T1-deep" in values.loc[gpu, "scale"] and "deadline" in values.loc[gpu, "scale"]
    assert "seed 2, deadline at step 2,200 (2026-11-27-h100-993e600); 95% interval [34.56, 37.57]" in \
        values.loc[gpu, "scale"] or len(chosen) > 1
    # seed 1 at the clock's step: its own labelled row, never in the mean
    clocked = "DE-EN 8L (GPU A-T1-deep, deadline at the clock's step 1,000, 2026-11-27-h100-65e2124)"
    assert round(values.loc[clocked, "6+6 ours"], 2) == 34.26
    assert values.loc[clocked, "scale"] == ("GPU base: A-T1-deep, seed 1, deadline at the clock's step 1,000, not "
                                            "averaged (2026-11-27-h100-65e2124: no validation chose it); 95% "
                                            "interval [32.82, 35.64]")
    diverged = [row for row in values.index if row.startswith("DE-EN 8L (GPU A-T1-deep, diverged")]
    assert len(diverged) == 1 and round(values.loc[diverged[0], "6+6 ours"], 2) == 18.34
    assert values.loc["DE-EN 8L", "6+6 paper"] == 30.99
    markdown = to_markdown(table)
    assert "| DE-EN 7Ftoken+1L (GPU A-T1-deep) | GPU base" in markdown and "seed 2" in markdown
    assert set(ours["scale"]) >= {"toy"} and (ours["scale"] != "toy").sum() >= 3


def test_a_deadline_run_at_the_clocks_step_is_shown_but_never_averaged_or_judged(tmp_path):
    """Seed 1 of each model stopped by the clock at step 1,000 with no validation (no
    best_step: the sittings before the stop rule), seeds 2 and 3 at their best validation
    (deadline) and converged: the row averages seeds 2-3 only, seed 1 has a row of its own,
    and the claims test seeds 2-3; a converged run without a best_step (a fine-tune trained
    to its planned end) is one of the seeds."""
    from headlab.studies import published
    from headlab.studies.effects import Judge
    from headlab.studies.paper_A import claims, outputs

    root = tmp_path / "published"
    ref = [f"a child number {index} throws a blue ball over the wooden fence" for index in range(120)]
    reference = tmp_path / "ref.txt"
    reference.write_text("\n".join(ref) + "\n")
    for sitting, seed, status, best in (("2026-11-27-h100-aaaaaaa", 1, "deadline", ""),
                                        ("2026-11-28-h100-bbbbbbb", 2, "deadline", 2200),
                                        ("2026-11-29-h100-ccccccc", 3, "converged", 2600)):
        rows = [dict(heads=heads, seed=seed, status=status, best_step=best, step=1000 if seed == 1 else 2800,
                     bleu=base + seed, bleu_ci_low=base + seed - 1.5, bleu_ci_high=base + seed + 1.5)
                for heads, base in (("8L", 30.0), ("7Ftoken+1L", 33.0), ("8Ftoken", 32.0))]
        _hypotheses(_sitting(root, sitting, rows), ref, seed)
    frame = published.read(str(root))
    assert list(published.at_the_clocks_step(frame)) == [True] * 3 + [False] * 6
    assert sorted(set(published.seeds_of(frame)["seed"])) == ["2", "3"]
    fine_tune = frame.assign(status="converged", best_step="")      # trained to their planned end
    assert not published.at_the_clocks_step(fine_tune).any() and len(published.seeds_of(fine_tune)) == 9

    files = _files(tmp_path, root)
    inputs, build = outputs.t1(files)
    _fake_toy_inputs(inputs, root)
    table, _ = build()
    gpu = "DE-EN 8L (GPU A-T1-deep)"
    assert table.values.loc[gpu, "6+6 ours"] == pytest.approx(32.5) and table.runs(gpu, "6+6 ours")[1] == 2
    assert "seeds 2, 3, deadline, converged at steps 2,200, 2,600 (" in table.values.loc[gpu, "scale"]
    clocked = "DE-EN 8L (GPU A-T1-deep, deadline at the clock's step 1,000, 2026-11-27-h100-aaaaaaa)"
    assert table.values.loc[clocked, "6+6 ours"] == pytest.approx(31.0)
    judge = Judge("paper_A", 200)
    claims.judge_published(judge, files, frame, reference=str(reference))
    assert set(judge.frame()["seeds"]) == {2}


def test_a_deadline_run_no_validation_chose_is_at_the_clocks_step_though_it_has_a_best_step(tmp_path):
    """A sitting's ``selected_by`` says how its evaluated checkpoint was chosen: a deadline run
    at its newest checkpoint (no validation had run: a training stopped before its first)
    is at the clock's step, best_step or not; a converged one (a fine-tune of fixed length)
    still counts. A rows.csv from before the column is read with it blank."""
    from headlab.studies import published

    root = tmp_path / "published"
    scored = dict(bleu=30, bleu_ci_low=29, bleu_ci_high=31)
    runs = [dict(heads="8L", seed=1, status="deadline", best_step=200, selected_by=published.BY_NEWEST, **scored),
            dict(heads="8L", seed=2, status="deadline", best_step=2200, selected_by=published.BY_VALIDATION, **scored),
            dict(heads="8L", seed=3, status="converged", best_step=400, selected_by=published.BY_NEWEST, **scored)]
    _sitting(root, "2026-11-28-h100-bbbbbbb", runs, columns=[*COLUMNS, "selected_by"])
    _sitting(root, "2026-11-29-h100-ccccccc", [dict(heads="8L", seed=4, status="deadline", best_step=2400,
                                                    bleu=30, bleu_ci_low=29, bleu_ci_high=31)])
    frame = published.read(str(root)).sort_values("seed")
    assert list(frame["selected_by"]) == [published.BY_NEWEST, published.BY_VALIDATION, published.BY_NEWEST, ""]
    assert list(published.at_the_clocks_step(frame)) == [True, False, False, False]
    assert sorted(published.seeds_of(frame)["seed"]) == ["2", "3", "4"]
    # shown at the step it was evaluated at (its newest checkpoint), not the last one logged
    tidy = published.gpu_tidy(frame.assign(bleu=30.0, bleu_ci_low=29.0, bleu_ci_high=31.0), "paper_A", "T1",
                              label=lambda run: run["heads"], column=lambda run: "6+6 ours")
    assert "8L (GPU A-T1-deep, deadline at the clock's step 200, 2026-11-28-h100-bbbbbbb)" in set(tidy["label"])


def test_three_converged_seeds_give_mean_sd_and_a_verdict(tmp_path):
    from headlab.studies import published
    from headlab.studies.effects import Judge
    from headlab.studies.paper_A import claims, outputs

    root = tmp_path / "published"
    rows = [dict(heads=heads, seed=seed, status="converged", bleu=bleu, bleu_ci_low=bleu - 1.5, bleu_ci_high=bleu + 1.5)
            for heads, base in (("8L", 34.0), ("7Ftoken+1L", 37.0), ("8Ftoken", 36.0))
            for seed, bleu in ((1, base), (2, base + 0.4), (3, base - 0.4))]
    folder = _sitting(root, "2026-12-01-h100-abc1234", rows)
    # hypotheses: 8L drops the last word of every other sentence, the fixed heads translate exactly
    ref = [f"a man number {index} rides a red bicycle down the long street" for index in range(120)]
    reference = tmp_path / "ref.txt"
    reference.write_text("\n".join(ref) + "\n")
    for heads in ("8L", "7Ftoken+1L", "8Ftoken"):
        for seed in (1, 2, 3):
            hyp = [" ".join(line.split()[:-1 - (index + seed) % 2]) if heads == "8L" else line
                   for index, line in enumerate(ref)]
            (folder / f"{heads}.seed{seed}.test_2016_flickr.txt").write_text("\n".join(hyp) + "\n")

    files = _files(tmp_path, root)
    inputs, build = outputs.t1(files)
    _fake_toy_inputs(inputs, root)
    table, _ = build()
    gpu = "DE-EN 8L (GPU A-T1-deep)"
    sd, runs = table.runs(gpu, "6+6 ours")
    assert table.values.loc[gpu, "6+6 ours"] == pytest.approx(34.0) and runs == 3 and sd == pytest.approx(0.4)
    # each seed's evaluated step (its best validation, 4,000 here) is in the label
    assert "seeds 1, 2, 3, converged ×3 at steps 4,000, 4,000, 4,000 (" in table.values.loc[gpu, "scale"]

    judge = Judge("paper_A", 200)
    scales = claims.judge_published(judge, files, published.read(str(root)), reference=str(reference))
    frame = judge.frame()
    assert len(frame) == 2 and all(scale.startswith("GPU base") for scale in scales.values())
    first = frame.iloc[0]
    assert first["compared"].startswith("7Ftoken+1L − 8L") and first["seeds"] == 3
    assert first["verdict"] == "holds" and first["interval"] == "seeds and test sentences"


def test_a_diverged_sitting_is_shown_but_not_averaged(tmp_path):
    from headlab.studies.paper_A import outputs

    root = tmp_path / "published"
    _sitting(root, "2026-12-01-h100-abc1234", [dict(heads="8L", seed=1, status="deadline", bleu=34.0,
                                                     bleu_ci_low=33, bleu_ci_high=35)])
    _sitting(root, "2026-12-02-h200-def5678", [dict(heads="8L", seed=2, status="diverged", bleu=18.0,
                                                     bleu_ci_low=17, bleu_ci_high=19)])
    files = _files(tmp_path, root)
    inputs, build = outputs.t1(files)
    _fake_toy_inputs(inputs, root)
    table, _ = build()
    values = table.values
    gpu = "DE-EN 8L (GPU A-T1-deep)"
    assert values.loc[gpu, "6+6 ours"] == 34.0 and table.runs(gpu, "6+6 ours")[1] == 1
    diverged = "DE-EN 8L (GPU A-T1-deep, diverged, 2026-12-02-h200-def5678)"
    assert values.loc[diverged, "6+6 ours"] == 18.0
    assert "not averaged" in values.loc[diverged, "scale"]


def test_a_run_without_an_interval_says_so_rather_than_nan(tmp_path):
    """A seed scored with BLEU but no bootstrap interval (the first sittings' rows may lack
    it), and a partial run with no BLEU at all: the scale names what is missing."""
    from headlab.studies.paper_A import outputs

    root = tmp_path / "published"
    _sitting(root, "2026-12-01-h100-abc1234", [dict(heads="8L", seed=1, status="converged", bleu=34.0),
                                               dict(heads="7Ftoken+1L", seed=1, status="partial")])
    files = _files(tmp_path, root)
    inputs, build = outputs.t1(files)
    _fake_toy_inputs(inputs, root)
    values = build()[0].values
    seed = values.loc["DE-EN 8L (GPU A-T1-deep)", "scale"]
    partial = values.loc["DE-EN 7Ftoken+1L (GPU A-T1-deep, partial, 2026-12-01-h100-abc1234)", "scale"]
    assert "nan" not in seed and seed.endswith("; no 95% interval (one seed, no bootstrap interval published)")
    assert "nan" not in partial and partial.endswith("; no 95% interval (no BLEU published)")


def test_a_slice_with_no_run_to_average_keeps_its_claims_not_judged_with_the_reason(tmp_path):
    """The sittings of 11-26 (diverged) and 11-27 (the clock's step) alone: the T1 rows show
    them, and the claims on the slice are rows 'not judged' saying why, not missing."""
    from headlab.studies.effects import NOT_JUDGED, UNJUDGED, Judge
    from headlab.studies.paper_A import claims

    root = tmp_path / "published"
    for sitting, status, best in (("2026-11-26-h200-e327191", "diverged", ""), ("2026-11-27-h100-65e2124",
                                                                               "deadline", "")):
        _sitting(root, sitting, [dict(heads=heads, seed=1, status=status, best_step=best, step=1000, bleu=30.0,
                                      bleu_ci_low=29, bleu_ci_high=31) for heads in ("8L", "7Ftoken+1L", "8Ftoken")])
    judge = Judge("paper_A", 200)
    reference = tmp_path / "ref.txt"
    reference.write_text("a line\n")
    scales = claims.judge_published(judge, _files(tmp_path, root), published_read(root), reference=str(reference))
    frame = judge.frame()
    assert len(frame) == 2 and (frame["verdict_adjusted"] == NOT_JUDGED).all()
    assert frame["claim"].str.startswith("§4.1").sum() == 1 and frame["claim"].str.startswith("§4.4").sum() == 1
    why = frame.set_index(frame["claim"].str[:4])["interval"]
    assert why["§4.1"] == (UNJUDGED + "7Ftoken+1L and 8L have no published run to average yet (published: "
                           "deadline at the clock's step, diverged)")
    assert set(scales.values()) == {"GPU base: A-T1-deep, seed 1, deadline, diverged"}

    # a later sitting: 8L and 7Ftoken+1L at their best checkpoints, 8Ftoken cut in its evaluation (partial):
    # §4.1 is judged (the seed pool of whole-test systems only), §4.4 not, naming what 8Ftoken has
    lines = [f"a dog number {index} runs across the wide green field" for index in range(60)]
    reference.write_text("\n".join(lines) + "\n")
    folder = _sitting(root, "2026-12-05-h100-ddddddd", [
        dict(heads=heads, seed=seed, status=status, bleu=30.0, bleu_ci_low=29, bleu_ci_high=31)
        for heads, status in (("8L", "converged"), ("7Ftoken+1L", "converged"), ("8Ftoken", "partial"))
        for seed in (2, 3)])
    for heads in ("8L", "7Ftoken+1L", "8Ftoken"):
        for seed in (2, 3):
            kept = lines[:15] if heads == "8Ftoken" else [" ".join(line.split()[seed:]) for line in lines]
            (folder / f"{heads}.seed{seed}.test_2016_flickr.txt").write_text("\n".join(kept) + "\n")
    judge = Judge("paper_A", 200)
    scales = claims.judge_published(judge, _files(tmp_path, root), published_read(root), reference=str(reference))
    frame = judge.frame().set_index(judge.frame()["claim"].str[:4])
    assert frame.loc["§4.1", "verdict"] != NOT_JUDGED and frame.loc["§4.1", "runs"] == "2/2"
    assert frame.loc["§4.4", "interval"] == (UNJUDGED + "8Ftoken has no published run to average yet (published: "
                                             "deadline at the clock's step, diverged, partial)")
    assert scales[frame.loc["§4.1", "compared"]] == "GPU base: A-T1-deep, seeds 2, 3, converged"


def published_read(root):
    from headlab.studies import published
    return published.read(str(root))


def test_a_slice_with_nothing_published_says_not_yet_run(tmp_path):
    from headlab.report.tables import to_csv, to_latex, to_markdown
    from headlab.studies import published
    from headlab.studies.paper_A import outputs

    root = tmp_path / "published"
    root.mkdir()
    files = _files(tmp_path, root)
    planned = {name: table for name, (study, table) in published.plan_slices().items() if study == "paper_A"}
    assert "A-T1-deep" in planned
    for builder, name in ((outputs.t1, "T1"), (outputs.t2, "T2")):
        inputs, build = builder(files)
        _fake_toy_inputs(inputs, root)
        table, _ = build()
        for slice_ in (slice_ for slice_, where in planned.items() if where == name):
            row = f"{slice_} (GPU)"
            assert table.values.loc[row, "scale"] == f"GPU base: {slice_}: not yet run"
            assert table.values.loc[row].drop("scale").isna().all()
        if name not in planned.values():
            assert "scale" not in table.values.columns     # no slice fills it: the table stays as it was
        for render in (to_csv, to_latex, to_markdown):   # a text column among the numbers renders
            assert ("not yet run" in render(table)) == (name in planned.values())
    # papers B, C and D: one row per slice of the plan, through the same extension of their tables
    import pandas as pd

    from headlab.studies.tables import beside, pivot
    tidy = pd.DataFrame({"row": ["multi30k de-en"] * 2, "column": ["T-base", "DHICM"], "seed": ["1", "1"],
                         "bleu": [30.0, 31.0]})
    toy = beside(pivot(tidy, index="row", columns="column", values="bleu", over="seed"),
                 pivot(tidy, index="row", columns="column", values="bleu"))
    for study, name, slice_ in (("paper_B", "T3", "B-base-dhicm"), ("paper_C", "T1", "C-core-base"),
                                ("paper_D", "T3", "D-gates-8L")):
        table, gpu = published.extend(toy, published.read(str(root)), study, name, label=lambda run: run["row"],
                                      column=lambda run: run["heads"])
        assert gpu.empty and table.values.loc[f"{slice_} (GPU)", "scale"] == f"GPU base: {slice_}: not yet run"
        assert "\\multicolumn{1}{c}{scale}" in to_latex(table) and "**31.00**" in to_markdown(table)


def test_a_rows_csv_without_a_column_is_one_clear_error_naming_the_file(tmp_path):
    from headlab.studies import published

    folder = _sitting(tmp_path, "2026-12-01-h100-abc1234", [dict(heads="8L", seed=1, status="converged", bleu=34,
                                                                  bleu_ci_low=33, bleu_ci_high=35)])
    rows = (folder / "rows.csv").read_text().splitlines()
    header = rows[0].split(",")
    drop = header.index("status")
    (folder / "rows.csv").write_text("\n".join(",".join(cell for index, cell in enumerate(line.split(","))
                                                         if index != drop) for line in rows) + "\n")
    with pytest.raises(DataError, match=rf"{folder / 'rows.csv'}.*status"):
        published.read(str(tmp_path))


@pytest.mark.parametrize("changed, message", [
    (dict(slice="C-core-base"), "2: [slice] slice 'C-core-base', where the folder's slice is 'A-T1-deep' "
                                "(<slice>/<sitting>/rows.csv holds that slice's and sitting's rows only)"),
    (dict(sitting="2026-12-09-h100-abcdef0"), "2: [sitting] sitting '2026-12-09-h100-abcdef0', where the folder's "
                                              "sitting is '2026-12-01-h100-abc1234' (<slice>/<sitting>/rows.csv holds "
                                              "that slice's and sitting's rows only)"),
    (dict(bleu="n/a"), "2: [bleu] bleu 'n/a' is not a number (a score is empty or a finite number, written with a "
                       "decimal point)"),
    (dict(bleu_ci_high="36,8"), "2: [bleu_ci_high] bleu_ci_high '36,8' is not a number (a score is empty or a "
                                "finite number, written with a decimal point)"),
    (dict(chrf="nan"), "2: [chrf] chrf 'nan' is not a number (a score is empty or a finite number, written with a "
                       "decimal point)"),
    (dict(bleu="", status="converged"), "2: [bleu] bleu is empty in a row of status converged, a seed of its model: "
                                        "a row not scored on the whole test set is partial"),
])
def test_a_row_of_another_folder_or_a_score_that_is_no_number_is_one_error_naming_the_line_and_column(
        tmp_path, changed, message):
    """Read as the tables read it (make run), not minutes later in the rendering: a row is of
    its folder's slice and sitting (the plan counts it by the folder, the tables by the
    column), a score is empty or a number, and a seed of its model has its BLEU."""
    from headlab.studies import published

    run = dict(heads="8L", seed=1, status="deadline", bleu=34, bleu_ci_low=33, bleu_ci_high=35)
    folder = _sitting(tmp_path, "2026-12-01-h100-abc1234", [dict(run, heads="8L", **changed)])
    with pytest.raises(DataError) as caught:
        published.read(str(tmp_path))
    assert str(caught.value) == f"{folder / 'rows.csv'}:{message}"
    # a row of status partial or diverged without BLEU is no seed: it is read
    (folder / "rows.csv").unlink()
    folder.rmdir()
    _sitting(tmp_path, "2026-12-01-h100-abc1234", [dict(run, bleu="", status="partial"),
                                                   dict(run, heads="8Ftoken", bleu="", status="diverged")])
    assert published.read(str(tmp_path))["bleu"].isna().all()


def _converged_tree(root, lines):
    """Three converged seeds of 8L, 7Ftoken+1L and 8Ftoken; 8L drops words, the others copy ``lines``."""
    rows = [dict(heads=heads, seed=seed, status="converged", bleu=bleu, bleu_ci_low=bleu - 1.5, bleu_ci_high=bleu + 1.5)
            for heads, base in (("8L", 34.0), ("7Ftoken+1L", 37.0), ("8Ftoken", 36.0))
            for seed, bleu in ((1, base), (2, base + 0.4), (3, base - 0.4))]
    folder = _sitting(root, "2026-12-01-h100-abc1234", rows)
    for heads in ("8L", "7Ftoken+1L", "8Ftoken"):
        for seed in (1, 2, 3):
            hyp = [" ".join(line.split()[:-1 - (index + seed) % 2]) if heads == "8L" else line
                   for index, line in enumerate(lines)]
            (folder / f"{heads}.seed{seed}.test_2016_flickr.txt").write_text("\n".join(hyp) + "\n")
    return folder


def test_paper_As_effects_judge_the_published_runs_in_one_family_with_a_scale_column(tmp_path):
    from headlab.studies.paper_A import claims

    root = tmp_path / "published"
    lines = [f"a woman number {index} walks a small dog along the quiet beach" for index in range(100)]
    _converged_tree(root, lines)
    study = {**STUDY, "seeds": [1, 2], "wsd_pair": "xx-yy"}    # no WSD models: their files are not faked here
    files = outputs_files(tmp_path, root, study)

    def fake(inputs, reference_lines):
        for file in inputs:
            if str(file).startswith(str(root)):
                continue
            Path(file).parent.mkdir(parents=True, exist_ok=True)
            if file.endswith("params.json"):
                Path(file).write_text(json.dumps({"params": 400_000 if "/8L/" in file else 390_000}))
            else:   # every toy translation and the reference: the same sentences
                Path(file).write_text("\n".join(reference_lines) + "\n")

    inputs, build = claims.effects(files)
    assert {str(file) for file in root.glob("*/*/*.seed*.txt")} <= set(inputs)
    fake(inputs, lines)
    frame = build()
    assert list(frame.columns[:4]) == ["study", "claim", "compared", "scale"]
    gpu = frame[frame["scale"] != "toy"]
    assert len(gpu) == 2 and (frame["scale"] == "toy").sum() >= 2
    assert gpu["scale"].str.startswith("GPU base: A-T1-deep, seeds 1, 2, 3, converged").all()
    tested = frame["p_value"].notna()
    assert gpu["p_adjusted"].notna().all() and tested.sum() > len(gpu)      # Holm over toy and GPU claims at once

    fake(inputs, lines[:20])     # a shortened test set (test_limit): the published runs cannot be judged on it
    frame = build()
    gpu = frame[frame["scale"] != "toy"]   # ... and their claims say so, beside the table's GPU rows
    assert len(gpu) == 2 and (gpu["verdict_adjusted"] == "not judged").all() and gpu["p_value"].isna().all()
    assert gpu["interval"].str.endswith("the published hypotheses have 100 lines, this workflow's test_2016_flickr "
                                        "reference 20 (test_limit shortens it)").all()
    assert gpu["scale"].str.startswith("GPU base: A-T1-deep, seeds 1, 2, 3, converged").all()


def outputs_files(tmp_path, published, study):
    from headlab.studies.paper_A import outputs
    return outputs.Files(CONFIG, study, str(tmp_path / "results"), published=str(published))


def test_a_published_row_of_paper_Bs_table_3_lands_in_its_table_and_tidy_rows(tmp_path):
    import pandas as pd

    from headlab.report.tables import to_markdown
    from headlab.studies import published
    from headlab.studies.tables import beside, pivot

    root = tmp_path / "published"
    # the plan's rows: the system is the row, its head spec the heads (paper B's wiring:
    # tests/test_published_slices.py renders the slice through the study's own Table 3)
    _sitting(root, "2026-12-03-h100-abc1234", [dict(heads=heads, seed=1, status="converged", bleu=bleu, bleu_ci_low=bleu - 1,
                                                     bleu_ci_high=bleu + 1, study="paper_B", table="T3", row=system)
                                                for system, heads, bleu in (("T-base", "8L", 35.0),
                                                                            ("DHICM", "*8L.8L~dhicm", 36.0))],
             slice_="B-base-dhicm")
    ours = pd.DataFrame({"row": ["multi30k de-en"] * 2, "column": ["T-base", "DHICM"], "seed": ["1", "1"],
                         "bleu": [30.0, 31.0]})
    toy = beside(pivot(ours, index="row", columns="column", values="bleu"), pivot(ours, index="row", columns="column",
                                                                                  values="bleu"))
    table, gpu = published.extend(toy, published.read(str(root)), "paper_B", "T3",
                                  label=lambda run: published.corpus_pair(run, CONFIG["corpora"]),
                                  column=lambda run: run["row"])
    row = "multi30k de-en (GPU B-base-dhicm)"
    assert table.values.loc[row, "DHICM ours"] == 36.0 and table.values.loc[row, "T-base ours"] == 35.0
    assert "B-base-dhicm (GPU)" not in table.values.index          # published: no "not yet run" row
    tidy = published.tidy(ours, gpu)
    assert list(tidy["scale"].str[:3]) == ["toy", "toy", "GPU", "GPU"] and set(tidy["column"]) == {"T-base", "DHICM"}
    assert ("| multi30k de-en (GPU B-base-dhicm) | GPU base: B-base-dhicm; T-base: seed 1, converged at step 4,000 "
            "(2026-12-03-h100-abc1234); 95% interval [34.00, 36.00] / DHICM: seed 1, converged") in to_markdown(table)
    assert "B-base-dhicm: 2026-12-03-h100-abc1234 (converged)" in published.summary(published.read(str(root)), "paper_B")
    # the slice's figure of every sitting, where there is one
    (root / "B-base-dhicm" / "learning_curves.png").write_bytes(b"png")
    assert (f"B-base-dhicm: 2026-12-03-h100-abc1234 (converged); curves: {root}/B-base-dhicm/learning_curves.png"
            in published.summary(published.read(str(root)), "paper_B"))


def test_paper_Ds_chain_rows_share_their_parents_heads_and_each_keeps_its_row(tmp_path):
    """D-gates-8L publishes the parent 8L and its three fine-tunes, all of heads 8L: each
    is a row of paper D's Table 3 of its own, never one seed of another."""
    import pandas as pd

    from headlab.studies import published
    from headlab.studies.paper_D.outputs import T3_ROWS
    from headlab.studies.tables import beside, pivot

    root = tmp_path / "published"
    rows = {"Baseline (converged)": 30.0, "Pruned (converged)": 29.0, "Non-inverted (fine-tuned)": 29.5,
            "Baseline (fine-tuned, no pruning)": 30.5}
    _sitting(root, "2026-12-04-h100-abc1234", [dict(heads="8L", seed=1, status="deadline", bleu=bleu,
                                                     bleu_ci_low=bleu - 1, bleu_ci_high=bleu + 1, study="paper_D",
                                                     table="T3", row=row, pair="en-de")
                                                for row, bleu in rows.items()], slice_="D-gates-8L")
    ours = pd.DataFrame({"row": list(T3_ROWS), "column": ["BLEU"] * len(T3_ROWS), "seed": ["1"] * len(T3_ROWS),
                         "bleu": [20.0] * len(T3_ROWS)})
    toy = beside(pivot(ours, index="row", columns="column", values="bleu"),
                 pivot(ours, index="row", columns="column", values="bleu"))
    table, gpu = published.extend(toy, published.read(str(root)), "paper_D", "T3", label=lambda run: run["row"],
                                  column=lambda run: "BLEU")
    for row, bleu in rows.items():
        assert table.values.loc[f"{row} (GPU D-gates-8L)", "BLEU ours"] == bleu
    assert len(gpu) == 4 and "D-gates-8L (GPU)" not in table.values.index


def test_the_slices_read_without_the_plan_are_the_shipped_plans(tmp_path):
    """Where the plan cannot be read (a workflow run from another folder) the tables fall
    back on a copy of its slices: that copy is the shipped plan's, study and table."""
    from headlab.studies import published

    assert published.plan_slices(str(tmp_path / "no-plan.yaml")) == published.SLICES == published.plan_slices()


H100_SITTING = "2026-11-27-h100-65e2124"
RETURNED = REPO.parent / "shared" / "gpu-sittings" / H100_SITTING
needs_the_returned_tarballs = pytest.mark.skipif(not (RETURNED / "sitting.tar.gz").is_file(),
                                                 reason=f"the returned tarballs are not in {RETURNED}")


def _import_h100(dest, sitting=RETURNED / "sitting.tar.gz"):
    from headlab.studies import published
    published.import_tarball(str(sitting), str(dest), str(RETURNED / "remainder.tar.gz"),
                             tuple(str(RETURNED / name) for name in ("README.md", "status-sitting.json",
                                                                     "status-remainder.json")))


@needs_the_returned_tarballs
def test_the_h100_sittings_returned_tarballs_import_as_its_shipped_folder(tmp_path):
    """The importer, run again on what the 2026-11-27 sitting returned, writes the shipped
    folder byte for byte: the tables, scores, provenance with its slice and lacks, rows.csv,
    the learning curves read from the training logs, the CUDA suite's report. The shipped
    folder only adds what was written later (the speed rows, the figure, a README paragraph,
    each model's recipe: rows.csv's last column and the provenance's, rebuilt from its commit)."""
    import csv
    import io
    import json

    shipped = SHIPPED / "A-T1-deep" / H100_SITTING
    _import_h100(tmp_path / H100_SITTING)
    imported = {file.name: file.read_bytes() for file in (tmp_path / H100_SITTING).iterdir()}
    assert sorted(set(path.name for path in shipped.iterdir()) - set(imported)) == [
        "learning_curves.png", "throughput.csv"]
    readme = imported.pop("README.md")
    assert (shipped / "README.md").read_bytes().startswith(readme)
    rows = list(csv.DictReader(io.StringIO((shipped / "rows.csv").read_text())))
    assert [row.pop("recipe") for row in rows] == ["91d3958c474b", "00b6b0eae6ad", "aace73d80050"]
    assert rows == list(csv.DictReader(io.StringIO(imported.pop("rows.csv").decode())))
    provenance = json.loads((shipped / "provenance.json").read_text())
    assert "rebuilt at 65e2124" in provenance.pop("recipe_rebuilt")
    assert {model.pop("recipe")["learning_rate"] for model in provenance["models"].values()} == {1.0}
    assert provenance == json.loads(imported.pop("provenance.json"))
    assert {name: (shipped / name).read_bytes() for name in imported} == imported
    assert b"8L,6+6,seed1,1000,34.2602,32.8235,35.6409" in imported["T1_deep.csv"]


@needs_the_returned_tarballs
def test_a_returned_tarball_changed_where_only_gzips_crc_sees_it_is_not_imported(tmp_path):
    """The returned tarball with 8L's BLEU changed from 34.26 to 32.26 inside a stored
    (uncompressed) deflate block: tarfile reads the changed table without an error, and only
    gzip's CRC-32 in the trailer tells. The importer reads to the trailer, names the tarball in
    one line, and makes no folder."""
    import gzip
    import tarfile
    import zlib

    tar = gzip.decompress((RETURNED / "sitting.tar.gz").read_bytes())
    stored = bytearray(gzip.compress(tar, compresslevel=0, mtime=0))
    stored[stored.index(b"8L,6+6,seed1,1000,34.2602") + len("8L,6+6,seed1,1000,3")] ^= 0b110   # '4' -> '2'
    changed = tmp_path / "sitting.tar.gz"
    changed.write_bytes(bytes(stored))
    with tarfile.open(changed) as copy:
        assert b"1000,32.2602" in copy.extractfile("./results/published/gpu-sitting/T1_deep.csv").read()
    unpacked = bytearray(tar)
    unpacked[unpacked.index(b"1000,34.2602") + len("1000,3")] ^= 0b110
    with pytest.raises(DataError) as caught:
        _import_h100(tmp_path / H100_SITTING, sitting=changed)
    assert str(caught.value) == (f"{changed}: cannot import this sitting: damaged gz data: CRC check failed "
                                 f"{hex(zlib.crc32(tar))} != {hex(zlib.crc32(unpacked))}")
    assert not (tmp_path / H100_SITTING).exists()


def test_the_importer_says_in_one_line_which_first_sitting_it_cannot_find(tmp_path, capsys):
    from headlab.studies import published
    root, shared = tmp_path / "published", tmp_path / "gpu-sittings"
    assert published.main(["--root", str(root), "--shared", str(shared)]) == 1
    sitting = next(iter(published.FIRST_SITTINGS))
    assert capsys.readouterr().err == (
        f"python -m headlab.studies.published: sitting {sitting}: neither {root}/A-T1-deep/{sitting}/T1_deep.csv "
        f"nor {shared}/{sitting}/sitting.tar.gz\n")
    assert not root.exists()


def test_a_seed_trained_by_an_earlier_recipe_is_shown_apart_and_never_averaged_or_judged(tmp_path):
    """Seeds 1-2 of each model by one recipe, seed 3 by another (a session changed what
    trains the slice between the sittings): the row averages seed 3 alone, seeds 1-2 have rows
    of their own saying so, and the claims test seed 3 only. A rows.csv without the column
    (a run with no recipe recorded) is never told apart."""
    from headlab.studies import published
    from headlab.studies.effects import Judge
    from headlab.studies.paper_A import claims, outputs

    root = tmp_path / "published"
    ref = [f"a child number {index} throws a blue ball over the wooden fence" for index in range(120)]
    reference = tmp_path / "ref.txt"
    reference.write_text("\n".join(ref) + "\n")
    for sitting, seeds, made_by in (("2026-11-27-h100-aaaaaaa", (1, 2), "1111aaaa2222"),
                                    ("2026-11-29-h100-ccccccc", (3,), "3333cccc4444")):
        rows = [dict(heads=heads, seed=seed, status="deadline", best_step=2200, step=2800, recipe=made_by,
                     bleu=base + seed, bleu_ci_low=base + seed - 1.5, bleu_ci_high=base + seed + 1.5)
                for seed in seeds for heads, base in (("8L", 30.0), ("7Ftoken+1L", 33.0), ("8Ftoken", 32.0))]
        folder = _sitting(root, sitting, rows, columns=[*COLUMNS, "recipe"])
        for seed in seeds:
            _hypotheses(folder, ref, seed)
    frame = published.read(str(root))
    assert list(published.earlier_recipe(frame)) == [True] * 6 + [False] * 3
    assert sorted(set(published.seeds_of(frame)["seed"])) == ["3"]
    unrecorded = frame.assign(recipe=[""] * 3 + list(frame["recipe"][3:]))        # seed 1's
    assert list(published.earlier_recipe(unrecorded)) == [False] * 3 + [True] * 3 + [False] * 3
    assert not published.earlier_recipe(frame.assign(recipe="")).any()

    files = _files(tmp_path, root)
    inputs, build = outputs.t1(files)
    _fake_toy_inputs(inputs, root)
    table, _ = build()
    values = table.values
    assert values.loc["DE-EN 8L (GPU A-T1-deep)", "6+6 ours"] == pytest.approx(33.0)
    assert table.runs("DE-EN 8L (GPU A-T1-deep)", "6+6 ours")[1] == 1
    for seed in (1, 2):
        apart = f"DE-EN 8L (GPU A-T1-deep, deadline, an earlier recipe, seed {seed}, 2026-11-27-h100-aaaaaaa)"
        assert values.loc[apart, "6+6 ours"] == pytest.approx(30.0 + seed)
        assert values.loc[apart, "scale"].startswith(
            f"GPU base: A-T1-deep, seed {seed}, deadline, an earlier recipe, not averaged "
            f"(2026-11-27-h100-aaaaaaa: trained otherwise than the newest sitting's run); 95% interval")
    judge = Judge("paper_A", 200)
    claims.judge_published(judge, files, frame, reference=str(reference))
    assert set(judge.frame()["seeds"]) == {1}
