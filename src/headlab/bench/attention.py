"""Attention (``attention.csv``, columns ``impl,spec,n,batch,precision,fwd_bwd_ms,cpu_ms,peak_mb,live_mb``
and ``ratio_time,ratio_cpu,ratio_mem,ratio_live``, each the median over rounds of the value
divided by headlab ``8L``'s of the same round, device, n and precision: :func:`with_ratios`):
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
``cpu_ms`` is the median CPU time (``process_time``) of the same repeats: on a loaded
machine it moves less than wall time. ``peak_mb`` on CPU is the growth of the process's
peak resident set size during the warm-up step (Linux's VmHWM, reset to the current RSS
just before it; elsewhere ``ru_maxrss``), measured after the module and inputs exist: the
extra memory one training step of the layer needs (activations, gradients, temporaries).
``live_mb`` is the peak of the tensor storages the step creates and holds at once, tracked
through torch's dispatcher (:func:`live_peak_mb`): allocator-independent and repeatable.
``--attention-rounds R`` runs every configuration R times round-robin. On CUDA it is the growth of
``torch.cuda.max_memory_allocated`` (reset before the step) over the same step; it counts
allocated tensors, not the caching allocator's reserve, so CUDA configurations run in one
process (one CUDA start-up; out of memory leaves an empty row). CPU configurations whose
n x n score tensors alone would exceed ``--mem-limit-gb`` are skipped (row with empty
values) rather than risk the OOM killer on a shared machine.
"""
from __future__ import annotations

import csv
import json
import os
import statistics
import subprocess
import sys
import time

from headlab.bench.synthetic import synthetic_side

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
