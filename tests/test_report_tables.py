"""Table renderers: exact Markdown / LaTeX / CSV for a 2x2 case; paper-beside; CLI."""
from __future__ import annotations

import pandas as pd
import pytest

from headlab.errors import DataError
from headlab.report.tables import main, to_csv, to_latex, to_markdown
from headlab.studies.tables import beside, pivot

TIDY = pd.DataFrame({"system": ["8L", "8L", "7F", "7F"], "config": ["6+1", "6+6", "6+1", "6+6"],
                     "bleu": [29.31, 30.99, 28.61, 31.2], "significantly_lower": [False, False, True, False]})


def _table(**kw):
    return pivot(TIDY, index="system", columns="config", values="bleu", mark="significantly_lower", **kw)


def test_markdown_exact():
    assert to_markdown(_table()) == (
        "| system | 6+1 | 6+6 |\n"
        "|:--|--:|--:|\n"
        "| 8L | **29.31** | 30.99 |\n"
        "| 7F | 28.61\\* | **31.20** |\n")


def test_latex_exact():
    assert to_latex(_table()) == (
        "\\begin{tabular}{lrr}\n"
        "\\toprule\n"
        "system & 6+1 & 6+6 \\\\\n"
        "\\midrule\n"
        "8L & \\textbf{29.31} & 30.99 \\\\\n"
        "7F & 28.61$^{*}$ & \\textbf{31.20} \\\\\n"
        "\\bottomrule\n"
        "\\end{tabular}\n")


def test_latex_caption_escape_and_no_bold():
    tex = to_latex(_table(best=None, caption="BLEU & 100%", label="tab:bleu"))
    assert "\\textbf" not in tex
    assert tex.startswith("\\begin{table}[t]\n\\centering\n\\begin{tabular}")
    assert "\\caption{BLEU \\& 100\\%}\n\\label{tab:bleu}\n\\end{table}\n" in tex


def test_csv():
    assert to_csv(_table()) == "system,6+1,6+1 mark,6+6\n8L,29.31,,30.99\n7F,28.61,*,31.2\n"


def test_paper_beside():
    paper = pivot(TIDY.assign(bleu=[29.31, 30.99, 28.61, 30.61]), index="system", columns="config",
                  values="bleu", mark="significantly_lower")
    both = beside(_table(), paper)
    assert to_markdown(both).splitlines()[0] == "| system | 6+1 ours | 6+1 paper | 6+6 ours | 6+6 paper |"
    tex = to_latex(both)
    assert "system & \\multicolumn{2}{c}{6+1} & \\multicolumn{2}{c}{6+6} \\\\\n" in tex
    assert "\\cmidrule(lr){2-3} \\cmidrule(lr){4-5}\n & ours & paper & ours & paper \\\\\n" in tex
    assert "7F & 28.61$^{*}$ & 28.61$^{*}$ & \\textbf{31.20} & 30.61 \\\\\n" in tex


def test_column_decimals_survive_beside():
    ours = _table(best=None)
    ours.column_decimals["6+6"] = 3
    both = beside(ours, pivot(TIDY, index="system", columns="config", values="bleu", best=None))
    assert to_markdown(both).splitlines()[2] == "| 8L | 29.31 | 29.31 | 30.990 | 30.99 |"
    assert to_csv(pivot(TIDY.assign(bleu=[1.23456] * 4), index="system", columns="config", values="bleu",
                        column_decimals={"6+1": 4})).splitlines()[1] == "8L,1.2346,1.23"


def test_integer_hyper_parameters_print_as_integers():
    # issue 24 item 7: paper B's T2 printed heads and feed-forward size as 8.00 / 2048.00
    hyper = pd.DataFrame({"row": ["Attention heads", "Attention heads", "Feed forward dim.", "Feed forward dim.",
                                  "Dropout", "Dropout"], "column": ["Default", "de-en"] * 3,
                          "value": [8, 4, 2048, 1024, 0.1, 0.3]})
    table = beside(pivot(hyper, index="row", columns="column", values="value", best=None),
                   pivot(hyper.assign(value=[8, 16, 2048, 4096, 0.1, 0.1]), index="row", columns="column",
                         values="value", best=None)).integer_rows()
    assert to_markdown(table).splitlines()[2:] == [
        "| Attention heads | 8 | 8 | 4 | 16 |",
        "| Feed forward dim. | 2048 | 2048 | 1024 | 4096 |",
        "| Dropout | 0.10 | 0.10 | 0.30 | 0.10 |"]
    assert "Attention heads & 8 & 8 & 4 & 16 \\\\" in to_latex(table)
    # a row with one fractional value keeps the decimals; paper B's T2 asks for integers
    assert pivot(hyper.assign(value=[8, 4.5, 2048, 1024, 0.1, 0.3]), index="row", columns="column",
                 values="value").integer_rows().row_decimals == {"Feed forward dim.": 0}



