"""Figures from tidy result CSVs with seaborn: PNG + PDF, written atomically.

    headlab figure --in bins.csv --x bucket --y bleu --hue system --out-prefix results/figures/fig2
        [--kind line|bar] [--where "by == 'distance'"] [--style COL] [--col COL]
        [--xlabel ..] [--ylabel ..] [--title ..] [--ylim LO:HI] [--x-order a,b,c]

x values keep the order in which they first appear in the CSV (compare-mt's bucket
order ``<10, [10,20) ...``; distance bins ``1 .. 15, >15``), unless ``--x-order``.
Intervals: a line plot over categories draws each point's 95% interval from two columns
(``interval=("ci_low", "ci_high")``: paper A Figures 2-3) and writes each category's number
of items under its tick (``counts="count"``). An interval is drawn as it is, from low to
high: the point need not lie inside it (sacreBLEU's bootstrap interval is centred on the
resamples' mean, not on the score), so the caller's title says which interval it is. Over
a numeric x (learning curves), several runs of one line (seeds) are drawn as their mean
with a band (``errorbar="sd"``: ± one standard deviation); ``ends`` names a column of the
step a line's run diverged at (empty: it did not): such a line has an × at its last point
up to that step (its end, unless the loss turned finite again), so that it does not read
as a run that was merely shorter.
Paper A Figure 2 = ``headlab compare --length-out`` (x bucket, y bleu, hue system);
Figure 3 = ``headlab contrastive distil`` rows with ``by == 'distance'`` (x bucket,
y accuracy, hue system).
"""
from __future__ import annotations

import argparse

from headlab.errors import DataError
from headlab.io import atomic_write
from headlab.report.tables import read_tidy

FORMATS = ("png", "pdf")


def plot(tidy, *, x: str | None = None, y: str | None = None, hue: str | None = None, kind: str = "line", style: str | None = None,
         col: str | None = None, x_order=None, xlabel=None, ylabel=None, title=None, ylim=None,
         x_numeric: bool = False, col_wrap: int | None = None, value: str | None = None,
         interval: tuple[str, str] | None = None, counts: str | None = None, errorbar=None,
         ends: str | None = None):
    """Return a matplotlib Figure (Agg backend, nothing shown). ``x_numeric``: a line plot
    over a numeric x (training steps) instead of ordered categories. ``kind="heatmap"``:
    one cell per (x, y) holding ``value`` (attention maps, head importance), x and y in
    the order they first appear, one panel per ``col``. ``kind="arcs"``: word-to-word
    attention arcs, one panel per ``panel`` (:func:`headlab.syntax.arcs.draw`; no x/y).
    ``interval``, ``counts``, ``errorbar``, ``ends``: see the module doc."""
    import matplotlib
    matplotlib.use("Agg")
    import seaborn as sns

    if kind == "heatmap":
        return _heatmap(tidy, x=x, y=y, value=value, col=col, xlabel=xlabel, ylabel=ylabel, title=title,
                        col_wrap=col_wrap)
    if kind == "arcs":                  # paper D Figs. 1-2: word-to-word attention arcs
        from headlab.syntax.arcs import draw
        return draw(tidy, title=title)
    for name in [x, y] + [c for c in (hue, style, col, counts, ends, *(interval or ())) if c]:
        if name not in tidy.columns:
            raise DataError(f"no column {name!r} in the results (have {list(tidy.columns)})")
    tidy = tidy.copy()
    sns.set_theme(style="whitegrid", context="paper")
    if x_numeric:
        hues = list(dict.fromkeys(tidy[hue])) if hue else [None]
        palette = _palette(sns, hues) if hue else None
        grid = sns.relplot(data=tidy, x=x, y=y, hue=hue, style=style or hue, col=col, col_wrap=col_wrap if col else None,
                           kind="line", dashes=True, height=3.2, aspect=1.4, errorbar=errorbar,
                           hue_order=hues if hue else None, palette=palette)
        if ends:
            _mark_ends(grid, tidy, x, y, hue, style, col, ends, palette)
        return _finish(grid, x, y, xlabel, ylabel, title, ylim)
    tidy[x] = tidy[x].astype(str)
    order = list(x_order) if x_order else list(dict.fromkeys(tidy[x]))
    missing = set(tidy[x]) - set(order)
    if missing:
        raise DataError(f"--x-order lacks {sorted(missing)}")
    if kind == "line":
        # categorical x kept in order: map to positions, label the ticks
        tidy["_pos"] = tidy[x].map({v: i for i, v in enumerate(order)})
        hues = list(dict.fromkeys(tidy[hue])) if hue else [None]
        palette = dict(zip(hues, sns.color_palette(n_colors=len(hues)))) if hue else None
        grid = sns.relplot(data=tidy, x="_pos", y=y, hue=hue, style=style or hue, col=col, kind="line",
                           markers=True, dashes=False, height=3.2, aspect=1.4, hue_order=hues if hue else None,
                           palette=palette, errorbar=errorbar)
        panels = grid.axes_dict.items() if col else [(None, grid.ax)]
        for panel, ax in panels:
            part = tidy if panel is None else tidy[tidy[col] == panel]
            ax.set_xticks(range(len(order)))
            ax.set_xticklabels(_tick_labels(part, x, order, counts))
            if interval:
                _error_bars(ax, part, hue, hues, palette, interval)
    elif kind == "bar":
        grid = sns.catplot(data=tidy, x=x, y=y, hue=hue, col=col, kind="bar", order=order,
                           height=3.2, aspect=1.4)
    else:
        raise DataError(f"unknown figure kind {kind!r} (line or bar)")
    return _finish(grid, x, y, xlabel, ylabel, title, ylim)


