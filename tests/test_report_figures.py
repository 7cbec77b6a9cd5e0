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
