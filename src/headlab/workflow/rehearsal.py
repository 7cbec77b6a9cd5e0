"""``make gpu-rehearsal``: the GPU sitting, rehearsed on this CPU against the GPU machine's
software, so that the sitting's first minute on a GPU is not its first run anywhere.

    python -m headlab.workflow.rehearsal --bundle gpu-bundle [--budget 300] [--venv .venv-rehearsal]

The bundle holds the GPU plan's next slice (``make gpu-bundle``), so the rehearsal runs it.

1. a virtual environment of the machine's Python (3.12) holding the machine's packages
   that the GPU side reaches, at the versions ``requirements/gpu-machine.txt`` gives
   (:func:`headlab.workflow.bundle.rehearsal_requirements`: torch 2.11.0, the same build
   the machine has, with no GPU to use; numpy 2.5.2; the newest release where the
   machine's version was not read), and nothing of headlab: the bundle installs that;
2. the bundle copied to a folder elsewhere (it must work from any folder it is copied to)
   and its ``run.py --device cpu --budget B`` run there: install, trainings, the CUDA suite
   (skipped: no GPU), the bench, the deadline, evaluation, publication, status and packing;
3. a second call on the same work folder: only the remainder, no training: its probes
   (side by side: two copies of the slice's models at once; alone: the first model) from
   the bundle's own configs, sized for two cores;
4. the checks: published and labelled (``lacks`` exactly when partial), a row per model,
   at most three files in OUT, each call within its budget, its speed rows read back by
   the GPU plan, the probes' too. One line per check; exit status 1 if any fails.
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from headlab.errors import DataError, HeadlabError
from headlab.workflow import gpu_measures
from headlab.workflow.bundle import MACHINE_FILE, rehearsal_requirements

MACHINE_PYTHON = "3.12"


def find_python(version: str = MACHINE_PYTHON) -> str:
    """A CPython ``version`` interpreter of this machine (on PATH, or pyenv's)."""
    candidates = [shutil.which(f"python{version}")] + sorted(
        glob.glob(str(Path.home() / f".pyenv/versions/{version}*/bin/python3")), reverse=True)
    for candidate in filter(None, candidates):
        result = subprocess.run([candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                capture_output=True, text=True)
        if result.returncode == 0 and result.stdout.strip() == version:
            return candidate
    raise HeadlabError(f"the rehearsal needs CPython {version} (the GPU machine's): none found on PATH or "
                       f"under ~/.pyenv/versions; install one or pass --python")


def venv(path: Path, python: str) -> Path:
    """The rehearsal venv at ``path``, (re)made when its requirements changed."""
    requirements = rehearsal_requirements(MACHINE_PYTHON)
    digest = hashlib.sha256("\n".join(requirements).encode()).hexdigest()[:16]
    stamp = path / ".rehearsal-requirements"
    if stamp.is_file() and stamp.read_text() == digest:
        return path / "bin/python"
    shutil.rmtree(path, ignore_errors=True)
    subprocess.run([python, "-m", "venv", str(path)], check=True)
    print(f"rehearsal: {path}: {' '.join(requirements)}", flush=True)
    # torch first and alone, at the machine's version: no other requirement may choose it
    torch = [r for r in requirements if r.startswith("torch==")]
    for group in (torch, [r for r in requirements if r not in torch]):
        result = subprocess.run([str(path / "bin/python"), "-m", "pip", "install", "-q",
                                 "--disable-pip-version-check", *group], capture_output=True, text=True)
        if result.returncode:
            raise HeadlabError(f"pip install {' '.join(group)} failed:\n{result.stderr[-2000:]}")
    stamp.write_text(digest)
    return path / "bin/python"


def run(python: Path, bundle: Path, work: Path, out: Path, budget: float, *extra: str) -> tuple[int, float]:
    began = time.monotonic()
    result = subprocess.run([str(python), str(bundle / "run.py"), "--device", "cpu", "--budget", str(budget),
                             "--work", str(work), "--out", str(out), *extra], cwd=bundle.parent)
    return result.returncode, time.monotonic() - began


def checkpoints(status: dict) -> dict:
    return {name: model["checkpoints"] for name, model in status["models"].items()}


def expected_rows(models: list[dict], untrained: list[str]) -> int:
    """Rows a sitting of the bundle's ``models`` publishes: one per model, less the chain's
    fine-tunes never trained (named in lacks), plus each trained one's initial checkpoint
    where its link asks for it (paper D's "initial" rows)."""
    trained = [m for m in models if not any(lack.startswith(f"{m['name']}: not trained (") for lack in untrained)]
    return len(trained) + sum(1 for m in trained if (m.get("chain") or {}).get("initial_row"))


def clock_check(clocks: dict[str, dict], trained: list[str]) -> tuple[str, bool]:
    """Every model trained from the bundle timed from inside (``logs/clock.<model>.json``),
    and the first one's profile traced, or not reached (said), never failed."""
    first = trained[0] if trained else ""
    clock = clocks.get(first, {})
    window = "traced" if clock.get("profile") else (f"failed: {clock['profile_error']}" if clock.get("profile_error")
                                                    else f"not reached in {clock.get('iterations', 0)} iterations")
    return (f"every training timed from inside ({len(clocks)} clocks); {first}'s profile window {window}",
            set(trained) <= set(clocks) and not clock.get("profile_error"))


def _read_back(published: str, files: dict[str, str | bytes], reader):
    """``reader`` (a GPU plan reader of a published tree) over a scratch tree holding only
    ``files`` in the publication's folder: what it read, or the one line of its error."""
    with tempfile.TemporaryDirectory(prefix="headlab-read-back.") as scratch:
        folder = Path(scratch, *Path(published).parts[-2:])
        folder.mkdir(parents=True)
        for name, content in files.items():
            (folder / name).write_bytes(content if isinstance(content, bytes) else content.encode())
        try:
            return reader(scratch), None
        except DataError as err:
            return None, str(err)


def speed_check(published: str, provenance: dict, speed: bytes | None) -> tuple[str, bool]:
    """The sitting's speed rows (``throughput.csv``) read back as the GPU plan reads them
    (:func:`headlab.workflow.gpu_measures.measured_speed`): the training's own clock, a step's
    seconds with the models side by side, so that the plan's throughput can be checked."""
    if speed is None:
        return ("the plan reads the sitting's clock: no throughput.csv published", False)
    def read(root: str) -> tuple[dict, str]:
        tables = gpu_measures.speed_tables(root)
        return gpu_measures.measured_speed(root, tables), gpu_measures.side_track_line(root, tables)

    # what the suite and bench beside the trainings cost them: said, never a failure (on two
    # cores the suite's CPU stand-ins may outlast every training)
    found, error = _read_back(published, {"throughput.csv": speed, "provenance.json": json.dumps(provenance)}, read)
    if error:
        return (f"the plan reads the sitting's clock: {error}", False)
    measured, side_track = found
    return ("the plan reads the sitting's clock: " + ("; ".join(
        f"{count} side by side {measure.step_s:.3f} s a step, first batch in "
        + (f"{measure.startup_s:.0f} s" if measure.startup_s is not None else "(not timed)")
        for count, measure in sorted(measured.items())) or "no step_ms") + (f"; {side_track}" if measured else ""),
        bool(measured))


def probe_check(second: Path) -> tuple[str, bool]:
    """The second call's probes, as a GPU's later call runs them (run.py's ``crowd_probe``
    and ``speed_probe``, here with the rehearsal's small settings): neither ended in an
    error, and what each timed reached the speed rows and is read back by the GPU plan
    (:func:`headlab.workflow.gpu_measures.measured_speed`: one model alone, and the copies side
    by side). A probe stopped at its time, or not run for want of it, is slowness, said,
    not a failure."""
    import csv

    try:
        later = json.loads((second / "status.json").read_text())
        call, published = later["calls"][-1], later["publication"]
        with tarfile.open(second / "headlab-sitting.tar.gz") as tar:
            speed = tar.extractfile(f"{published}/throughput.csv").read()
            provenance = tar.extractfile(f"{published}/provenance.json").read()
    except (OSError, KeyError, TypeError, ValueError, AttributeError, tarfile.TarError) as err:
        return (f"the second call's probes: no speed rows to read ({type(err).__name__}: {err})", False)
    rows = list(csv.DictReader(speed.decode().splitlines()))
    ran = {"side by side": call.get("crowd_rc", "not run"), "alone": call.get("probe_rc", "not run")}
    errors = [what for what, rc in ran.items() if rc not in (0, None, "not run")]
    columns = {"side by side": "step_ms_probed_side_by_side", "alone": "step_ms_alone"}
    missing = [what for what, rc in ran.items() if rc == 0 and not any(row.get(columns[what]) for row in rows)]
    measured, error = _read_back(published, {"throughput.csv": speed, "provenance.json": provenance},
                                 gpu_measures.measured_speed)
    probed = sorted(count for count, measure in (measured or {}).items() if measure.probe)
    said = "; ".join(f"{what} {'stopped at its time' if rc is None else rc if rc == 'not run' else f'status {rc}'}"
                     for what, rc in ran.items())
    return (f"the second call's probes ({said}): in the speed rows"
            + (f", lacking {', '.join(missing)}" if missing else "")
            + (f"; the plan reads {', '.join(map(str, probed))} model(s) at once from them" if probed else "")
            + (f"; {error}" if error else ""),
            not errors and not missing and error is None)


def suite_check(second: Path) -> tuple[str, bool]:
    """The CUDA suite's CPU stand-ins as the publication has them after the second call
    (``cuda-suite.csv``), run by the machine's torch, whose dynamo is not this checkout's:
    one that failed fails the check (the compiled cases count a model's graphs there, which
    another torch can break); those the calls' time left unrun are said, not a failure."""
    import csv

    try:
        later = json.loads((second / "status.json").read_text())
        published = later["publication"]
        with tarfile.open(second / "headlab-sitting.tar.gz") as tar:
            names = tar.getnames()
            suite = (tar.extractfile(f"{published}/cuda-suite.csv").read().decode()
                     if f"{published}/cuda-suite.csv" in names else "")
    except (OSError, KeyError, TypeError, ValueError, AttributeError, tarfile.TarError) as err:
        return (f"the CUDA suite's stand-ins: no publication to read ({type(err).__name__}: {err})", False)
    outcomes: dict[str, list[str]] = {}
    for row in csv.DictReader(suite.splitlines()):
        outcomes.setdefault(row["outcome"], []).append(row["test"].split("::", 1)[-1])
    failed = outcomes.pop("failed", [])
    counts = ", ".join(f"{len(tests)} {outcome}" for outcome, tests in sorted(outcomes.items())) or "none finished"
    return (f"the CUDA suite's CPU stand-ins under the machine's torch: {counts}"
            + (f"; failed: {', '.join(failed)}" if failed else ""), not failed)


def evaluation_check(published: str, provenance: dict, rows: bytes | None, status: dict) -> tuple[str, bool]:
    """The call's status read back as the GPU plan reads a received sitting's
    (:func:`headlab.workflow.gpu_measures.measured_evaluation`: its ``evaluate`` phase, per row
    scored), so that the plan's evaluation reserves can be checked against it."""
    if rows is None:
        return ("the plan reads the sitting's evaluation: no rows.csv published", False)
    measured, error = _read_back(published, {"rows.csv": rows, "provenance.json": json.dumps(provenance),
                                             "status-sitting.json": json.dumps(status)}, gpu_measures.measured_evaluation)
    if error:
        return (f"the plan reads the sitting's evaluation: {error}", False)
    if measured is None:
        return ("the plan reads the sitting's evaluation: no evaluate phase or no row scored", False)
    return (f"the plan reads the sitting's evaluation: {measured.evaluated} rows in {measured.seconds:.0f} s "
            f"(its head atlas aside)", True)


def final_lacks(out: Path) -> list[tuple[str, str]]:
    """(cause, what) of each thing the publication in ``out``'s tarball still lacks."""
    try:
        status = json.loads((out / "status.json").read_text())
        with tarfile.open(out / "headlab-sitting.tar.gz") as tar:
            provenance = json.load(tar.extractfile(f"{status['publication']}/provenance.json"))
    except (OSError, KeyError, TypeError, ValueError, tarfile.TarError):
        return []             # nothing published: the checks say so
    causes = provenance.get("lacks_by_cause") or {}
    return [(cause, what) for cause, lines in causes.items() for what in lines]


def checks(out: Path, second: Path, budget: float, seconds: tuple[float, float], models: list[dict]) -> list[tuple[str, bool]]:
    """What holds at any machine speed: a labelled publication, not a deadline met."""
    import csv

    status = json.loads((out / "status.json").read_text())
    later = json.loads((second / "status.json").read_text())
    published = status.get("publication") or ""
    with tarfile.open(out / "headlab-sitting.tar.gz") as tar:
        names = tar.getnames()
        if f"{published}/provenance.json" not in names:
            return [("published", False)]
        provenance = json.load(tar.extractfile(f"{published}/provenance.json"))
        rows_bytes = tar.extractfile(f"{published}/rows.csv").read() if f"{published}/rows.csv" in names else None
        rows = list(csv.DictReader(rows_bytes.decode().splitlines())) if rows_bytes is not None else []
        clocks = {name.split(".", 1)[1].removesuffix(".json"): json.load(tar.extractfile(name))
                  for name in names if name.startswith("logs/clock.") and name.endswith(".json")}
        speed = (tar.extractfile(f"{published}/throughput.csv").read()
                 if f"{published}/throughput.csv" in names else None)
    scored = [row for row in rows if row["bleu"]]
    # a training that ended by itself before the deadline with an error (a crash) is not
    # slowness: on the GPU it would have thrown the sitting away
    crashed = sorted(name for name, rc in (status.get("exited") or {}).items() if rc not in (0, None))
    # likewise a step of the evaluation that failed (the head atlas), as against one skipped for time
    causes = provenance.get("lacks_by_cause") or {}
    failed = causes.get("failed") or []
    # a fine-tune of the chain its stage left no time for (said in lacks) has no row
    untrained = [lack for lack in causes.get("not trained") or [] if ": not trained (" in lack]
    return [
        (f"no training ended in an error ({', '.join(crashed) or 'none'}; train-logs/*.console.log)", not crashed),
        (f"no evaluation step ended in an error ({'; '.join(failed) or 'none'})", not failed),
        (f"published {published} ({provenance['status']}), one row per model"
         + (f" ({len(untrained)} of the chain not trained, said in lacks)" if untrained else ""),
         status.get("published") is True and len(rows) == expected_rows(models, untrained)),
        (f"labelled: lacks {len(provenance['lacks'])} thing(s) exactly when partial, each with its cause",
         (provenance["status"] == "partial") == bool(provenance["lacks"])
         and sorted(provenance["lacks"]) == sorted(sum(causes.values(), []))),
        (f"BLEU for {len(scored)} of {len(rows)} models, each at its own evaluated checkpoint, saying how it "
         f"was chosen ({', '.join(sorted({row.get('selected_by') or 'not said' for row in scored}))})",
         all(row["best_step"] and row.get("selected_by") for row in scored)),
        ("torch and numpy are the venv's, not the bundle's",
         "site" not in Path(provenance["machine"]["torch_file"]).parts[-4:-2]),
        (f"first call within its budget ({seconds[0]:.0f} of {budget:.0f} s)", seconds[0] <= budget + 5),
        clock_check(clocks, [model["name"] for model in models if "config" in model]),
        speed_check(published, provenance, speed),
        evaluation_check(published, provenance, rows_bytes, status),
        ("at most 3 files in OUT", len(list(out.iterdir())) <= 3 and len(list(second.iterdir())) <= 3),
        # (it may first complete the evaluation the first call's deadline cut: no training)
        ("the second call trained nothing",
         later["calls"][-1].get("phases", {}).keys() in ({"remainder"}, {"evaluate-rest", "remainder"})
         and checkpoints(later) == checkpoints(status)),
        # the later call's speed rows carry its probe into the publication; an error there
        # loses it silently (the call itself still ends with status 0). Not run, or stopped
        # for time: not an error
        (f"the second call's speed rows rewritten without an error (status {later['calls'][-1].get('speed_rows_rc')})",
         later["calls"][-1].get("speed_rows_rc") in (0, None)),
        probe_check(second),
        suite_check(second),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m headlab.workflow.rehearsal", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", default="gpu-bundle", help="a built bundle (make gpu-bundle)")
    parser.add_argument("--venv", default=".venv-rehearsal", help="the Python 3.12 virtual environment of the rehearsal")
    parser.add_argument("--python", default=None, help=f"a CPython {MACHINE_PYTHON} (default: found)")
    parser.add_argument("--budget", type=float, default=300, help="the first call's budget in seconds")
    parser.add_argument("--second-budget", type=float, default=180,
                        help="budget (s) of the second call on the same work folder (its probes: ~2 x 60 s)")
    parser.add_argument("--keep", default=None, help="copy OUT of both calls here")
    args = parser.parse_args(argv)
    bundle = Path(args.bundle).resolve()
    if not (bundle / "manifest.json").is_file():
        raise HeadlabError(f"{bundle} is not a built bundle (make gpu-bundle)")
    began = time.monotonic()
    python = venv(Path(args.venv).resolve(), args.python or find_python())
    setup_s = time.monotonic() - began
    models = json.loads((bundle / "manifest.json").read_text())["models"]
    with tempfile.TemporaryDirectory(prefix="headlab-rehearsal.") as scratch:
        copy = Path(scratch) / "elsewhere" / "bundle"
        shutil.copytree(bundle, copy)
        out, second = Path(scratch) / "out", Path(scratch) / "out2"
        first_rc, first_s = run(python, copy, Path(scratch) / "work", out, args.budget)
        second_rc, second_s = run(python, copy, Path(scratch) / "work", second, args.second_budget)
        results = [("first call exit status 0", first_rc == 0), ("second call exit status 0", second_rc == 0)]
        if (out / "status.json").is_file() and (second / "status.json").is_file():
            results += checks(out, second, args.budget, (first_s, second_s), models)
        lacking = final_lacks(second)
        if args.keep:
            for folder in (out, second):
                shutil.copytree(folder, Path(args.keep) / folder.name, dirs_exist_ok=True)
    for text, passed in results:
        print(f"rehearsal: {'ok  ' if passed else 'FAIL'} {text}")
    for cause, what in lacking:
        print(f"rehearsal: lacks ({cause}): {what}")
    print(f"rehearsal: venv {setup_s:.0f} s, first call {first_s:.0f} s, second {second_s:.0f} s "
          f"({MACHINE_FILE.name}; {python})")
    return 0 if all(passed for _, passed in results) else 1


if __name__ == "__main__":
    sys.exit(main())
