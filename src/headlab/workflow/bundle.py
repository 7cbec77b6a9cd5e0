"""``headlab gpu-bundle``: one folder with everything a GPU sitting needs that the offline
GPU machine lacks, built from the shipped config, so that its minutes go to the GPU.

    headlab gpu-bundle --out gpu-bundle [--slice NAME]        (make gpu-bundle [SLICE=NAME])

What it bundles is the GPU plan's next slice (``config/gpu-plan.yaml``,
:mod:`headlab.workflow.gpu_plan`): the first slice not yet done in ``results/published/``
that fits one sitting, with its next seeds, or ``--slice NAME``. The slice becomes an
overlay on ``config/multi30k-gpu.yaml`` + ``config/gpu-sitting.yaml`` (:func:`slice_overlay`:
the baseline study's grid set to the slice's models and seeds, its stop rule as
OpenNMT-py options), written into the bundle and carried with the source.

The machine to plan for (``requirements/gpu-machine.txt``): Python 3.12, CUDA torch 2.11,
numpy 2.5 and the other packages listed there, no package index, one command of at most 10
minutes, 15 minutes of device time in all, 64 MiB that travel with the checkout. The
folder (at most ``--max-mib``, 55 MiB) holds:

- ``wheels/``: what the GPU side imports and the machine lacks or has at a version headlab
  does not accept (:func:`runtime_requirements`: the closure of :data:`GPU_REQUIREMENTS`
  in this environment's metadata, minus the machine's acceptable packages): OpenNMT-py
  3.5.1, ConfigArgParse, pyonmttok, sacremoses, nltk. Never torch, numpy or a CUDA library
  (:data:`NEVER_CARRIED`: the runner refuses such a wheel);
- ``source.tar.gz``: the checkout (tracked and untracked-not-ignored files) and its commit;
  headlab runs from its ``src/`` there, ``tests/gpu`` is the CUDA suite;
- ``data.tar.gz``: what the CPU does here, by the same workflow on the same config: every
  job upstream of ``train`` (``snakemake --omit-from train``): prepared Multi30k, Moses,
  BPE, the vocabulary and each model's ``onmt.yaml``. What the full workflow would still
  run after that is checked to be model work only (:data:`GPU_RULES`);
- ``run.py``: the sitting (:mod:`headlab.workflow.gpu_runner`, standard library only), and
  ``manifest.json`` / ``README.md``: what is inside and the command that starts it.
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
from headlab.workflow import gpu_measures, gpu_plan
from headlab.workflow.slice_check import SITTING_CONFIGS, stop_overrides

REPO = Path(__file__).resolve().parents[3]
#: the sitting's workflow: the GPU config with the one-sitting overlay
CONFIGS = SITTING_CONFIGS
#: the study whose models the sitting trains (its published folder is the DAG checked)
TARGETS = ("tables",)
#: rules downstream of a model: what may be left for a GPU machine once the CPU-side
#: preparation is done (anything else needs tools or data the machine lacks)
GPU_RULES = ("onmt_config", "finetune_config", "snapshot", "train", "average_checkpoints", "translate",
             "postprocess", "bleu", "compare", "forced_score", "distil_accuracy", "learning_curve", "params",
             "gates", "export_attention", "profile_heads", "study_stage", "study_table", "study_figure",
             "study_readme", "study_effects", "effects_summary", "publish", "all")
#: where the CPU-side preparation stops (--omit-from: it and everything after it stay)
GPU_ENTRY_RULES = ("train", "finetune_config", "snapshot")
#: distributions the GPU side imports (engine, translation, scoring, the CUDA suite); the
#: bundle carries those of their closure the machine lacks. OpenNMT-py is installed with
#: --no-deps everywhere (it pins torch < 2.3): its run-time imports are listed here.
GPU_REQUIREMENTS = ("torch>=2.1", "OpenNMT-py==3.5.1", "ConfigArgParse", "pyonmttok>=1.37,<2", "PyYAML", "six",
                    "sacrebleu>=2.4", "sacremoses", "numpy", "pandas", "scipy", "pytest", "packaging",
                    # the synthetic parses of the syntax kinds' CUDA tests and bench (bench/synthetic.py)
                    "nltk")
#: the machine's own builds: a wheel of these would replace its CUDA torch or the numpy
#: torch was built against (gpu_runner.PROTECTED refuses them on the machine too)
NEVER_CARRIED = ("torch", "numpy", "triton")
ONMT = "OpenNMT-py==3.5.1"
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64")
MACHINE_FILE = REPO / "requirements/gpu-machine.txt"
#: the command that starts a sitting from the checkout that carries the bundle (``$OUT``:
#: the folder whose files come back)
START = "python3 {bundle}/run.py --out \"$OUT\""
#: seconds one device command may run (the device tool's limit): what both calls of a sitting
#: in one command share
COMMAND_LIMIT_S = 600


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def machine_packages(path: Path = MACHINE_FILE) -> dict[str, str | None]:
    """name -> version (None: not read) of the GPU machine's packages: one ``name==version``
    or ``name`` a line, ``#`` comments."""
    found = {}
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)(?:==([A-Za-z0-9.+!-]+))?", line)
        if not match:
            raise ConfigError(f"not 'name' or 'name==version': {raw!r}", path=str(path), line=number)
        found[_norm(match[1])] = match[2]
    return found