def _palette(sns, hues) -> dict:
    """seaborn's own colours for a categorical hue (the theme's, husl beyond their number),
    named so that what is drawn over the lines can match them."""
    many = len(hues) > len(sns.color_palette())
    return dict(zip(hues, sns.color_palette("husl" if many else None, n_colors=len(hues))))


def _mark_ends(grid, tidy, x, y, hue, style, col, ends: str, palette) -> None:
    """An × at the last point up to the divergence (``ends`` filled) of each line whose run
    diverged, in the line's colour: a diverged curve stops there, like a short one would
    without it, and one whose loss turns finite again goes on past it."""
    panels = grid.axes_dict.items() if col else [(None, grid.ax)]
    keys = [key for key in (hue, style) if key]
    for panel, ax in panels:
        part = tidy if panel is None else tidy[tidy[col] == panel]
        # the points after the divergence (a loss finite again) are not where it stopped
        part = part[part[ends].notna() & (part[x] <= part[ends])]
        for _, line in (part.groupby(keys, sort=False) if keys else [(None, part)]):
            last = line.loc[line[x].idxmax()]
            colour = palette[last[hue]] if palette else "black"
            ax.plot([last[x]], [line.loc[line[x] == last[x], y].mean()], linestyle="none", marker="x",
                    markersize=8, markeredgewidth=2, color=colour, zorder=5)


def _tick_labels(part, x, order, counts: str | None) -> list[str]:
    """Category labels, with the category's number of items under it (``counts``)."""
    if not counts:
        return list(order)
    n = part.groupby(x, sort=False)[counts].first()
    return [f"{v}\n(n={int(n[v])})" if v in n.index and n[v] == n[v] else str(v) for v in order]


def _error_bars(ax, part, hue, hues, palette, interval: tuple[str, str]) -> None:
    """Each point's interval as a bar from low to high, in its line's colour (lines side by
    side). Drawn as it is, not as the point ± two distances: a bootstrap interval is centred
    on the resamples' mean, so the point itself may lie outside it."""
    low, high = interval
    for i, name in enumerate(hues):
        rows = part if hue is None else part[part[hue] == name]
        rows = rows.dropna(subset=[low, high])          # an empty bucket has no interval
        if rows.empty:
            continue
        where = rows["_pos"] + (i - (len(hues) - 1) / 2) * 0.06
        colour = palette[name] if palette else "black"
        ax.vlines(where, rows[low], rows[high], colors=colour, linewidth=1)
        caps = [*where, *where], [*rows[low], *rows[high]]
        ax.plot(*caps, linestyle="none", marker="_", markersize=4, color=colour)


