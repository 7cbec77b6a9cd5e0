"""Head atlas (``atlas.csv``, :func:`bench_atlas`): the cost of each part of every model's
``atlas-model`` job of a finished run (``--results``), beside its CPU seconds.
"""
from __future__ import annotations

import csv
import json
import os


ATLAS_COLUMNS = ["model", "sentences", "heads", "load", "passes", "ablation", "profile", "write", "total", "cpu_s",
                 "max_rss_mb"]


def bench_atlas(out_dir: str, results: str = "results") -> list[dict]:
    """``atlas.csv``: the head atlas's cost per model from a finished run (issue 23): each
    part's seconds from the model's ``timing.json`` (load, the shared passes, the per-head
    ablations, the syntactic profile, writing) and the job's CPU seconds and peak memory
    from its snakemake benchmark (``logs/atlas/MODEL.benchmark.tsv``)."""
    import glob

    from headlab.io import atomic_write

    rows = []
    for path in sorted(glob.glob(f"{results}/atlas/**/timing.json", recursive=True)):
        with open(path, encoding="utf-8") as handle:
            timing = json.load(handle)
        row = {c: timing.get(c, "") for c in ATLAS_COLUMNS}
        bench = f"{results}/logs/atlas/{timing['model']}.benchmark.tsv"
        if os.path.exists(bench):
            with open(bench, encoding="utf-8") as handle:
                record = next(csv.DictReader(handle, delimiter="\t"))
            row["cpu_s"], row["max_rss_mb"] = record.get("cpu_time", ""), record.get("max_rss", "")
        rows.append(row)
    if not rows:
        print(f"atlas: no {results}/atlas/**/timing.json (run the workflow first); nothing measured")
        return rows
    os.makedirs(out_dir, exist_ok=True)
    with atomic_write(os.path.join(out_dir, "atlas.csv")) as handle:
        writer = csv.DictWriter(handle, fieldnames=ATLAS_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    cpu = [float(r["cpu_s"]) for r in rows if r["cpu_s"] not in ("", None)]
    print(f"atlas: {len(rows)} models, {sum(float(r['total']) for r in rows):.0f} s in the atlas-model "
          f"processes' parts, {sum(cpu):.0f} CPU s by their benchmarks")