def test_paper_b_t2_prints_heads_and_ffn_as_integers(tmp_path):
    import json
    from headlab.studies.common import stage_file
    from headlab.studies.paper_B import grid, outputs
    study = {"data": {"multi30k": ["de-en"]}, "layers": "1+1", "preset": "mini_paper_B",
             "grid": {"stage1": {"heads": [4, 8]}, "stage2": {"dropout": [0.0, 0.1]}}}
    files = outputs.Files({"corpora": {}}, study, str(tmp_path))
    for stage in grid.STAGES:
        path = tmp_path / stage_file(str(tmp_path), grid.OUTDIR, "multi30k", "de-en", stage)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"chosen": {"heads": 4, "transformer_ff": 512, "dropout": [0.3]}}))
    _, build = outputs.t2(files)
    table, _ = build()
    lines = to_markdown(table).splitlines()
    assert any(line.startswith("| Attention heads | 8 | ") and "| 4 |" in line for line in lines), lines
    assert any(line.startswith("| Feed forward dim. | ") and "| 512 |" in line for line in lines), lines
    assert any(line.startswith("| Dropout | ") and "| 0.30 |" in line for line in lines), lines


def test_duplicate_cells_are_an_error():
    with pytest.raises(DataError, match="two values"):
        pivot(pd.concat([TIDY, TIDY.iloc[:1]]), index="system", columns="config", values="bleu")
    with pytest.raises(DataError, match="no column 'score'"):
        pivot(TIDY, index="system", columns="config", values="score")


def test_cli_writes_three_files(tmp_path):
    TIDY.to_csv(tmp_path / "r.csv", index=False)
    TIDY.assign(bleu=[29.0, 31.0, 28.0, 30.0]).to_csv(tmp_path / "p.csv", index=False)
    prefix = str(tmp_path / "out" / "table1")
    assert main(["--in", str(tmp_path / "r.csv"), "--index", "system", "--columns", "config", "--values", "bleu",
                 "--mark", "significantly_lower", "--paper", str(tmp_path / "p.csv"), "--best", "none",
                 "--row-order", "8L,7F", "--out-prefix", prefix]) == 0
    for suffix in (".csv", ".md", ".tex"):
        assert (tmp_path / "out" / f"table1{suffix}").exists()
    assert "28.61\\* | 28.00\\*" in (tmp_path / "out" / "table1.md").read_text()
    with pytest.raises(DataError, match="no rows left"):
        main(["--in", str(tmp_path / "r.csv"), "--index", "system", "--columns", "config", "--values", "bleu",
              "--where", "system == 'none'", "--out-prefix", str(tmp_path / "x")])
    assert not list(tmp_path.glob("x.*"))


