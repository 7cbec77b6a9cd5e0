"""Training wall time of a study's models, from the train rule's snakemake benchmark files."""
from __future__ import annotations

from headlab.naming import model_path, path


def training_time(models: list[dict], root: str) -> str:
    """One README line: how many models, their summed training wall time, the longest."""
    import pandas as pd

    seconds = {}
    for m in models:
        try:
            seconds[model_path(m)] = float(pd.read_csv(path("train_benchmark", root, m), sep="\t")["s"].iloc[-1])
        except (OSError, KeyError, IndexError, ValueError):
            continue  # trained elsewhere (published checkpoint) or before benchmarks existed
    total = len(set(model_path(m) for m in models))
    if not seconds:
        return f"{total} models (no benchmark files)"
    longest = max(seconds, key=seconds.get)
    # a sum over some models must say it is not the study's whole training time
    unmeasured = (f" ({total - len(seconds)} more without a benchmark file: trained elsewhere or before benchmarks "
                  f"existed)" if total > len(seconds) else "")
    return (f"{len(seconds)} models, {sum(seconds.values()) / 60:.1f} min of training wall time in all "
            f"(jobs run in parallel), longest {seconds[longest] / 60:.1f} min ({longest}){unmeasured}")
