"""One GPU sitting (copied into the bundle as ``run.py`` by ``headlab gpu-bundle``):
standard library only, since it runs before anything is installed.

    python3 gpu-bundle/run.py --out "$OUT" [--budget 570] [--work /tmp/headlab-gpu]
    python3 gpu-bundle/run.py --out OUT --device cpu --budget 300      (a rehearsal)

Everything is driven by one deadline, ``--budget`` seconds after the start (by default the
GPU plan's ``sitting.budget_s``, 570: a 10-minute command less the machine's start-up of the
files and their return). The plan's ``sitting`` figures travel in the manifest, so the window
a sitting trains in is the one the queue forecast from (:func:`sitting_figures`):

1. install, bounded (:data:`INSTALL_S`) and checked first: a wheel that would replace the
   machine's torch, numpy or a CUDA library is refused by name before anything is unpacked;
   a wheel whose package the machine already has at the bundled version or newer is not
   installed (it would shadow the machine's); then the checkout, the prepared data and the
   remaining wheels (``pip --no-index --no-deps --target``), and an import check that torch
   and numpy are the machine's own;
2. the bundle's models train side by side on the one GPU (``headlab train -config``, the
   config the workflow wrote: mixed precision, a checkpoint every ``save_checkpoint_steps``);
   beside them the CUDA suite (``pytest -m gpu``, each result appended to a report as it
   comes) and then a short attention bench (every kind, n = 512, fp32 and fp16) once per
   attention path (fused, blocked: ``HEADLAB_ATTENTION_PATH``); ``--mps on`` shares the GPU
   through CUDA MPS where its daemon starts and a client connects (else without, recorded);
   Each training stops by its slice's stop rule (``-early_stopping``: no lower validation
   cross-entropy for ``patience`` validations) or at ``budget - eval reserve``. A slice with
   a chain (paper D: fine-tunes of a model trained in this sitting) trains stage by stage,
   each chained stage prepared from the stage before (:mod:`headlab.workflow.sitting_chain`)
   and ended early enough to leave the later stages the time the plan keeps for them;
3. each model's best validation checkpoint is translated (beam 5, ``-precision fp16``),
   scored with sacreBLEU (95% bootstrap interval; paired bootstrap against the first model
   of its seed) and published with its provenance (:mod:`headlab.workflow.sitting`) into
   ``results/published/<slice>/<sitting>/``, ``<sitting>`` = ``<UTC date>-<gpu>-<commit>``
   (a new folder: never one that exists). The folder is written, labelled, before anything
   slow, so the sitting never publishes nothing: a deadline leaves ``status`` partial or
   deadline and ``lacks`` naming what is missing. With time left after it, the probes:
   side by side, more copies of the slice's models at once than the sitting trained (the
   manifest's ``probe_side_by_side``: one seed more a sitting), each timed past its warm-up;
   and the first model alone for a minute, its steady step timed and 20 steps profiled,
   and on a GPU the same model compiled in place and timed again (the two probes in the
   manifest's ``probe_first`` order; the speed rows gain their
   columns; the plan's seconds a step with that many models, with one, and what compiling
   buys). ``--compile MODE`` trains the sitting's models compiled (default off).

OUT holds at most three files at any moment, rewritten every :data:`STATUS_EVERY_S`
seconds, so a command killed at any point returns what was done: ``status.json`` (phase,
steps, tests, bench rows, errors) and ``headlab-sitting.tar.gz`` (the publication, logs, the
CUDA suite's report, bench CSVs, training logs).

A second call on the same machine (same ``--work``) reads the first one's state and does
only what it left: the evaluation its deadline cut, the CUDA tests not yet run, the probes,
the bench on an idle GPU. It never trains again. ``--device cpu`` rehearses every step on a
CPU with small settings (checkpoints every 2 steps, 24 test sentences), so ``make
gpu-rehearsal`` proves the route in a venv that holds the GPU machine's Python and package
versions.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
import zlib
from pathlib import Path

BUNDLE = Path(__file__).resolve().parent
#: packages a bundle must never replace: the machine's CUDA torch, the numpy it was built
#: against, and CUDA's own libraries
PROTECTED = re.compile(r"^(torch|numpy|triton|nvidia-.*|cuda-.*)$")
INSTALL_S = 120          # unpack + pip + import check; fails the sitting past this
STATUS_EVERY_S = 30
POLL_S = 2
#: a manifest without the plan's ``sitting`` figures (a bundle of before they travelled
#: in it, or a test's): the plan's own, as shipped
BUDGET_S = 570
PACK_S = 15              # kept back at the end for the last status and tarball
EVAL_RESERVE_S = {"cuda": 110, "cpu": 120}   # translation (three models at once) + scoring
#: what the evaluation's reserve keeps back from its translations: the evaluation's own
#: deadline comes EVAL_MARGIN_S before the runner stops it (its start-up and last write), the
#: translations end SCORING_S before that (sacreBLEU with bootstrap intervals and the paired
#: tests: 2.8 s for three rows of 1,000 sentences at 993e600), and the trainings' stop and the
#: MPS daemon's quit come first (~0 s at 993e600). A slice's reserve must hold these and its
#: translations (headlab.workflow.gpu_measures.EvaluationMeasured.reserve_for)
EVAL_MARGIN_S = 10
SCORING_S = {"cuda": 10, "cpu": 10}
STOP_S = 3
BENCH_S = 60
#: the probe alone: one model, 60 steps, the last 20 profiled (a rehearsal: 8 steps, 2 profiled)
PROBE_S = {"cuda": 90, "cpu": 60}
#: the probe side by side: K copies of the slice's models at once (their start-ups together,
#: a barrier, 30 steps timed; a rehearsal: 2 copies, 4 steps); K is the manifest's
#: ``probe_side_by_side`` (the bundle's: one seed more a sitting for the plan's ready slices)
CROWD_S = {"cuda": 100, "cpu": 60}
#: the probe alone then compiles its model in place (``sitting_probe --compile default``) and
#: times it again: the compile's time on top of the probe's (of unknown length on the GPU
#: machine: a cap, not a forecast; the eager figures are written before it begins, so a probe
#: stopped while compiling keeps them and says how long it had compiled). On a GPU only: a CPU
#: rehearsal's two cores would compile a base model for minutes (tests/test_compiled.py runs
#: the same probe on a toy model instead)
COMPILE_S = {"cuda": 150, "cpu": 0}
COMPILE_MODE = "default"
#: ``--compile``'s values: ``headlab train -compile``'s (headlab.engine.opts.COMPILE_MODES; this
#: file runs before headlab is installed)
TRAIN_COMPILE_MODES = ("off", "default", "reduce-overhead", "max-autotune-no-cudagraphs")
#: the probes' own options on a CPU rehearsal (a GPU's are the probe's defaults): every step
#: of the later call's probes rehearsed, sized for two cores
PROBE_ARGS = {"cuda": [], "cpu": ["--steps", "8", "--warmup", "2", "--profile-steps", "2"]}
CROWD_ARGS = {"cuda": [], "cpu": ["--steps", "6", "--warmup", "2"]}
CROWD_FOLDER = "crowd"   # under logs/: one JSON per copy (headlab.workflow.sitting_speed.crowd_summary)
SUITE_REST_MIN_S = 30    # a later call's rest of the CUDA suite has at least this before the probe's time is kept
SPEED_ROWS_S = 15        # kept back for the speed rows after a later call's probe and bench
#: iterations between two marks of a training's clock (its Unix time): the steps that shared
#: the GPU with the CUDA suite or the bench, against those that did not
MARK_EVERY = {"cuda": 50, "cpu": 5}
#: the first model's profile window side by side: (first iteration, iterations); on a GPU
#: past the allocator's and MPS's warm-up and clear of the validation and checkpoint at 200
PROFILE_STEPS = {"cuda": (151, 20), "cpu": (3, 2)}
MPS_CHECK_S = 60         # a CUDA client of the MPS daemon must start within this
MPS_CONTROL_S = 20       # the daemon's start (-d) and quit answer within this, else recorded and left
MPS_SEARCH_PATH = "/usr/local/nvidia/bin:/usr/bin:/usr/local/cuda/bin"
MPS_CLIENT_CHECK = "import torch; assert torch.ones(2, device='cuda').sum().item() == 2"
ATTENTION_PATHS = ("fused", "blocked")
RESULTS_TAR = "headlab-sitting.tar.gz"
PUBLISHED = "results/published"
SMI_QUERY = "timestamp,power.draw,memory.used,utilization.gpu"
SMI_EVERY_S = 10
MAX_FILE_BYTES = 4 * 2**20
#: a rehearsal's settings (--device cpu): the same steps, sized for two cores
#: (bucket_size: the config's 262,144 examples make OpenNMT-py read Multi30k ~9 times before
#: its first batch, a minute of two shared cores, which once left no checkpoint at all;
#: side_by_side: the copies of its probe side by side, one a core)
CPU_SETTINGS = {"save_every": 2, "valid_steps": 10**6, "sentences": 16, "batch_size": 256, "max_length": 40,
                "bucket_size": 2048, "side_by_side": 2}


def onmt_overrides(device: str) -> list[str]:
    """OpenNMT-py options a rehearsal adds to a model's config, for its trainings and its
    probes alike (none on a GPU): one process on the CPU, fp32, small buckets and batches."""
    if device != "cpu":
        return []
    return ["-world_size", "1", "-gpu_ranks", "-model_dtype", "fp32", "-bucket_size",
            str(CPU_SETTINGS["bucket_size"]), "-batch_size", str(CPU_SETTINGS["batch_size"])]


def training_overrides(device: str) -> list[str]:
    """What a training adds to its model's config (the sitting's publication records them in
    the model's recipe: :mod:`headlab.workflow.recipe`): :func:`onmt_overrides`, and on the
    CPU no validation on two cores (a base model over 1,014 sentences): the stop rule is the
    GPU's; the rehearsal evaluates its newest checkpoint and says so."""
    if device != "cpu":
        return onmt_overrides(device)
    return [*onmt_overrides(device), "-save_checkpoint_steps", str(CPU_SETTINGS["save_every"]),
            "-valid_steps", str(CPU_SETTINGS["valid_steps"]), "-report_every", "1"]