def _marker_env(python_version: str) -> dict[str, str]:
    return {"python_version": python_version, "python_full_version": f"{python_version}.0",
            "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
            "implementation_name": "cpython", "platform_python_implementation": "CPython", "os_name": "posix",
            "extra": ""}


def _accepts(specifiers, version: str | None) -> bool:
    """Whether the machine's ``version`` meets every requirer's specifier (unread: yes)."""
    from packaging.version import InvalidVersion, Version
    if version is None:
        return True
    try:
        return all(Version(version) in spec for spec in specifiers)
    except InvalidVersion:
        return False


def requirement_closure(roots, python_version: str, machine: dict[str, str | None]) -> dict[str, list]:
    """name -> the specifiers its requirers ask for, of ``roots`` and all they require here
    (markers evaluated for ``python_version`` on Linux x86_64)."""
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet

    env = _marker_env(python_version)
    wanted: dict[str, list] = {}
    for root in map(Requirement, roots):
        wanted.setdefault(_norm(root.name), []).append(root.specifier or SpecifierSet())
    todo = list(wanted)
    while todo:
        name = todo.pop()
        if name == "headlab":
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            if name in machine:
                continue
            raise ConfigError(f"{name} is needed on the GPU machine but not installed here, so its version is "
                              f"unknown: install it (make setup) or add it to {MACHINE_FILE.name}") from None
        if name == "opennmt-py":
            continue                     # --no-deps: its imports are in GPU_REQUIREMENTS
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            dep = _norm(req.name)
            if dep not in wanted:
                todo.append(dep)
            wanted.setdefault(dep, []).append(req.specifier)
    return wanted


def closure(roots, python_version: str, machine: dict[str, str | None]) -> dict[str, str]:
    """name -> installed version here of what :func:`requirement_closure` finds, less what
    the machine has at a version every requirer accepts: the wheels to carry.
    :data:`NEVER_CARRIED` is an error there."""
    carry = {}
    for name, specifiers in sorted(requirement_closure(roots, python_version, machine).items()):
        if name in machine and _accepts(specifiers, machine[name]):
            continue
        if name in NEVER_CARRIED:
            raise ConfigError(f"headlab needs {name} {','.join(map(str, specifiers))}, but the GPU machine has "
                              f"{machine.get(name)} and a bundle never carries {name} (it would replace the "
                              f"machine's CUDA build)", path=str(MACHINE_FILE))
        carry[name] = metadata.version(name)
    return carry


def runtime_requirements(python_version: str) -> dict[str, str]:
    """The wheels the GPU side needs and the machine lacks (name -> version to carry)."""
    return closure(GPU_REQUIREMENTS, python_version, machine_packages())