def test_cli_refuses_what_would_render_a_wrong_table_silently(tmp_path, capsys):
    """A misspelt column was a pandas traceback (--index, --columns) or ignored (--mark: no
    marks at all); a word among the values became an empty cell; negative decimals a
    traceback from the formatter. Each is one line now, and nothing is written (an empty
    cell, or pandas' NA words such as n/a, stays a run not there)."""
    TIDY.to_csv(tmp_path / "r.csv", index=False)
    TIDY.assign(bleu=["29.31", "30.99", "pending", "31.2"]).to_csv(tmp_path / "words.csv", index=False)
    TIDY.drop(columns="significantly_lower").to_csv(tmp_path / "paper.csv", index=False)
    named = ["--index", "system", "--columns", "config", "--values", "bleu"]

    def table(inputs, *options):
        return main([part for path in inputs for part in ("--in", str(tmp_path / path))] + list(options)
                    + ["--out-prefix", str(tmp_path / "t")])

    for option, wrong in (("--index", "sytem"), ("--columns", "cfg"), ("--values", "blue"), ("--mark", "sig")):
        options = dict(zip(named[::2], named[1::2])) | {option: wrong}
        with pytest.raises(DataError) as caught:
            table(["r.csv"], *[part for pair in options.items() for part in pair])
        assert str(caught.value) == (f"{option} {wrong!r}: no such column in {tmp_path / 'r.csv'} "
                                     f"(have ['system', 'config', 'bleu', 'significantly_lower'])")
    with pytest.raises(DataError) as caught:
        table(["words.csv"], *named)
    assert str(caught.value) == f"--values 'bleu': 'pending' (row '7F', column '6+1') in {tmp_path / 'words.csv'} is no number"
    with pytest.raises(SystemExit):
        table(["r.csv"], *named, "--decimals", "-1")
    assert capsys.readouterr().err.splitlines()[-1] == "headlab table: error: argument --decimals: -1: must be at least 0"
    assert not list(tmp_path.glob("t.*"))
    # the paper's numbers without a significance column: our marks, none on its side
    assert table(["r.csv"], *named, "--mark", "significantly_lower", "--paper", str(tmp_path / "paper.csv")) == 0
    assert "28.61\\* | 28.61 |" in (tmp_path / "t.md").read_text()


def test_json_inputs_as_rows(tmp_path):
    """`headlab bleu --system S --tag config=C` JSON files pivot straight into Table 1."""
    import json

    paths = []
    for i, row in TIDY.iterrows():
        path = tmp_path / f"{i}.json"
        path.write_text(json.dumps({"system": row.system, "config": row.config, "bleu": row.bleu,
                                    "signature": "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"}))
        paths += ["--in", str(path)]
    assert main(paths + ["--index", "system", "--columns", "config", "--values", "bleu",
                         "--out-prefix", str(tmp_path / "t")]) == 0
    assert (tmp_path / "t.md").read_text() == to_markdown(pivot(TIDY, index="system", columns="config", values="bleu"))


def test_text_marks_are_kept_and_boolean_words_are_not():
    """Paper B/C significance marks are text (⇑ p < 0.01, ↑ p < 0.05): the text is the mark;
    booleans (and their CSV spellings) still give the configured symbol or nothing."""
    tidy = pd.DataFrame({"system": ["a", "b", "c", "d"], "config": ["x"] * 4, "bleu": [1.0, 2.0, 3.0, 4.0],
                         "mark": ["⇑", "↑", "", "False"]})
    table = pivot(tidy, index="system", columns="config", values="bleu", mark="mark")
    assert list(table.marks["x"]) == ["⇑", "↑", "", ""]
    flags = pivot(tidy.assign(mark=[True, False, "true", "no"]), index="system", columns="config",
                  values="bleu", mark="mark")
    assert list(flags.marks["x"]) == ["*", "", "*", ""]


def test_runs_of_several_seeds_render_mean_sd_and_n():
    """over="seed": a cell of runs 10, 12, 14 is 12.00 ± 2.00 (n=3); a one-run cell its number."""
    tidy = pd.DataFrame({"system": ["8L"] * 3 + ["1L"], "layers": ["2+2"] * 4, "seed": [1, 2, 3, 1],
                         "bleu": [10.0, 12.0, 14.0, 9.5], "low": [False, False, False, True]})
    table = pivot(tidy, index="system", columns="layers", values="bleu", over="seed", mark="low", best=None)
    assert table.values.loc["8L", "2+2"] == 12.0 and table.runs("8L", "2+2") == (2.0, 3)
    assert table.runs("1L", "2+2")[1] == 1
    assert to_markdown(table).splitlines()[2:] == ["| 8L | 12.00 ± 2.00 (n=3) |", "| 1L | 9.50\\* |"]
    assert r"12.00 $\pm$ 2.00 (n=3) \\" in to_latex(table)
    assert to_csv(table).splitlines() == ["system,2+2,2+2 sd,2+2 n,2+2 mark", "8L,12.0,2.0,3,", "1L,9.5,,1,*"]
    both = beside(table, pivot(tidy.assign(bleu=30.0).iloc[:1], index="system", columns="layers", values="bleu",
                               best=None))
    assert both.runs("8L", "2+2 ours") == (2.0, 3) and both.runs("8L", "2+2 paper")[1] == 1
    assert "12.00 ± 2.00 (n=3) | 30.00 |" in to_markdown(both)
    with pytest.raises(DataError, match="two values"):
        pivot(pd.concat([tidy, tidy.iloc[:1]]), index="system", columns="layers", values="bleu", over="seed")
    single = pivot(tidy[tidy["seed"] == 1], index="system", columns="layers", values="bleu", over="seed")
    assert single.count is None and "±" not in to_markdown(single)


