"""Figures: PNG + PDF from tidy CSVs (paper A Figures 2 and 3)."""
from __future__ import annotations

import pathlib

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


def _interval_rows(panel_hues: dict) -> list[dict]:
    """Paper A Fig. 2's columns: bucket ``<10`` scored above its interval (sacreBLEU's
    interval is centred on the bootstrap mean, not on the score), ``[10,20)`` below it,
    ``>=20`` empty (no sentences: NaN score and interval, count 0)."""
    nan = float("nan")
    buckets = [("<10", 30.0, 26.0, 29.5, 40), ("[10,20)", 20.0, 21.0, 25.0, 7), (">=20", nan, nan, nan, 0)]
    return [{"system": s, "layers": lay, "bucket": b, "bleu": y, "ci_low": lo, "ci_high": hi, "count": n}
            for lay, systems in panel_hues.items() for s in systems for b, y, lo, hi, n in buckets]


def test_line_intervals_need_not_contain_their_points(tmp_path):
    """A point outside its interval, an empty bucket, a bucket with no rows (``x_order``) and
    a system missing from one panel: every interval drawn as it is, from low to high."""
    from matplotlib.collections import LineCollection

    from headlab.report.figures import plot, save

    rows = _interval_rows({"2+1": ("8L", "7F"), "2+2": ("8L",)})
    figure = plot(pd.DataFrame(rows), x="bucket", y="bleu", hue="system", col="layers",
                  x_order=["<10", "[10,20)", ">=20", ">=60"], interval=("ci_low", "ci_high"), counts="count")
    drawn = []
    for ax in figure.axes:
        for bars in (c for c in ax.collections if isinstance(c, LineCollection)):
            drawn.append([(s[0][1], s[1][1]) for s in bars.get_segments()])
    assert drawn == [[(26.0, 29.5), (21.0, 25.0)]] * 3       # 2 systems + 1; the empty bucket: none
    assert all(p.stat().st_size > 0 for p in map(pathlib.Path, save(figure, str(tmp_path / "f2"))))


def test_atlas_claims_need_not_lie_in_their_intervals(tmp_path, monkeypatch):
    """The atlas figure: a claim's rho outside its percentile bootstrap interval, and a claim
    without rho (too few heads), drawn without error; the axis says which interval it shows."""
    from matplotlib.collections import LineCollection

    from headlab.report import figures
    from headlab.report.atlas import figure

    drawn, save = [], figures.save
    monkeypatch.setattr(figures, "save", lambda fig, prefix: drawn.append(fig) or save(fig, prefix))
    nan = float("nan")
    agreement = pd.DataFrame([{"group": "all", "a": "confidence", "b": "entropy", "rho": 0.4}])
    claims = pd.DataFrame([
        {"claim": "c1", "paper": "A", "a": "confidence", "b": "entropy", "expected": "+", "rho": 0.30, "low": 0.32,
         "high": 0.70, "verdict": "agrees"},
        {"claim": "c2", "paper": "B", "a": "confidence", "b": "entropy", "expected": "+", "rho": nan, "low": nan,
         "high": nan, "verdict": "no data"}])
    figure(agreement, claims, tmp_path / "agreement")
    assert (tmp_path / "agreement.png").stat().st_size > 0 and (tmp_path / "agreement.pdf").stat().st_size > 0
    (claims_ax,) = [ax for ax in drawn[0].axes if ax.get_title() == "the papers' claims as agreements"]
    bars = [c for c in claims_ax.collections if isinstance(c, LineCollection)]
    assert [[tuple(point) for point in segment] for bar in bars for segment in bar.get_segments()] == \
        [[(0.32, 0.0), (0.70, 0.0)]]
    assert "need not contain rho" in claims_ax.get_xlabel()