def rehearsal_requirements(python_version: str = "3.12") -> list[str]:
    """What a CPU rehearsal venv installs to stand for the machine: the machine's packages
    the GPU side reaches (the closure, less what the bundle carries), at the machine's
    versions where they were read (``name==version``), torch included."""
    machine = machine_packages()
    wanted = requirement_closure(GPU_REQUIREMENTS, python_version, machine)
    carried = set(closure(GPU_REQUIREMENTS, python_version, machine))
    lines = []
    for name in sorted(set(wanted) - carried - {"headlab"}):
        version = machine.get(name)
        lines.append(f"{name}=={version}" if version else name)
    return lines


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
    """Everything of ``targets`` upstream of the models, run here."""
    result = snakemake(configfiles, "--cores", str(cores), "--scheduler", "greedy", "--rerun-incomplete",
                       "--omit-from", *GPU_ENTRY_RULES, "--", *targets)
    if result.returncode:
        raise HeadlabError(f"the CPU-side preparation failed:\n{(result.stdout + result.stderr)[-4000:]}")


def plan(configfiles, targets, *extra, results: str | None = None) -> dict[str, int]:
    """rule -> jobs of a dry run towards ``targets``."""
    result = snakemake(configfiles, "-n", "--quiet", "rules", *extra, "--", *targets, results=results)
    if result.returncode:
        raise HeadlabError(f"dry run failed:\n{(result.stdout + result.stderr)[-3000:]}")
    return job_stats(result.stdout + result.stderr)


def gpu_side(configfiles, targets, results: str | None = None) -> dict[str, int]:
    """rule -> jobs that the CPU-side preparation leaves for the GPU machine: the whole plan
    less what ``--omit-from`` runs (two dry runs; the DAG's check of the config included)."""
    whole = plan(configfiles, targets, results=results)
    cpu = plan(configfiles, targets, "--omit-from", *GPU_ENTRY_RULES, results=results)
    return {rule: count - cpu.get(rule, 0) for rule, count in whole.items() if count > cpu.get(rule, 0)}


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


def slice_overlay(choice: gpu_plan.Choice) -> dict:
    """The config overlay of a sitting of ``choice``: the baseline study's grid set to the
    slice's models at the chosen seeds (any head spec trains there at base size), and the
    slice's stop rule: validation and a checkpoint every ``valid_steps``, OpenNMT-py's early
    stopping after ``patience`` validations without a lower perplexity (the order of
    cross-entropy), the best validation kept and chosen (``model_selection: valid_loss``)."""
    entry = choice.slice.entry
    study = {"data": {"multi30k": [entry["pair"]]}, "layers": [entry["layers"]], "preset": entry["preset"],
             "heads": choice.slice.heads, "seeds": list(choice.seeds)}
    if entry.get("overrides"):
        study["overrides"] = dict(entry["overrides"])
    return {"studies": {"baseline": study}, "training": {"overrides": stop_overrides(entry["stop"])}}


def slice_manifest(choice: gpu_plan.Choice, published: Path | str = gpu_plan.PUBLISHED) -> dict:
    entry = choice.slice.entry
    from headlab.naming import heads_name

    return {"name": choice.slice.name, "study": entry["study"], "table": entry["table"], "seeds": list(choice.seeds),
            "rows": {heads_name(m["heads"]): m["row"] for m in entry["models"]}, "stop": entry["stop"],
            "expected_steps": entry["expected_steps"], "cost_gpu_s": entry["cost_gpu_s"],
            "steps_in_window": choice.slice.steps_in_window, "min_steps": entry["min_steps"],
            "seconds_per_step": choice.slice.seconds_per_step,
            "startup_s": choice.slice.plan.throughput["startup_s"],
            # the runner's stage deadlines: the time the plan keeps for each chain stage, out
            # of its training window (scaled with the window of a rehearsal)
            "train_window_s": choice.slice.train_window_s,
            "chain_stage_s": {str(stage): seconds for stage, seconds in choice.slice.chain_stage_s.items()},
            # the budget, packing and evaluation reserve the window above is made of: run.py
            # keeps these, so the sitting trains in the window the queue forecast from; and
            # its trainings' -compile (the slice's, else sitting.compile: run.py --compile's default)
            "sitting": {**choice.slice.plan.sitting, "eval_reserve_s": choice.slice.eval_reserve_s,
                        "compile": choice.slice.compile},
            # the probe side by side after the publication: one seed more a sitting of every
            # ready slice, measured with this slice's models (run.py's crowd_probe)
            "probe_side_by_side": choice.slice.plan.probe_side_by_side,
            # the most trainings a ready slice runs side by side: the probe compiles with the
            # workers one of them has (run.py's cores_each), in whatever slice's sitting, so
            # that one compile_s stands for every slice's
            "compile_side_by_side": max((found.side_by_side for found in choice.slice.plan.slices
                                         if found.entry["ready"]), default=choice.slice.side_by_side),
            # which probe a later call runs first: the one the published sittings ran longest
            # ago (a later call rarely holds both); the probe alone where none goes side by side
            "probe_first": gpu_measures.probe_first(published) if choice.slice.plan.probe_side_by_side > 1
            else "alone"}


