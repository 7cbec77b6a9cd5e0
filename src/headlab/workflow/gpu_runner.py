"""The GPU bundle's runner (copied into the bundle as ``run.py`` by ``headlab gpu-bundle``):
one command for an offline GPU machine, standard library only (it runs before anything is
installed).

    python3 gpu-bundle/run.py --out OUT [--budget 540] [--work /tmp/headlab-gpu] [--dry-run]

Each call does the next ``--budget`` seconds of work and returns, so that every command
stays under the machine's 10-minute limit; call it again (same machine, same --work) until
it prints "all done". In order, each step once:

1. install: the checkout and the prepared data unpacked into WORK/headlab, the wheels
   installed with ``pip --no-index --no-deps --target WORK/site`` (the machine's own CUDA
   torch and packages stay; the bundle's come first on PYTHONPATH), an import check;
2. ``pytest -m gpu tests/gpu`` (the CUDA suite);
3. the GPU bench (``python -m headlab.bench``) into ``RESULTS/bench``;
4. the workflow towards the bundle's targets (``results/.../published/STUDY``, provenance
   inside), with ``profiles/local`` (``gpu_percent``: several small jobs share the GPU), the
   first unfinished target prioritised; stopped (SIGINT, then the process group killed)
   before the budget ends: the next call's snakemake reruns the interrupted jobs, and
   ``headlab train`` resumes them from their last checkpoint.

Every call writes OUT/status.json and OUT/headlab-gpu-results.tar.gz (published studies,
bench CSVs, logs, and the scores, configs, training logs and benchmarks of every model
trained so far: what finished can be committed, what is missing can be named).
``--dry-run`` (no GPU needed): install, import check, the GPU suite (skipped without
CUDA), and the workflow's plan, which must hold only GPU-side rules (no data preparation).
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
from pathlib import Path

BUNDLE = Path(__file__).resolve().parent
MARGIN_S = 45            # kept back from the budget: stopping snakemake, packing OUT
RESULTS_TAR = "headlab-gpu-results.tar.gz"
MAX_FILE_BYTES = 2 * 2**20  # files larger than this (checkpoints: never) are not packed


class Runner:
    def __init__(self, args):
        self.args = args
        self.started = time.monotonic()
        self.work = Path(args.work).resolve()
        self.src = self.work / "headlab"
        self.site = self.work / "site"
        self.logs = self.work / "logs"
        self.manifest = json.loads((BUNDLE / "manifest.json").read_text())
        self.state_path = self.work / "state.json"
        self.state = json.loads(self.state_path.read_text()) if self.state_path.is_file() else {}

    # -- helpers -------------------------------------------------------------------------
    def left(self) -> float:
        return self.args.budget - MARGIN_S - (time.monotonic() - self.started)

    def save(self) -> None:
        self.state_path.write_text(json.dumps(self.state, indent=1))

    def env(self) -> dict:
        env = dict(os.environ, PYTHONUNBUFFERED="1", HEADLAB_COMMIT=self.manifest["commit"],
                   PYTHONDONTWRITEBYTECODE="1")
        # the checkout's src/ first (as make setup's editable install), then the wheels
        env["PYTHONPATH"] = os.pathsep.join([str(self.src / "src"), str(self.site), env.get("PYTHONPATH", "")]).rstrip(
            os.pathsep)
        env["PATH"] = f"{self.site / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        return env

    def run(self, name: str, cmd: list[str], timeout: float, *, stop_gently: bool = False) -> dict:
        """``cmd`` in WORK/headlab, output to WORK/logs/NAME.log; stopped at ``timeout`` s."""
        self.logs.mkdir(parents=True, exist_ok=True)
        log = self.logs / f"{name}.log"
        began = time.monotonic()
        print(f"run.py: {name}: {' '.join(cmd)} (at most {timeout:.0f} s)", flush=True)
        with open(log, "a") as out:
            out.write(f"\n$ {' '.join(cmd)}\n")
            out.flush()
            proc = subprocess.Popen(cmd, cwd=self.src if self.src.is_dir() else self.work, env=self.env(), stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
            timed_out = False
            try:
                proc.wait(timeout=max(timeout, 1))
            except subprocess.TimeoutExpired:
                timed_out = True
                if stop_gently:   # snakemake: let it stop its jobs and mark them incomplete
                    os.killpg(proc.pid, signal.SIGINT)
                    try:
                        proc.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        pass
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        result = {"rc": proc.returncode, "timed_out": timed_out, "seconds": round(time.monotonic() - began, 1),
                  "log": f"logs/{name}.log"}
        print(f"run.py: {name}: {result}", flush=True)
        return result

    def python(self) -> str:
        return sys.executable

    # -- steps ---------------------------------------------------------------------------
    def install(self) -> None:
        if self.state.get("install", {}).get("rc") == 0 and self.site.is_dir():
            return
        self.work.mkdir(parents=True, exist_ok=True)
        for name in ("headlab", "site"):
            shutil.rmtree(self.work / name, ignore_errors=True)
        with tarfile.open(BUNDLE / "source.tar.gz") as tar:
            tar.extractall(self.work, filter="data")
        with tarfile.open(BUNDLE / "data.tar.gz") as tar:
            tar.extractall(self.src, filter="data")
        wheels = sorted(str(w) for w in (BUNDLE / "wheels").glob("*.whl"))
        result = self.run("install", [self.python(), "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                                      "--no-compile", "--target", str(self.site), *wheels], 300)
        if result["rc"] == 0:
            imports = ("import headlab.engine.plugin, headlab.cli; "
                       "import torch, onmt.bin.train, snakemake, sacrebleu, sacremoses, compare_mt, pandas, seaborn; "
                       "print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), "
                       "torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')")
            result = self.run("imports", [self.python(), "-c", imports], 120)
        self.state["install"] = result
        self.save()
        if result["rc"]:
            raise SystemExit(f"run.py: install failed, see {self.logs / 'install.log'} / imports.log")

    def gpu_tests(self) -> None:
        if "gpu_tests" in self.state or self.left() < 60:
            return
        suite = self.src / "tests/gpu"
        if not suite.is_dir():
            self.state["gpu_tests"] = {"rc": None, "note": "tests/gpu is not in this checkout"}
        else:
            result = self.run("gpu-tests", [self.python(), "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider",
                                            "tests/gpu"], min(self.args.gpu_test_timeout, self.left()))
            self.state["gpu_tests"] = result
        self.save()

    def bench(self, cuda: bool) -> None:
        if "bench" in self.state or self.left() < 60:
            return
        if not cuda:
            self.state["bench"] = {"rc": None, "note": "no CUDA: the GPU bench did not run"}
        else:
            # the bench's data: the bundle's prepared Multi30k de-en (BPE and vocabulary of the GPU config)
            results = self.manifest["results"]
            cmd = [self.python(), "-m", "headlab.bench", "--out", f"{results}/bench", "--devices", "cuda"]
            data = f"{results}/data/multi30k/de-en/full"
            if (self.src / data / "vocab.txt").is_file():
                cmd += ["--train-data", data]
            self.state["bench"] = self.run("bench", cmd, min(self.args.bench_timeout, self.left()))
        self.save()

    def snakemake(self, *args) -> list[str]:
        return [self.python(), "-m", "snakemake", "--profile", "profiles/local", "--configfile",
                *self.manifest["configfiles"], *args]

    def plan(self) -> dict[str, int]:
        result = subprocess.run(self.snakemake("-n", "--quiet", "rules", "--", *self.unfinished()), cwd=self.src,
                                env=self.env(), capture_output=True, text=True)
        (self.logs / "plan.log").write_text(result.stdout + result.stderr)
        if result.returncode:
            raise SystemExit(f"run.py: the workflow's dry run failed, see {self.logs / 'plan.log'}")
        text = result.stdout + result.stderr
        if "Job stats:" not in text:
            return {}
        table = text.split("Job stats:", 1)[1].split("\n\n", 1)[0]
        return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M) if m[1] != "total"}

    def unfinished(self) -> list[str]:
        return [t for t in self.manifest["targets"] if not (self.src / t).is_dir()]

    def workflow(self) -> None:
        chunks = self.state.setdefault("workflow", [])
        while self.unfinished() and self.left() > 90:
            todo = self.unfinished()
            result = self.run(f"workflow-{len(chunks) + 1}", self.snakemake(
                "--cores", str(self.args.cores), "--keep-going", "--prioritize", todo[0], "--", *todo),
                self.left(), stop_gently=True)
            result["targets"] = todo
            chunks.append(result)
            self.save()
            if not result["timed_out"] and self.unfinished():
                break  # snakemake ended, but some study failed: see its log, do not loop
        self.state["finished"] = [t for t in self.manifest["targets"] if t not in self.unfinished()]
        self.save()

    # -- OUT -----------------------------------------------------------------------------
    def pack(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.state["elapsed_s_this_call"] = round(time.monotonic() - self.started, 1)
        self.state["missing"] = self.unfinished() if self.src.is_dir() else self.manifest["targets"]
        self.save()
        (out / "status.json").write_text(json.dumps({**self.state, "commit": self.manifest["commit"]}, indent=1))
        results = self.src / self.manifest["results"]
        keep = (".json", ".csv", ".md", ".tex", ".png", ".pdf", ".txt", ".yaml", ".tsv", ".log")
        with tarfile.open(out / RESULTS_TAR, "w:gz") as tar:
            tar.add(self.state_path, arcname="status.json")
            for path in sorted(self.logs.glob("*.log")) if self.logs.is_dir() else []:
                tar.add(path, arcname=f"logs/{path.name}")
            for sub in ("published", "bench", "tables", "paper_B", "paper_C", "paper_D", "paper_A", "scores", "models"):
                base = results / sub
                for path in sorted(base.rglob("*")) if base.is_dir() else []:
                    if path.is_file() and path.suffix in keep and path.stat().st_size <= MAX_FILE_BYTES:
                        tar.add(path, arcname=str(path.relative_to(self.src)))
        size = (out / RESULTS_TAR).stat().st_size
        print(f"run.py: {out / RESULTS_TAR} ({size / 2**20:.1f} MiB)", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="run.py", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT"), help="where the results tarball goes ($OUT)")
    parser.add_argument("--work", default=os.environ.get("HEADLAB_GPU_WORK",
                                                             os.path.join(tempfile.gettempdir(), "headlab-gpu")),
                        help="scratch folder for the installation and the run (default: TMPDIR/headlab-gpu)")
    parser.add_argument("--budget", type=float, default=540, help="seconds this call may take in all")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--gpu-test-timeout", type=float, default=240)
    parser.add_argument("--bench-timeout", type=float, default=240)
    parser.add_argument("--dry-run", action="store_true", help="check everything without a GPU")
    parser.add_argument("--allow-cpu", action="store_true",
                        help="run the workflow without CUDA too (tests: a bundle of a CPU config)")
    args = parser.parse_args(argv)
    if not args.out:
        parser.error("--out (or $OUT) is required")
    runner = Runner(args)
    try:
        runner.install()
        cuda = "cuda True" in (runner.logs / "imports.log").read_text()
        if args.dry_run:
            runner.gpu_tests()
            plan = runner.plan()
            runner.state["dry_run"] = {"plan": plan, "cuda": cuda,
                                       "not_gpu_side": sorted(set(plan) - set(runner.manifest["gpu_rules"]))}
            runner.save()
            tests = runner.state.get("gpu_tests", {}).get("rc")
            ok = not runner.state["dry_run"]["not_gpu_side"] and tests in (None, 0, 5)
            print(f"run.py: dry run {'passed' if ok else 'FAILED'}: plan {plan}", flush=True)
            return 0 if ok else 1
        if not cuda and not args.allow_cpu:
            print("run.py: no CUDA device: nothing to run (use --dry-run to check the bundle)", flush=True)
            return 1
        runner.gpu_tests()
        runner.bench(cuda)
        runner.workflow()
        missing = runner.unfinished()
        print("run.py: all done" if not missing else f"run.py: to do: {', '.join(missing)} (call run.py again)",
              flush=True)
        return 0
    finally:
        runner.pack(Path(args.out))


if __name__ == "__main__":
    sys.exit(main())
