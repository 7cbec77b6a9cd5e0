"""Study tables as data: a grid of numbers with marks, and the paper's numbers beside ours.

A :class:`Table` is a grid of numbers (rows x columns, pandas) with optional
significance marks per cell (paper A Table 1: ``*`` = significantly lower than the 8L
baseline at p < 0.05) and the best value per column in bold (paper A Table 6).
:func:`pivot` makes one from tidy rows; :func:`beside` puts a reproduction next to a
paper's published numbers: each column becomes two, ``ours`` and ``paper``. Rendering
(CSV, Markdown, LaTeX) is :mod:`headlab.report.tables`.

Runs of several seeds: ``pivot(..., over="seed")`` takes the tidy rows of every run (one
row per seed, as the tidy CSVs keep them) and makes each cell their mean, with the
standard deviation (``ddof=1``) and the number of runs beside it (``Table.sd``,
``Table.count``); a cell of two or more runs renders as ``mean ± sd (n=N)``, a cell of one
run as its number alone.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from headlab.errors import DataError

OURS, PAPER = "ours", "paper"


@dataclass
class Table:
    values: "pd.DataFrame"             # noqa: F821  numbers, NaN = empty; index = row labels
    marks: "pd.DataFrame | None" = None  # noqa: F821  same shape, "" or a symbol
    decimals: int = 2
    #: column -> decimals where a column needs other than ``decimals`` (e.g. small #params)
    column_decimals: dict = field(default_factory=dict)
    best: str | None = "max"           # bold the max/min of each column, or None
    index_name: str = ""
    caption: str | None = None
    label: str | None = None
    #: for beside(): column -> (group, sub) so that LaTeX can print a two-row header
    groups: list[tuple[str, str]] = field(default_factory=list)
    #: same shape as values, True = bold whatever ``best`` says (paper D Table 1: a head
    #: 20 points above its baseline)
    bold: "pd.DataFrame | None" = None  # noqa: F821
    #: row -> decimals where a row needs other than its column's (paper B Table 2: the number
    #: of heads and the feed-forward size are integers among dropout rates)
    row_decimals: dict = field(default_factory=dict)
    #: same shape as values: standard deviation over seeds and number of runs of each cell
    #: (``pivot(..., over="seed")``); None = one run per cell
    sd: "pd.DataFrame | None" = None  # noqa: F821
    count: "pd.DataFrame | None" = None  # noqa: F821

    def mark(self, row, col) -> str:
        if self.marks is None:
            return ""
        value = self.marks.loc[row, col]
        return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)

    def places(self, col, row=None) -> int:
        """Decimals of a column, or of one cell (its row's, where the row has its own)."""
        if row is not None and row in self.row_decimals:
            return self.row_decimals[row]
        return self.column_decimals.get(col, self.decimals)

    def integer_rows(self) -> "Table":
        """Print rows whose values are all whole numbers (hyper-parameters such as heads, the
        feed-forward size) as integers: ``8``, not ``8.00``."""
        for row in self.values.index:
            cells = [cell for cell in self.values.loc[row] if isinstance(cell, (int, float)) and not math.isnan(cell)]
            if cells and all(float(cell).is_integer() for cell in cells):
                self.row_decimals[row] = 0
        return self

    def runs(self, row, col) -> tuple[float, int]:
        """(sd, n) of a cell; (nan, 1) where it holds one run."""
        if self.count is None or col not in self.count.columns or row not in self.count.index:
            return math.nan, 1
        runs = self.count.loc[row, col]
        if runs is None or (isinstance(runs, float) and math.isnan(runs)):
            return math.nan, 1
        return float(self.sd.loc[row, col]), int(runs)


def pivot(tidy, *, index: str, columns: str, values: str, mark: str | None = None,
          mark_symbol: str = "*", row_order=None, col_order=None, over: str | None = None, **kwargs) -> Table:
    """Tidy rows -> :class:`Table`; duplicate (index, column) pairs are an error, except
    that with ``over`` (e.g. ``"seed"``) the rows of one cell that differ in ``over`` are
    its runs: the cell is their mean, with sd and count (a cell's mark is its first run's).
    No rows (a study list the config leaves empty, e.g. paper C's ``parsers: []``): an empty
    table, which :func:`beside` fills with the paper's rows alone."""
    import pandas as pd

    if len(tidy) == 0:
        return Table(pd.DataFrame(), None, index_name=index, **kwargs)
    for col in [index, columns, values] + ([mark] if mark else []) + ([over] if over else []):
        if col not in tidy.columns:
            raise DataError(f"no column {col!r} in the results (have {list(tidy.columns)})")
    dup = tidy.duplicated([index, columns] + ([over] if over else []))
    if dup.any():
        first = tidy[dup].iloc[0]
        raise DataError(f"two values for ({first[index]!r}, {first[columns]!r}): filter the rows first")
    rows = _ordered(tidy[index], row_order, "--row-order")
    cols = _ordered(tidy[columns], col_order, "--col-order")
    numbers = tidy.assign(**{values: pd.to_numeric(tidy[values], errors="coerce")})
    groups = numbers.groupby([index, columns], sort=False)
    shape = dict(index=rows, columns=cols)

    def grid_of(series):
        grid = series.unstack(columns).reindex(**shape)
        grid.index.name = grid.columns.name = None
        return grid
    sd = count = None
    if over:
        grid = grid_of(groups[values].mean())
        count = grid_of(groups[values].count().astype(float))
        sd = grid_of(groups[values].std(ddof=1))
        if not (count > 1).any().any():
            sd = count = None
    else:
        grid = grid_of(groups[values].first()).apply(pd.to_numeric, errors="coerce")
    marks = None
    if mark:
        flags = tidy.assign(_m=tidy[mark].map(lambda value: _symbol(value, mark_symbol)))
        marks = grid_of(flags.groupby([index, columns], sort=False)["_m"].first()).fillna("")
    return Table(grid, marks, index_name=index, sd=sd, count=count, **kwargs)


def _ordered(labels, order, option: str) -> list:
    """The table's rows (or columns): ``order`` where given, else the labels as they come.
    An order that leaves out a label of the results is refused: the table would drop it
    silently. A label of the order the results lack stays, an empty row (paper D's Table 3
    lists a row the paper has not, so that the paper's side lines up with ours)."""
    present = list(dict.fromkeys(labels))
    if not order:
        return present
    listed = set(order)
    left_out = [label for label in present if label not in listed]
    if left_out:
        raise DataError(f"{option} lacks {left_out}, which the results have")
    return list(order)


def _symbol(value, default: str) -> str:
    """A mark cell: a boolean-like value gives ``default`` or nothing; any other text (paper
    B and C's ``⇑`` / ``↑``) is the mark itself."""
    if isinstance(value, str) and value.strip() and value.strip().lower() not in _BOOLEAN_WORDS:
        return value.strip()
    return default if _truthy(value) else ""


_BOOLEAN_WORDS = ("true", "1", "yes", "*", "false", "0", "no", "nan", "none")


def _truthy(value) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes", "*")
    return bool(value) and not (isinstance(value, float) and math.isnan(value))


def beside(ours: Table, paper: Table) -> Table:
    """Each column ``c`` becomes ``c ours`` and ``c paper``; rows are the union (ours first)."""
    import pandas as pd

    rows = list(dict.fromkeys(list(ours.values.index) + list(paper.values.index)))
    cols = list(dict.fromkeys(list(ours.values.columns) + list(paper.values.columns)))
    values, marks, groups, places, bold, sd, count = {}, {}, [], {}, {}, {}, {}
    for col in cols:
        for sub, table in ((OURS, ours), (PAPER, paper)):
            name = f"{col} {sub}"
            groups.append((str(col), sub))
            has_runs = table.count is not None and col in table.count.columns
            count[name] = table.count[col].reindex(rows) if has_runs else pd.Series(float("nan"), index=rows)
            sd[name] = table.sd[col].reindex(rows) if has_runs else pd.Series(float("nan"), index=rows)
            bold[name] = (table.bold[col].reindex(rows).fillna(False).astype(bool)
                          if table.bold is not None and col in table.bold.columns else pd.Series(False, index=rows))
            if table.places(col) != ours.decimals:
                places[name] = table.places(col)
            values[name] = (table.values[col].reindex(rows) if col in table.values.columns
                            else pd.Series(float("nan"), index=rows))
            if table.marks is not None and col in table.marks.columns:
                marks[name] = table.marks[col].reindex(rows).fillna("")
            else:
                marks[name] = pd.Series("", index=rows)
    return Table(pd.DataFrame(values, index=rows), pd.DataFrame(marks, index=rows), decimals=ours.decimals,
                 column_decimals=places, best=ours.best, index_name=ours.index_name, caption=ours.caption,
                 label=ours.label, groups=groups, row_decimals={**paper.row_decimals, **ours.row_decimals},
                 bold=pd.DataFrame(bold, index=rows) if ours.bold is not None or paper.bold is not None else None,
                 sd=pd.DataFrame(sd, index=rows) if ours.count is not None or paper.count is not None else None,
                 count=pd.DataFrame(count, index=rows) if ours.count is not None or paper.count is not None else None)
