"""``headlab gpu-bundle``: one folder with everything an offline GPU machine lacks (issue 21
item 6), so that its minutes go to training, not to set-up.

    headlab gpu-bundle --out gpu-bundle        (make gpu-bundle)

The machine to plan for has Python 3.12, CUDA torch 2.11, the packages listed in
``requirements/gpu-machine.txt``, no package index, commands under 10 minutes and about
30 minutes in all. The folder (at most ``--max-mib``, 64 MiB) holds:

- ``wheels/``: OpenNMT-py 3.5.1, headlab (built from this checkout), and every run-time
  dependency of the GPU side that the machine lacks: the closure of headlab's requirements
  in this environment's metadata, markers evaluated for the target Python, minus the
  machine's packages, minus :data:`NOT_CARRIED` (torch above all). Binary wheels for
  ``--python-version`` on manylinux x86_64 (``pip download --only-binary``); a package
  published only as an sdist is built here into a pure-Python wheel (an error if it is not
  pure);
- ``source.tar.gz``: the checkout (tracked and untracked-not-ignored files) and its commit;
- ``data.tar.gz``: what the CPU does here before the GPU machine starts, from the same
  workflow: every job of the chosen targets except those of :data:`GPU_RULES` and what
  follows them (``snakemake --omit-from``): prepared corpora, Moses, BPE, vocabularies,
  parses, source features, suite splits and parse caches, with the fetch markers; so the
  GPU machine only trains, translates and scores. After the preparation the plan that
  remains is checked: a rule outside :data:`GPU_RULES` (it would need a CPU-side tool such
  as spaCy there) is an error naming it;
- ``run.py``: the runner (:mod:`headlab.workflow.gpu_runner`, standard library only), and
  ``manifest.json`` / ``README.md``: what is inside and how to run it.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from importlib import metadata
from pathlib import Path

from headlab.errors import ConfigError, HeadlabError

REPO = Path(__file__).resolve().parents[3]
#: the bundle's workflow: the GPU config with its 30-minute overlay, targets in the order
#: the GPU machine works through them (issue 21 item 7)
CONFIGS = ("config/multi30k-gpu.yaml", "config/gpu-30min.yaml")
TARGETS = ("tables", "paper_B", "paper_C", "paper_D")
#: rules that run on the GPU machine: models and everything that reads them
GPU_RULES = ("onmt_config", "finetune_config", "snapshot", "train", "average_checkpoints", "translate",
             "postprocess", "bleu", "compare", "forced_score", "distil_accuracy", "learning_curve", "params",
             "gates", "export_attention", "profile_heads", "study_stage", "study_table", "study_figure",
             "study_readme", "publish", "all")
#: the first rules of the GPU side (--omit-from: they and everything after them stay for the GPU)
GPU_ENTRY_RULES = ("onmt_config", "finetune_config", "snapshot", "train")
#: requirements of headlab that the GPU machine does not get from the bundle: its own CUDA
#: torch; spaCy and its model (parses are data, made here); the SLURM executor (a local run);
#: pulp (snakemake imports it only for its ILP scheduler; profiles/local uses greedy); the
#: packages of OpenNMT-py transforms headlab never uses (headlab.engine.compat.OPTIONAL_IMPORTS)
NOT_CARRIED = ("torch", "spacy", "snakemake-executor-plugin-slurm", "pulp", "fasttext-wheel", "rapidfuzz",
               "pyahocorasick")
ONMT = "OpenNMT-py==3.5.1"
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64")
#: datasets whose files GPU-side rules read beyond the fetch marker (rules/analyse.smk:
#: distil_accuracy reads the suite, profile_heads the UD gold trees)
RAW_READ_ON_GPU = ("distil-lingeval", "ud")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def machine_packages(path: Path = REPO / "requirements/gpu-machine.txt") -> set[str]:
    return {_norm(line.strip()) for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")}


def _marker_env(python_version: str) -> dict[str, str]:
    return {"python_version": python_version, "python_full_version": f"{python_version}.0",
            "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
            "implementation_name": "cpython", "platform_python_implementation": "CPython", "os_name": "posix",
            "extra": ""}


def closure(roots, python_version: str, exclude: set[str]) -> dict[str, str]:
    """name -> installed version of ``roots`` and everything they require (installed here),
    markers evaluated for ``python_version`` on Linux x86_64, skipping ``exclude``."""
    from packaging.requirements import Requirement

    env = _marker_env(python_version)
    found: dict[str, str] = {}
    todo = list(roots)
    while todo:
        name = _norm(todo.pop())
        if name in found or name in exclude:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise ConfigError(f"{name} is required on the GPU machine but not installed here, so its version is "
                              f"unknown: install it (make setup) or add it to requirements/gpu-machine.txt") from None
        found[name] = dist.version
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate(env):
                todo.append(req.name)
    return found


def runtime_requirements(python_version: str) -> dict[str, str]:
    """The GPU side's third-party packages the machine lacks (name -> version to carry)."""
    from packaging.requirements import Requirement

    env = _marker_env(python_version)
    roots = [Requirement(r).name for r in metadata.requires("headlab") or []
             if Requirement(r).marker is None or Requirement(r).marker.evaluate(env)]
    # OpenNMT-py is installed with --no-deps (it pins torch < 2.3): its run-time imports are
    # headlab's requirements above (pyproject.toml lists them)
    return closure(roots, python_version, machine_packages() | {_norm(n) for n in NOT_CARRIED} | {"headlab"})


