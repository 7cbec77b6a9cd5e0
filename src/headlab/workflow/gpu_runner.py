"""One GPU sitting (copied into the bundle as ``run.py`` by ``headlab gpu-bundle``):
standard library only, since it runs before anything is installed.

    python3 gpu-bundle/run.py --out "$OUT" [--budget 570] [--work /tmp/headlab-gpu]
    python3 gpu-bundle/run.py --out OUT --device cpu --budget 300      (a rehearsal)

Everything is driven by one deadline, ``--budget`` seconds after the start (570: a 10-minute
command less the machine's start-up of the files and their return):

1. install, bounded (:data:`INSTALL_S`) and checked first: a wheel that would replace the
   machine's torch, numpy or a CUDA library is refused by name before anything is unpacked;
   a wheel whose package the machine already has at the bundled version or newer is not
   installed (it would shadow the machine's); then the checkout, the prepared data and the
   remaining wheels (``pip --no-index --no-deps --target``), and an import check that torch
   and numpy are the machine's own;
2. the bundle's models train side by side on the one GPU (``headlab train -config``, the
   config the workflow wrote: mixed precision, a checkpoint every ``save_checkpoint_steps``);
   beside them the CUDA suite (``pytest -m gpu``, each result appended to a report as it
   comes) and then a short attention bench (every kind, n = 512, fp32 and fp16);
3. at ``budget - eval reserve`` the trainings stop; the newest checkpoint step that every
   model has whole is translated (beam 5, ``-precision fp16``), scored with sacreBLEU (95%
   bootstrap interval; paired bootstrap against the first model) and published with its
   provenance (:mod:`headlab.workflow.sitting`).

OUT holds at most three files at any moment, rewritten every :data:`STATUS_EVERY_S`
seconds, so a command killed at any point returns what was done: ``status.json`` (phase,
steps, tests, bench rows, errors) and ``headlab-sitting.tar.gz`` (the publication, logs, the
CUDA suite's report, bench CSVs, training logs).

A second call on the same machine (same ``--work``) reads the first one's state and does
only what it left: the CUDA tests not yet run, the bench on an idle GPU. It never trains
again. ``--device cpu`` rehearses every step on a CPU with small settings (checkpoints
every 2 steps, 24 test sentences), so ``make gpu-rehearsal`` proves the route in a venv that
holds the GPU machine's Python and package versions.
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
from pathlib import Path

BUNDLE = Path(__file__).resolve().parent
#: packages a bundle must never replace: the machine's CUDA torch, the numpy it was built
#: against, and CUDA's own libraries
PROTECTED = re.compile(r"^(torch|numpy|triton|nvidia-.*|cuda-.*)$")
INSTALL_S = 120          # unpack + pip + import check; fails the sitting past this
STATUS_EVERY_S = 30
POLL_S = 2
PACK_S = 15              # kept back at the end for the last status and tarball
EVAL_RESERVE_S = {"cuda": 110, "cpu": 120}   # translation (three models at once) + scoring
BENCH_S = 60
RESULTS_TAR = "headlab-sitting.tar.gz"
PUBLISHED = "results/published/gpu-sitting"
MAX_FILE_BYTES = 4 * 2**20
#: a rehearsal's settings (--device cpu): the same steps, sized for two cores
CPU_SETTINGS = {"save_every": 2, "sentences": 16, "batch_size": 256, "max_length": 40}


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
        self.state_path = self.work / "state.json"
        previous = json.loads(self.state_path.read_text()) if self.state_path.is_file() else {}
        if not previous and args.after:      # a fresh machine after a sitting on another one
            previous = {k: v for k, v in json.loads(Path(args.after).read_text()).items()
                        if k in ("trained", "published", "models", "calls")}
            previous["after"] = str(args.after)
        self.state = {"calls": previous.get("calls", []) + [{"budget_s": args.budget, "device": args.device}],
                      **{k: v for k, v in previous.items() if k != "calls"}}
        self.call = self.state["calls"][-1]
        self.procs: dict[str, subprocess.Popen] = {}
        self.last_status = 0.0

    # -- time and status -----------------------------------------------------------------
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def left(self) -> float:
        return self.args.budget - PACK_S - self.elapsed()

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

    def pack(self) -> None:
        keep = (".json", ".jsonl", ".csv", ".md", ".txt", ".yaml", ".tsv", ".log")
        members = [(self.state_path, "state.json")]
        for folder, prefix in ((self.logs, "logs"), (self.src / PUBLISHED, PUBLISHED),
                               (self.src / self.manifest["results"] / "bench", "bench")):
            for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
                if path.is_file() and path.suffix in keep and path.stat().st_size <= MAX_FILE_BYTES:
                    members.append((path, f"{prefix}/{path.relative_to(folder)}"))
        for model in self.manifest["models"]:
            for log, name in (("train.log", f"{model['heads']}.log"), ("console.log", f"{model['heads']}.console.log")):
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
    def model_progress(self) -> dict:
        progress = {}
        for model in self.manifest["models"]:
            folder = self.src / model["dir"]
            steps = sorted(int(m[1]) for p in folder.glob("*_step_*.pt") if (m := re.search(r"_step_(\d+)\.pt$", p.name)))
            log = folder / "train.log"
            text = log.read_text(errors="replace") if log.is_file() else ""
            reports = re.findall(r"Step\s+(\d+)/\s*\d+;.*?(\d+)/\s*(\d+) tok/s", text)
            proc = self.procs.get(model["heads"])
            progress[model["heads"]] = {
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
        log.parent.mkdir(parents=True, exist_ok=True)
        handle = open(log, "a")
        handle.write(f"\n$ {' '.join(cmd)}\n")
        handle.flush()
        proc = subprocess.Popen(cmd, cwd=self.src, env={**self.env(), **(extra_env or {})}, stdout=handle,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        self.procs[name] = proc
        return proc

    def stop(self, name: str, grace: float = 10.0) -> None:
        proc = self.procs.get(name)
        if proc is None or proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 30)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue

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
        with tarfile.open(BUNDLE / "source.tar.gz") as tar:
            tar.extractall(self.work, filter="data")
        with tarfile.open(BUNDLE / "data.tar.gz") as tar:
            tar.extractall(self.src, filter="data")
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
        cmd = [sys.executable, "-m", "headlab.cli", "train", "-config", model["config"]]
        if self.args.device == "cpu":
            cmd += ["-world_size", "1", "-gpu_ranks", "-model_dtype", "fp32",
                    "-save_checkpoint_steps", str(CPU_SETTINGS["save_every"]),
                    "-batch_size", str(CPU_SETTINGS["batch_size"]), "-report_every", "1"]
        return cmd

    def train(self) -> None:
        if self.state.get("trained"):
            return
        self.phase("train")
        reserve = EVAL_RESERVE_S[self.args.device] if self.args.eval_reserve is None else self.args.eval_reserve
        stop_at = self.args.budget - PACK_S - reserve
        threads = str(max(1, (os.cpu_count() or 4) // (len(self.manifest["models"]) + 1)))
        for model in self.manifest["models"]:
            # train.log is headlab train's own (its logger); the console (warnings, a
            # traceback) goes beside it
            self.start(model["heads"], self.train_args(model), self.src / model["dir"] / "console.log",
                       {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads})
        side = self.side_track(stop_at)
        while self.elapsed() < stop_at and any(self.procs[m["heads"]].poll() is None for m in self.manifest["models"]):
            next(side)
            time.sleep(POLL_S)
            self.status()
        for name in list(self.procs):
            self.stop(name)
        self.state["trained"] = True
        self.end_phase("train", stopped_at_s=round(self.elapsed(), 1), models=self.model_progress())
        self.status(force=True)

    def side_track(self, stop_at: float):
        """The CUDA suite, then the bench, each started when the one before ends; a
        generator the training loop advances every poll."""
        report = self.test_report()
        cmd = self.suite_args()
        self.start("gpu-tests", cmd, self.logs / "gpu-tests.log", {"HEADLAB_TEST_REPORT": str(report)})
        self.call["gpu_tests_started_s"] = round(self.elapsed(), 1)
        while self.procs["gpu-tests"].poll() is None:
            if self.elapsed() > stop_at - BENCH_S:
                self.stop("gpu-tests")
                break
            yield
        self.call["gpu_tests_rc"] = self.procs["gpu-tests"].returncode
        if self.elapsed() < stop_at - 15:
            self.start("bench", self.bench_args("bench-shared"), self.logs / "bench.log")
            self.call["bench_started_s"] = round(self.elapsed(), 1)
            while self.procs["bench"].poll() is None and self.elapsed() < stop_at:
                yield
            self.stop("bench")
            self.call["bench_rc"] = self.procs["bench"].returncode
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
        cmd = [sys.executable, "-m", "headlab.workflow.sitting", "--manifest", str(BUNDLE / "manifest.json"),
               "--out", PUBLISHED, "--device", self.args.device, "--state", str(self.state_path),
               "--budget-s", str(self.args.budget), "--logs", str(self.logs)]
        if self.args.device == "cpu":
            cmd += ["--sentences", str(CPU_SETTINGS["sentences"]), "--max-length", str(CPU_SETTINGS["max_length"])]
        self.status(force=True)
        rc = self.run("evaluate", cmd, self.left())
        self.end_phase("evaluate", rc=rc)
        self.state["published"] = rc == 0 and (self.src / PUBLISHED / "provenance.json").is_file()
        if not self.state["published"]:
            self.state["error"] = f"evaluation failed (rc {rc}): see logs/evaluate.log"

    # -- a later call: what the first left -----------------------------------------------
    def remainder(self) -> None:
        """The CUDA tests not yet passed or skipped (a failure gets another run: it may have
        been the bundle's, fixed since), then the bench on an idle GPU."""
        self.phase("remainder")
        earlier = Path(self.state["after"]).with_name("gpu-tests.jsonl") if self.state.get("after") else None
        if earlier is not None and earlier.is_file() and not self.test_report().is_file():
            shutil.copyfile(earlier, self.test_report())
        reports = [json.loads(line) for line in self.test_report().read_text().splitlines()] \
            if self.test_report().is_file() else []
        done = [r["nodeid"] for r in reports if r["outcome"] in ("passed", "skipped")]
        skip = self.logs / "gpu-tests-done.txt"
        skip.write_text("\n".join(done) + "\n")
        reserve = BENCH_S if self.left() > 2 * BENCH_S else 0
        rc = self.run("gpu-tests-rest", self.suite_args(), self.left() - reserve,
                      {"HEADLAB_TEST_REPORT": str(self.test_report()), "HEADLAB_TESTS_DONE": str(skip)})
        self.call["gpu_tests_rc"] = rc
        if self.left() > 20:
            self.call["bench_rc"] = self.run("bench-idle", self.bench_args("bench-idle"), self.left())
        self.end_phase("remainder")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="run.py", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT"), help="where status.json and the results go ($OUT)")
    parser.add_argument("--work", default=os.environ.get("HEADLAB_GPU_WORK",
                                                         os.path.join(tempfile.gettempdir(), "headlab-gpu")),
                        help="scratch folder: the installation, the models (default: TMPDIR/headlab-gpu)")
    parser.add_argument("--budget", type=float, default=570, help="seconds this call may take in all")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cpu: a rehearsal of every step (small settings, see CPU_SETTINGS)")
    parser.add_argument("--after", default=None,
                        help="status.json of a sitting on another machine: do only what it left "
                             "(its CUDA test report, if any, as WORK/logs/gpu-tests.jsonl)")
    parser.add_argument("--eval-reserve", type=float, default=None,
                        help="seconds kept for translation and scoring after the trainings stop")
    args = parser.parse_args(argv)
    if not args.out:
        parser.error("--out (or $OUT) is required")
    sitting = Sitting(args)
    code = 0
    try:
        first = not sitting.state.get("trained")
        sitting.install()
        if first:
            sitting.train()
            sitting.evaluate()
            code = 0 if sitting.state.get("published") else 1
        else:
            sitting.remainder()
        print(f"run.py: {'published ' + PUBLISHED if sitting.state.get('published') else 'NOT published'}; "
              f"{sitting.elapsed():.0f} s", flush=True)
    except SystemExit as stop:
        print(stop, flush=True)
        sitting.state.setdefault("error", str(stop).removeprefix("run.py: "))
        code = 1
    finally:
        for name in list(sitting.procs):
            sitting.stop(name, grace=2)
        sitting.call["phase"] = "done"
        sitting.status(force=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