def recipe_changes(choice: gpu_plan.Choice, models: list[dict], published: Path | str) -> list[str]:
    """A line for each of the bundle's models (a chain's fine-tunes aside: theirs names their
    parent's) that trains by another recipe (:mod:`headlab.workflow.recipe`) than the newest
    published run of its slice, row and heads: the session changed what trains it. Not a
    refusal (a changed recipe is how the plan moves on), but the sitting then starts the
    model's seeds again: once it publishes, the earlier recipe's runs are shown apart and
    their seeds trained anew (:func:`headlab.workflow.gpu_plan.seed_states`)."""
    import yaml

    from headlab.workflow import recipe
    from headlab.workflow.gpu_runner import training_overrides

    rows = slice_manifest(choice)["rows"]
    newest = gpu_plan.newest_recipes(choice.slice, published)
    lines = []
    for model in models:
        before = newest.get((rows.get(model["heads"], ""), model["heads"]))
        if before is None or "chain" in model:
            continue
        options = yaml.safe_load((REPO / model["config"]).read_text(encoding="utf-8"))
        now = recipe.of(recipe.with_overrides(options, training_overrides("cuda")), REPO)
        if recipe.digest(now) == before.digest:
            continue
        changed = (", ".join(recipe.differences(before.recipe, now)) if before.recipe
                   else f"recipe {before.digest} -> {recipe.digest(now)}")
        lines.append(f"{model['name']} trains by another recipe than its newest published run's "
                     f"({before.sitting}: {changed}); once this sitting publishes, that recipe's runs are shown "
                     f"apart and their seeds trained anew")
    return lines


def chain_models(choice: gpu_plan.Choice, models: list[dict]) -> list[dict]:
    """The manifest entries of the slice's chain (:mod:`headlab.workflow.sitting_chain`), one
    per link and seed: the parent's identity (heads, layers, seed, ...), the link's row and
    its ``chain`` (parent and ``mask_from`` as the sitting's model names); no folder or
    config yet: the GPU machine writes them once the parent has trained."""
    from headlab.naming import heads_name

    several = len({m["seed"] for m in models}) > 1

    def named(name: str, seed: str) -> str:
        return f"{name}.{seed}" if several else name

    linked = []
    for seed in dict.fromkeys(m["seed"] for m in models):
        by_heads = {m["heads"]: m for m in models if m["seed"] == seed}
        for link in choice.slice.chain:
            parent = by_heads[heads_name(link["parent"])]
            chain = {"stage": link["stage"], "parent": parent["name"], "options": dict(link["options"])}
            if link.get("mask_from"):
                chain.update(mask_from=named(link["mask_from"], seed), mask=link.get("mask", "mask"))
            if link.get("initial_row"):
                chain["initial_row"] = link["initial_row"]
            linked.append({key: parent[key] for key in ("heads", "layers", "seed", "corpus", "pair", "size")}
                          | {"name": named(link["name"], seed), "row": link["row"], "chain": chain})
    return linked


def train_folders(configfiles, targets) -> list[str]:
    """The model folders (relative to the checkout) of the ``train`` jobs in the DAG towards
    ``targets``, in snakemake's order: what this sitting trains, as the workflow itself
    says (``snakemake --summary``: one tab-separated row per output file, its rule third)."""
    result = snakemake(configfiles, "--summary", "--", *targets)
    if result.returncode:
        raise HeadlabError(f"snakemake --summary failed:\n{(result.stdout + result.stderr)[-3000:]}")
    return parse_train_folders(result.stdout)