def test_a_text_column_is_left_aligned_and_never_bold():
    table = _table()
    table.values.insert(0, "scale", ["toy", "GPU base"])
    table.marks.insert(0, "scale", "")
    assert to_markdown(table).splitlines()[1:3] == ["|:--|:--|--:|--:|", "| 8L | toy | **29.31** | 30.99 |"]
    assert "scale" in to_csv(table).splitlines()[0] and "\\textbf{toy}" not in to_latex(table)


def test_an_order_that_leaves_out_a_row_or_column_of_the_results_is_refused():
    """An order was the table's rows exactly: a row it did not list vanished from the table."""
    with pytest.raises(DataError) as caught:
        _table(row_order=["8L"])
    assert str(caught.value) == "--row-order lacks ['7F'], which the results have"
    with pytest.raises(DataError) as caught:
        _table(col_order=["6+6"])
    assert str(caught.value) == "--col-order lacks ['6+1'], which the results have"


def test_an_order_naming_a_row_the_results_lack_keeps_it_empty_for_the_studies():
    """Paper D's Table 3 lists a row the paper has not ('Baseline (fine-tuned, no pruning)'):
    its side of the table keeps the row, empty."""
    table = _table(row_order=["8L", "7F", "1L"])
    assert list(table.values.index) == ["8L", "7F", "1L"] and table.values.loc["1L"].isna().all()


def test_cli_refuses_an_order_naming_what_neither_the_results_nor_the_paper_have(tmp_path):
    """A misspelt label in --row-order / --col-order was an empty row or column; a label the
    paper alone has is the paper's row, empty on our side."""
    TIDY.to_csv(tmp_path / "r.csv", index=False)
    pd.concat([TIDY, TIDY.iloc[:2].assign(system="1L")]).to_csv(tmp_path / "p.csv", index=False)
    named = ["--in", str(tmp_path / "r.csv"), "--index", "system", "--columns", "config", "--values", "bleu",
             "--out-prefix", str(tmp_path / "t")]
    with pytest.raises(DataError) as caught:
        main(named + ["--row-order", "8L,7F,8l"])
    assert str(caught.value) == f"--row-order names ['8l'], which {tmp_path / 'r.csv'} lacks"
    with pytest.raises(DataError) as caught:
        main(named + ["--col-order", "6+1,6+6,6+2", "--paper", str(tmp_path / "p.csv")])
    assert str(caught.value) == f"--col-order names ['6+2'], which {tmp_path / 'r.csv'} and {tmp_path / 'p.csv'} lack"
    with pytest.raises(DataError) as caught:
        main(named + ["--row-order", "8L,7F", "--paper", str(tmp_path / "p.csv")])
    assert str(caught.value) == f"--row-order lacks ['1L'], which {tmp_path / 'p.csv'} has"
    assert not list(tmp_path.glob("t.*"))
    assert main(named + ["--row-order", "8L,7F,1L", "--paper", str(tmp_path / "p.csv"), "--best", "none"]) == 0
    assert "| 1L |  | 29.31 |  | 30.99 |" in (tmp_path / "t.md").read_text()


def test_cli_scale_multiplies_our_results_not_the_papers_numbers(tmp_path):
    """--scale 100: our 0.781 is 78.10; the paper's 79.5 is as the paper prints it, not 7950."""
    TIDY.assign(bleu=[0.781, 0.8, 0.7, 0.75]).to_csv(tmp_path / "r.csv", index=False)
    TIDY.assign(bleu=[79.5, 80.0, 70.0, 75.0]).to_csv(tmp_path / "p.csv", index=False)
    assert main(["--in", str(tmp_path / "r.csv"), "--paper", str(tmp_path / "p.csv"), "--index", "system",
                 "--columns", "config", "--values", "bleu", "--scale", "100", "--best", "none",
                 "--out-prefix", str(tmp_path / "t")]) == 0
    assert "| 8L | 78.10 | 79.50 | 80.00 | 80.00 |" in (tmp_path / "t.md").read_text()
