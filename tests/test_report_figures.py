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
