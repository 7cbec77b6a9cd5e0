"""Attention (``attention.csv``, columns ``impl,spec,n,batch,precision,fwd_bwd_ms,cpu_ms,peak_mb,first_mb,live_mb``
and ``ratio_time,ratio_cpu,ratio_mem,ratio_first,ratio_live``, each the median over rounds of the value
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

Method: on CPU every configuration runs in **two fresh subprocesses** (no allocator or
cache reuse between configurations), one timing it and one measuring its memory.
``fwd_bwd_ms`` is the median over repeats after one warm-up step (10 repeats for n <= 128,
3 at 512, 1 at 2048), synchronised on CUDA, with glibc's allocator set as every workflow job
sets it (:data:`headlab.engine.malloc.JOB_MALLOC`: the layer timed as training runs it).
``cpu_ms`` is the median CPU time (``process_time``) of the same repeats: on a loaded
machine it moves less than wall time.

Memory on CPU: ``peak_mb`` is the growth of the process's peak resident set size during a
**steady-state** step, the second (Linux's VmHWM, reset to the current RSS just before it;
elsewhere ``ru_maxrss``), under :data:`headlab.engine.malloc.PROBE_MALLOC`, where every
allocation of 64 KiB or more is a mapping of its own, unmapped when freed: the RSS then
follows the tensors in use, workspaces inside ops included, so ``peak_mb`` is the extra
memory one training step of the layer needs (activations, gradients, temporaries).
``first_mb`` is the same growth over the first step: it adds what the process sets up once
and every layer of a model shares, so it is reported but not the layer's cost (library
buffers; torch's lazy imports: the first ``torch.autograd.grad``, which the chunked
backward of DEA/LPEA calls, imports sympy, ~35 MB of the 44 MB LPEA adds at n = 512).
Why not the first step's RSS under the job's allocator, as earlier versions measured:
there the RSS also holds what glibc keeps for reuse, which depends on the order and sizes of allocations more than on their total
(``7Ftoken+1L`` at n = 512: 175 MB of peak RSS for 77 MB of tensors). ``live_mb`` is the
peak of the tensor storages the step creates and holds at once, tracked through torch's
dispatcher (:func:`live_peak_mb`): allocator-independent and repeatable, but blind to
workspaces inside single ops.

``--attention-rounds R`` runs every configuration R times round-robin. On CUDA the memory
columns are the growth of ``torch.cuda.max_memory_allocated`` (reset before the step) over
the second step (``peak_mb``) and the first (``first_mb``: cuBLAS workspaces); it counts
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
MEASURED = {"fwd_bwd_ms": "ratio_time", "cpu_ms": "ratio_cpu", "peak_mb": "ratio_mem", "first_mb": "ratio_first",
            "live_mb": "ratio_live"}
COLUMNS = ["impl", "spec", "n", "batch", "precision", "fwd_bwd_ms", "cpu_ms", "peak_mb", "first_mb", "live_mb",
           "ratio_time", "ratio_cpu", "ratio_mem", "ratio_first", "ratio_live"]
#: what one measurement (:func:`run_one`) covers: on CPU the timing and the memory run in
#: processes of their own, each under its allocator settings (see the module doc)
PARTS = ("all", "time", "memory")
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
              heads: int = 8, attention_dropout: float = 0.0):
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
        module = MultiHeadedAttention(heads, d, dropout=attention_dropout, is_decoder=False, attn_type="self",
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
        module = HeadlabSelfAttention(parse_spec(spec)[0], d, d // heads, add_qkvbias=True,
                                      attention_dropout=attention_dropout)
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

    def clear():
        """Free the previous step's gradients (of the input and the parameters), as an
        optimizer's ``zero_grad(set_to_none=True)`` does between training steps."""
        x.grad = None
        module.zero_grad(set_to_none=True)

    def clean_step():
        clear()
        step()
    clean_step.clear = clear           # step_memory measures from the cleared state
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


def step_memory(step, cuda: bool = False) -> tuple[float, float]:
    """MiB (first, steady): the growth of the peak memory over ``step()``'s first run and its
    second (CPU: peak RSS, see :func:`_rss_start`; CUDA: ``max_memory_allocated``), each from
    the state ``step.clear()`` leaves (no gradients held), so that the gradients a step
    creates count in full."""
    import torch

    growth = []
    for _ in range(2):
        getattr(step, "clear", lambda: None)()
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.max_memory_allocated()
            step()
            torch.cuda.synchronize()
            growth.append((torch.cuda.max_memory_allocated() - before) / 2**20)
        else:
            before = _rss_start()
            step()
            growth.append(_rss_peak_growth(before))
    return growth[0], growth[1]