def _heatmap(tidy, *, x: str, y: str, value: str | None, col: str | None, xlabel, ylabel, title,
             col_wrap: int | None = None):
    """One heatmap per ``col`` panel, in a row, or with ``col_wrap`` in a grid of that many
    columns sized for a page: cells of a fixed size, one colour bar, and when every panel has
    the same rows and columns (one sentence), tick labels only on the left column and the
    bottom row."""
    import math

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    for name in [x, y, value] + ([col] if col else []):
        if name is None or name not in tidy.columns:
            raise DataError(f"no column {name!r} in the results (have {list(tidy.columns)})")
    panels = list(dict.fromkeys(tidy[col])) if col else [None]
    first = tidy if col is None else tidy[tidy[col] == panels[0]]
    vmax = float(tidy[value].max()) or 1.0
    parts = [tidy if panel is None else tidy[tidy[col] == panel] for panel in panels]
    grids = [part.pivot(index=y, columns=x, values=value).reindex(
        index=list(dict.fromkeys(part[y])), columns=list(dict.fromkeys(part[x]))) for part in parts]
    if not col_wrap:
        width = 1.2 + 0.35 * first[x].nunique()
        height = 1.0 + 0.3 * first[y].nunique()
        figure, axes = plt.subplots(1, len(panels), figsize=(width * len(panels), height), squeeze=False)
        for ax, panel, grid in zip(axes[0], panels, grids):
            sns.heatmap(grid, ax=ax, vmin=0.0, vmax=vmax, cmap="viridis", cbar=panel == panels[-1], square=False)
            _label_axes(ax, panel, xlabel or x, ylabel or y)
        if title:
            figure.suptitle(title)
        figure.tight_layout()
        return figure
    ncols = min(col_wrap, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    same = all(list(g.index) == list(grids[0].index) and list(g.columns) == list(grids[0].columns) for g in grids)
    cell = 0.22                                        # inches per cell, square: 8-pt labels fit
    label = 0.08 * max(len(str(v)) for v in [*grids[0].index, *grids[0].columns]) + 0.45
    panel_w, panel_h = cell * grids[0].shape[1], cell * grids[0].shape[0]
    gap_w, gap_h = (0.15, 0.35) if same else (label + 0.15, label + 0.35)   # panel titles above
    top, right = (0.7 if title else 0.3), 1.0
    width = label + ncols * panel_w + (ncols - 1) * gap_w + right
    height = top + nrows * panel_h + (nrows - 1) * gap_h + 0.3 + label
    figure, axes = plt.subplots(nrows, ncols, squeeze=False, figsize=(width, height))
    figure.subplots_adjust(left=label / width, right=1 - right / width, bottom=label / height,
                           top=1 - (top + 0.3) / height, wspace=gap_w / panel_w, hspace=gap_h / panel_h)
    colorbar = figure.add_axes([1 - 0.75 / width, 0.5 - 0.2 * panel_h * nrows / height, 0.12 / width,
                                0.4 * panel_h * nrows / height])
    for k, ax in enumerate(axes.flat):
        if k >= len(panels):
            ax.set_visible(False)
            continue
        column = k % ncols
        sns.heatmap(grids[k], ax=ax, vmin=0.0, vmax=vmax, cmap="viridis", cbar=k == 0, cbar_ax=colorbar,
                    square=True, xticklabels=True, yticklabels=True)
        _label_axes(ax, panels[k], xlabel or x, ylabel or y)
        ax.tick_params(labelsize=8)
        if same and column > 0:
            ax.set_yticklabels([])
            ax.set_ylabel("")
        if same and k + ncols < len(panels):           # a panel below shows the labels
            ax.set_xticklabels([])
            ax.set_xlabel("")
    colorbar.tick_params(labelsize=8)
    if title:
        figure.suptitle(title, y=1 - 0.25 / height, fontsize=10)
    return figure


def _label_axes(ax, panel, xlabel, ylabel):
    ax.tick_params(axis="y", rotation=0)          # row labels read horizontally
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if panel is not None:
        ax.set_title(str(panel), fontsize=9)


def _finish(grid, x, y, xlabel, ylabel, title, ylim):
    grid.set_axis_labels(xlabel or x, ylabel or y)
    if ylim:
        grid.set(ylim=ylim)
    if title:
        grid.figure.suptitle(title)
    # FacetGrid.tight_layout keeps the panels left of the outside legend;
    # Figure.tight_layout would stretch them underneath it
    grid.tight_layout()
    return grid.figure


def save(figure, prefix: str) -> list[str]:
    import matplotlib.pyplot as plt

    paths = []
    try:
        for fmt in FORMATS:
            path = f"{prefix}.{fmt}"
            with atomic_write(path, "wb") as handle:
                # fixed metadata: the same data gives the same PDF bytes
                figure.savefig(handle, format=fmt, dpi=200, bbox_inches="tight",
                               metadata={"CreationDate": None} if fmt == "pdf" else None)
            paths.append(path)
    finally:
        plt.close(figure)
    return paths


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="headlab figure", description=__doc__.split("\n\n")[0])
    parser.add_argument("--in", dest="inputs", action="append", required=True, help="tidy CSV (repeatable)")
    parser.add_argument("--x", required=True, help="column on the x axis")
    parser.add_argument("--y", required=True, help="column on the y axis")
    parser.add_argument("--hue", default=None, help="column coloured by")
    parser.add_argument("--style", default=None, help="column drawn in line styles")
    parser.add_argument("--col", default=None, help="one panel per value of this column")
    parser.add_argument("--kind", default="line", choices=["line", "bar"], help="line or bar plot")
    parser.add_argument("--where", default=None, help="pandas query to select rows")
    parser.add_argument("--x-order", default=None, help="comma-separated x values")
    parser.add_argument("--xlabel", default=None, help="x axis label")
    parser.add_argument("--ylabel", default=None, help="y axis label")
    parser.add_argument("--title", default=None, help="figure title")
    parser.add_argument("--ylim", default=None, help="LO:HI")
    parser.add_argument("--out-prefix", required=True, help="writes PREFIX.png and PREFIX.pdf")
    args = parser.parse_args(argv)
    ylim = None
    if args.ylim:
        try:
            lo, hi = (float(v) for v in args.ylim.split(":"))
        except ValueError:
            raise DataError(f"--ylim must be LO:HI, got {args.ylim!r}") from None
        ylim = (lo, hi)
    tidy = read_tidy(args.inputs, args.where)
    figure = plot(tidy, x=args.x, y=args.y, hue=args.hue, kind=args.kind, style=args.style, col=args.col,
                  x_order=args.x_order.split(",") if args.x_order else None, xlabel=args.xlabel,
                  ylabel=args.ylabel, title=args.title, ylim=ylim)
    for path in save(figure, args.out_prefix):
        print(path)
    return 0
