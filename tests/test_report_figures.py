"""Figures: PNG + PDF from tidy CSVs (paper A Figures 2 and 3)."""
from __future__ import annotations

import pandas as pd
import pytest

from headlab.errors import DataError
from headlab.report.figures import main


def test_line_and_bar(tmp_path):
    bins = pd.DataFrame({"system": ["8L"] * 3 + ["7F"] * 3, "bucket": ["<10", "[10,20)", ">=20"] * 2,
                         "bleu": [30.0, 28.0, 25.0, 29.0, 27.5, 24.0], "count": [5, 4, 3] * 2})
    bins.to_csv(tmp_path / "bins.csv", index=False)
    for kind in ("line", "bar"):
        prefix = tmp_path / f"fig2-{kind}"
        assert main(["--in", str(tmp_path / "bins.csv"), "--x", "bucket", "--y", "bleu", "--hue", "system",
                     "--kind", kind, "--ylabel", "BLEU", "--out-prefix", str(prefix)]) == 0
        png, pdf = prefix.with_suffix(".png"), prefix.with_suffix(".pdf")
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and pdf.read_bytes()[:5] == b"%PDF-"


def test_errors(tmp_path):
    pd.DataFrame({"a": [1], "b": [2]}).to_csv(tmp_path / "r.csv", index=False)
    with pytest.raises(DataError, match="no column 'c'"):
        main(["--in", str(tmp_path / "r.csv"), "--x", "a", "--y", "c", "--out-prefix", str(tmp_path / "f")])
    assert not list(tmp_path.glob("f.*"))


def test_legend_clear_of_panels():
    """Two panels with a long hue label (Paper A Fig. 3): the legend sits right of the panels.

    ``Figure.tight_layout`` after ``relplot`` stretched the panels under the legend."""
    from headlab.report.figures import plot

    rows = [{"system": system, "bucket": str(b), "accuracy": 0.5 + 0.01 * b, "layers": layers}
            for system in ("8L", "7Ftoken+1L", "7Ftoken+1L (H8 disabled)")
            for layers in ("2+1", "2+2") for b in range(1, 16)]
    figure = plot(pd.DataFrame(rows), x="bucket", y="accuracy", hue="system", col="layers", title="t")
    renderer = figure.canvas.get_renderer()
    legend = figure.legends[0].get_window_extent(renderer)
    for ax in figure.axes:
        panel = ax.get_window_extent(renderer)
        assert legend.x0 >= panel.x1 or not legend.overlaps(panel), ax.get_title()


def test_intervals_and_counts_on_categories():
    """Paper A Fig. 2/3: each point's interval as an error bar in its line's colour, the number
    of items under each category, in every panel."""
    from matplotlib.collections import LineCollection

    from headlab.report.figures import plot

    rows = [{"system": s, "bucket": b, "bleu": 20.0 + i, "ci_low": 18.0 + i, "ci_high": 23.0 + i, "count": n,
             "layers": lay}
            for s in ("8L", "7F") for lay in ("2+1", "2+2") for i, (b, n) in enumerate((("<10", 40), (">=10", 7)))]
    figure = plot(pd.DataFrame(rows), x="bucket", y="bleu", hue="system", col="layers",
                  interval=("ci_low", "ci_high"), counts="count")
    for ax in figure.axes:
        assert [t.get_text() for t in ax.get_xticklabels()] == ["<10\n(n=40)", ">=10\n(n=7)"]
        bars = [c for c in ax.collections if isinstance(c, LineCollection)]
        assert len(bars) == 2                           # one per system
        segments = bars[0].get_segments()
        assert [(s[0][1], s[1][1]) for s in segments] == [(18.0, 23.0), (19.0, 24.0)]