def _pip(*args, cwd=None) -> None:
    result = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, cwd=cwd)
    if result.returncode:
        raise HeadlabError(f"pip {' '.join(args[:3])} ... failed:\n{result.stderr[-2000:]}")


def download_wheels(pins: dict[str, str], dest: Path, python_version: str) -> None:
    """One wheel per pin for the target Python on manylinux x86_64; sdist-only packages are
    built here and must come out pure Python."""
    target = ["--only-binary=:all:", "--python-version", python_version, "--implementation", "cp",
              *[arg for p in PLATFORMS for arg in ("--platform", p)]]
    try:  # all at once (one pip start); one by one where some package has no wheel
        _pip("download", "-q", "--no-deps", *target, "-d", str(dest), *[f"{n}=={v}" for n, v in sorted(pins.items())])
        return
    except HeadlabError:
        pass
    for name, version in sorted(pins.items()):
        spec = f"{name}=={version}"
        before = set(dest.glob("*.whl"))
        try:
            _pip("download", "-q", "--no-deps", *target, "-d", str(dest), spec)
        except HeadlabError:
            _pip("wheel", "-q", "--no-deps", "-w", str(dest), spec)
        new = set(dest.glob("*.whl")) - before
        if not new and not any(_norm(w.name.split("-")[0]) == _norm(name) for w in before):
            raise HeadlabError(f"no wheel for {spec}")
        for wheel in new:
            if not wheel.name.endswith("-none-any.whl") and f"cp{python_version.replace('.', '')}" not in wheel.name:
                raise HeadlabError(f"{wheel.name} is not for Python {python_version} (built from an sdist?)")


def source_archive(dest: Path, configfiles=()) -> tuple[str, list[str]]:
    """The checkout as a tarball (``headlab/...``) with copies of ``configfiles`` under
    ``.gpu-bundle/`` (a config may live outside the checkout); returns the commit
    (``-dirty`` when the working tree differs from it) and the copies' paths."""
    def git(*args) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout

    commit = git("rev-parse", "--short=7", "HEAD").strip()
    if git("status", "--porcelain", "--untracked-files=no").strip():
        commit += "-dirty"
    files = [f for f in git("ls-files", "-co", "--exclude-standard", "-z").split("\0") if f and (REPO / f).is_file()]
    copies = [f".gpu-bundle/{i}-{Path(path).name}" for i, path in enumerate(configfiles, 1)]
    with tarfile.open(dest, "w:gz") as tar:
        for name in sorted(files):
            tar.add(REPO / name, arcname=f"headlab/{name}")
        for path, copy in zip(configfiles, copies):
            tar.add(REPO / path, arcname=f"headlab/{copy}")
    return commit, copies


