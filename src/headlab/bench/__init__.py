"""Benchmarks (not tests): ``python -m headlab.bench --out results/bench``.

Devices (``--devices``): ``cuda`` where a GPU is visible, else ``cpu``; ``cpu,cuda`` runs
both. ``--dry-run`` prints what would run (and writes the training configs) without
running anything: the CUDA plan can be checked on a machine without a GPU.

One module per benchmark: :mod:`~headlab.bench.attention` (``attention.csv``),
:mod:`~headlab.bench.train` (``train.csv``), :mod:`~headlab.bench.parts` (``train_parts.csv``),
:mod:`~headlab.bench.atlas` (``atlas.csv``), :mod:`~headlab.bench.dispatch` (``dispatch.csv``:
aten ops and host syncs of one attention layer per kind and path, what a GPU pays for,
``--what dispatch``), :mod:`~headlab.bench.calibration`
(``calibration.csv``: the seed-aware test's false-positive rate and power, ``--what
calibration``, not in the default list); :mod:`~headlab.bench.synthetic` makes the syntax
kinds' parses.
"""
from __future__ import annotations

import argparse
import json
import os

from headlab.bench.atlas import bench_atlas
from headlab.bench.calibration import bench_calibration
from headlab.bench.dispatch import bench_dispatch
from headlab.bench.attention import (CONFIGS, attention_plan, bench_attention, run_one,  # noqa: F401
                                     with_ratios)
from headlab.bench.parts import bench_train_parts, train_parts
from headlab.bench.synthetic import random_facts, synthetic_side  # noqa: F401
from headlab.bench.train import TRAIN_CONFIGS, bench_train, featured_corpus  # noqa: F401


__all__ = ["CONFIGS", "TRAIN_CONFIGS", "attention_plan", "bench_atlas", "bench_attention", "bench_calibration", "bench_dispatch",
           "bench_train",
           "bench_train_parts", "featured_corpus", "main", "random_facts", "run_one", "synthetic_side", "train_parts",
           "with_ratios"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m headlab.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="results/bench", help="folder for the bench CSVs")
    parser.add_argument("--sizes", default=None,
                        help="comma list of n (default: 32,128,512,2048 on CPU, 32,64,...,1024 on CUDA)")
    parser.add_argument("--batch", type=int, default=16, help="sentences per batch in the attention bench")
    parser.add_argument("--devices", default=None, help="comma list: cpu, cuda (default: cuda if available, else cpu)")
    parser.add_argument("--precisions", default=None,
                        help="comma list of fp32, fp16, bf16 for CUDA runs (default fp32,fp16); CPU: fp32")
    parser.add_argument("--mem-limit-gb", type=float, default=6.0, help="memory cap (GiB) of a measured process")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (see module doc)")
    parser.add_argument("--what", default="attention,train,parts,atlas,dispatch",
                        help="comma list of attention, train (tokens/s), parts (where a mini training's time "
                             "goes), atlas (a finished run's atlas costs), calibration (the seed-aware "
                             "test's false-positive rate and power, by simulation; not in the default), "
                             "dispatch (aten ops and host syncs per attention layer, fused and blocked "
                             "path: what a GPU pays for)")
    parser.add_argument("--results", default="results", help="a finished run's results (for atlas)")
    parser.add_argument("--specs", default=None,
                        help="comma list: only these attention specs (e.g. 8L,8DEA,8LPEA)")
    parser.add_argument("--attention-rounds", type=int, default=1,
                        help="run every attention configuration this many times, round-robin; "
                             "medians (ratios: median of per-round ratios to 8L)")
    parser.add_argument("--repeat-scale", type=float, default=1.0,
                        help="multiply the timed repeats (10/3/1 by n) by this, at least 1")
    parser.add_argument("--train-data", default="results/data/multi30k/de-en/full", help="prepared corpus folder the training bench reads")
    parser.add_argument("--train-steps", type=int, default=60, help="training steps per timed run")
    parser.add_argument("--train-preset", default=None, help="default: tiny on CPU, base on CUDA")
    parser.add_argument("--train-layers", default=None, help="default: 3+3 on CPU, 6+6 on CUDA")
    parser.add_argument("--rounds", type=int, default=1, help="repetitions of each measurement")
    parser.add_argument("--dry-run", action="store_true",
                        help="print what would run and write the training configs; run nothing")
    parser.add_argument("--parts-runs", type=int, default=1, help="trainings for the parts (medians)")
    parser.add_argument("--calibration-experiments", type=int, default=2000,
                        help="simulated experiments per cell of calibration.csv")
    parser.add_argument("--parts-one", nargs=2, metavar=("CONFIG", "START"), help=argparse.SUPPRESS)
    parser.add_argument("--one", nargs="+", metavar="ARG", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.parts_one:
        parts = train_parts(args.parts_one[0], float(args.parts_one[1]))
        print(json.dumps(parts))
        return 0
    if args.one:
        impl, spec, n, batch, device, threads, *rest = args.one      # rest: [precision [part]]
        precision, part = (rest + ["fp32", "all"][len(rest):])[:2]
        print(json.dumps(run_one(impl, spec, int(n), int(batch), device, int(threads), precision, part=part)))
        return 0
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else None
    devices = args.devices.split(",") if args.devices else None
    precisions = args.precisions.split(",") if args.precisions else None
    what = args.what.split(",")
    if "attention" in what:
        os.environ["HEADLAB_BENCH_REPEAT_SCALE"] = str(args.repeat_scale)   # read by the --one children
        bench_attention(args.out, sizes, args.batch, devices, args.mem_limit_gb, threads=args.threads,
                        specs=args.specs.split(",") if args.specs else None, precisions=precisions,
                        rounds=args.attention_rounds, dry_run=args.dry_run)
    if "train" in what:
        bench_train(args.out, args.train_data, args.train_steps, args.rounds, args.threads, devices, precisions,
                    args.train_preset, args.train_layers, args.dry_run)
    if "parts" in what and not args.dry_run:
        bench_train_parts(args.out, args.train_data, args.parts_runs, args.threads)
    if "atlas" in what and not args.dry_run:
        bench_atlas(args.out, args.results)
    if "dispatch" in what and not args.dry_run:
        bench_dispatch(args.out, specs=args.specs.split(",") if args.specs else None)
    if "calibration" in what and not args.dry_run:
        bench_calibration(args.out, args.calibration_experiments)
    return 0

