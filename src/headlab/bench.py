"""Benchmarks (not tests): ``python -m headlab.bench --out results/bench``.

Devices (``--devices``): ``cuda`` where a GPU is visible, else ``cpu``; ``cpu,cuda`` runs
both. ``--dry-run`` prints what would run (and writes the training configs) without
running anything: the CUDA plan can be checked on a machine without a GPU.

Attention (``attention.csv``, columns ``impl,spec,n,batch,precision,fwd_bwd_ms,peak_mb``):
one encoder self-attention layer (attention only, no FFN), d=512, 8 heads, biases on,
batch 16, n in {32, 128, 512, 2048} on CPU and {32, 64, ..., 1024} on CUDA, forward +
backward of ``out.sum()``, training mode, every head kind and mixer (below). Precision:
``fp32`` on CPU; on CUDA ``fp32`` and ``fp16`` (``--precisions``; mixed = autocast, as
training with ``model_dtype fp16`` runs the layer):

* ``onmt``: stock OpenNMT-py 3.5.1 ``MultiHeadedAttention`` (spec ``8L``). On CPU it
  always takes its explicit matmul + softmax path (the SDPA branch is GPU-only).
* ``headlab``: :class:`headlab.heads.attention.HeadlabSelfAttention` for ``8L`` (learned
  heads through torch SDPA), ``7Ftoken+1L`` and ``7Fword+1L`` (word boundaries: random,
  ~30% of pieces continue into the next), and ``8L|dhicm`` (paper B's second-level
  attention over the heads in place of the output projection); paper C's ``8DEA``,
  ``8LPEA`` (k = 6), ``8RelPos`` (k = 16), ``8Local``, ``8RHEdea`` and ``8RHElpea`` on synthetic parses
  (:func:`synthetic_side`: a random binary tree and random dependency heads per sentence;
  the parse is built before timing, as the data pipeline delivers it), ``8RHErel``,
  ``8RHEloc``, ``1Lwide`` and ``8L|gate``. Goal (issue 13): DEA and LPEA within 1.3x of
  ``8L`` in time and memory at n = 512.

Lengths are random in [n/2, n] (one sentence of length n), the same for every impl.
attention_dropout is 0 for all (with dropout, CPU SDPA falls back to its n x n math
kernel; stock always materialises n x n).

CPU threads: ``--threads`` (default 1). On a shared 2-core machine with other jobs
running, 2 OpenMP threads make every op wait for a descheduled thread (~5 ms per op,
measured: a 1 MB flip took 7 ms), which swamps the comparison; 1 thread gives stable,
comparable numbers. Use more threads on a dedicated machine.

Method: on CPU every configuration runs in a **fresh subprocess** (no allocator or cache
reuse between configurations). ``fwd_bwd_ms`` is the median over repeats after one
warm-up step (10 repeats for n <= 128, 3 at 512, 1 at 2048), synchronised on CUDA.
``peak_mb`` on CPU is the growth of the process's peak resident set size
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``) during the warm-up step, measured after
the module and inputs exist: the extra memory one training step of the layer needs
(activations, gradients, temporaries). On CUDA it is the growth of
``torch.cuda.max_memory_allocated`` (reset before the step) over the same step; it counts
allocated tensors, not the caching allocator's reserve, so CUDA configurations run in one
process (one CUDA start-up; out of memory leaves an empty row). CPU configurations whose
n x n score tensors alone would exceed ``--mem-limit-gb`` are skipped (row with empty
values) rather than risk the OOM killer on a shared machine.

Training (``train.csv``, columns ``impl,spec,device,precision,steps,src_tok_s,tgt_tok_s,
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

Head atlas (``atlas.csv``, :func:`bench_atlas`): the cost of each part of every model's
``atlas-model`` job of a finished run (``--results``), beside its CPU seconds.

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
           ("headlab", "8RHEdea"), ("headlab", "8RHElpea"),
           # the remaining kinds and mixers (issue 21)
           ("headlab", "8RHErel"), ("headlab", "8RHEloc"), ("headlab", "1Lwide"), ("headlab", "8L|gate")]
#: kinds whose heads materialise (B, heads, n, n) scores (explicit softmax, not SDPA)
DENSE_KINDS = ("RelPos", "Local", "RHE")
#: measured columns and their ratio to headlab ``8L`` of the same run, device, n and
#: precision (:func:`with_ratios`)
MEASURED = {"fwd_bwd_ms": "ratio_time", "cpu_ms": "ratio_cpu", "peak_mb": "ratio_mem", "live_mb": "ratio_live"}
COLUMNS = ["impl", "spec", "n", "batch", "precision", "fwd_bwd_ms", "cpu_ms", "peak_mb", "live_mb", "ratio_time",
           "ratio_cpu", "ratio_mem", "ratio_live"]
#: default sequence lengths and precisions per device type
SIZES = {"cpu": (32, 128, 512, 2048), "cuda": (32, 64, 128, 256, 512, 1024)}
PRECISIONS = {"cpu": ("fp32",), "cuda": ("fp32", "fp16")}
AMP_DTYPES = {"fp16": "float16", "bf16": "bfloat16"}


def default_devices() -> list[str]:
    import torch
    return ["cuda"] if torch.cuda.is_available() else ["cpu"]


def _kind(device: str) -> str:
    return "cuda" if device.startswith("cuda") else "cpu"


def _repeats(n: int) -> int:
    scale = float(os.environ.get("HEADLAB_BENCH_REPEAT_SCALE", "1"))   # --repeat-scale
    return max(1, round((10 if n <= 128 else 3 if n <= 512 else 1) * scale))


def _dense_bytes(impl: str, spec: str, n: int, batch: int) -> float:
    """Rough bytes of n x n tensors a step keeps alive (scores, probs, grads: ~6 copies)."""
    dense_heads = 8 if impl == "onmt" or any(k in spec for k in DENSE_KINDS) else 0
    # headlab learned heads use SDPA (O(n) memory); DEA/LPEA add one (B, 1, n, n) bias
    dense_heads += 1 if ("DEA" in spec or "LPEA" in spec) else 0
    return 6 * 4 * batch * dense_heads * n * n


def random_facts(n_words: int, gen) -> dict[str, list[int]]:
    """Per-word parse facts (headlab.syntax.trees.word_facts) of a random binary
    constituency tree over ``n_words`` words and random dependency heads."""
    import torch
    from nltk import Tree

    from headlab.syntax.trees import word_facts

    def tree(lo, hi):                       # words lo..hi-1
        if hi - lo == 1:
            return Tree("X", [f"w{lo}"])
        cut = int(torch.randint(lo + 1, hi, (1,), generator=gen))
        return Tree("X", [tree(lo, cut), tree(cut, hi)])

    heads = torch.randint(0, n_words, (n_words,), generator=gen).tolist()
    return word_facts(tree(0, n_words), heads)


def synthetic_side(word_ids, lengths, gen):
    """ctx.side columns (headlab.syntax.trees.FEATURES) of random parses
    (:func:`random_facts`), the per-word facts copied onto each piece. Costs as real
    parses do (same shapes)."""
    import torch

    from headlab.syntax.trees import FEATURES

    B, N = word_ids.shape
    side = {name: torch.zeros(B, N, dtype=torch.long) for name in FEATURES}
    for b in range(B):
        n_words = int(word_ids[b, int(lengths[b]) - 1]) + 1
        facts = random_facts(n_words, gen)
        pieces = word_ids[b].clamp_max(n_words - 1)
        for name in FEATURES:
            side[name][b] = torch.tensor(facts[name])[pieces]
    return side


def make_step(impl: str, spec: str, n: int, batch: int, device: str, precision: str = "fp32", d: int = 512,
              heads: int = 8):
    """(module, step) for one configuration: ``step()`` runs forward + backward once;
    ``precision`` fp16/bf16: the forward runs under the device's autocast."""
    import contextlib

    import torch

    autocast = contextlib.nullcontext if precision == "fp32" else \
        (lambda: torch.autocast(_kind(device), dtype=getattr(torch, AMP_DTYPES[precision])))
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
            with autocast():
                out, _ = module(x, x, x, mask=mask)
            out.float().sum().backward()
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
            with autocast():
                out = module(x, ctx)
            out.float().sum().backward()
    module.to(device).train()

    def clean_step():
        x.grad = None
        module.zero_grad(set_to_none=True)
        step()
    return module, clean_step