def snakemake(configfiles, *args, results: str | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(REPO),
           "--configfile", *map(str, configfiles)]
    if results:
        cmd += ["--config", f"results={results}"]
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run(cmd + list(args), capture_output=True, text=True, cwd=REPO, env=env)


def results_dir(configfiles) -> str:
    """The configs' results folder, which must be relative: the GPU machine unpacks the
    prepared data into its own checkout."""
    import yaml

    root = "results"
    for path in configfiles:
        data = yaml.safe_load((REPO / path).read_text()) or {}
        root = data.get("results", root)
        if Path(root).is_absolute():
            raise ConfigError(f"the bundle's results folder must be relative to the checkout, got {root!r}",
                              path=str(path), key="results")
    return root


def prepare(configfiles, targets, cores: int) -> None:
    """Everything of ``targets`` that is not GPU work, run here."""
    result = snakemake(configfiles, "--cores", str(cores), "--scheduler", "greedy", "--rerun-incomplete",
                       "--omit-from", *GPU_ENTRY_RULES, "--", *targets)
    if result.returncode:
        raise HeadlabError(f"the CPU-side preparation failed:\n{(result.stdout + result.stderr)[-4000:]}")


def remaining_rules(configfiles, targets) -> dict[str, int]:
    """rule -> jobs of the plan that remains for the GPU machine (a dry run)."""
    result = snakemake(configfiles, "-n", "--quiet", "rules", "--", *targets)
    if result.returncode:
        raise HeadlabError(f"dry run failed:\n{result.stderr[-3000:]}")
    return job_stats(result.stdout + result.stderr)


def job_stats(output: str) -> dict[str, int]:
    """snakemake's ``Job stats`` table (rule -> jobs) from its output (empty: nothing to do)."""
    if "Job stats:" not in output:
        return {}
    table = output.split("Job stats:", 1)[1].split("\n\n", 1)[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M) if m[1] != "total"}


def check_gpu_side(stats: dict[str, int]) -> None:
    others = sorted(set(stats) - set(GPU_RULES))
    if others:
        raise ConfigError(f"after the CPU-side preparation, rule(s) {', '.join(others)} would still run on the GPU "
                          f"machine, which lacks what they need (spaCy, the data mirror): leave the studies that "
                          f"need them out of the bundle's config, or make them data (rules upstream of a model)")