def parse_train_folders(summary: str) -> list[str]:
    """The folders of the ``train`` rule's outputs in ``snakemake --summary``'s table."""
    rows = [line.split("\t") for line in summary.splitlines()]
    return list(dict.fromkeys(str(Path(row[0]).parent) for row in rows if len(row) > 2 and row[2] == "train"))


def sitting_models(results: str, folders, heads_order=()) -> list[dict]:
    """The models of the sitting: of ``folders`` (:func:`train_folders`, the DAG's, under
    ``results``/models), those whose ``onmt.yaml`` the preparation wrote (heads, folder,
    config); a chain's fine-tune has none yet (:func:`chain_models`). Taken from the DAG,
    never from what the results folder holds: it outlives a bundle, and the configs of an
    earlier bundle (another slice's preset or pair, other seeds: paper B's 8L de-en seed 1
    beside paper A's low-resource one) must not join this sitting. Ordered seed by seed as
    ``heads_order`` (the study's: its first is the baseline of the paired tests); ``name``:
    the heads, with the seed where the sitting trains several, unique (the runner keys its
    processes and files by it); ``valid_src``: the validation source its config names."""
    import yaml

    from headlab.naming import MODEL_KEYS, heads_name

    models = []
    for folder in folders:
        config = REPO / folder / "onmt.yaml"
        if not config.is_file():
            continue
        keys = dict(zip(MODEL_KEYS, Path(folder).relative_to(Path(results) / "models").parts))
        options = yaml.safe_load(config.read_text())
        models.append({"heads": keys["heads"], "layers": keys["layers"], "seed": keys["seed"],
                       "corpus": keys["corpus"], "pair": keys["pair"], "size": keys["size"],
                       "dir": str(Path(folder)), "config": str(Path(folder) / "onmt.yaml"),
                       "save_model": options["save_model"], "save_every": options["save_checkpoint_steps"],
                       "model_dtype": options.get("model_dtype", "fp32"),
                       "valid_src": options["data"]["valid"]["path_src"]})
    if not models:
        raise HeadlabError(f"the preparation wrote no config of the DAG's models ({', '.join(folders) or 'none'})")
    order = [heads_name(spec) for spec in heads_order]
    several = len({m["seed"] for m in models}) > 1
    for model in models:
        model["name"] = f"{model['heads']}.{model['seed']}" if several else model["heads"]
    names = [m["name"] for m in models]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise HeadlabError(f"the sitting would train two models named {', '.join(twice)}: "
                           + ", ".join(m["dir"] for m in models if m["name"] in twice))
    return sorted(models, key=lambda m: (m["seed"], order.index(m["heads"]) if m["heads"] in order else len(order),
                                         m["heads"]))


def study_heads(configfiles, study: str = "baseline") -> list[str]:
    """The head specs of ``study`` in the merged configs (the last file that sets them)."""
    import yaml

    heads = []
    for path in configfiles:
        entry = ((yaml.safe_load((REPO / path).read_text()) or {}).get("studies") or {}).get(study) or {}
        heads = entry.get("heads", heads)
    return heads if isinstance(heads, list) else [heads]


def test_split(configfiles, model: dict, results: str) -> dict:
    """The first test split of the models' corpus: source BPE, raw reference, language pair."""
    import yaml

    corpora = {}
    for path in configfiles:
        corpora.update((yaml.safe_load((REPO / path).read_text()) or {}).get("corpora") or {})
    split = corpora[model["corpus"]]["tests"][0]
    data = f"{results}/data/{model['corpus']}/{model['pair']}/{model['size']}"
    found = {"split": split, "pair": model["pair"], "src": f"{data}/bpe/{split}.src", "ref": f"{data}/raw/{split}.tgt"}
    for key in ("src", "ref"):
        if not (REPO / found[key]).is_file():
            raise HeadlabError(f"the preparation did not write {found[key]}")
    return found


