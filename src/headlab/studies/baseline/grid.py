"""The baseline's models: the grid of its config (``naming.study_models``), trained with its
``overrides``."""
from __future__ import annotations

from typing import Any, Iterator, Mapping

from headlab.naming import study_models


def models(study: Mapping[str, Any], root: str | None = None) -> Iterator[tuple[dict, dict]]:
    for model in study_models(study):
        yield model, dict(study.get("overrides", {}))
