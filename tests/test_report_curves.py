"""Learning curves from OpenNMT-py training logs, and each study's figure of them."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from headlab.engine.logs import parse_log, read_curve, tensorboard_options
from headlab.studies.curves import figure

LOG = """\
[2026-11-23 16:14:35,573 INFO] Start training loop and validate every 10 steps...
[2026-11-23 16:14:35,700 INFO] Step  5/   30; acc: 2.0; ppl: 324.5; xent: 5.8; lr: 0.07217; sents:     122; bsz:  335/ 398/12; 4047/4805 tok/s;      0 sec;
[2026-11-23 16:14:35,701 INFO] aux: gate_l0 0.31; total 6.11
[2026-11-23 16:14:35,800 INFO] Step 10/   30; acc: 2.1; ppl: 190.6; xent: 5.3; lr: 0.05330; sents:     122; bsz:  335/ 398/12; 4047/4805 tok/s;      0 sec;
[2026-11-23 16:14:35,905 INFO] valid stats calculation
                           took: 0.0890505313873291 s.
[2026-11-23 16:14:35,906 INFO] Train perplexity: 250.716
[2026-11-23 16:14:35,906 INFO] Train accuracy: 2.0603
[2026-11-23 16:14:35,906 INFO] Validation perplexity: 182.569
[2026-11-23 16:14:35,906 INFO] Validation accuracy: 1.59842
[2026-11-23 16:14:36,000 INFO] headlab: resuming interrupted training from checkpoint /m/model_step_15.pt
[2026-11-23 16:14:36,100 INFO] Start training loop and validate every 10 steps...
[2026-11-23 16:14:36,200 INFO] Step 20/   30; acc: 4.7; ppl: 171.1; xent: 5.1; lr: 0.03858; sents:     122; bsz:  335/ 398/12; 4047/4805 tok/s;      0 sec;
[2026-11-23 16:14:36,300 INFO] Validation perplexity: 159.029
[2026-11-23 16:14:36,300 INFO] Validation accuracy: 7.17004
[2026-11-23 16:14:36,400 INFO] Validation perplexity: 150
[2026-11-23 16:14:36,400 INFO] Validation accuracy: 9.5
"""


def test_parse_log_train_and_valid_rows_with_their_steps():
    rows = parse_log(LOG.splitlines())
    train = [(r["step"], r["acc"], r["ppl"], r["xent"], r["lr"]) for r in rows if r["split"] == "train"]
    assert train == [(5, 2.0, 324.5, 5.8, 0.07217), (10, 2.1, 190.6, 5.3, 0.0533), (20, 4.7, 171.1, 5.1, 0.03858)]
    valid = [(r["step"], r["ppl"], r["acc"]) for r in rows if r["split"] == "valid"]
    # validation at multiples of valid_steps; after resuming at step 15: 20, then 30
    assert valid == [(10, 182.569, 1.59842), (20, 159.029, 7.17004), (30, 150.0, 9.5)]
    assert [r["xent"] for r in rows if r["split"] == "valid"][0] == round(math.log(182.569), 4)


def test_read_curve_writes_nothing_but_rows_of_the_log(tmp_path):
    path = tmp_path / "train.log"
    path.write_text(LOG)
    curve = read_curve(path)
    assert list(curve.columns) == ["step", "split", "xent", "ppl", "acc", "lr"] and len(curve) == 6


def test_tensorboard_is_one_config_key():
    assert tensorboard_options({"training": {}}, "m") == {}
    assert tensorboard_options({"training": {"tensorboard": True}}, "r/m") == \
        {"tensorboard": True, "tensorboard_log_dir": "r/m/tb"}


def test_study_figure_draws_every_model(tmp_path):
    config = {"corpora": {"c": {"tests": ["t"]}},
              "studies": {"baseline": {"data": {"c": ["de-en", "en-de"]}, "layers": ["1+1"], "heads": ["8L", "1L"],
                                       "preset": "tiny"}}}
    inputs, build = figure(config, "baseline", str(tmp_path))
    assert len(inputs) == 4
    for i, path in enumerate(inputs):
        pd.DataFrame({"step": [5, 10, 10], "split": ["train", "train", "valid"], "xent": [6.0 - i, 5.0, 5.5],
                      "ppl": [1, 1, 1], "acc": [1, 2, 3], "lr": [0.1, 0.1, None]}).to_csv(_mk(path), index=False)
    tidy, style = build()
    assert sorted(tidy["model"].unique()) == ["1L", "8L"] and style["col"] == "pair" and len(tidy) == 12
    from headlab.report.figures import plot, save
    paths = save(plot(tidy, **style), str(tmp_path / "curves"))
    assert all((tmp_path / f"curves.{ext}").stat().st_size > 1000 for ext in ("png", "pdf")) and len(paths) == 2


def test_a_diverged_curve_ends_in_a_mark_and_says_where(tmp_path):
    """A loss that turns NaN / inf (a diverged training) ends the curve at its last finite
    point with an ×, on a line of its own named "diverged at step N"; a run with no finite
    loss at all is named in the title. A run that merely stops earlier has neither."""
    from matplotlib.lines import Line2D

    from headlab.report.figures import plot
    config = {"corpora": {"c": {"tests": ["t"]}},
              "studies": {"baseline": {"data": {"c": ["de-en"]}, "layers": ["1+1"], "heads": ["8L", "1L", "4L"],
                                       "preset": "tiny"}}}
    inputs, build = figure(config, "baseline", str(tmp_path))
    nan, inf = float("nan"), float("inf")
    losses = {"8L": [6.0, 5.0], "1L": [6.0, 5.0, nan, nan, inf], "4L": [nan, nan, nan, nan, nan]}
    for path in inputs:
        heads = next(h for h in losses if f"/{h}/" in path)
        xent = losses[heads]
        split = ["train", "train", "train", "train", "valid"][:len(xent)]
        pd.DataFrame({"step": [5, 10, 15, 20, 20][:len(xent)], "split": split, "xent": xent, "ppl": 1, "acc": 1,
                      "lr": 0.1}).to_csv(_mk(path), index=False)
    tidy, style = build()
    assert tidy["xent"].notna().all() and set(tidy["model"]) == {"8L", "1L seed 1: diverged at step 15"}
    assert set(tidy.loc[tidy["model"] == "8L", "diverged_at"].isna()) == {True}
    assert set(tidy.loc[tidy["model"] != "8L", "diverged_at"]) == {15}
    assert style["ends"] == "diverged_at" and style["title"].endswith("\nno finite loss logged: de-en 4L seed 1: "
                                                                      "diverged at step 5")
    figure_ = plot(tidy, **style)
    crosses = [line for ax in figure_.axes for line in ax.get_lines()
               if isinstance(line, Line2D) and line.get_marker() == "x"]
    assert [(list(line.get_xdata()), list(line.get_ydata())) for line in crosses] == [([10], [5.0])]


def test_a_recovering_curve_is_marked_where_it_diverged_and_says_it_recovered(tmp_path):
    """A loss that turns NaN / inf and later finite again: the × sits on each of the run's
    lines at its last point up to the divergence, not at the curve's end, as for a run
    that stays NaN; the label says from which step the loss is finite again."""
    from matplotlib.lines import Line2D

    from headlab.report.figures import plot
    config = {"corpora": {"c": {"tests": ["t"]}},
              "studies": {"baseline": {"data": {"c": ["de-en"]}, "layers": ["1+1"], "heads": ["8L", "1L"],
                                       "preset": "tiny"}}}
    inputs, build = figure(config, "baseline", str(tmp_path))
    nan, inf = float("nan"), float("inf")
    steps = [5, 10, 15, 20, 25, 10, 20]
    split = ["train"] * 5 + ["valid"] * 2
    losses = {"8L": [6.0, 5.0, nan, nan, nan, 5.2, nan],           # stays NaN
              "1L": [6.0, 5.5, inf, 4.5, 4.0, 5.8, 4.9]}           # recovers at step 20
    for path in inputs:
        heads = next(h for h in losses if f"/{h}/" in path)
        pd.DataFrame({"step": steps, "split": split, "xent": losses[heads], "ppl": 1, "acc": 1,
                      "lr": 0.1}).to_csv(_mk(path), index=False)
    tidy, style = build()
    assert set(tidy["model"]) == {"8L seed 1: diverged at step 15",
                                  "1L seed 1: diverged at step 15, finite again from step 20"}
    figure_ = plot(tidy, **style)
    crosses = [(float(line.get_xdata()[0]), float(line.get_ydata()[0])) for ax in figure_.axes
               for line in ax.get_lines() if isinstance(line, Line2D) and line.get_marker() == "x"]
    # 8L: train and valid end at step 10; 1L: at step 10 too, though its lines go on to 25 and 20
    assert sorted(crosses) == [(10.0, 5.0), (10.0, 5.2), (10.0, 5.5), (10.0, 5.8)]


def test_study_figure_without_logged_steps_names_the_option(tmp_path):
    from headlab.errors import DataError
    config = {"corpora": {"c": {"tests": ["t"]}},
              "studies": {"baseline": {"data": {"c": ["de-en"]}, "layers": ["1+1"], "heads": ["8L"], "preset": "tiny"}}}
    inputs, build = figure(config, "baseline", str(tmp_path))
    pd.DataFrame(columns=["step", "split", "xent", "ppl", "acc", "lr"]).to_csv(_mk(inputs[0]), index=False)
    with pytest.raises(DataError, match=r"\[training.overrides.report_every\]"):
        build()


def _mk(path):
    from pathlib import Path
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return path