def translation_inputs(models: list[dict], test: dict) -> None:
    """Each model's test source and ``headlab translate`` options, as the workflow's
    ``translate`` rule gives them (rules/evaluate.smk): a syntax model (paper C's DEA, LPEA,
    RHE) reads the test split featured by the parser it was trained with (beside its
    validation source), and every model that reads source features gets the options it was
    trained with (``feature_args``: the word-boundary column from the text, the parse
    columns); a chain's fine-tune those of its parent. Without them a syntax model's
    translation stops at once, and with it the BLEU of every model of the sitting."""
    from headlab.engine.config import feature_args
    from headlab.heads.spec import feature_columns, needs_syntax

    by_name = {m["name"]: m for m in models}
    for model in models:
        if "config" not in model:
            parent = by_name[model["chain"]["parent"]]
            model.update(test_src=parent["test_src"], translate_args=parent["translate_args"])
            continue
        src = test["src"]
        if needs_syntax(model["heads"]):
            src = str(Path(model["valid_src"]).with_name(f"{test['split']}.src"))
            if not (REPO / src).is_file():
                raise HeadlabError(f"the preparation did not write {src}, the featured test source of {model['name']}")
        model.update(test_src=src, translate_args=feature_args(feature_columns(model["heads"])).split())


def data_archive(dest: Path, results: str, models: list[dict]) -> int:
    """The prepared data of ``models`` (the sitting's: ``RESULTS/data/CORPUS/PAIR/SIZE`` of
    each, with the raw test references they are scored against; the mirror's verification
    mark) and their configs, as a tarball of paths relative to the checkout, mtimes kept
    (``headlab train`` resumes only from checkpoints newer than its config). Only theirs: the
    results folder keeps what earlier bundles prepared (paper C's en-de parses would add 11
    MiB to a de-en slice). Returns the number of files."""
    root = REPO / results
    folders = {root / "data" / m["corpus"] / m["pair"] / m["size"] for m in models}
    paths = [p for folder in sorted(folders) for p in sorted(folder.rglob("*"))
             if p.is_file() and ".snakemake" not in p.parts]
    paths += sorted((root / "data" / "raw").rglob(".verified"))
    paths += [REPO / model["config"] for model in models if "config" in model]   # the chain's: written there
    with tarfile.open(dest, "w:gz") as tar:
        for path in dict.fromkeys(paths):
            tar.add(path, arcname=str(path.relative_to(REPO)))
    return len(dict.fromkeys(paths))


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


#: the file that makes a folder a bundle: the one folder ``--out`` may replace
MANIFEST = "manifest.json"


def check_out_folder(out: Path) -> None:
    """Refuse an ``out`` that holds anything but a previous bundle: the bundle replaces its
    folder whole, and ``--out .`` or ``--out results`` would wipe the checkout's files."""
    out = Path(out)
    if not out.exists():
        return
    if out.is_dir() and ((out / MANIFEST).is_file() or not any(out.iterdir())):
        return
    raise ConfigError(f"--out {out}: a folder that is not a bundle (it has no {MANIFEST}) and not empty; "
                      "the bundle would replace it whole")


