"""Every study's ``learning_curves`` figure: the cross-entropy of each of its models over
training steps (training solid, validation dashed), from the ``learning_curve.csv`` that
:mod:`headlab.engine.logs` reads out of each model's ``train.log``. The runs of one system
at several seeds share a label: the figure draws their mean with a band of ± one standard
deviation; the tidy CSV keeps one row per run (``seed``, ``path``)."""
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
        tidy = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
        tidy = tidy.dropna(subset=["step", "xent"]).sort_values(["step", "model", "split"], kind="stable")
        tidy["step"] = tidy["step"].astype(int)
        if tidy.empty:
            raise DataError(f"the models of study {study!r} logged no training step: OpenNMT-py reports every "
                            f"report_every steps; set it below train_steps", key="training.overrides.report_every")
        style = dict(x="step", y="xent", hue="model", style="split", x_numeric=True, xlabel="training step",
                     errorbar="sd",
                     ylabel="cross-entropy (nats/token)", title=f"{study}: learning curves",
                     col="pair" if tidy["pair"].nunique() > 1 else None, col_wrap=3)
        return tidy, style
    return inputs, build