def data_archive(dest: Path, results: str) -> int:
    """The prepared data (``RESULTS/data``, fetch markers kept, raw copies only where GPU
    rules read them) as a tarball of paths relative to the checkout, mtimes kept (snakemake
    judges freshness by them). Returns the number of files."""
    data = REPO / results / "data"
    count = 0
    with tarfile.open(dest, "w:gz") as tar:
        for path in sorted(data.rglob("*")):
            rel = path.relative_to(data)
            if not path.is_file() or rel.parts[0] == ".snakemake":
                continue
            if rel.parts[0] == "raw" and path.name != ".verified" and rel.parts[1] not in RAW_READ_ON_GPU:
                continue
            tar.add(path, arcname=str(path.relative_to(REPO)))
            count += 1
    return count


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def build(out: Path, *, configfiles=CONFIGS, targets=TARGETS, python_version: str = "3.12", cores: int = 2,
          max_mib: float = 64.0) -> dict:
    """Write the bundle folder ``out`` (replaced as a whole once complete); its manifest."""
    started = time.time()
    results = results_dir(configfiles)
    target_paths = [f"{results}/published/{t}" for t in targets]
    out = Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        (work / "wheels").mkdir()
        commit, copies = source_archive(work / "source.tar.gz", configfiles)
        _pip("download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(work / "wheels"), ONMT)
        _pip("wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(work / "wheels"), str(REPO))
        pins = runtime_requirements(python_version)
        download_wheels(pins, work / "wheels", python_version)
        prepare(configfiles, target_paths, cores)
        stats = remaining_rules(configfiles, target_paths)
        check_gpu_side(stats)
        files = data_archive(work / "data.tar.gz", results)
        shutil.copyfile(Path(__file__).with_name("gpu_runner.py"), work / "run.py")
        manifest = {
            "commit": commit, "created": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "python_version": python_version, "configfiles": copies, "config_sources": list(map(str, configfiles)),
            "results": results,
            "targets": target_paths, "gpu_rules": list(GPU_RULES), "gpu_plan": stats, "data_files": files,
            "wheels": sorted(w.name for w in (work / "wheels").glob("*.whl")),
            "sha256": {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
                       for p in sorted(work.glob("*.tar.gz"))},
        }
        (work / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
        (work / "README.md").write_text(_readme(manifest))
        size = _size(work)
        manifest["size_mib"] = round(size / 2**20, 1)
        if size > max_mib * 2**20:
            raise HeadlabError(f"the bundle is {size / 2**20:.1f} MiB, over the {max_mib:g} MiB limit "
                               f"(wheels {_size(work / 'wheels') / 2**20:.1f} MiB, data "
                               f"{(work / 'data.tar.gz').stat().st_size / 2**20:.1f} MiB)")
        (work / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
        if out.exists():
            shutil.rmtree(out)
        os.replace(work, out)
    finally:
        if work.exists():
            shutil.rmtree(work)
    print(f"headlab gpu-bundle: {out} ({manifest['size_mib']} MiB, {len(manifest['wheels'])} wheels, "
          f"{files} data files, {time.time() - started:.0f} s); the GPU machine's plan: "
          + ", ".join(f"{r} {n}" for r, n in stats.items()), file=sys.stderr)
    return manifest


def _readme(manifest: dict) -> str:
    plan = ", ".join(f"{rule} {n}" for rule, n in manifest["gpu_plan"].items()) or "nothing"
    return f"""# headlab GPU bundle (generated by `headlab gpu-bundle`; do not edit)

headlab {manifest['commit']}, built {manifest['created']} for Python {manifest['python_version']}.
On the GPU machine, from the folder that holds this one:

    python3 {{BUNDLE}}/run.py --out OUT          # repeat until it says "all done"; each call <= --budget s

Each call continues where the last stopped (state in --work, default /tmp/headlab-gpu):
install (pip --no-index --target, the machine's own torch), `pytest -m gpu`, the GPU
bench, then the workflow `{' '.join(manifest['config_sources'])}` towards
{', '.join(manifest['targets'])} in chunks that end before the budget (interrupted
trainings resume from their last checkpoint). Every call leaves OUT/headlab-gpu-results.tar.gz
(results/published/..., bench CSVs, logs, the scores of every finished model) and
OUT/status.json. `python3 run.py --dry-run --out OUT` checks it all without a GPU.

Jobs left for the GPU machine: {plan}.
"""


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="headlab gpu-bundle", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="gpu-bundle", help="the bundle folder (replaced)")
    parser.add_argument("--configfile", nargs="+", default=list(CONFIGS), help="the workflow's config files")
    parser.add_argument("--target", nargs="+", default=list(TARGETS),
                        help="studies to publish (output folders: tables = the baseline), in order")
    parser.add_argument("--python-version", default="3.12", help="the GPU machine's Python (wheels' tags)")
    parser.add_argument("--cores", type=int, default=2, help="cores of the CPU-side preparation here")
    parser.add_argument("--max-mib", type=float, default=64.0)
    args = parser.parse_args(argv)
    build(Path(args.out), configfiles=args.configfile, targets=args.target, python_version=args.python_version,
          cores=args.cores, max_mib=args.max_mib)
    return 0