def run_one(impl: str, spec: str, n: int, batch: int, device: str, threads: int = 1,
            precision: str = "fp32", d: int = 512, heads: int = 8, part: str = "all") -> dict:
    """Measure one configuration in this process (on CPU a fresh subprocess per ``part``:
    ``time`` the timing columns, ``memory`` the memory columns, ``all`` both)."""
    import torch

    if part not in PARTS:
        raise ValueError(f"part must be one of {', '.join(PARTS)}, got {part!r}")
    torch.set_num_threads(threads)
    module, step = make_step(impl, spec, n, batch, device, precision, d, heads)
    cuda = device.startswith("cuda")
    row = {}
    if part in ("all", "memory"):
        first_mb, peak_mb = step_memory(step, cuda)
        row.update(peak_mb=round(peak_mb, 1), first_mb=round(first_mb, 1), live_mb=round(live_peak_mb(step), 1))
    if part in ("all", "time"):
        if part == "time":
            step()                                                      # warm-up
        times, cpu_times = [], []
        for _ in range(_repeats(n)):
            start, cpu_start = time.perf_counter(), time.process_time()
            step()
            if cuda:
                torch.cuda.synchronize()
            times.append((time.perf_counter() - start) * 1000)
            cpu_times.append((time.process_time() - cpu_start) * 1000)
        row.update(fwd_bwd_ms=round(statistics.median(times), 2), cpu_ms=round(statistics.median(cpu_times), 2))
    return row


def _run_on_cpu(impl, spec, n, batch, threads, precision, timeout) -> dict:
    """One CPU configuration: its timing and its memory each in a fresh subprocess, under the
    job's and the probe's allocator settings (module doc). A failed or timed-out part leaves
    its columns empty."""
    from headlab.engine.malloc import job_environ, probe_environ

    row = {}
    for part, env in (("time", job_environ()), ("memory", probe_environ())):
        cmd = [sys.executable, "-m", "headlab.bench", "--one", impl, spec, str(n), str(batch), "cpu",
               str(threads), precision, part]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            continue
        if proc.returncode:
            print(proc.stderr[-2000:], file=sys.stderr)
            continue
        row.update(json.loads(proc.stdout.strip().splitlines()[-1]))
    return row


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


def _append_partial(out_dir: str, row: dict) -> None:
    """Each measured row as it comes, to ``attention.partial.csv`` (a bench stopped at a
    deadline keeps what it measured; ``attention.csv`` is written at the end, with ratios)."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "attention.partial.csv")
    new = not os.path.exists(path)
    with open(path, "a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, extrasaction="ignore")
        if new:
            writer.writeheader()
        writer.writerow(row)


def bench_attention(out_dir: str, sizes=None, batch: int = 16, devices=None,
                    mem_limit_gb: float = 6.0, timeout: int = 300, threads: int = 1,
                    specs: list[str] | None = None, precisions=None, rounds: int = 1,
                    dry_run: bool = False) -> list[dict]:
    """Every configuration of :func:`attention_plan` ``rounds`` times, round-robin (see
    :func:`with_ratios`); CPU configurations each in two fresh processes (:func:`_run_on_cpu`),
    CUDA ones in this one."""
    from headlab.io import atomic_write

    plan = attention_plan(devices or default_devices(), sizes, specs and sorted({*specs, "8L"}), precisions)
    sweeps = []
    for round_no in range(rounds):
        rows = []
        for device, n, precision, impl, spec in plan:
            name = impl if device == "cpu" else f"{impl}@{device}"
            row = {"impl": name, "spec": spec, "n": n, "batch": batch, "precision": precision}
            if dry_run:
                print("would run:", "-m headlab.bench --one", impl, spec, n, batch, device, threads, precision, flush=True)
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
                result = _run_on_cpu(impl, spec, n, batch, threads, precision, timeout)
            row.update(result)
            rows.append(row)
            print(f"round {round_no + 1}/{rounds}:", ",".join(str(row.get(c, "")) for c in COLUMNS[:10]), flush=True)
            _append_partial(out_dir, row)
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
