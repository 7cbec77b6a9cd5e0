"""Training parts (``train_parts.csv``, columns ``part,cpu_s,wall_s,cpu_share,calls``): where
one ``headlab train`` of the embedded default's model goes (preset ``mini``, 2+2, 8L, on
the workflow's Multi30k de-en data: 250 steps, validations at 125 and 250, 1 thread, the
workflow's malloc settings), timed inside the process by wrapping OpenNMT-py's own
functions (:func:`train_parts`: :class:`headlab.engine.steptime.StepClock`, as in a GPU sitting):

=================  ===========================================================================
``startup``        interpreter start and imports (torch, OpenNMT-py, headlab's plugin)
``setup``          options, vocabulary, model and optimizer built (``train()`` until the loop)
``data``           OpenNMT-py's data pipeline: reading, bucketing, numericalising, batching
``steps``          forward, loss, backward and optimizer step (``_gradient_accumulation``)
``validation``     ``Trainer.validate`` (its own data pipeline included)
``checkpoints``    ``ModelSaver.save``: writing ``model_step_N.pt``
``loop_other``     the rest of the loop (reports, learning-rate updates)
``end``            after the loop: publishing ``model.pt``, cleaning up
``process``        the whole process as the parent sees it (``getrusage`` of the child)
=================  ===========================================================================

CPU is ``time.process_time()`` (user + system of the process), wall ``perf_counter``; on
a shared machine quote CPU. ``--parts-runs N`` repeats the training and reports medians.
"""
from __future__ import annotations

import csv
import json
import os
import statistics
import subprocess
import sys
import time


PART_COLUMNS = ["part", "cpu_s", "wall_s", "cpu_share", "calls"]


def _parts() -> list[str]:
    from headlab.engine.steptime import PARTS as LOOP_PARTS
    return ["startup", "setup", *LOOP_PARTS, "end"]


def train_parts(config: str, start_wall: float) -> dict:
    """Run ``headlab train -config CONFIG`` in this process with OpenNMT-py's loop timed by
    :class:`headlab.engine.steptime.StepClock` (the loop's parts) and the time before and
    after the loop added (see the module doc); ``start_wall``: ``time.time()`` when the
    parent started this process. Returns {part: {"cpu_s", "wall_s", "calls"}}."""
    import headlab.engine.plugin  # noqa: F401  (torch, OpenNMT-py, compat: the start-up)
    import onmt.trainer
    from headlab.engine.run import train
    from headlab.engine.steptime import StepClock

    startup = {"cpu_s": time.process_time(), "wall_s": time.time() - start_wall, "calls": 1}
    clock = StepClock().install()
    loop = onmt.trainer.Trainer.__dict__["train"]
    marks = {}

    def marked_loop(self, *args, **kwargs):
        marks["loop"] = (time.process_time(), time.perf_counter())
        try:
            return loop(self, *args, **kwargs)
        finally:
            marks["end"] = (time.process_time(), time.perf_counter())

    onmt.trainer.Trainer.train = marked_loop
    setup = (time.process_time(), time.perf_counter())
    try:
        train(["-config", config])
    finally:
        onmt.trainer.Trainer.train = loop
        clock.undo()
    parts = {"startup": startup,
             "setup": {"cpu_s": marks["loop"][0] - setup[0], "wall_s": marks["loop"][1] - setup[1], "calls": 1}}
    parts.update(clock.summary()["parts"])
    parts["end"] = {"cpu_s": time.process_time() - marks["end"][0], "wall_s": time.perf_counter() - marks["end"][1],
                    "calls": 1}
    return {part: {"cpu_s": round(found["cpu_s"], 3), "wall_s": round(found["wall_s"], 3), "calls": found["calls"]}
            for part, found in parts.items()}


def bench_train_parts(out_dir: str, data_dir: str = "results/data/multi30k/de-en/full", runs: int = 1,
                      threads: int = 1, preset: str = "mini", layers: str = "2+2", heads: str = "8L") -> list[dict]:
    """Train the embedded default's model ``runs`` times, each in a fresh process (see the
    module doc); write ``train_parts.csv`` with the median of each part."""
    import resource
    import shutil
    import tempfile

    from headlab.engine.config import train_config, write_yaml
    from headlab.engine.malloc import job_environ
    from headlab.io import atomic_write

    for split in ("train", "val"):
        for side in ("src", "tgt"):
            if not os.path.exists(f"{data_dir}/bpe/{split}.{side}"):
                raise SystemExit(f"no prepared data in {data_dir}: run `snakemake {data_dir}/bpe/{split}.{side}` first")
    work = tempfile.mkdtemp(prefix="headlab-bench-parts-")
    runs_parts = []
    try:
        for run in range(runs):
            folder = os.path.join(work, f"run{run}")
            write_yaml(train_config(
                preset=preset, layers=layers, heads=heads, train_src=f"{data_dir}/bpe/train.src",
                train_tgt=f"{data_dir}/bpe/train.tgt", valid_src=f"{data_dir}/bpe/val.src",
                valid_tgt=f"{data_dir}/bpe/val.tgt", vocab=f"{data_dir}/vocab.txt", save_dir=folder),
                f"{work}/run{run}.yaml")
            # as the workflow runs a training job (rules/train.smk, rules/common.smk)
            env = job_environ(dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads)))
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.time()
            proc = subprocess.run([sys.executable, "-m", "headlab.bench", "--parts-one", f"{work}/run{run}.yaml",
                                   repr(start)], capture_output=True, text=True, env=env)
            wall = time.time() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if proc.returncode:
                raise RuntimeError(f"training failed:\n{proc.stderr[-3000:]}")
            parts = json.loads(proc.stdout.strip().splitlines()[-1])
            parts["process"] = {"cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 3),
                                "wall_s": round(wall, 3), "calls": 1}
            runs_parts.append(parts)
            shutil.rmtree(folder, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    total = statistics.median(r["process"]["cpu_s"] for r in runs_parts)
    rows = []
    for part in _parts() + ["process"]:
        cpu = statistics.median(r[part]["cpu_s"] for r in runs_parts)
        rows.append({"part": part, "cpu_s": round(cpu, 2),
                     "wall_s": round(statistics.median(r[part]["wall_s"] for r in runs_parts), 2),
                     "cpu_share": round(cpu / total, 3) if total else "",
                     "calls": runs_parts[0][part]["calls"]})
    os.makedirs(out_dir, exist_ok=True)
    with atomic_write(os.path.join(out_dir, "train_parts.csv")) as handle:
        writer = csv.DictWriter(handle, fieldnames=PART_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    width = max(map(len, _parts()))
    print(f"{'part':<{width}}  cpu_s  wall_s  share")
    for row in rows:
        print(f"{row['part']:<{width}}  {row['cpu_s']:5.1f}  {row['wall_s']:6.1f}  {row['cpu_share']}")
    return rows