def _rss_start() -> tuple[str, int]:
    """Start of a peak-RSS measurement: Linux's VmHWM reset to the current RSS (writing 5
    to /proc/self/clear_refs), so that the peak counts from the RSS the step starts at;
    where that is not possible, the process's peak so far (ru_maxrss), which hides any
    step peak below an earlier one (set-up transients)."""
    import resource
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return "hwm", _status_kib("VmRSS")
    except OSError:
        return "maxrss", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss       # KiB on Linux


def _rss_peak_growth(start: tuple[str, int]) -> float:
    """MiB the process's peak RSS grew by since :func:`_rss_start`."""
    import resource
    how, before = start
    peak = _status_kib("VmHWM") if how == "hwm" else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return (peak - before) / 1024


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise OSError(f"no {field} in /proc/self/status")


def live_peak_mb(step) -> float:
    """MiB: peak of the tensor storages created by ``step()`` and alive at once (every op's
    outputs, tracked through torch's dispatcher and freed with their storage). Allocator
    independent and deterministic, unlike RSS; it misses temporaries inside single ops
    (a fused kernel's own buffers) and tensors smaller than 64 KiB."""
    import weakref

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class Live(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.sizes, self.known, self.total, self.peak = {}, set(), 0, 0

        def _free(self, key):
            self.total -= self.sizes.pop(key)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            for t in tree_flatten((args, kwargs))[0]:          # storages from before: never counted
                if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in self.sizes:
                    self.known.add(t.untyped_storage().data_ptr())
            out = func(*args, **(kwargs or {}))
            for t in tree_flatten(out)[0]:
                if not isinstance(t, torch.Tensor):
                    continue
                storage = t.untyped_storage()
                key = storage.data_ptr()
                if key in self.sizes or key in self.known or storage.nbytes() < 2 ** 16:
                    continue
                self.sizes[key] = storage.nbytes()
                self.total += storage.nbytes()
                weakref.finalize(storage, self._free, key)
            self.peak = max(self.peak, self.total)
            return out

    mode = Live()
    with mode:
        step()
    return mode.peak / 2 ** 20


def run_one(impl: str, spec: str, n: int, batch: int, device: str, threads: int = 1,
            precision: str = "fp32", d: int = 512, heads: int = 8) -> dict:
    """Time one configuration in this process (a fresh subprocess on CPU)."""
    import torch

    torch.set_num_threads(threads)
    module, step = make_step(impl, spec, n, batch, device, precision, d, heads)
    cuda = device.startswith("cuda")

    def sync():
        if cuda:
            torch.cuda.synchronize()

    if cuda:
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.max_memory_allocated()
    else:
        before = _rss_start()
    step()                                                              # warm-up = memory probe
    sync()
    if cuda:
        peak_mb = (torch.cuda.max_memory_allocated() - before) / 2**20
    else:
        peak_mb = _rss_peak_growth(before)
    times, cpu_times = [], []
    for _ in range(_repeats(n)):
        start, cpu_start = time.perf_counter(), time.process_time()
        step()
        sync()
        times.append((time.perf_counter() - start) * 1000)
        cpu_times.append((time.process_time() - cpu_start) * 1000)
    return {"fwd_bwd_ms": round(statistics.median(times), 2), "cpu_ms": round(statistics.median(cpu_times), 2),
            "peak_mb": round(peak_mb, 1), "live_mb": round(live_peak_mb(step), 1)}


def with_ratios(rounds: list[list[dict]]) -> list[dict]:
    """One row per configuration from ``rounds`` (each a list of rows of one sweep, same
    order): medians of the measured columns and ``ratio_*`` = the median over rounds of
    the row's value divided by that of headlab ``8L`` (same device and n) in the same
    round, so load that changes between rounds cancels. Empty where either is missing."""
    def base_of(rows, row):
        impl = row["impl"].replace("onmt", "headlab", 1)      # onmt@cuda -> headlab@cuda
        return next((r for r in rows if r["impl"] == impl and r["spec"] == "8L" and r["n"] == row["n"]
                     and r["precision"] == row["precision"]), None)

    out = []
    for i, first in enumerate(rounds[0]):
        row = {c: first[c] for c in ("impl", "spec", "n", "batch", "precision")}
        for column, ratio in MEASURED.items():
            values = [r[i][column] for r in rounds if r[i].get(column) not in ("", None)]
            row[column] = round(statistics.median(values), 2) if values else ""
            ratios = []
            for r in rounds:
                base = base_of(r, r[i])
                if base and r[i].get(column) not in ("", None) and base.get(column) not in ("", None, 0):
                    ratios.append(r[i][column] / base[column])
            row[ratio] = round(statistics.median(ratios), 3) if ratios else ""
        out.append(row)
    return out


def _run_on_cuda(impl, spec, n, batch, device, threads, precision) -> dict:
    """One CUDA configuration in this process: torch.cuda.max_memory_allocated measures
    allocated tensors only (not the caching allocator's reserve), so its growth over a step
    needs no fresh process, and 180 configurations cost one CUDA start-up, not 180. Out of
    memory gives an empty row."""
    import torch
    try:
        return run_one(impl, spec, n, batch, device, threads, precision)
    except torch.cuda.OutOfMemoryError:
        print(f"out of memory: {impl} {spec} n={n} {precision}", file=sys.stderr, flush=True)
        return {}
    finally:
        torch.cuda.empty_cache()


def attention_plan(devices, sizes=None, specs=None, precisions=None) -> list[tuple]:
    """(device, n, precision, impl, spec) of every attention configuration, in run order:
    per device its sizes (``sizes`` or :data:`SIZES`) and precisions (``precisions``, or
    :data:`PRECISIONS`; CPU runs fp32 only)."""
    plan = []
    for device in devices:
        kind = _kind(device)
        wanted = [p for p in (precisions or PRECISIONS[kind]) if kind == "cuda" or p == "fp32"]
        for n in sizes or SIZES[kind]:
            for precision in wanted:
                plan += [(device, n, precision, impl, spec) for impl, spec in CONFIGS if not specs or spec in specs]
    return plan


def bench_attention(out_dir: str, sizes=None, batch: int = 16, devices=None,
                    mem_limit_gb: float = 6.0, timeout: int = 300, threads: int = 1,
                    specs: list[str] | None = None, precisions=None, rounds: int = 1,
                    dry_run: bool = False) -> list[dict]:
    """Every configuration of :func:`attention_plan` ``rounds`` times, round-robin (see
    :func:`with_ratios`); CPU configurations each in a fresh process, CUDA ones in this one."""
    from headlab.io import atomic_write

    plan = attention_plan(devices or default_devices(), sizes, specs and sorted({*specs, "8L"}), precisions)
    sweeps = []
    for round_no in range(rounds):
        rows = []
        for device, n, precision, impl, spec in plan:
            name = impl if device == "cpu" else f"{impl}@{device}"
            row = {"impl": name, "spec": spec, "n": n, "batch": batch, "precision": precision}
            cmd = [sys.executable, "-m", "headlab.bench", "--one", impl, spec, str(n),
                   str(batch), device, str(threads), precision]
            if dry_run:
                print("would run:", " ".join(cmd[1:]), flush=True)
                rows.append(row)
                continue
            if device == "cpu" and _dense_bytes(impl, spec, n, batch) > mem_limit_gb * 2**30:
                if round_no == 0:
                    print(f"skip {name} {spec} n={n}: n x n tensors exceed {mem_limit_gb} GB", flush=True)
                rows.append(row)
                continue
            if _kind(device) == "cuda":
                result = _run_on_cuda(impl, spec, n, batch, device, threads, precision)
            else:
                try:
                    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
                    result = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else {}
                    if proc.returncode:
                        print(proc.stderr[-2000:], file=sys.stderr)
                except subprocess.TimeoutExpired:
                    result = {}
            row.update(result)
            rows.append(row)
            print(f"round {round_no + 1}/{rounds}:", ",".join(str(row.get(c, "")) for c in COLUMNS[:9]), flush=True)
        sweeps.append(rows)
    if dry_run:
        return sweeps[0]
    rows = with_ratios(sweeps)
    os.makedirs(out_dir, exist_ok=True)
    with atomic_write(os.path.join(out_dir, "attention.csv")) as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return rows


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
    parser.add_argument("--sizes", default=None,
                        help="comma list of n (default: 32,128,512,2048 on CPU, 32,64,...,1024 on CUDA)")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--devices", default=None, help="comma list: cpu, cuda (default: cuda if available, else cpu)")
    parser.add_argument("--precisions", default=None,
                        help="comma list of fp32, fp16, bf16 for CUDA runs (default fp32,fp16); CPU: fp32")
    parser.add_argument("--mem-limit-gb", type=float, default=6.0)
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (see module doc)")
    parser.add_argument("--what", default="attention,train,parts,atlas",
                        help="comma list of attention, train (tokens/s), parts (where a mini training's time "
                             "goes), atlas (a finished run's atlas costs)")
    parser.add_argument("--results", default="results", help="a finished run's results (for atlas)")
    parser.add_argument("--specs", default=None,
                        help="comma list: only these attention specs (e.g. 8L,8DEA,8LPEA)")
    parser.add_argument("--attention-rounds", type=int, default=1,
                        help="run every attention configuration this many times, round-robin; "
                             "medians (ratios: median of per-round ratios to 8L)")
    parser.add_argument("--repeat-scale", type=float, default=1.0,
                        help="multiply the timed repeats (10/3/1 by n) by this, at least 1")
    parser.add_argument("--train-data", default="results/data/multi30k/de-en/full")
    parser.add_argument("--train-steps", type=int, default=60)
    parser.add_argument("--train-preset", default=None, help="default: tiny on CPU, base on CUDA")
    parser.add_argument("--train-layers", default=None, help="default: 3+3 on CPU, 6+6 on CUDA")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--dry-run", action="store_true",
                        help="print what would run and write the training configs; run nothing")
    parser.add_argument("--parts-runs", type=int, default=1, help="trainings for the parts (medians)")
    parser.add_argument("--parts-one", nargs=2, metavar=("CONFIG", "START"), help=argparse.SUPPRESS)
    parser.add_argument("--one", nargs="+", metavar="ARG", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.parts_one:
        parts = train_parts(args.parts_one[0], float(args.parts_one[1]))
        print(json.dumps(parts))
        return 0
    if args.one:
        impl, spec, n, batch, device, threads, *precision = args.one
        print(json.dumps(run_one(impl, spec, int(n), int(batch), device, int(threads), *precision)))
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
    return 0


if __name__ == "__main__":
    import warnings
    warnings.filterwarnings("ignore", category=FutureWarning)
    sys.exit(main())
