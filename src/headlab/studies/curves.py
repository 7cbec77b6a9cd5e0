"""Every study's ``learning_curves`` figure: the cross-entropy of each of its models over
training steps (training solid, validation dashed), from the ``learning_curve.csv`` that
:mod:`headlab.engine.logs` reads out of each model's ``train.log``. The runs of one system
at several seeds share a label: the figure draws their mean with a band of ± one standard
deviation; the tidy CSV keeps one row per run (``seed``, ``path``).

A diverged run logs a loss that is not finite (OpenNMT-py prints ``xent: nan``, a validation
perplexity ``inf``) from some step on: its curve ends at its last finite point, marked with
an ×, and it is a line of its own labelled ``<model> seed S: diverged at step N`` (the first
step whose loss is not finite; ``diverged_at`` in the CSV), not one of its system's seeds,
so that it reads neither as a run cut short nor as a jump in the mean. A run whose loss
turns finite again keeps its × at the divergence (its last point up to step N), its later
points drawn on, and says so: ``diverged at step N, finite again from step M``. A run with
no finite loss at all is named in the title."""
from __future__ import annotations

from typing import Any, Mapping

from headlab.engine.logs import COLUMNS
from headlab.errors import DataError


def _label(models: list[dict[str, str]]) -> dict[str, str]:
    """model path -> a short label naming only what varies between the study's models
    (the pair has its own panel; seeds are runs of one line)."""
    from headlab.naming import MODEL_KEYS, model_path

    varying = [k for k in MODEL_KEYS if k not in ("pair", "seed") and len({m.get(k, "") for m in models}) > 1] \
        or ["heads"]
    return {model_path(m): " ".join(str(m.get(k, "")) for k in varying) for m in models}


def figure(config: Mapping[str, Any], study: str, root: str):
    """(inputs, build) of a study's ``learning_curves`` figure: loss (cross-entropy) over
    steps of every model it trains, training solid / validation dashed, one panel per
    language pair."""
    import pandas as pd

    from headlab.naming import model_path, path
    from headlab.studies import study_models

    models = list({model_path(m): m for m, _ in study_models(config, study, root)}.values())
    labels = _label(models)
    inputs = [path("learning_curve", root, m) for m in models]

    def build():
        frames = []
        for m, file in zip(models, inputs):
            curve = pd.read_csv(file)
            frames.append(curve.assign(model=labels[model_path(m)], pair=m["pair"], seed=m["seed"], path=model_path(m)))
        tidy = pd.concat(frames, ignore_index=True) if frames \
            else pd.DataFrame(columns=[*COLUMNS, "model", "pair", "seed", "path"])
        tidy = _diverged(tidy.dropna(subset=["step"]))
        if tidy.empty:
            raise DataError(f"the models of study {study!r} logged no training step: OpenNMT-py reports every "
                            f"report_every steps; set it below train_steps", key="training.overrides.report_every")
        drawn = tidy.dropna(subset=["xent"])
        lost = [f"{pair} {model}" for pair, model in
                tidy[~tidy["path"].isin(drawn["path"])][["pair", "model"]].drop_duplicates().itertuples(index=False)]
        if drawn.empty:
            raise DataError(f"every model of study {study!r} diverged before its first report: {'; '.join(lost)}")
        tidy = drawn.sort_values(["step", "model", "split"], kind="stable")
        tidy["step"] = tidy["step"].astype(int)
        # a run with no point to mark is named where the reader looks first
        title = f"{study}: learning curves" + (f"\nno finite loss logged: {'; '.join(lost)}" if lost else "")
        style = dict(x="step", y="xent", hue="model", style="split", x_numeric=True, xlabel="training step",
                     errorbar="sd", ends="diverged_at",
                     ylabel="cross-entropy (nats/token)", title=title,
                     col="pair" if tidy["pair"].nunique() > 1 else None, col_wrap=3)
        return tidy, style
    return inputs, build


def _diverged(tidy):
    """``tidy`` with each run's ``diverged_at`` (the first step whose loss is not finite;
    NaN: none), its non-finite losses NaN, and a diverged run labelled as a line of its own
    (saying from which step its loss is finite again, if it is): averaged with its system's
    other seeds, its end would read as a step in their mean."""
    import numpy as np
    import pandas as pd

    xent = pd.to_numeric(tidy["xent"], errors="coerce")
    broken = ~np.isfinite(xent)
    first = tidy[broken].groupby("path")["step"].min()
    tidy = tidy.assign(xent=xent.where(~broken), diverged_at=tidy["path"].map(first).astype("Int64"))
    diverged = tidy["diverged_at"].notna()
    recovered = _recovered_at(tidy[diverged & ~broken])
    tidy.loc[diverged, "model"] = [
        f"{model} seed {seed}: diverged at step {step}"
        + (f", finite again from step {recovered[path]}" if path in recovered else "")
        for model, seed, step, path in tidy.loc[diverged, ["model", "seed", "diverged_at", "path"]].itertuples(index=False)]
    return tidy


def _recovered_at(finite) -> dict:
    """path -> the first step after its divergence with a finite loss, for the diverged
    runs (rows of finite loss) that have one: the curve goes on past its ×, and the label
    says why, lest the later points read as a run that never diverged."""
    after = finite[finite["step"] > finite["diverged_at"]]
    return {path: int(step) for path, step in after.groupby("path")["step"].min().items()}
