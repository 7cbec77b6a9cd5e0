"""Tables rendered: CSV + Markdown + LaTeX (booktabs), written atomically.

Renders a :class:`headlab.studies.tables.Table` (a grid of numbers with significance marks
per cell and the best value per column in bold; studies build them, this module writes
them). A cell of several runs (seeds) is ``mean ± sd (n=N)`` in Markdown and LaTeX; the
CSV has the mean and, beside the column, ``<column> sd`` and ``<column> n``. A symbol mark
stands against its number (``28.61*``, a superscript in LaTeX), a word mark follows it in
brackets (``28.61 (n/a)``: a significance not judged). As a command it also builds one from tidy result CSVs:

    headlab table --in results.csv [--in more.csv] --index system --columns config --values bleu
        [--where "suite == 'x'"] [--mark significantly_lower] [--best max|min|none]
        [--decimals 2] [--paper paper.csv] [--row-order A,B] [--col-order X,Y]
        [--caption TEXT] [--label tab:x] --out-prefix results/tables/table1

writes ``table1.csv``, ``table1.md`` and ``table1.tex``. Inputs may be CSVs or JSON
files (``headlab bleu`` outputs, one row each). ``--mark COL``: a boolean
column of the tidy CSV; true cells get ``--mark-symbol`` (default ``*``). ``--paper``:
a tidy CSV with the same index/columns/values columns, and the mark column where it has
one (a paper's numbers seldom come with our significance test). A column these options
name that the results lack is an error naming it and the columns there are.
``--row-order`` / ``--col-order`` list every row / column of the results (one left out is
an error, not a row dropped); a label that neither the results nor ``--paper`` have is an
error too, and one the paper alone has is its row, empty on our side. ``--scale``
multiplies our values alone: the paper's numbers are as the paper prints them.
"""
from __future__ import annotations

import argparse
import math

from headlab.errors import DataError
from headlab.io import atomic_write
from headlab.options import bounded
from headlab.studies.tables import OURS, PAPER, Table, beside, pivot  # noqa: F401  (the table CLI builds them too)


def _best_cells(table: Table) -> set[tuple]:
    out = set()
    if table.bold is not None:
        out.update((row, col) for col in table.bold.columns for row, flag in table.bold[col].items() if flag)
    if table.best not in ("max", "min"):
        return out
    for col in table.values.columns:
        if _text_column(table, col):
            continue        # labels (the scale of a row: toy or GPU) are never the best
        # compare the printed values, so that ties on screen are both bold
        column = table.values[col].dropna().round(table.places(col))
        if column.empty:
            continue
        target = column.max() if table.best == "max" else column.min()
        out.update((row, col) for row, v in column.items() if v == target)
    return out


def _text_column(table: Table, col) -> bool:
    """A column of labels: every cell it fills is text."""
    cells = table.values[col].dropna()
    return len(cells) > 0 and all(isinstance(cell, str) for cell in cells)


def _number(table: Table, row, col) -> str | None:
    v = table.values.loc[row, col]
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, str):              # a label cell (paper D Table 1's "Head": "2-4")
        return v
    return f"{v:.{table.places(col, row)}f}"


def _runs(table: Table, row, col, latex: bool = False) -> str:
    """`` ± sd (n=N)`` of a cell of two or more runs, else nothing."""
    sd, runs = table.runs(row, col)
    if runs < 2:
        return ""
    pm = r" $\pm$ " if latex else " ± "
    return f"{pm}{sd:.{table.places(col)}f} (n={runs})"


def _is_word(mark: str) -> bool:
    """A mark in letters (``n/a``: a significance not judged) reads as words, in brackets
    after the number; a symbol (``*``, ``⇑``) stands against it."""
    return mark[:1].isalpha()


def to_markdown(table: Table) -> str:
    best = _best_cells(table)
    head = [table.index_name] + [str(c) for c in table.values.columns]
    align = "".join(":--|" if _text_column(table, col) else "--:|" for col in table.values.columns)
    lines = ["| " + " | ".join(head) + " |", "|:--|" + align]
    for row in table.values.index:
        cells = [str(row)]
        for col in table.values.columns:
            text = _number(table, row, col)
            if text is None:
                cells.append("")
                continue
            if (row, col) in best:
                text = f"**{text}**"
            mark = table.mark(row, col)
            mark = f" ({mark})" if _is_word(mark) else mark
            cells.append(text + "".join("\\" + ch if ch in "*_" else ch for ch in mark) + _runs(table, row, col))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


_LATEX_SPECIAL = {"&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}",
                  "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "\\": r"\textbackslash{}"}


def latex_escape(text) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in str(text))


