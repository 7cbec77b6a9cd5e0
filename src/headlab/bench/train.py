"""Training (``train.csv``, columns ``impl,spec,device,precision,steps,src_tok_s,tgt_tok_s,
wall_s``): full models on the workflow's Multi30k de-en data (on CPU preset ``tiny`` 3+3
with 1 thread, on CUDA preset ``base`` 6+6: ``--train-preset``, ``--train-layers``),
trained for ``--train-steps`` steps: stock ``onmt_train`` (``-encoder_type transformer``)
against ``headlab train`` with 8L, 7Ftoken+1L, 7Fword+1L, DHICM (paper B: the last layer
of every site), LPEA+RHE (paper C: the first encoder layer, on synthetic parses of the
training data, :func:`featured_corpus`) and gated heads (paper D), in the same run,
round-robin over ``--rounds`` rounds; on CUDA each in fp32 and mixed precision (the
``model_dtype`` of ``headlab.engine.config.model_dtype``: fp16 AMP). tokens/s is the
median of OpenNMT-py's own per-report throughput, the first report (start-up, bucketing)
excluded.
"""
from __future__ import annotations

import csv
import os
import statistics
import subprocess
import sys
import time

from headlab.bench.attention import PRECISIONS, _kind, default_devices  # noqa: F401
from headlab.bench.synthetic import random_facts

#: paper B's DHICM: the last layer of encoder self, decoder self and cross-attention
DHICM = "*(8L),8L|dhicm"
TRAIN_CONFIGS = [("onmt", "8L"), ("headlab", "8L"), ("headlab", "7Ftoken+1L"), ("headlab", "7Fword+1L"),
                 ("headlab", f"{DHICM}@dec={DHICM}@cross={DHICM}"),   # paper B
                 ("headlab", "8RHElpea,*(8L)"),                       # paper C: LPEA+RHE, first layer
                 ("headlab", "8L|gate")]                              # paper D: gated encoder heads
TRAIN_COLUMNS = ["impl", "spec", "device", "precision", "steps", "src_tok_s", "tgt_tok_s", "wall_s"]
#: training model per device type: (preset, layers)
TRAIN_MODELS = {"cpu": ("tiny", "3+3"), "cuda": ("base", "6+6")}
#: OpenNMT-py's report: "Step %2d/%5d; ... %3.0f/%3.0f tok/s" (numbers padded with spaces)
_TOKS = __import__("re").compile(r"Step\s+(\d+)/.*?;\s*([\d.]+)/\s*([\d.]+) tok/s")


def featured_corpus(bpe_src: str, vocab: str, folder: str, seed: int = 1) -> tuple[str, str]:
    """(featured source, vocabulary with its feature vocabularies beside it) for the syntax
    kinds: every BPE line with the facts of a random parse (:func:`random_facts`), written
    as ``headlab featurize`` writes real parses. A benchmark needs the shapes, not the trees."""
    import shutil

    import torch

    from headlab.io import atomic_write, read_lines
    from headlab.syntax.features import feature_names, featurize_line, join_pieces, write_feature_vocabs

    gen = torch.Generator().manual_seed(seed)
    out = os.path.join(folder, "featured." + os.path.basename(bpe_src))
    with atomic_write(out) as handle:
        for line in read_lines(bpe_src):
            pieces = line.split()
            words = join_pieces(pieces) if pieces else []
            facts = random_facts(len(words), gen) if words else {}
            handle.write(featurize_line(pieces, facts, feature_names()) + "\n")
    copy = os.path.join(folder, "vocab.txt")
    if not os.path.exists(copy):
        shutil.copyfile(vocab, copy)
        write_feature_vocabs(copy)
    return out, copy