def sitting_figures(manifest: dict, device: str) -> dict:
    """The call's budget, packing and evaluation reserve (seconds): the GPU plan's
    ``sitting`` block as the bundle copied it into the manifest, so that a reserve changed
    in config/gpu-plan.yaml changes the sitting's training window and not only the queue's
    forecast; and its trainings' ``-compile`` (the slice's, else ``sitting.compile``; off
    without either). A CPU
    rehearsal keeps its own reserve (two cores translate ~2x slower than the reserve a GPU
    needs) and is given its budget (``--budget 300``)."""
    plan = (manifest.get("slice") or {}).get("sitting") or {}
    return {"budget_s": plan.get("budget_s", BUDGET_S), "pack_s": plan.get("pack_s", PACK_S),
            "eval_reserve_s": plan.get("eval_reserve_s", EVAL_RESERVE_S["cuda"]) if device == "cuda"
            else EVAL_RESERVE_S[device],
            # the trainings' -compile (YAML's bare off reads as false)
            "compile": plan.get("compile") or "off"}


def chain_stages(models: list[dict]) -> list[list[str]]:
    """The names of the manifest's models stage by stage: first those trained from scratch,
    then each ``chain`` stage in order (a fine-tune of a model trained earlier in the
    sitting: it starts when the stage before it has ended)."""
    stages: dict[int, list[str]] = {}
    for model in models:
        stages.setdefault(int((model.get("chain") or {}).get("stage", 0)), []).append(model["name"])
    return [stages[index] for index in sorted(stages)]


def stage_deadlines(stop_at_s: float, reserved_s: list[float], plan_window_s: float | None) -> list[float]:
    """Each stage's end (seconds since the start): the last at ``stop_at_s``, each earlier one
    before the time the plan reserves for the stages after it (``reserved_s[k]``: stage k's
    start-up, preparation and training at the plan's throughput). A window other than the
    plan's (a CPU rehearsal, a shorter --budget) scales every reservation with it. Both
    windows count from the call's start: the installation comes out of the first stage, as
    in the plan's steps a sitting, never out of the chain's reservations (scaled by the
    window after it, the GPU's 12 s of installing cut 6 s from paper D's two fine-tuning
    stages, each planned to end its 400 steps just in time)."""
    scale = stop_at_s / plan_window_s if plan_window_s else 1.0
    ends = []
    for index in range(len(reserved_s)):
        ends.append(stop_at_s - scale * sum(reserved_s[index + 1:]))
    return ends


def gpu_short_name(name: str | None) -> str:
    """``NVIDIA H100 80GB HBM3`` -> ``h100``; no GPU -> ``cpu`` (a sitting's name says its GPU)."""
    if not name:
        return "cpu"
    match = re.search(r"(H100|H200|A100|L40S|V100|B200|A10G|L4|T4)", name, re.I)
    return match[1].lower() if match else (re.sub(r"[^a-z0-9]+", "", name.lower())[:12] or "gpu")


def sitting_folder(checkout: Path, slice_name: str, gpu: str, commit: str, today: str | None = None) -> str:
    """``results/published/<slice>/<UTC date>-<gpu>-<commit>``, relative to ``checkout``; where
    that folder exists (the same slice on the same day, GPU and commit) ``-2``, ``-3``...:
    a sitting never overwrites another's publication."""
    base = f"{today or time.strftime('%Y-%m-%d', time.gmtime())}-{gpu}-{commit}"
    parent = f"{PUBLISHED}/{slice_name}"
    name, count = base, 1
    while (Path(checkout) / parent / name).exists():
        count += 1
        name = f"{base}-{count}"
    return f"{parent}/{name}"


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_name(path: Path) -> tuple[str, str]:
    """(normalised distribution name, version) from a wheel's file name."""
    name, version = path.name.split("-")[:2]
    return _norm(name), version


def _version_tuple(text: str) -> tuple:
    return tuple(int(part) if part.isdigit() else 0 for part in re.split(r"[.+-]", text)[:4])


def installed_version(name: str) -> str | None:
    from importlib import metadata
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def unpack_bundled(tarball: Path, into: Path) -> None:
    """One of the bundle's tarballs unpacked, or SystemExit naming it. Read to its end:
    tarfile stops before gzip's trailer, so a copy damaged inside a stored deflate block
    (which zlib cannot see) would unpack without an error, and train on what it was not;
    at the end gzip checks its CRC-32 (a stdlib-only twin of ``headlab.io.read_to_the_end``)."""
    try:
        with tarfile.open(tarball, "r:gz") as tar:      # make gpu-bundle writes gzip only
            tar.extractall(into, filter="data")
            while tar.fileobj.read(1 << 20):
                pass
    except (tarfile.TarError, EOFError, zlib.error, OSError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err) or type(err).__name__
        raise SystemExit(f"run.py: the bundle's {tarball.name} cannot be unpacked ({reason}): build the bundle "
                         f"again (make gpu-bundle) and carry it again") from None


def choose_wheels(wheels: list[Path]) -> tuple[list[Path], list[str]]:
    """The wheels to install, and a note for each one skipped; SystemExit naming a wheel
    that would replace a :data:`PROTECTED` package (checked first, before anything is
    unpacked: seconds, not minutes)."""
    for wheel in wheels:
        name, _ = wheel_name(wheel)
        if PROTECTED.match(name):
            raise SystemExit(f"run.py: refusing {wheel.name}: it would replace the machine's {name}")
        with zipfile.ZipFile(wheel) as archive:
            tops = {entry.split("/")[0] for entry in archive.namelist()}
        if tops & {"torch", "numpy", "triton"}:
            raise SystemExit(f"run.py: refusing {wheel.name}: it holds {', '.join(sorted(tops & {'torch', 'numpy', 'triton'}))}")
    chosen, skipped = [], []
    for wheel in wheels:
        name, version = wheel_name(wheel)
        have = installed_version(name)
        if have is not None and _version_tuple(have) >= _version_tuple(version):
            skipped.append(f"{wheel.name}: the machine has {name} {have}")
        else:
            chosen.append(wheel)
    return chosen, skipped