def build(out: Path, *, slice_name: str | None = None, published: Path | str = gpu_plan.PUBLISHED,
          plan_path: Path | str = gpu_plan.PLAN, configfiles=CONFIGS, targets=TARGETS, python_version: str = "3.12",
          cores: int = 2, max_mib: float = 55.0) -> dict:
    """Write the bundle folder ``out`` (a previous bundle there is replaced as a whole once
    complete; any other folder that is not empty is refused) for the plan's
    next slice (or ``slice_name``); its manifest."""
    import yaml

    check_out_folder(out)               # refused before minutes of preparation, not wiped after them
    started = time.time()
    plan = gpu_plan.load(plan_path)
    choice = gpu_plan.choose(plan, published, slice_name)
    print(f"headlab gpu-bundle: slice {choice.slice.name}, seeds {choice.seeds}"
          + (f" (passed over: {'; '.join(choice.skipped)})" if choice.skipped else ""), file=sys.stderr)
    # a warning, not a refusal: the sitting trains to its deadline whatever the plan says, but
    # the queue's choice (steps a sitting, seeds undertrained or at their limit) rests on it
    try:
        warnings = [f"the plan's throughput is stale: {line}" for line in gpu_plan.stale_throughput(plan, published)]
    except HeadlabError as err:
        warnings = [f"the plan's throughput is not checked: {err}"]
    for line in warnings:
        print(f"headlab gpu-bundle: warning: {line}", file=sys.stderr)
    out = Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    overlay = work / f"slice-{choice.slice.name}.yaml"
    overlay.write_text(f"# generated by headlab gpu-bundle from {Path(plan_path).name}: slice {choice.slice.name}\n"
                       + yaml.safe_dump(slice_overlay(choice), sort_keys=False))
    configfiles = [*configfiles, str(overlay)]
    results = results_dir(configfiles)
    target_paths = [f"{results}/published/{t}" for t in targets]
    try:
        stats = gpu_side(configfiles, target_paths)
        check_gpu_side(stats)           # before minutes of preparation: the config's DAG decides
        (work / "wheels").mkdir()
        commit, copies = source_archive(work / "source.tar.gz", configfiles)
        _pip("download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(work / "wheels"), ONMT)
        pins = runtime_requirements(python_version)
        pins.pop("opennmt-py", None)
        download_wheels(pins, work / "wheels", python_version)
        folders = train_folders(configfiles, target_paths)
        prepare(configfiles, target_paths, cores)
        models = sitting_models(results, folders, choice.slice.heads)
        for line in recipe_changes(choice, models, published):
            print(f"headlab gpu-bundle: warning: {line}", file=sys.stderr)
        models += chain_models(choice, models)
        test = test_split(configfiles, models[0], results)
        translation_inputs(models, test)
        files = data_archive(work / "data.tar.gz", results, models)
        shutil.copyfile(Path(__file__).with_name("gpu_runner.py"), work / "run.py")
        manifest = {
            "commit": commit, "created": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "slice": slice_manifest(choice, published),
            "python_version": python_version, "configfiles": copies,
            "config_sources": [*map(str, configfiles[:-1]), f"{Path(plan_path).name}: slice {choice.slice.name}"],
            "results": results, "models": models, "test": test, "targets": target_paths,
            "gpu_rules": list(GPU_RULES), "gpu_plan": stats, "data_files": files,
            "wheels": sorted(w.name for w in (work / "wheels").glob("*.whl")),
            "never_carried": list(NEVER_CARRIED),
            "sha256": {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(work.glob("*.tar.gz"))},
        }
        (work / "README.md").write_text(_readme(manifest, out.name))
        overlay.unlink()                 # carried in source.tar.gz (.gpu-bundle/)
        manifest["size_mib"] = round(_size(work) / 2**20, 1)
        if manifest["size_mib"] > max_mib:
            raise HeadlabError(f"the bundle is {manifest['size_mib']} MiB, over the {max_mib:g} MiB limit "
                               f"(wheels {_size(work / 'wheels') / 2**20:.1f} MiB, data "
                               f"{(work / 'data.tar.gz').stat().st_size / 2**20:.1f} MiB, source "
                               f"{(work / 'source.tar.gz').stat().st_size / 2**20:.1f} MiB)")
        (work / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        if out.exists():
            shutil.rmtree(out)
        os.replace(work, out)
    finally:
        if work.exists():
            shutil.rmtree(work)
    print(f"headlab gpu-bundle: {out}: slice {choice.slice.name}, seeds {choice.seeds} "
          f"({manifest['size_mib']} MiB, {len(manifest['wheels'])} wheels, "
          f"{files} data files, {time.time() - started:.0f} s); models: "
          + ", ".join(m["name"] for m in manifest["models"]), file=sys.stderr)
    print(f"start the sitting from the checkout that holds {out.name}/ (the device's run, carry [\"{out.name}\"]):")
    print(f"  {START.format(bundle=out.name)}")
    return manifest


def _readme(manifest: dict, folder: str) -> str:
    models = ", ".join(f"{m['layers']} {m['name']}" for m in manifest["models"] if "chain" not in m)
    chained = [m for m in manifest["models"] if "chain" in m]
    if chained:
        models += (" (then, stage by stage, the fine-tunes of its chain from their parents' best checkpoints: "
                   + "; ".join(f"stage {m['chain']['stage']}: {m['name']} from {m['chain']['parent']}"
                               + (f" masked by {m['chain']['mask_from']}'s gates" if m["chain"].get("mask_from") else "")
                               for m in chained) + ")")
    plan = manifest["slice"]
    return f"""# headlab GPU sitting (generated by `headlab gpu-bundle`; do not edit)

headlab {manifest['commit']}, built {manifest['created']} for Python {manifest['python_version']}
from `{' '.join(manifest['config_sources'])}`. From the folder that holds `{folder}/`:

    {START.format(bundle=folder)}                  # one command, --budget {plan['sitting']['budget_s']:g} s
    {START.format(bundle=folder)} --budget B       # again at once, on the same still warm machine: what is left

The second call's budget B: what the lease has left (`status`: budget_left_s) less ~40 s for the
transfers and the give-back, and at most the {COMMAND_LIMIT_S} s a device command may run less ~15 s. About 270 s
hold a head atlas the deadline cut (~50 s), the probe side by side ({plan.get('probe_side_by_side', 1)} models
at once: a start-up and 40 steps, at most 100 s) and the probe alone (at most 90 s, then its compile
with what is left, up to 150 s), each probe's measures published before the idle bench takes what
is left; with less, the one the published sittings ran longest ago comes first (here the probe
{plan.get('probe_first', 'crowd').replace('crowd', 'side by side')}) and the other waits for a later sitting. It must come within the machine's
warm time (idle 30 s): a machine given back takes the first call's state with it, and a second call
there refuses to train anew on a window short of the slice's min_steps. Not both in one device
command with a fixed budget: the first call alone takes its {plan['sitting']['budget_s']:g} s of the {COMMAND_LIMIT_S}; in
one command the second gets what is left of it, `--budget $(({COMMAND_LIMIT_S - 15} - SECONDS))` (bash's
seconds since the command began). A call stopped from outside anyway (SIGTERM) stops its processes
and packs what it has; the next call evaluates the checkpoints of a training it cut.

Slice {plan['name']} of the GPU plan ({plan['study']} {plan['table']}), seeds {plan['seeds']}.
The first call installs (seconds; refuses any wheel that would replace the machine's
torch or numpy), trains {models} side by side on the GPU until each stops by its rule
(validation every {plan['stop']['valid_steps']} steps, stop after {plan['stop']['patience']} without a
lower validation cross-entropy) or the deadline, runs the CUDA suite and a short attention
bench beside them, then translates each model's best validation checkpoint (beam 5, fp16),
scores it with sacreBLEU (95% bootstrap interval, paired bootstrap against the first model)
and writes `results/published/{plan['name']}/<UTC date>-<gpu>-{manifest['commit']}/` with
provenance, labelled partial with what it lacks when time runs short. A later call on the same machine (same --work) runs what the first left:
the evaluation its deadline cut, the rest of the CUDA suite, the probe side by side (more models
at once than this sitting trained: the plan's seconds a step with one seed more a sitting), the
probe alone (the plan's seconds a step with one), the bench on an idle GPU; it never trains again.
OUT/status.json is rewritten every 30 s; OUT/headlab-sitting.tar.gz holds what is done.
`--device cpu --budget 300` rehearses it all on a CPU (`make gpu-rehearsal`).
"""


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="headlab gpu-bundle", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="gpu-bundle", help="the bundle folder: replaced where it is a previous bundle; "
                        "any other folder that is not empty is refused")
    parser.add_argument("--slice", default=None,
                        help="the GPU plan's slice to bundle (default: the first not done that fits a sitting)")
    parser.add_argument("--published", default=str(gpu_plan.PUBLISHED),
                        help="the published sittings the next slice is read from")
    parser.add_argument("--configfile", nargs="+", default=list(CONFIGS), help="the workflow's config files")
    parser.add_argument("--target", nargs="+", default=list(TARGETS),
                        help="the studies whose DAG is checked (tables = the baseline)")
    parser.add_argument("--python-version", default="3.12", help="the GPU machine's Python (wheels' tags)")
    parser.add_argument("--cores", type=int, default=2, help="cores of the CPU-side preparation here")
    parser.add_argument("--max-mib", type=float, default=55.0, help="refuse a bundle larger than this (MiB)")
    args = parser.parse_args(argv)
    build(Path(args.out), slice_name=args.slice, published=args.published, configfiles=args.configfile, targets=args.target, python_version=args.python_version,
          cores=args.cores, max_mib=args.max_mib)
    return 0