def train_options(impl: str, spec: str, data_dir: str, folder: str, steps: int, device: str = "cpu",
                  precision: str = "fp32", preset: str | None = None, layers: str | None = None) -> dict:
    """The OpenNMT-py training config of one benchmark run (``device`` cpu or cuda)."""
    from headlab.engine.config import train_config
    from headlab.heads.spec import needs_syntax

    kind = _kind(device)
    default_preset, default_layers = TRAIN_MODELS[kind]
    stock = impl == "onmt"
    src, vocab = f"{data_dir}/bpe/train.src", f"{data_dir}/vocab.txt"
    valid_src = f"{data_dir}/bpe/val.src"
    if needs_syntax(spec):
        src, vocab = featured_corpus(src, vocab, folder)
        valid_src = featured_corpus(valid_src, vocab, folder)[0]
    options = train_config(
        preset=preset or default_preset, layers=layers or default_layers, heads=spec,
        train_src=src, train_tgt=f"{data_dir}/bpe/train.tgt", valid_src=valid_src,
        valid_tgt=f"{data_dir}/bpe/val.tgt", vocab=vocab, save_dir=folder,
        device="gpu" if kind == "cuda" else "cpu", precision=precision,
        overrides={"train_steps": steps, "report_every": max(1, steps // 6),
                   "save_checkpoint_steps": 10 * steps, "valid_steps": 10 * steps,
                   **({"encoder_type": "transformer"} if stock else {})})
    if stock:
        options.pop("enc_heads", None)
    return options


def train_once(impl: str, spec: str, data_dir: str, work: str, steps: int, threads: int = 1,
               device: str = "cpu", precision: str = "fp32", preset: str | None = None,
               layers: str | None = None, dry_run: bool = False) -> dict:
    """Train one model for ``steps`` steps; OpenNMT-py's reported tokens/s."""
    import tempfile

    from headlab.engine.config import write_yaml
    from headlab.naming import heads_name, parse_heads_name

    stock = impl == "onmt"
    folder = tempfile.mkdtemp(dir=work, prefix=f"{impl}-{heads_name(**parse_heads_name(spec))}-{precision}-")
    options = train_options(impl, spec, data_dir, folder, steps, device, precision, preset, layers)
    write_yaml(options, f"{folder}/onmt.yaml")
    row = {"impl": impl, "spec": spec, "device": _kind(device), "precision": options["model_dtype"],
           "steps": steps, "src_tok_s": "", "tgt_tok_s": "", "wall_s": ""}
    if dry_run:
        print(f"would train: {folder}/onmt.yaml (gpu_ranks {options['gpu_ranks']}, "
              f"model_dtype {options['model_dtype']})", flush=True)
        return row
    bin_dir = os.path.dirname(sys.executable)
    cmd = ([os.path.join(bin_dir, "onmt_train")] if stock else [sys.executable, "-m", "headlab.cli", "train"])
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    start = time.perf_counter()
    proc = subprocess.run(cmd + ["-config", f"{folder}/onmt.yaml"], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if proc.returncode:
        raise RuntimeError(f"{impl} {spec} training failed:\n{proc.stderr[-3000:]}")
    reports = [(float(a), float(b)) for _, a, b in _TOKS.findall(proc.stderr)][1:]
    return {**row, "src_tok_s": round(statistics.median(r[0] for r in reports), 1),
            "tgt_tok_s": round(statistics.median(r[1] for r in reports), 1), "wall_s": round(wall, 1)}


def bench_train(out_dir: str, data_dir: str = "results/data/multi30k/de-en/full", steps: int = 60,
                rounds: int = 1, threads: int = 1, devices=None, precisions=None, preset: str | None = None,
                layers: str | None = None, dry_run: bool = False) -> list[dict]:
    import shutil
    import tempfile

    from headlab.io import atomic_write

    if not os.path.exists(f"{data_dir}/vocab.txt"):
        raise SystemExit(f"no prepared data in {data_dir}: run `snakemake {data_dir}/vocab.txt` first")
    if dry_run:                        # the configs stay for inspection
        work = os.path.join(out_dir, "train-configs")
        os.makedirs(work, exist_ok=True)
    else:
        work = tempfile.mkdtemp(prefix="headlab-bench-train-")
    rows = []
    try:
        for device in devices or default_devices():
            kind = _kind(device)
            wanted = [p for p in (precisions or PRECISIONS[kind]) if kind == "cuda" or p == "fp32"]
            for _ in range(rounds):
                for impl, spec in TRAIN_CONFIGS:
                    for precision in wanted:
                        rows.append(train_once(impl, spec, data_dir, work, steps, threads, device, precision,
                                               preset, layers, dry_run))
                        print(",".join(str(rows[-1][c]) for c in TRAIN_COLUMNS), flush=True)
    finally:
        if not dry_run:
            shutil.rmtree(work, ignore_errors=True)
    if dry_run:
        return rows
    os.makedirs(out_dir, exist_ok=True)
    with atomic_write(os.path.join(out_dir, "train.csv")) as handle:
        writer = csv.DictWriter(handle, fieldnames=TRAIN_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return rows