def to_latex(table: Table) -> str:
    best = _best_cells(table)
    cols = list(table.values.columns)
    lines = [r"\begin{tabular}{l" + "r" * len(cols) + "}", r"\toprule"]
    if table.groups:
        top, rules, start = [latex_escape(table.index_name)], [], 2
        i = 0
        while i < len(cols):
            group = table.groups[i][0]
            end = next((k for k in range(i, len(cols)) if table.groups[k][0] != group), len(cols))
            span = end - i
            top.append(rf"\multicolumn{{{span}}}{{c}}{{{latex_escape(group)}}}")
            rules.append(rf"\cmidrule(lr){{{start + i}-{start + i + span - 1}}}")
            i += span
        lines.append(" & ".join(top) + r" \\")
        lines.append(" ".join(rules))
        lines.append(" & ".join([""] + [latex_escape(sub) for _, sub in table.groups]) + r" \\")
    else:
        lines.append(" & ".join([latex_escape(table.index_name)] + [latex_escape(c) for c in cols]) + r" \\")
    lines.append(r"\midrule")
    for row in table.values.index:
        cells = [latex_escape(row)]
        for col in cols:
            text = _number(table, row, col)
            if text is None:
                cells.append("")
                continue
            if isinstance(table.values.loc[row, col], str):
                text = latex_escape(text)
            if (row, col) in best:
                text = rf"\textbf{{{text}}}"
            mark = table.mark(row, col)
            mark = f" ({latex_escape(mark)})" if _is_word(mark) else rf"$^{{{mark}}}$" if mark else ""
            cells.append(text + mark + _runs(table, row, col, latex=True))
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    body = "\n".join(lines)
    if table.caption or table.label:
        wrapped = [r"\begin{table}[t]", r"\centering", body]
        if table.caption:
            wrapped.append(rf"\caption{{{latex_escape(table.caption)}}}")
        if table.label:
            wrapped.append(rf"\label{{{table.label}}}")
        wrapped.append(r"\end{table}")
        body = "\n".join(wrapped)
    return body + "\n"


def to_csv(table: Table) -> str:
    """Numbers rounded to the table's decimals; a ``<column> mark`` column where any cell is marked."""
    frame = table.values.round({c: table.places(c) for c in table.values.columns}).copy()
    if table.marks is not None:
        for col in list(table.values.columns):
            if (table.marks[col] != "").any():
                frame.insert(frame.columns.get_loc(col) + 1, f"{col} mark", table.marks[col])
    if table.bold is not None:
        for col in list(table.values.columns):
            if col in table.bold.columns and table.bold[col].any():
                frame.insert(frame.columns.get_loc(col) + 1, f"{col} bold", table.bold[col])
    if table.count is not None:
        for col in list(table.values.columns):
            if col in table.count.columns and (table.count[col] > 1).any():
                at = frame.columns.get_loc(col) + 1
                frame.insert(at, f"{col} n", table.count[col].astype("Int64"))
                frame.insert(at, f"{col} sd", table.sd[col].round(table.places(col)))
    frame.index.name = table.index_name or "row"
    return frame.to_csv(lineterminator="\n")


def write_table(table: Table, prefix: str) -> list[str]:
    """Write ``prefix.csv``, ``prefix.md`` and ``prefix.tex`` (all rendered before any write)."""
    rendered = {".csv": to_csv(table), ".md": to_markdown(table), ".tex": to_latex(table)}
    paths = []
    for suffix, text in rendered.items():
        with atomic_write(prefix + suffix) as handle:
            handle.write(text)
        paths.append(prefix + suffix)
    return paths


def read_tidy(paths: list[str], where: str | None = None):
    """Concatenate tidy CSVs (or JSON files: an object is one row, a list of objects rows,
    e.g. ``headlab bleu`` outputs), optionally filtered with a pandas query."""
    import json
    import pandas as pd

    frames = []
    for path in paths:
        try:
            if str(path).endswith(".json"):
                with open(path, encoding="utf-8") as handle:
                    data = json.load(handle)
                frames.append(pd.DataFrame([data] if isinstance(data, dict) else data))
            else:
                frames.append(pd.read_csv(path))
        except (OSError, ValueError) as err:
            raise DataError(f"cannot read results: {err}", path=str(path)) from None
    frame = pd.concat(frames, ignore_index=True)
    if where:
        try:
            frame = frame.query(where)
        except Exception as err:  # pandas raises many kinds for a bad expression
            raise DataError(f"bad --where {where!r}: {err}") from None
    if frame.empty:
        raise DataError(f"no rows left in {', '.join(map(str, paths))}" + (f" after --where {where!r}" if where else ""))
    return frame


def _order(text: str | None):
    return [x for x in text.split(",")] if text else None