def usable_cores() -> int:
    """The cores this process may run on (its affinity, which inductor counts too)."""
    try:
        return len(os.sched_getaffinity(0)) or 4
    except AttributeError:                  # no affinity on this platform
        return os.cpu_count() or 4


def cores_each(processes: int) -> dict[str, str]:
    """The environment of each of ``processes`` trainings side by side: its share of the
    machine's cores (one kept for the runner, the suite and the bench), for its math threads
    and for inductor's compile workers. Inductor otherwise starts a worker per core in every
    compiling process (three trainings on 16 cores: 48 processes, each holding torch), and a
    training that finished its compile would launch its steps among the others' workers."""
    threads = str(max(1, usable_cores() // (processes + 1)))
    return {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "TORCHINDUCTOR_COMPILE_THREADS": threads}


class Sitting:
    def __init__(self, args):
        self.args = args
        self.started = time.monotonic()
        self.work = Path(args.work).resolve()
        self.src = self.work / "headlab"
        self.site = self.work / "site"
        self.logs = self.work / "logs"
        self.out = Path(args.out).resolve()
        self.manifest = json.loads((BUNDLE / "manifest.json").read_text())
        # the manifest with the chain's fine-tunes completed as they are prepared (their
        # folders and configs exist only once their parent has trained)
        self.resolved = self.work / "manifest.json"
        if self.resolved.is_file() and (self.work / "state.json").is_file():
            self.manifest = json.loads(self.resolved.read_text())
        self.figures = sitting_figures(self.manifest, args.device)
        if args.budget is None:
            args.budget = self.figures["budget_s"]
        if args.eval_reserve is not None:
            self.figures["eval_reserve_s"] = args.eval_reserve
        # --compile wins; else the plan's. A CPU rehearsal passes the plan's mode to its
        # trainings with torch's own switch off (TORCH_COMPILE_DISABLE: the compile a no-op):
        # two cores would compile each model for minutes of its 300 s
        self.compile_rehearsed = args.compile is None and args.device == "cpu" and self.figures["compile"] != "off"
        if args.compile is None:
            args.compile = self.figures["compile"]
        self.state_path = self.work / "state.json"
        previous = json.loads(self.state_path.read_text()) if self.state_path.is_file() else {}
        if not previous and args.after:      # a fresh machine after a sitting on another one
            previous = {k: v for k, v in json.loads(Path(args.after).read_text()).items()
                        if k in ("trained", "published", "models", "calls")}
            previous["after"] = str(args.after)
        self.state = {"calls": previous.get("calls", []) + [{"budget_s": args.budget, "device": args.device}],
                      **{k: v for k, v in previous.items() if k != "calls"}}
        self.call = self.state["calls"][-1]
        # the call's start as Unix time: its *_s times on the trainings' clocks (their marks)
        self.call["started_at"] = round(time.time() - (time.monotonic() - self.started), 3)
        self.procs: dict[str, subprocess.Popen] = {}
        self.last_status = 0.0
        self.mps_control = "nvidia-cuda-mps-control"
        self.mps_live: set[str] = set()      # the records whose daemon this call started and has not quit

    # -- time and status -----------------------------------------------------------------
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def left(self) -> float:
        return self.args.budget - self.figures["pack_s"] - self.elapsed()

    def phase(self, name: str) -> None:
        self.call.setdefault("phases", {})[name] = {"start_s": round(self.elapsed(), 1)}
        self.call["phase"] = name
        print(f"run.py: {self.elapsed():6.1f} s  {name}", flush=True)
        self.status(force=True)

    def end_phase(self, name: str, **info) -> None:
        entry = self.call["phases"][name]
        entry.update(end_s=round(self.elapsed(), 1), **info)
        entry["wall_s"] = round(entry["end_s"] - entry["start_s"], 1)

    def env(self) -> dict:
        env = dict(os.environ, PYTHONUNBUFFERED="1", HEADLAB_COMMIT=self.manifest["commit"],
                   PYTHONDONTWRITEBYTECODE="1")
        # headlab from its checkout, then the carried wheels; the machine's site-packages
        # follow (the bundle carries nothing the machine has, see choose_wheels)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(self.src / "src"), str(self.site),
                                                        os.environ.get("PYTHONPATH", "")) if p)
        if self.args.device == "cpu":
            env["CUDA_VISIBLE_DEVICES"] = ""
        if self.compile_rehearsed:
            env["TORCH_COMPILE_DISABLE"] = "1"
        return env

    def status(self, force: bool = False) -> None:
        """OUT/status.json and OUT/headlab-sitting.tar.gz, both replaced whole."""
        now = time.monotonic()
        if not force and now - self.last_status < STATUS_EVERY_S:
            return
        self.last_status = now
        self.call["elapsed_s"] = round(self.elapsed(), 1)
        self.state["models"] = self.model_progress()
        self.state["gpu_tests"] = self.test_summary()
        self.state["bench_rows"] = self.bench_rows()
        self.work.mkdir(parents=True, exist_ok=True)
        self.state_path.write_text(json.dumps(self.state, indent=1))
        self.out.mkdir(parents=True, exist_ok=True)
        tmp = self.out / ".status.json.tmp"
        tmp.write_text(json.dumps({**self.state, "commit": self.manifest["commit"]}, indent=1))
        os.replace(tmp, self.out / "status.json")
        self.pack()

    def published(self) -> str | None:
        """The sitting's folder in the checkout (results/published/<slice>/<sitting>)."""
        return self.state.get("publication")

    def pack(self) -> None:
        keep = (".json", ".jsonl", ".csv", ".md", ".txt", ".yaml", ".tsv", ".log", ".png")
        members = [(self.state_path, "state.json")]
        publication = self.published()
        folders = [(self.logs, "logs")] + ([(self.src / publication, publication)] if publication else [])
        for folder, prefix in (*folders,
                               (self.src / self.manifest["results"] / "bench", "bench")):
            for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
                if path.is_file() and path.suffix in keep and path.stat().st_size <= MAX_FILE_BYTES:
                    members.append((path, f"{prefix}/{path.relative_to(folder)}"))
        for model in self.prepared():
            for log, name in (("train.log", f"{model['name']}.log"), ("console.log", f"{model['name']}.console.log")):
                if (self.src / model["dir"] / log).is_file():
                    members.append((self.src / model["dir"] / log, f"train-logs/{name}"))
        tmp = self.out / f".{RESULTS_TAR}.tmp"
        with tarfile.open(tmp, "w:gz") as tar:
            for path, name in members:
                try:
                    tar.add(path, arcname=name)
                except OSError:
                    pass             # a log rotated away while packing: the next pack has it
        os.replace(tmp, self.out / RESULTS_TAR)

    # -- progress ------------------------------------------------------------------------
    def prepared(self) -> list[dict]:
        """The models with a config: all but the chain's fine-tunes not yet prepared."""
        return [model for model in self.manifest["models"] if "config" in model]

    def model_progress(self) -> dict:
        progress = {}
        for model in self.prepared():
            folder = self.src / model["dir"]
            steps = sorted(int(m[1]) for p in folder.glob("*_step_*.pt") if (m := re.search(r"_step_(\d+)\.pt$", p.name)))
            log = folder / "train.log"
            text = log.read_text(errors="replace") if log.is_file() else ""
            reports = re.findall(r"Step\s+(\d+)/\s*\d+;.*?(\d+)/\s*(\d+) tok/s", text)
            proc = self.procs.get(model["name"])
            progress[model["name"]] = {
                "checkpoints": steps, "last_logged_step": int(reports[-1][0]) if reports else 0,
                "tok_s_src_tgt": [int(reports[-1][1]), int(reports[-1][2])] if reports else None,
                "running": proc is not None and proc.poll() is None,
                "rc": None if proc is None else proc.poll(),
            }
        return {**self.state.get("models", {}), **progress} if progress else self.state.get("models", {})

    def test_report(self) -> Path:
        return self.logs / "gpu-tests.jsonl"

    def test_summary(self) -> dict:
        counts: dict[str, int] = {}
        path = self.test_report()
        for line in path.read_text().splitlines() if path.is_file() else []:
            outcome = json.loads(line)["outcome"]
            counts[outcome] = counts.get(outcome, 0) + 1
        return counts

    def bench_rows(self) -> int:
        logs = sorted(self.logs.glob("bench*.log")) if self.logs.is_dir() else []
        return sum(len(re.findall(r"^round \d+/\d+:", log.read_text(), re.M)) for log in logs)

    # -- processes -----------------------------------------------------------------------
    def start(self, name: str, cmd: list[str], log: Path, extra_env=None) -> subprocess.Popen:
        # a process is stopped by its name: a second one under a live one's name would be
        # lost, and outlive the sitting on the GPU
        if name in self.procs and self.procs[name].poll() is None:
            raise SystemExit(f"run.py: {name} is still running; not starting another under its name")
        log.parent.mkdir(parents=True, exist_ok=True)
        handle = open(log, "a")
        handle.write(f"\n$ {' '.join(cmd)}\n")
        handle.flush()
        # a process group of its own (stopped as one: a sitting's translations with it), in
        # the command's session: the device machine ends what a command leaves running
        # except a new session's, which would hold the GPU into the next call
        proc = subprocess.Popen(cmd, cwd=self.src, env={**self.env(), **(extra_env or {})}, stdout=handle,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, process_group=0)
        self.procs[name] = proc
        return proc

    def stop(self, name: str, grace: float = 10.0) -> None:
        proc = self.procs.get(name)
        if proc is not None:
            self._terminate([proc], grace, kill_wait=30)

    def stop_all(self, grace: float) -> None:
        """Every process of the call at once (one by one, each with its own grace, a call
        stopped from outside would lose its last pack)."""
        self._terminate(list(self.procs.values()), grace, kill_wait=10)

    @staticmethod
    def _terminate(procs: list[subprocess.Popen], grace: float, kill_wait: float) -> None:
        """SIGTERM to each process's group, ``grace`` s for all of them, then SIGKILL."""
        live = [proc for proc in procs if proc.poll() is None]
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, kill_wait)):
            for proc in live:
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    pass
            until = time.monotonic() + wait
            while time.monotonic() < until and any(proc.poll() is None for proc in live):
                time.sleep(0.1)
            live = [proc for proc in live if proc.poll() is None]
            if not live:
                return

    def run(self, name: str, cmd: list[str], timeout: float, extra_env=None) -> int | None:
        """``cmd`` to the end or ``timeout`` s (then stopped: None), status kept current."""
        proc = self.start(name, cmd, self.logs / f"{name}.log", extra_env)
        deadline = time.monotonic() + max(timeout, 1)
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(min(POLL_S, 0.2 + (time.monotonic() - deadline + timeout) / 10))
            self.status()
        if proc.poll() is None:
            self.stop(name)
            return None
        return proc.returncode

    # -- 1: install ----------------------------------------------------------------------
    def install(self) -> None:
        if self.state.get("installed") and (self.src / "src").is_dir():
            return
        self.phase("install")
        wheels, skipped = choose_wheels(sorted((BUNDLE / "wheels").glob("*.whl")))
        for name in ("headlab", "site", "logs"):
            shutil.rmtree(self.work / name, ignore_errors=True)
        self.logs.mkdir(parents=True)
        unpack_bundled(BUNDLE / "source.tar.gz", self.work)
        unpack_bundled(BUNDLE / "data.tar.gz", self.src)
        rc = 0
        if wheels:
            rc = self.run("install", [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                                      "--no-compile", "--disable-pip-version-check", "--target", str(self.site),
                                      *map(str, wheels)], INSTALL_S - self.elapsed())
        # headlab.engine first, as every headlab command: it defers OpenNMT-py's imports of
        # packages for transforms headlab never uses (spaCy, fastText, ...), which the machine lacks
        check = ("import json, headlab.engine.plugin, torch, numpy, onmt.bin.train, onmt.bin.translate, sacrebleu, "
                 "sacremoses, headlab.workflow.sitting; "
                 "print(json.dumps({'torch': torch.__version__, 'torch_file': torch.__file__, "
                 "'numpy': numpy.__version__, 'numpy_file': numpy.__file__, 'cuda': torch.cuda.is_available(), "
                 "'gpu': torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "
                 "'cuda_version': torch.version.cuda, 'python': __import__('sys').version.split()[0]}))")
        if rc == 0:
            rc = self.run("imports", [sys.executable, "-c", check], max(INSTALL_S - self.elapsed(), 30))
        found = self._last_json(self.logs / "imports.log") if rc == 0 else None
        if found and any(str(self.site) in found[key] for key in ("torch_file", "numpy_file")):
            found, rc = None, f"torch or numpy was imported from the bundle ({self.site}), not the machine"
        self.end_phase("install", rc=rc, installed=[w.name for w in wheels], skipped=skipped)
        if found is None:
            self.state["error"] = f"install failed (rc {rc}): see logs/install.log, logs/imports.log"
            raise SystemExit(f"run.py: {self.state['error']}")
        self.state.update(installed=True, machine=found, machine_packages=self.pip_list())
        if self.args.device == "cuda" and not found["cuda"]:
            self.state["error"] = "no CUDA device: use --device cpu for a rehearsal"
            raise SystemExit(f"run.py: {self.state['error']}")
        self.name_sitting(found.get("gpu") if self.args.device == "cuda" else None)

    def name_sitting(self, gpu_name: str | None) -> None:
        short = gpu_short_name(gpu_name)
        folder = sitting_folder(self.src, self.manifest["slice"]["name"], short, self.manifest["commit"])
        self.state.update(sitting=Path(folder).name, gpu=short, publication=folder)

    @staticmethod
    def _last_json(path: Path) -> dict | None:
        for line in reversed(path.read_text().splitlines()):
            if line.startswith("{"):
                return json.loads(line)
        return None

    def pip_list(self) -> str:
        result = subprocess.run([sys.executable, "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"],
                                capture_output=True, text=True, timeout=60)
        (self.logs / "machine-packages.txt").write_text(result.stdout)
        return "logs/machine-packages.txt"

    # -- 2: train, with the suite and the bench beside -----------------------------------
    def train_args(self, model: dict) -> list[str]:
        """``headlab train`` of one model, timed from inside (:mod:`headlab.workflow.sitting_clock`:
        ``logs/clock.<name>.json``); the slice's first model also profiles
        :data:`PROFILE_STEPS` whole iterations side by side with the others."""
        cmd = [sys.executable, "-m", "headlab.workflow.sitting_clock", "--out",
               str(self.logs / f"clock.{model['name']}.json"), "--name", model["name"],
               "--mark-every", str(MARK_EVERY[self.args.device])]
        if model["name"] == self.manifest["models"][0]["name"]:
            first, steps = PROFILE_STEPS[self.args.device]
            cmd += ["--profile-from", str(first), "--profile-steps", str(steps)]
        # -compile always given: a $HEADLAB_COMPILE the device command inherited never decides.
        # A chain's fine-tune trains eager: its few hundred steps (~40 s) would not pay back a
        # compile (the probe's, ~1 min unmeasured on the GPU) within the stage the plan reserves
        # for it at eager speed, and the stage's deadline would cut it short of its train_steps
        mode = "off" if model.get("chain") else self.args.compile
        return cmd + ["--", "-config", model["config"], *training_overrides(self.args.device), "-compile", mode]

    def training_window_s(self) -> float:
        return self.args.budget - self.figures["pack_s"] - self.figures["eval_reserve_s"]

    def check_manifest(self) -> None:
        """Before anything: the runner keys each model's process, logs and rows by its name."""
        names = [model["name"] for model in self.manifest["models"]]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise SystemExit(f"run.py: the manifest names {', '.join(twice)} more than once "
                             f"({', '.join(m.get('dir', m['name']) for m in self.manifest['models'] if m['name'] in twice)}): "
                             f"rebuild the bundle (make gpu-bundle); nothing trained")

    def adopt_interrupted_training(self) -> bool:
        """A call stopped from outside while its models trained (the device command's limit,
        a signal, a fault of the runner) left the phase begun and never ended, and the
        checkpoints on this machine: this call takes them for trained (each at the deadline
        of its newest checkpoint) and evaluates them, where training anew would throw them
        away and find the window short of the slice's min_steps. False where there is
        nothing to adopt (no earlier call trained here, or no checkpoint came of it)."""
        earlier = self.state["calls"][:-1]
        began = next((call for call in earlier if "train" in (call.get("phases") or {})), None)
        if self.state.get("trained") or self.state.get("after") or began is None or not self.src.is_dir():
            return False
        if not any(entry.get("checkpoints") for entry in self.model_progress().values()):
            return False
        self.state.update(trained=True, exited={})
        began.setdefault("phases", {})["train"].setdefault("interrupted", True)
        self.call["adopted_training"] = (f"the training of an earlier call was stopped from outside at "
                                         f"{began.get('elapsed_s', '?')} s: its checkpoints evaluated")
        print(f"run.py: {self.call['adopted_training']}", flush=True)
        return True

    def check_window(self) -> None:
        """Before anything, on a GPU: a first call whose training window cannot reach the
        slice's ``min_steps`` at the plan's throughput would publish rows worth nothing, and
        most often means a call meant for the remainder found a fresh machine (the warm one
        was given back): its state is gone, so it would train from scratch."""
        plan = self.manifest.get("slice") or {}
        if self.args.device != "cuda" or self.state.get("trained") or not plan.get("min_steps"):
            return
        window = self.training_window_s()
        if plan.get("chain_stage_s") and plan.get("train_window_s"):
            # the first stage's share: the chain's stages keep theirs (stage_deadlines)
            window *= 1 - sum(plan["chain_stage_s"].values()) / plan["train_window_s"]
        steps = (window - plan["startup_s"]) / plan["seconds_per_step"]
        if steps < plan["min_steps"]:
            raise SystemExit(f"run.py: --budget {self.args.budget:g} leaves ~{max(steps, 0):.0f} training steps, under the "
                             f"slice's min_steps {plan['min_steps']} at the plan's {plan['seconds_per_step']:g} s a step; "
                             f"no state in {self.work} (a fresh machine?): a later call finds the first one's state "
                             f"only on the same machine, with the same --work; nothing trained")

    def train(self) -> None:
        """The models side by side, stage by stage (:func:`chain_stages`): a slice without a
        chain is one stage; a chained stage first prepares its fine-tunes from the models
        trained before it (:mod:`headlab.workflow.sitting_chain`), then trains them. Each
        stage ends when its models stop by the stop rule or at its deadline
        (:func:`stage_deadlines`); the CUDA suite and the bench run beside all of them."""
        if self.state.get("trained"):
            return
        self.phase("train")
        stop_at = self.training_window_s()
        stages = chain_stages(self.manifest["models"])
        plan = self.manifest.get("slice") or {}
        reserved = [0.0] + [float(plan.get("chain_stage_s", {}).get(str(index), 0)) for index in range(1, len(stages))]
        ends = stage_deadlines(stop_at, reserved, plan.get("train_window_s"))
        self.call["stage_ends_s"] = [round(end, 1) for end in ends]
        self.write_resolved()
        self.sample_gpu()
        self.start_mps()
        self.record_extra("train_compile", self.args.compile)
        if self.compile_rehearsed:
            self.call["train_compile_disabled"] = "a CPU rehearsal of the plan's mode (TORCH_COMPILE_DISABLE=1)"
        side = self.side_track(stop_at)
        exited = {}
        for index, (names, end) in enumerate(zip(stages, ends)):
            # each stage's times: what the plan's prepare_s and start-up estimate
            record = {"models": names, "start_s": round(self.elapsed(), 1), "end_by_s": round(end, 1)}
            self.call.setdefault("stages", []).append(record)
            print(f"run.py: {self.elapsed():6.1f} s  stage {index}: {', '.join(names)} (until {end:.0f} s)", flush=True)
            if index:
                names = self.prepare_stage(names, end)
                record.update(prepared=names, prepared_s=round(self.elapsed(), 1))
            self.call["stage"] = index
            exited.update(self.train_stage(names, end, side))
            record["ended_s"] = round(self.elapsed(), 1)
        # who ended by itself (its stop rule, or a crash) before the deadline
        self.state["exited"] = exited
        for name in list(self.procs):
            if name != "nvidia-smi":
                self.stop(name)
        self.stop_mps()
        self.state["trained"] = True
        self.end_phase("train", stopped_at_s=round(self.elapsed(), 1), models=self.model_progress())
        self.status(force=True)

    def compile_workers(self, probe: bool = False) -> str:
        """Inductor's compile workers of one training of the slice's first stage beside the
        others (:func:`cores_each`); ``probe``: of one training of the plan's largest stage
        (the manifest's ``compile_side_by_side``), whatever slice the probe's sitting trains."""
        trainings = len(chain_stages(self.manifest["models"])[0])
        if probe:
            trainings = int((self.manifest.get("slice") or {}).get("compile_side_by_side") or trainings)
        return cores_each(trainings)["TORCHINDUCTOR_COMPILE_THREADS"]

    def train_stage(self, names: list[str], end: float, side) -> dict:
        """Train ``names`` side by side until they all stop or ``end``; who exited by itself."""
        models = [model for model in self.prepared() if model["name"] in names]
        share = cores_each(len(models))
        for model in models:
            # train.log is headlab train's own (its logger); the console (warnings, a
            # traceback) goes beside it
            self.start(model["name"], self.train_args(model), self.src / model["dir"] / "console.log", share)
        while models and self.elapsed() < end and any(self.procs[m["name"]].poll() is None for m in models):
            next(side)
            time.sleep(POLL_S)
            self.status()
        exited = {m["name"]: self.procs[m["name"]].poll() for m in models if self.procs[m["name"]].poll() is not None}
        for model in models:
            self.stop(model["name"])
        return exited

    def prepare_stage(self, names: list[str], end: float) -> list[str]:
        """The fine-tunes of one chain stage prepared at once (their parents' best
        checkpoints, a mask from a gated model's gates); the names of those prepared. A
        failure (a parent without a checkpoint) is kept in ``chain_errors`` and published
        in ``lacks``; the others go on."""
        chain_dir = self.work / "chain"
        chain_dir.mkdir(exist_ok=True)
        for name in names:
            self.start(f"prepare-{name}", [sys.executable, "-m", "headlab.workflow.sitting_chain", "--manifest",
                                           str(self.resolved), "--model", name, "--out", str(chain_dir / f"{name}.json")],
                       self.logs / f"prepare-{name}.log")
        while self.elapsed() < end and any(self.procs[f"prepare-{n}"].poll() is None for n in names):
            time.sleep(min(POLL_S, 0.5))
            self.status()
        prepared = []
        for name in names:
            late = self.procs[f"prepare-{name}"].poll() is None     # still preparing at the stage's end
            self.stop(f"prepare-{name}")
            done = chain_dir / f"{name}.json"
            if self.procs[f"prepare-{name}"].returncode == 0 and done.is_file():
                # the model, and its initial checkpoint's entry (evaluated, never trained)
                entries = json.loads(done.read_text())
                self.manifest["models"] = [entry for m in self.manifest["models"]
                                           for entry in (entries if m["name"] == name else [m])]
                prepared.append(name)
            else:
                log = (self.logs / f"prepare-{name}.log").read_text(errors="replace").strip().splitlines()
                why = "its preparation was stopped at its stage's end" if late or not log else log[-1]
                self.state.setdefault("chain_errors", {})[name] = why[:300]
        self.write_resolved()
        return prepared

    def write_resolved(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        tmp = self.resolved.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.manifest, indent=1))
        os.replace(tmp, self.resolved)

    def side_track(self, stop_at: float):
        """The CUDA suite, then the bench, each started when the one before ends; a
        generator the training loop advances every poll."""
        report = self.test_report()
        cmd = self.suite_args()
        # its compiled cases compile beside the trainings: with one training's compile workers
        self.start("gpu-tests", cmd, self.logs / "gpu-tests.log",
                   {"HEADLAB_TEST_REPORT": str(report), "TORCHINDUCTOR_COMPILE_THREADS": self.compile_workers()})
        self.call["gpu_tests_started_s"] = round(self.elapsed(), 1)
        while self.procs["gpu-tests"].poll() is None:
            if self.elapsed() > stop_at - BENCH_S:
                self.stop("gpu-tests")
                break
            yield
        self.call["gpu_tests_rc"] = self.procs["gpu-tests"].returncode
        self.call["gpu_tests_ended_s"] = round(self.elapsed(), 1)
        # the attention bench once per attention path (HEADLAB_ATTENTION_PATH), beside the
        # trainings (a shared GPU: the columns compare paths within one run, not to an idle GPU)
        for path in ATTENTION_PATHS:
            if self.elapsed() >= stop_at - 15:
                break
            name = f"bench-{path}"
            self.start(name, self.bench_args(f"bench-shared-{path}"), self.logs / f"{name}.log",
                       {"HEADLAB_ATTENTION_PATH": path})
            self.call[f"bench_{path}_started_s"] = round(self.elapsed(), 1)
            while self.procs[name].poll() is None and self.elapsed() < stop_at:
                yield
            self.stop(name)
            self.call[f"bench_{path}_rc"] = self.procs[name].returncode
            self.call[f"bench_{path}_ended_s"] = round(self.elapsed(), 1)
        while True:
            yield

    def suite_args(self) -> list[str]:
        """The CUDA suite; on a CPU rehearsal its CPU stand-ins (``cpu-...`` ids), which
        import all the CUDA cases import, so that a package the bundle lacks shows there."""
        marks = ["-m", "gpu"] if self.args.device == "cuda" else ["-k", "cpu-"]
        return [sys.executable, "-m", "pytest", "-q", *marks, "-p", "no:cacheprovider", "tests/gpu"]

    def bench_args(self, name: str) -> list[str]:
        device = "cuda" if self.args.device == "cuda" else "cpu"
        sizes, precisions = ("512", "fp32,fp16") if device == "cuda" else ("32", "fp32")
        return [sys.executable, "-m", "headlab.bench", "--what", "attention", "--devices", device, "--sizes", sizes,
                "--precisions", precisions, "--batch", "16", "--out", f"{self.manifest['results']}/bench/{name}"]

    # -- 3: evaluate and publish ---------------------------------------------------------
    def evaluate(self) -> None:
        if self.state.get("published"):
            return
        self.phase("evaluate")
        for name in [n for n in self.procs if n == "nvidia-smi"]:
            self.stop(name, grace=2)
        self.status(force=True)
        rc = self.run("evaluate", self.sitting_args(), self.left())
        self.end_phase("evaluate", rc=rc)
        self.read_publication(rc, "evaluate")

    def evaluation_left(self) -> list[str]:
        """What the first call's deadline cut of its publication, which an evaluation can still
        add (the provenance's ``lacks_by_cause``: BLEU on every test sentence, the head atlas,
        a publication the evaluation never wrote); not a model that never trained or whose
        checkpoints do not load, and nothing after a step failed (it would fail again)."""
        causes = self.state.get("lacks_by_cause") or {}
        return [] if causes.get("failed") else list(causes.get("deadline") or [])

    def complete_evaluation(self) -> None:
        """A later call on the same machine evaluates again what the first call's deadline
        cut (its finished translation chunks kept, :func:`headlab.workflow.sitting.translate_until`),
        in at most half of what this call has, and publishes into the same sitting folder.
        A first call stopped from outside in its evaluation never read what it published:
        its causes are read here (the translations not yet made are the deadline's), and
        one stopped before writing anything is evaluated whole."""
        if not self.published() or self.state.get("after") or not self.state.get("trained"):
            return        # (after a sitting on another machine, its checkpoints are not here)
        written = (self.src / self.published() / "provenance.json").is_file()
        cut = "published" not in self.state
        if cut and written:
            self.adopt_publication()
        if not (cut and not written) and not self.evaluation_left():
            return
        self.phase("evaluate-rest")
        before = list(self.state.get("lacks") or [])
        # its own deadline is half of what is left; stopped from outside only past all of it
        rc = self.run("evaluate-rest", self.sitting_args(deadline_s=self.left() / 2), self.left() - 5)
        self.end_phase("evaluate-rest", rc=rc, lacked=before)
        self.read_publication(rc, "evaluate-rest")

    def read_publication(self, rc, log: str) -> None:
        """The state's view of the publication (status, lacks) after the evaluation ``log``."""
        provenance = self.src / self.published() / "provenance.json"
        if not provenance.is_file():
            # stopped from outside (rc None) only past its own deadline: time, not a fault
            self.fallback_publication(("the evaluation was stopped at its deadline" if rc is None else
                                       f"the evaluation ended with status {rc}")
                                      + f" before writing anything (logs/{log}.log)",
                                      "deadline" if rc is None else "failed")
        self.adopt_publication()
        if rc != 0:
            self.state["error"] = f"evaluation ended with status {rc}: see logs/{log}.log"

    def adopt_publication(self) -> None:
        """The state's view of what the sitting folder's provenance says (status, lacks)."""
        provenance = self.src / self.published() / "provenance.json"
        self.state["published"] = provenance.is_file()
        found = json.loads(provenance.read_text()) if provenance.is_file() else {}
        self.state["publication_status"] = found.get("status")
        self.state["lacks"] = found.get("lacks")
        self.state["lacks_by_cause"] = found.get("lacks_by_cause")

    def sitting_args(self, speed_only: bool = False, deadline_s: float | None = None) -> list[str]:
        manifest = self.resolved if self.resolved.is_file() else BUNDLE / "manifest.json"
        deadline_s = self.left() - EVAL_MARGIN_S if deadline_s is None else deadline_s
        cmd = [sys.executable, "-m", "headlab.workflow.sitting", "--manifest", str(manifest),
               "--out", self.published(), "--device", self.args.device, "--state", str(self.state_path),
               "--sitting", self.state["sitting"], "--gpu", self.state["gpu"],
               "--deadline-s", str(max(deadline_s, 1)), "--logs", str(self.logs)]
        if self.args.device == "cpu":
            cmd += ["--sentences", str(CPU_SETTINGS["sentences"]), "--max-length", str(CPU_SETTINGS["max_length"])]
        return cmd + (["--speed-only"] if speed_only else [])

    def fallback_publication(self, why: str, cause: str) -> None:
        """The least a sitting publishes, standard library only: its provenance, labelled
        partial, saying what it lacks (the training logs and the status travel in the tarball)."""
        folder = self.src / self.published()
        folder.mkdir(parents=True, exist_ok=True)
        progress = self.model_progress()
        lack = "rows.csv, learning curves, speed rows, BLEU and chrF: " + why
        provenance = {"slice": self.manifest["slice"]["name"], "sitting": self.state["sitting"], "status": "partial",
                      # (headlab.workflow.sitting.LACK_CAUSES: run.py imports nothing of headlab)
                      "lacks": [lack], "lacks_by_cause": {"deadline": [], "failed": [], "not trained": [], cause: [lack]},
                      "headlab commit": self.manifest["commit"], "machine": self.state.get("machine"),
                      "models": {name: {k: entry.get(k) for k in ("checkpoints", "last_logged_step", "tok_s_src_tgt")}
                                 for name, entry in progress.items()},
                      "phases_s": self.call.get("phases", {})}
        (folder / "provenance.json").write_text(json.dumps(provenance, indent=1, sort_keys=True) + "\n")

    def start_mps(self, record: str = "mps") -> None:
        """CUDA MPS for the side-by-side trainings, if asked for and it works; optional: a
        failure is recorded and the trainings run without it. Without MPS the processes'
        kernels take turns on the GPU (time slices); with it, the small kernels of several
        trainings run at once. A daemon that starts is not enough: a CUDA client must
        connect within MPS_CHECK_S, else the daemon is stopped and its variables removed
        (a client of a broken server can wait, not fail). ``record``: the key the mode is
        kept under (the call's and ``speed-extra.json``'s: ``mps`` is the trainings')."""
        mode = "off"
        if self.args.mps == "on" and self.args.device == "cuda":
            control = shutil.which("nvidia-cuda-mps-control") or shutil.which(
                "nvidia-cuda-mps-control", path=MPS_SEARCH_PATH)
            mode = "unavailable"
            if control:
                self.mps_control = control
                pipes = self.work / "mps"
                pipes.mkdir(exist_ok=True)
                variables = {"CUDA_MPS_PIPE_DIRECTORY": str(pipes), "CUDA_MPS_LOG_DIRECTORY": str(pipes)}
                os.environ.update(variables)
                self.mps_live.add(record)
                try:
                    started = subprocess.run([control, "-d"], capture_output=True, text=True, timeout=MPS_CONTROL_S)
                    mode = "on" if started.returncode == 0 else f"failed: {started.stderr.strip()[:80]}"
                    if mode == "on":
                        client = subprocess.run([sys.executable, "-c", MPS_CLIENT_CHECK], capture_output=True,
                                                text=True, timeout=MPS_CHECK_S)
                        if client.returncode != 0:
                            mode = f"failed: client check: {client.stderr.strip().splitlines()[-1:]}"[:120]
                except (OSError, subprocess.TimeoutExpired) as err:
                    mode = f"failed: {err}"[:120]
                if mode != "on":
                    self.quit_mps(record)
        self.record_extra(record, mode)

    def record_extra(self, key: str, value: str) -> None:
        """``key`` in the call's state and in ``speed-extra.json`` (the speed rows' source)."""
        self.call[key] = value
        extra = self.logs / "speed-extra.json"
        found = json.loads(extra.read_text()) if extra.is_file() else {}
        extra.parent.mkdir(parents=True, exist_ok=True)
        extra.write_text(json.dumps({**found, key: value}, indent=1))

    def stop_mps(self, record: str = "mps") -> None:
        if self.call.get(record) == "on" and record in self.mps_live:
            self.quit_mps(record)

    def quit_mps(self, record: str) -> None:
        """The daemon told to quit, its variables removed; optional like its start: a daemon
        that does not answer (``quit`` waits for its clients) is recorded and left, never
        taken for the sitting's failure (it would cost the evaluation after the trainings)."""
        try:
            subprocess.run([self.mps_control], input="quit\n", text=True, capture_output=True,
                           timeout=MPS_CONTROL_S)
        except (OSError, subprocess.TimeoutExpired) as err:
            self.call[f"{record}_quit"] = f"failed: {err}"[:120]
        self.mps_live.discard(record)
        for name in ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY"):
            os.environ.pop(name, None)

    def sample_gpu(self) -> None:
        """nvidia-smi every SMI_EVERY_S s into logs/nvidia-smi.csv, while the runner lives
        (none on a machine without it: the speed rows then leave power and memory blank)."""
        if self.args.device != "cuda" or shutil.which("nvidia-smi") is None:
            return
        self.start("nvidia-smi", ["nvidia-smi", f"--query-gpu={SMI_QUERY}", "--format=csv,noheader,nounits",
                                  "-l", str(SMI_EVERY_S)], self.logs / "nvidia-smi.csv")

    # -- a later call: what the first left -----------------------------------------------
    def remainder(self) -> None:
        """What the first call's deadline cut of the evaluation (:meth:`complete_evaluation`),
        the CUDA tests not yet passed or skipped (a failure gets another run: it may have
        been the bundle's, fixed since; none at all after a suite that passed whole), then
        the probe side by side (the plan's seconds a step with one seed more a sitting: how
        many seeds the queue can train at once) and the probe alone (the plan's seconds a
        step with one model, never measured by a slice that trains several) and, in the same
        process, that model compiled (:meth:`speed_probe`), in the manifest's order
        (:meth:`probes`), then the bench on an idle GPU (measured by earlier sittings: it
        takes what the probes leave)."""
        self.complete_evaluation()
        self.phase("remainder")
        earlier = Path(self.state["after"]).with_name("gpu-tests.jsonl") if self.state.get("after") else None
        if earlier is not None and earlier.is_file() and not self.test_report().is_file():
            shutil.copyfile(earlier, self.test_report())
        if any(call.get("gpu_tests_rc") == 0 for call in self.state["calls"][:-1]):
            self.call["gpu_tests_rest"] = "none: the suite passed whole in an earlier call"
        else:
            reports = [json.loads(line) for line in self.test_report().read_text().splitlines()] \
                if self.test_report().is_file() else []
            done = [r["nodeid"] for r in reports if r["outcome"] in ("passed", "skipped")]
            skip = self.logs / "gpu-tests-done.txt"
            skip.write_text("\n".join(done) + "\n")
            device = self.args.device
            # the probes, and the speed rows that publish them before the bench
            probes = (CROWD_S[device] if self.crowd_size() > 1 else 0) + PROBE_S[device] + SPEED_ROWS_S
            # at the least, the time of the probe that goes first
            lead = CROWD_S[device] if self.crowd_first() else PROBE_S[device]
            reserve = next((need for need in (probes + 2 * BENCH_S, probes, lead)
                            if self.left() >= need + SUITE_REST_MIN_S), 0)
            rc = self.run("gpu-tests-rest", self.suite_args(), self.left() - reserve,
                          {"HEADLAB_TEST_REPORT": str(self.test_report()), "HEADLAB_TESTS_DONE": str(skip)})
            self.call["gpu_tests_rc"] = rc
        crowd, alone = self.probes()
        if crowd or alone:
            # the probes' measures into the publication before the bench: a call cut in it (the
            # lease's end) keeps them; the pack after the bench would otherwise be the first
            self.speed_rows(SPEED_ROWS_S)
        # the attention bench on the idle GPU, once per attention path (HEADLAB_ATTENTION_PATH),
        # in what the speed rows leave (they carry the bench's rows into the publication)
        benched = False
        for path in ATTENTION_PATHS:
            room = self.left() - SPEED_ROWS_S
            if room > 20:
                share = room / 2 if path == ATTENTION_PATHS[0] else room
                self.call[f"bench_{path}_rc"] = self.run(f"bench-idle-{path}", self.bench_args(f"bench-idle-{path}"),
                                                         min(share, BENCH_S), {"HEADLAB_ATTENTION_PATH": path})
                benched = True
        if benched or not (crowd or alone):
            self.speed_rows()
        self.end_phase("remainder")

    def speed_probe_and_rows(self) -> None:
        """In the first call after the publication, when it has the time (one call on a
        lease too short for two; on a GPU only: a rehearsal probes in its second call): the
        probes, then the speed rows with what they added."""
        if self.args.device != "cuda":
            return
        if any(self.probes()):
            self.speed_rows()

    def crowd_first(self) -> bool:
        """Whether the probe side by side goes before the probe alone: the manifest's
        ``probe_first`` (the one the published sittings measured longest ago; without it, the
        probe side by side), where there is a probe side by side at all."""
        return self.crowd_size() > 1 and (self.manifest.get("slice") or {}).get("probe_first") != "alone"

    def probes(self) -> tuple[bool, bool]:
        """The probe side by side and the probe alone, in :meth:`crowd_first`'s order, the
        second in what the first leaves; whether each ran."""
        if not self.crowd_first():
            alone = self.speed_probe()
            return self.crowd_probe(), alone
        crowd = self.crowd_probe()
        return crowd, self.speed_probe()

    def speed_rows(self, within: float | None = None) -> None:
        """The sitting's speed rows and CUDA suite again, with what this call added (the
        probe, the rest of the tests, the idle bench), in at most ``within`` s (default: all
        that is left)."""
        if self.published() and (self.src / self.published() / "rows.csv").is_file() and self.left() > 5:
            self.call["speed_rows_rc"] = self.run("speed-rows", self.sitting_args(speed_only=True),
                                                  self.left() if within is None else min(within, self.left()))

    def crowd_size(self) -> int:
        """How many copies the probe side by side trains at once (1: none; a rehearsal: at
        most two)."""
        size = int((self.manifest.get("slice") or {}).get("probe_side_by_side") or 1)
        return min(size, CPU_SETTINGS["side_by_side"]) if self.args.device == "cpu" else size

    def crowd_probe(self) -> bool:
        """The probe side by side (:mod:`headlab.workflow.sitting_probe` ``--side-by-side``):
        :meth:`crowd_size` copies of the slice's first-stage models at once, shared through
        MPS as the trainings were (its own mode recorded: ``crowd_mps``), each timed past its
        warm-up once all of them are there. Only with time left, after the publication; it
        only adds to the speed rows."""
        size, device = self.crowd_size(), self.args.device
        if size < 2 or self.left() < CROWD_S[device] or not self.published():
            return False
        first = chain_stages(self.manifest["models"])[0]       # those trained from scratch
        models = [model for model in self.prepared() if model["name"] in first]
        cmd = [sys.executable, "-m", "headlab.workflow.sitting_probe", "--side-by-side", str(size),
               "--out", str(self.logs / CROWD_FOLDER), *CROWD_ARGS[device]]
        for model in models:
            cmd += ["--config", model["config"], "--name", model["name"]]
        cmd += ["--", *onmt_overrides(self.args.device)]
        share = cores_each(size)
        self.start_mps(record="crowd_mps")
        try:
            self.call["crowd_rc"] = self.run("probe-side-by-side", cmd, min(self.left() - SPEED_ROWS_S, CROWD_S[device]),
                                             share)
        finally:
            self.stop_mps(record="crowd_mps")
        self.call["crowd_side_by_side"] = size
        return True

    def speed_probe(self) -> bool:
        """The first model alone on the idle GPU, its last 20 steps profiled, then (on a GPU)
        the same model compiled in place and timed again (:mod:`headlab.workflow.sitting_probe`:
        whether compiling pays within a sitting, which no sitting has measured; the speed rows
        are rewritten with both after). Only with time for the eager part, and never at the
        publication's cost: it runs after the publication and only adds to its speed rows;
        the compile takes what is left, up to :data:`COMPILE_S`."""
        device = self.args.device
        if self.left() < PROBE_S[device] or not self.published():
            return False
        model = self.manifest["models"][0]
        extra = self.logs / "speed-extra.json"
        compiled = ["--compile", COMPILE_MODE] if COMPILE_S[device] else []
        # alone on the machine, but compiling with the workers a training has beside the
        # others in the plan's largest stage: its compile_s is what any compiled sitting pays
        # at most, whichever slice's sitting measured it
        workers = self.compile_workers(probe=True)
        self.call["probe_compile_threads"] = int(workers)
        self.call["probe_rc"] = self.run("probe", [sys.executable, "-m", "headlab.workflow.sitting_probe", "--config",
                                                   model["config"], "--name", model["name"], "--out", str(extra),
                                                   *PROBE_ARGS[device], *compiled, "--",
                                                   *onmt_overrides(self.args.device)],
                                         min(self.left() - SPEED_ROWS_S, PROBE_S[device] + COMPILE_S[device]),
                                         {"TORCHINDUCTOR_COMPILE_THREADS": workers})
        return True


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="run.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.environ.get("OUT"), help="where status.json and the results go ($OUT)")
    parser.add_argument("--work", default=os.environ.get("HEADLAB_GPU_WORK",
                                                         os.path.join(tempfile.gettempdir(), "headlab-gpu")),
                        help="scratch folder: the installation, the models (default: TMPDIR/headlab-gpu)")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds this call may take in all (default: the GPU plan's sitting.budget_s, 570)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cpu: a rehearsal of every step (small settings, see CPU_SETTINGS)")
    parser.add_argument("--after", default=None,
                        help="status.json of a sitting on another machine: do only what it left "
                             "(its CUDA test report, if any, as WORK/logs/gpu-tests.jsonl)")
    parser.add_argument("--eval-reserve", type=float, default=None,
                        help="seconds kept for translation and scoring after the trainings stop "
                             "(default: the GPU plan's sitting.eval_reserve_s on a GPU)")
    # on by default: the H100 sitting with it (993e600) trained 4.4x the tokens/s per model of
    # the one without (65e2124); a daemon that does not start or serve falls back to off
    parser.add_argument("--mps", choices=("off", "on"), default="on",
                        help="on (default): the trainings share the GPU through CUDA MPS where its daemon starts "
                             "and a client connects, else without (throughput.csv's mps column says which)")
    # by default the GPU plan's (the slice's compile, else sitting.compile), off until a
    # sitting's probe alone has measured that compiling pays (throughput.csv:
    # step_ms_alone_compiled, compile_s; gpu_compile.stale_compile); not in any recipe (the
    # same function)
    parser.add_argument("--compile", choices=TRAIN_COMPILE_MODES, default=None,
                        help="the trainings' -compile (headlab train; default: the GPU plan's, the slice's compile "
                             "else sitting.compile, else off); throughput.csv's train_compile column records it")
    args = parser.parse_args(argv)
    if not args.out:
        parser.error("--out (or $OUT) is required")
    sitting = Sitting(args)
    code = 0
    # a call stopped from outside (the device command's limit, a Ctrl-C) still stops its
    # processes and packs what it has: the signal ends the call through `finally`
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _stopped_by_signal)
    try:
        sitting.check_manifest()
        adopted = sitting.adopt_interrupted_training()
        first = not sitting.state.get("trained")
        sitting.check_window()
        sitting.install()
        if first:
            sitting.train()
            sitting.evaluate()
            code = 0 if sitting.state.get("published") else 1
            sitting.speed_probe_and_rows()
        elif adopted:
            sitting.evaluate()
            code = 0 if sitting.state.get("published") else 1
            sitting.remainder()
        else:
            sitting.remainder()
        published = (f"published {sitting.published()} ({sitting.state.get('publication_status')})"
                     if sitting.state.get("published") else "NOT published")
        print(f"run.py: {published}; "
              f"{sitting.elapsed():.0f} s", flush=True)
    except SystemExit as stop:
        print(stop, flush=True)
        sitting.state.setdefault("error", str(stop).removeprefix("run.py: "))
        code = 1
    except Exception as err:
        # a fault of the runner itself: recorded, and the call ends as after any error (a
        # later call on the machine evaluates what trained, :meth:`adopt_interrupted_training`)
        import traceback
        traceback.print_exc()
        sitting.state.setdefault("error", f"run.py failed in {sitting.call.get('phase')}: "
                                          f"{type(err).__name__}: {err}"[:300])
        code = 1
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)       # the last pack is not itself cut short
        sitting.stop_all(grace=2)
        for record in list(sitting.mps_live):      # a daemon left by a call cut short
            sitting.quit_mps(record)
        sitting.call["phase"] = "done"
        sitting.status(force=True)
    return code


def _stopped_by_signal(signum, frame) -> None:
    raise SystemExit(f"run.py: stopped by {signal.Signals(signum).name}: what is done is packed")


if __name__ == "__main__":
    sys.exit(main())
