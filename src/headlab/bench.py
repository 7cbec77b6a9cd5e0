"""Benchmarks (not tests): ``python -m headlab.bench --out results/bench``.

Attention (``attention.csv``, columns ``impl,spec,n,batch,fwd_bwd_ms,peak_mb``): one
encoder self-attention layer (attention only, no FFN), d=512, 8 heads, biases on, batch
16, n in {32, 128, 512, 2048}, forward + backward of ``out.sum()``, training mode:

* ``onmt``: stock OpenNMT-py 3.5.1 ``MultiHeadedAttention`` (spec ``8L``). On CPU it
  always takes its explicit matmul + softmax path (the SDPA branch is GPU-only).
* ``headlab``: :class:`headlab.heads.attention.HeadlabSelfAttention` for ``8L`` (learned
  heads through torch SDPA), ``7Ftoken+1L`` and ``7Fword+1L`` (word boundaries: random,
  ~30% of pieces continue into the next), and ``8L|dhicm`` (paper B's second-level
  attention over the heads in place of the output projection); paper C's ``8DEA``,
  ``8LPEA`` (k = 6), ``8RelPos`` (k = 16), ``8Local``, ``8RHEdea`` and ``8RHElpea`` on synthetic parses
  (:func:`synthetic_side`: a random binary tree and random dependency heads per sentence;
  the parse is built before timing, as the data pipeline delivers it). Goal (issue 13):
  DEA and LPEA within 1.3x of ``8L`` in time and memory at n = 512.

Lengths are random in [n/2, n] (one sentence of length n), the same for every impl.
attention_dropout is 0 for all (with dropout, CPU SDPA falls back to its n x n math
kernel; stock always materialises n x n).

CPU threads: ``--threads`` (default 1). On a shared 2-core machine with other jobs
running, 2 OpenMP threads make every op wait for a descheduled thread (~5 ms per op,
measured: a 1 MB flip took 7 ms), which swamps the comparison; 1 thread gives stable,
comparable numbers. Use more threads on a dedicated machine.

Method: every configuration runs in a **fresh subprocess** (no allocator or cache reuse
between configurations). ``fwd_bwd_ms`` is the median over repeats after one warm-up
step (10 repeats for n <= 128, 3 at 512, 1 at 2048). ``peak_mb`` on CPU is the growth of
the process's peak resident set size (``resource.getrusage(RUSAGE_SELF).ru_maxrss``)
during the warm-up step, measured after the module and inputs exist: the extra memory one
training step of the layer needs (activations, gradients, temporaries). On CUDA it is
``torch.cuda.max_memory_allocated`` growth over the same step. Configurations whose
n x n score tensors alone would exceed ``--mem-limit-gb`` are skipped (row with empty
values) rather than risk the OOM killer on a shared machine.

Training (``train.csv``, columns ``impl,spec,steps,src_tok_s,tgt_tok_s,wall_s``): full
tiny models (preset ``tiny``, 3+3 layers) on the workflow's Multi30k de-en data, trained
for ``--train-steps`` steps with 1 thread: stock ``onmt_train`` (``-encoder_type
transformer``) against ``headlab train`` with 8L, 7Ftoken+1L and 7Fword+1L, in the same
run, round-robin over ``--rounds`` rounds. tokens/s is the median of OpenNMT-py's own
per-report throughput, the first report (start-up, bucketing) excluded.

Training parts (``train_parts.csv``, columns ``part,cpu_s,wall_s,cpu_share,calls``): where
one ``headlab train`` of the embedded default's model goes (preset ``mini``, 2+2, 8L, on
the workflow's Multi30k de-en data: 250 steps, validations at 125 and 250, 1 thread, the
workflow's malloc settings), timed inside the process by wrapping OpenNMT-py's own
functions (:func:`train_parts`):

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

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time

CONFIGS = [("onmt", "8L"), ("headlab", "8L"), ("headlab", "7Ftoken+1L"), ("headlab", "7Fword+1L"),
           ("headlab", "8L|dhicm"),
           # paper C (issue 13 item 8): SEA, the baselines and RHE (on synthetic parses)
           ("headlab", "8DEA"), ("headlab", "8LPEA"), ("headlab", "8RelPos"), ("headlab", "8Local"),
           ("headlab", "8RHEdea"), ("headlab", "8RHElpea")]
#: kinds whose heads materialise (B, heads, n, n) scores (explicit softmax, not SDPA)
DENSE_KINDS = ("RelPos", "Local", "RHE")
COLUMNS = ["impl", "spec", "n", "batch", "fwd_bwd_ms", "peak_mb"]


def _repeats(n: int) -> int:
    scale = float(os.environ.get("HEADLAB_BENCH_REPEAT_SCALE", "1"))   # --repeat-scale
    return max(1, round((10 if n <= 128 else 3 if n <= 512 else 1) * scale))


def _dense_bytes(impl: str, spec: str, n: int, batch: int) -> float:
    """Rough bytes of n x n tensors a step keeps alive (scores, probs, grads: ~6 copies)."""
    dense_heads = 8 if impl == "onmt" or any(k in spec for k in DENSE_KINDS) else 0
    # headlab learned heads use SDPA (O(n) memory); DEA/LPEA add one (B, 1, n, n) bias
    dense_heads += 1 if ("DEA" in spec or "LPEA" in spec) else 0
    return 6 * 4 * batch * dense_heads * n * n


def synthetic_side(word_ids, lengths, gen):
    """ctx.side columns (headlab.syntax.trees.FEATURES) of random parses: per sentence a
    random binary constituency tree over its words and random dependency heads, the
    per-word facts copied onto each piece. Costs as real parses do (same shapes)."""
    import torch
    from nltk import Tree

    from headlab.syntax.trees import FEATURES, word_facts

    def tree(lo, hi):                       # words lo..hi-1
        if hi - lo == 1:
            return Tree("X", [f"w{lo}"])
        cut = int(torch.randint(lo + 1, hi, (1,), generator=gen))
        return Tree("X", [tree(lo, cut), tree(cut, hi)])

    B, N = word_ids.shape
    side = {name: torch.zeros(B, N, dtype=torch.long) for name in FEATURES}
    for b in range(B):
        n_words = int(word_ids[b, int(lengths[b]) - 1]) + 1
        heads = torch.randint(0, n_words, (n_words,), generator=gen).tolist()
        facts = word_facts(tree(0, n_words), heads)
        pieces = word_ids[b].clamp_max(n_words - 1)
        for name in FEATURES:
            side[name][b] = torch.tensor(facts[name])[pieces]
    return side


def run_one(impl: str, spec: str, n: int, batch: int, device: str, threads: int = 1,
            d: int = 512, heads: int = 8) -> dict:
    """Time one configuration in this process (called in a fresh subprocess)."""
    import resource

    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(n)
    lengths = torch.randint(n // 2, n + 1, (batch,), generator=gen)
    lengths[0] = n
    pad = torch.arange(n).unsqueeze(0) >= lengths.unsqueeze(1)
    x = torch.randn(batch, n, d, generator=gen).to(device).requires_grad_()
    if impl == "onmt":
        from onmt.modules import MultiHeadedAttention
        module = MultiHeadedAttention(heads, d, dropout=0.0, is_decoder=False, attn_type="self",
                                      add_qkvbias=True)
        for param in module.parameters():          # skip_init leaves them uninitialised
            torch.nn.init.normal_(param, std=0.02)
        mask = pad.to(device).view(batch, 1, 1, n).expand(-1, -1, n, -1)

        def step():
            out, _ = module(x, x, x, mask=mask)
            out.sum().backward()
    else:
        from headlab.heads.attention import HeadlabSelfAttention
        from headlab.heads.base import HeadContext
        from headlab.heads.spec import parse_spec
        module = HeadlabSelfAttention(parse_spec(spec)[0], d, d // heads, add_qkvbias=True)
        starts = torch.rand(batch, n, generator=gen) > 0.3
        starts[:, 0] = True
        word_ids = torch.cumsum(starts.long(), 1) - 1
        side = synthetic_side(word_ids, lengths, gen) if module.needs_syntax else {}
        ctx = HeadContext(pad.to(device), lengths.to(device), word_ids=word_ids.to(device),
                          side={k: v.to(device) for k, v in side.items()})

        def step():
            module(x, ctx).sum().backward()
    module.to(device).train()
    cuda = device.startswith("cuda")

    def sync():
        if cuda:
            torch.cuda.synchronize()

    if cuda:
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.max_memory_allocated()
    else:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss        # KiB on Linux
    step()                                                              # warm-up = memory probe
    sync()
    if cuda:
        peak_mb = (torch.cuda.max_memory_allocated() - before) / 2**20
    else:
        peak_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    times = []
    for _ in range(_repeats(n)):
        x.grad = None
        module.zero_grad(set_to_none=True)
        start = time.perf_counter()
        step()
        sync()
        times.append((time.perf_counter() - start) * 1000)
    return {"fwd_bwd_ms": round(statistics.median(times), 2), "peak_mb": round(peak_mb, 1)}


def bench_attention(out_dir: str, sizes=(32, 128, 512, 2048), batch: int = 16, devices=None,
                    mem_limit_gb: float = 6.0, timeout: int = 300, threads: int = 1,
                    specs: list[str] | None = None) -> list[dict]:
    from headlab.io import atomic_write

    if devices is None:
        import torch
        devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    rows = []
    for device in devices:
        for n in sizes:
            for impl, spec in CONFIGS:
                if specs and spec not in specs:
                    continue
                name = impl if device == "cpu" else f"{impl}@{device}"
                row = {"impl": name, "spec": spec, "n": n, "batch": batch, "fwd_bwd_ms": "", "peak_mb": ""}
                if device == "cpu" and _dense_bytes(impl, spec, n, batch) > mem_limit_gb * 2**30:
                    print(f"skip {name} {spec} n={n}: n x n tensors exceed {mem_limit_gb} GB", flush=True)
                    rows.append(row)
                    continue
                cmd = [sys.executable, "-m", "headlab.bench", "--one", impl, spec, str(n),
                       str(batch), device, str(threads)]
                try:
                    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
                    result = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else {}
                    if proc.returncode:
                        print(proc.stderr[-2000:], file=sys.stderr)
                except subprocess.TimeoutExpired:
                    result = {}
                row.update(result)
                rows.append(row)
                print(",".join(str(row[c]) for c in COLUMNS), flush=True)
    os.makedirs(out_dir, exist_ok=True)
    with atomic_write(os.path.join(out_dir, "attention.csv")) as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return rows


TRAIN_CONFIGS = [("onmt", "8L"), ("headlab", "8L"), ("headlab", "7Ftoken+1L"), ("headlab", "7Fword+1L"),
           ("headlab", "8L|dhicm")]
TRAIN_COLUMNS = ["impl", "spec", "steps", "src_tok_s", "tgt_tok_s", "wall_s"]
_TOKS = __import__("re").compile(r"Step (\d+)/.*?; ([\d.]+)/([\d.]+) tok/s")


def train_once(impl: str, spec: str, data_dir: str, work: str, steps: int, threads: int = 1) -> dict:
    """Train one tiny model for ``steps`` steps; OpenNMT-py's reported tokens/s."""
    import tempfile

    from headlab.engine.config import train_config, write_yaml

    stock = impl == "onmt"
    folder = tempfile.mkdtemp(dir=work, prefix=f"{impl}-{spec}-")
    options = train_config(
        preset="tiny", layers="3+3", heads=spec,
        train_src=f"{data_dir}/bpe/train.src", train_tgt=f"{data_dir}/bpe/train.tgt",
        valid_src=f"{data_dir}/bpe/val.src", valid_tgt=f"{data_dir}/bpe/val.tgt",
        vocab=f"{data_dir}/vocab.txt", save_dir=folder,
        overrides={"train_steps": steps, "report_every": max(1, steps // 6),
                   "save_checkpoint_steps": 10 * steps,
                   **({"encoder_type": "transformer"} if stock else {})})
    if stock:
        options.pop("enc_heads", None)
    write_yaml(options, f"{folder}/onmt.yaml")
    bin_dir = os.path.dirname(sys.executable)
    cmd = ([os.path.join(bin_dir, "onmt_train")] if stock else [sys.executable, "-m", "headlab.cli", "train"])
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    start = time.perf_counter()
    proc = subprocess.run(cmd + ["-config", f"{folder}/onmt.yaml"], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if proc.returncode:
        raise RuntimeError(f"{impl} {spec} training failed:\n{proc.stderr[-3000:]}")
    reports = [(float(a), float(b)) for _, a, b in _TOKS.findall(proc.stderr)][1:]
    return {"impl": impl, "spec": spec, "steps": steps,
            "src_tok_s": round(statistics.median(r[0] for r in reports), 1),
            "tgt_tok_s": round(statistics.median(r[1] for r in reports), 1),
            "wall_s": round(wall, 1)}


def bench_train(out_dir: str, data_dir: str = "results/data/multi30k/de-en/full", steps: int = 60,
                rounds: int = 1, threads: int = 1) -> list[dict]:
    import shutil
    import tempfile

    from headlab.io import atomic_write

    if not os.path.exists(f"{data_dir}/vocab.txt"):
        raise SystemExit(f"no prepared data in {data_dir}: run `snakemake {data_dir}/vocab.txt` first")
    work = tempfile.mkdtemp(prefix="headlab-bench-train-")
    rows = []
    try:
        for _ in range(rounds):
            for impl, spec in TRAIN_CONFIGS:
                rows.append(train_once(impl, spec, data_dir, work, steps, threads))
                print(",".join(str(rows[-1][c]) for c in TRAIN_COLUMNS), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    os.makedirs(out_dir, exist_ok=True)
    with atomic_write(os.path.join(out_dir, "train.csv")) as handle:
        writer = csv.DictWriter(handle, fieldnames=TRAIN_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return rows


PART_COLUMNS = ["part", "cpu_s", "wall_s", "cpu_share", "calls"]
PARTS = ["startup", "setup", "data", "steps", "validation", "checkpoints", "loop_other", "end"]


class _Clock:
    """Accumulates CPU and wall seconds per part; parts do not nest (inner time is taken
    out of the outer part by the caller's choice of what to wrap)."""

    def __init__(self):
        self.cpu = dict.fromkeys(PARTS, 0.0)
        self.wall = dict.fromkeys(PARTS, 0.0)
        self.calls = dict.fromkeys(PARTS, 0)

    def add(self, part, cpu, wall):
        self.cpu[part] += cpu
        self.wall[part] += wall
        self.calls[part] += 1

    def wrap(self, owner, name, part):
        """Time every call of ``owner.name`` as ``part``."""
        import functools
        original = getattr(owner, name)

        @functools.wraps(original)
        def timed(*args, **kwargs):
            cpu, wall = time.process_time(), time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.add(part, time.process_time() - cpu, time.perf_counter() - wall)

        setattr(owner, name, timed)


def train_parts(config: str, start_wall: float) -> dict:
    """Run ``headlab train -config CONFIG`` in this process with OpenNMT-py's loop
    instrumented (see the module doc); ``start_wall``: ``time.time()`` when the parent
    started this process. Returns {part: {"cpu_s", "wall_s", "calls"}}."""
    import headlab.engine.plugin  # noqa: F401  (torch, OpenNMT-py, compat: the start-up)
    import onmt.models.model_saver as saver
    import onmt.trainer
    from headlab.engine.run import train

    clock = _Clock()
    clock.add("startup", time.process_time(), time.time() - start_wall)
    trainer = onmt.trainer.Trainer
    clock.wrap(trainer, "_gradient_accumulation", "steps")
    clock.wrap(trainer, "validate", "validation")
    clock.wrap(saver.ModelSaverBase, "save", "checkpoints")
    accumulate = trainer._accum_batches

    def timed_batches(self, iterator):          # time spent producing each batch
        batches = accumulate(self, iterator)
        while True:
            cpu, wall = time.process_time(), time.perf_counter()
            try:
                item = next(batches)
            except StopIteration:
                return
            finally:
                clock.add("data", time.process_time() - cpu, time.perf_counter() - wall)
            yield item

    trainer._accum_batches = timed_batches
    loop = trainer.train
    marks = {}

    def timed_loop(self, *args, **kwargs):
        marks["loop"] = (time.process_time(), time.perf_counter())
        inner = {p: (clock.cpu[p], clock.wall[p]) for p in ("data", "steps", "validation", "checkpoints")}
        try:
            return loop(self, *args, **kwargs)
        finally:
            cpu = time.process_time() - marks["loop"][0]
            wall = time.perf_counter() - marks["loop"][1]
            for p, (c, w) in inner.items():
                cpu -= clock.cpu[p] - c
                wall -= clock.wall[p] - w
            clock.add("loop_other", cpu, wall)
            marks["end"] = (time.process_time(), time.perf_counter())

    trainer.train = timed_loop
    setup = (time.process_time(), time.perf_counter())
    train(["-config", config])
    clock.add("setup", marks["loop"][0] - setup[0], marks["loop"][1] - setup[1])
    clock.add("end", time.process_time() - marks["end"][0], time.perf_counter() - marks["end"][1])
    return {p: {"cpu_s": round(clock.cpu[p], 3), "wall_s": round(clock.wall[p], 3), "calls": clock.calls[p]}
            for p in PARTS}


def bench_train_parts(out_dir: str, data_dir: str = "results/data/multi30k/de-en/full", runs: int = 1,
                      threads: int = 1, preset: str = "mini", layers: str = "2+2", heads: str = "8L") -> list[dict]:
    """Train the embedded default's model ``runs`` times, each in a fresh process (see the
    module doc); write ``train_parts.csv`` with the median of each part."""
    import resource
    import shutil
    import tempfile

    from headlab.engine.config import train_config, write_yaml
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
            env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
            for key, value in {"MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "4294967296",
                               "MALLOC_TOP_PAD_": "268435456"}.items():
                env.setdefault(key, value)
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
    for part in PARTS + ["process"]:
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
    width = max(map(len, PARTS))
    print(f"{'part':<{width}}  cpu_s  wall_s  share")
    for row in rows:
        print(f"{row['part']:<{width}}  {row['cpu_s']:5.1f}  {row['wall_s']:6.1f}  {row['cpu_share']}")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m headlab.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="results/bench")
    parser.add_argument("--sizes", default="32,128,512,2048")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--devices", default=None, help="comma list, default cpu (+cuda if available)")
    parser.add_argument("--mem-limit-gb", type=float, default=6.0)
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (see module doc)")
    parser.add_argument("--what", default="attention,train,parts",
                        help="comma list of attention, train (tokens/s), parts (where a mini training's time goes)")
    parser.add_argument("--specs", default=None,
                        help="comma list: only these attention specs (e.g. 8L,8DEA,8LPEA)")
    parser.add_argument("--repeat-scale", type=float, default=1.0,
                        help="multiply the timed repeats (10/3/1 by n) by this, at least 1")
    parser.add_argument("--train-data", default="results/data/multi30k/de-en/full")
    parser.add_argument("--train-steps", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--parts-runs", type=int, default=1, help="trainings for the parts (medians)")
    parser.add_argument("--parts-one", nargs=2, metavar=("CONFIG", "START"), help=argparse.SUPPRESS)
    parser.add_argument("--one", nargs=6, metavar=("IMPL", "SPEC", "N", "BATCH", "DEVICE", "THREADS"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.parts_one:
        parts = train_parts(args.parts_one[0], float(args.parts_one[1]))
        print(json.dumps(parts))
        return 0
    if args.one:
        impl, spec, n, batch, device, threads = args.one
        print(json.dumps(run_one(impl, spec, int(n), int(batch), device, int(threads))))
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    devices = args.devices.split(",") if args.devices else None
    what = args.what.split(",")
    if "attention" in what:
        os.environ["HEADLAB_BENCH_REPEAT_SCALE"] = str(args.repeat_scale)   # read by the --one children
        bench_attention(args.out, sizes, args.batch, devices, args.mem_limit_gb, threads=args.threads,
                        specs=args.specs.split(",") if args.specs else None)
    if "train" in what:
        bench_train(args.out, args.train_data, args.train_steps, args.rounds, args.threads)
    if "parts" in what:
        bench_train_parts(args.out, args.train_data, args.parts_runs, args.threads)
    return 0


if __name__ == "__main__":
    import warnings
    warnings.filterwarnings("ignore", category=FutureWarning)
    sys.exit(main())