def _check_order_names(option: str, text: str | None, names: list[str], labels: list) -> None:
    """Refuse an order that leaves out a label of an input (pivot would refuse it too, but
    without the file's name), and a label that no input has (a misspelt one would be an
    empty row or column); a label the paper alone has is its row, empty on our side."""
    order = _order(text)
    if not order:
        return
    listed = set(order)
    for name, of_one_input in zip(names, labels):
        left_out = [label for label in dict.fromkeys(of_one_input) if label not in listed]
        if left_out:
            raise DataError(f"{option} lacks {left_out}, which {name} has")
    known = {label for of_one_input in labels for label in of_one_input}
    unknown = [label for label in order if label not in known]
    if unknown:
        raise DataError(f"{option} names {unknown}, which {' and '.join(names)} {'lack' if len(names) > 1 else 'lacks'}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="headlab table", description=__doc__.split("\n\n")[0])
    parser.add_argument("--in", dest="inputs", action="append", required=True, help="tidy CSV (repeatable)")
    parser.add_argument("--index", required=True, help="column giving the table rows")
    parser.add_argument("--columns", required=True, help="column giving the table columns")
    parser.add_argument("--values", required=True, help="column with the numbers")
    parser.add_argument("--where", default=None, help="pandas query to select rows")
    parser.add_argument("--mark", default=None, help="boolean column: marked cells get --mark-symbol")
    parser.add_argument("--mark-symbol", default="*", help="mark of a significant difference")
    parser.add_argument("--best", default="max", choices=["max", "min", "none"], help="bold the max or min of each column, or none")
    parser.add_argument("--decimals", type=bounded(int, 0), default=2, help="decimals shown (0 or more)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply our values (e.g. 100 for %%); the --paper numbers are left as they are")
    parser.add_argument("--paper", default=None, help="tidy CSV of the paper's numbers, same columns")
    parser.add_argument("--row-order", default=None, help="comma-separated row labels")
    parser.add_argument("--col-order", default=None, help="comma-separated column labels")
    parser.add_argument("--caption", default=None, help="table caption")
    parser.add_argument("--label", default=None, help="LaTeX label")
    parser.add_argument("--out-prefix", required=True, help="writes PREFIX.csv, PREFIX.md, PREFIX.tex")
    args = parser.parse_args(argv)

    def read(paths, where, mark, scale=1.0, mark_if_there=False):
        """(tidy rows with numeric values, the mark column they have or None)."""
        import pandas as pd

        tidy = read_tidy(paths, where)
        if mark_if_there and mark not in tidy.columns:
            mark = None
        for option, name in (("--index", args.index), ("--columns", args.columns), ("--values", args.values),
                             ("--mark", mark)):
            if name is not None and name not in tidy.columns:
                raise DataError(f"{option} {name!r}: no such column in {', '.join(map(str, paths))} "
                                f"(have {list(tidy.columns)})")
        numbers = pd.to_numeric(tidy[args.values], errors="coerce")
        words = tidy[numbers.isna() & tidy[args.values].notna()]
        if not words.empty:  # an empty cell is a run not there; a word would become one silently
            first = words.iloc[0]
            raise DataError(f"--values {args.values!r}: {first[args.values]!r} (row {first[args.index]!r}, column "
                            f"{first[args.columns]!r}) in {', '.join(map(str, paths))} is no number")
        tidy[args.values] = numbers * scale
        tidy[args.columns] = tidy[args.columns].astype(str)
        tidy[args.index] = tidy[args.index].astype(str)
        return tidy, mark

    def build(tidy, mark):
        return pivot(tidy, index=args.index, columns=args.columns, values=args.values,
                     mark=mark,
                     mark_symbol=args.mark_symbol, row_order=_order(args.row_order),
                     col_order=_order(args.col_order), decimals=args.decimals,
                     best=None if args.best == "none" else args.best,
                     caption=args.caption, label=args.label)

    # --scale is for our results alone: the paper's numbers are as the paper prints them
    inputs = [(", ".join(args.inputs), *read(args.inputs, args.where, args.mark, args.scale))]
    if args.paper:  # the paper's numbers seldom carry a significance column: its mark only if there
        inputs.append((args.paper, *read([args.paper], None, args.mark, mark_if_there=True)))
    names = [name for name, _, _ in inputs]
    _check_order_names("--row-order", args.row_order, names, [tidy[args.index] for _, tidy, _ in inputs])
    _check_order_names("--col-order", args.col_order, names, [tidy[args.columns] for _, tidy, _ in inputs])
    tables = [build(tidy, mark) for _, tidy, mark in inputs]
    table = beside(*tables) if args.paper else tables[0]
    for path in write_table(table, args.out_prefix):
        print(path)
    return 0
