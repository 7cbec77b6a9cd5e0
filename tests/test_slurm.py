"""The cluster route for real: the smoke config through `profiles/slurm` on a single-node
SLURM started by tests/slurm/up.sh (real munged/slurmdbd/slurmctld/slurmd, real sbatch).

One run (module fixture) builds the baseline table and one low-resource model whose
training is `scancel`led mid-way; the profile's `retries` must resume it from its last
checkpoint. The tests then read `sacct`, the logs and the table (against a local run of
the same config); the last one makes a training job exceed its memory limit."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

import headlab.naming
import headlab.workflow.hints
from test_workflow import ROOT, SNAKEMAKE, run_workflow, snakemake, snakemake_env, write_config
from hangguard import hang_guard

SLURM = ROOT / "tests/slurm"
# the run's one low-resource model, trained long enough (about 30 s) to be cancelled between
# two checkpoints; its study's overrides are its variant (the path names them). On de-en, the
# baseline's pair: the data jobs of a second pair would add 18 SLURM jobs of a few seconds,
# each one waiting a ~14 s round of the executor's polling, and test nothing more.
LONG = {"train_steps": 1500}
LONG_TRAINING = {"studies.paper_A.lowres.overrides": LONG, "studies.paper_A.lowres.data": {"multi30k": ["de-en"]},
                 "studies.paper_A.eight_fixed_lowres": ["de-en"], "training.overrides.save_checkpoint_steps": 100}
CANCELLED = f"multi30k/de-en/300/tiny_lowres/{headlab.naming.variant_name(LONG)}/1+1/8L/seed1"
SACCT_FIELDS = ["JobIDRaw", "Comment", "State", "Partition", "AllocCPUS", "ReqMem"]


def merge(base: dict, overlay: dict) -> dict:
    """overlay on base, key by key in nested mappings; None removes a key."""
    out = dict(base)
    for key, value in overlay.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def test_merge_overlays_nested_keys_and_removes_nulls():
    base = {"a": 1, "sdm": "conda", "res": {"train": {"p": "gpu", "mem": 9}}}
    assert merge(base, {"sdm": None, "res": {"train": {"mem": 2}}}) == {"a": 1, "res": {"train": {"p": "gpu", "mem": 2}}}


def slurm_profile(folder: Path, **changes) -> tuple[Path, dict]:
    """profiles/slurm with the test overlay (tests/slurm/profile.yaml) and `changes` applied."""
    profile = merge(merge(yaml.safe_load((ROOT / "profiles/slurm/config.yaml").read_text()),
                          yaml.safe_load((SLURM / "profile.yaml").read_text())), changes)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text(yaml.safe_dump(profile))
    return folder, profile


def rule_of(comment: str) -> str:
    """the rule of a job from the comment the SLURM executor gives it (rule_NAME_wildcards_…)"""
    return comment.split("_wildcards_")[0].removeprefix("rule_")


def sacct(run) -> list[dict]:
    """sacct's record of the jobs the run submitted (not of other runs on the same cluster)."""
    out = subprocess.run(["sacct", "-X", "-P", "-n", "-S", run.since, "--format", ",".join(SACCT_FIELDS)],
                         capture_output=True, text=True, check=True).stdout
    jobs = [dict(zip(SACCT_FIELDS, line.split("|"))) for line in out.splitlines() if line]
    submitted = set(re.findall(r"has been submitted with SLURM jobid (\d+)", run.output))
    return [job for job in jobs if job["JobIDRaw"] in submitted]


def job_stats(output: str) -> dict[str, int]:
    """snakemake's `Job stats:` table (rule -> number of jobs) from its output."""
    table = output.split("Job stats:", 1)[1].split("\n\n", 1)[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M) if m[1] != "total"}


def test_memory_hint_names_the_rule_and_the_resource(tmp_path):
    slurm_log = tmp_path / "53.log"
    slurm_log.write_text("slurmstepd-vm: error: StepId=53.batch exceeded memory limit (271347712 > 209715200), "
                         "being killed\n")
    log = ("[Mon Nov 23 16:20:10 2026]\nrule train:\n    input: a/onmt.yaml\n    output: a/model.pt\n"
           "    jobid: 7\n    resources: tmpdir=<TBD>, mem_mb=200, runtime=15\n\n"
           "Error in rule train:\n    message: SLURM-job '53' failed, SLURM status is: 'FAILED'.\n    jobid: 7\n"
           f"    log: a/train.log, {slurm_log} (check log file(s) for error details)\n\n"
           "Error in rule bleu:\n    jobid: 9\n    log: b/bleu.log (check log file(s) for error details)\n")
    [hint] = headlab.workflow.hints.memory_hints(log)
    assert hint.startswith("headlab: rule train exceeded its memory limit (mem_mb=200): raise mem_mb")
    # cgroup clusters: the SLURM state says it, no log needed; other failures give no hint
    assert headlab.workflow.hints.memory_hints("Error in rule x:\n    message: SLURM status is: 'OUT_OF_MEMORY'\n")
    slurm_log.write_text("Traceback: ValueError\n")
    assert headlab.workflow.hints.memory_hints(log) == []


class _Resources(dict):
    __getattr__ = dict.__getitem__


def _sbatch(rule: str, resources: dict, threads: int) -> str:
    """The sbatch call the SLURM executor makes for a job of ``rule`` with these resources."""
    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    typed = _Resources({k: int(v) if str(v).isdigit() else v for k, v in resources.items()})
    job = SimpleNamespace(resources=typed, threads=threads, name=rule, is_group=lambda: False)
    params = dict(run_uuid="u", slurm_logfile="l.log", comment_str=f"rule_{rule}", account="",
                  partition=f"-p {typed['slurm_partition']}", workdir="")
    return get_submit_command(job, params) + set_gres_string(job)


def test_gpu_requests_reach_sbatch_as_gpus(tmp_path):
    """A GPU config through profiles/slurm, with training.gpus 2 and jobs_per_gpu 4: train
    asks for 2 GPUs in the gpu partition (`sbatch --gpus=2`; OpenNMT-py world_size 2),
    translate and forced_score for one (their gpu_percent share is for local runs and never
    reaches sbatch), the rest for none; no slurm_extra repeats an option the executor
    manages (it refuses such jobs)."""
    from snakemake_executor_plugin_slurm.validation import get_forbidden_slurm_options

    result = snakemake("-n", "-p", "--profile", "profiles/slurm", "--configfile", "config/multi30k-gpu.yaml",
                       "--config", f"results={tmp_path / 'results'}",
                       # accum_count 2: 2 GPUs each summing 1 batch a step = the model of 1 GPU
                       'training={"gpus": 2, "jobs_per_gpu": 4, "overrides": {"accum_count": [2]}}')
    assert result.returncode == 0, result.stderr[-3000:]
    seen = {}
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", result.stdout + result.stderr):
        rule = re.match(r"(?:local)?rule (\w+):", block)
        resources = re.search(r"^\s+resources: (.*)$", block, re.M)
        if rule and resources:
            seen[rule[1]] = _Resources(kv.split("=", 1) for kv in resources[1].split(", "))
    profile = yaml.safe_load((ROOT / "profiles/slurm/config.yaml").read_text())
    assert (seen["train"]["gpu"], seen["train"]["gpu_percent"], seen["train"]["slurm_partition"]) == ("2", "200", "gpu")
    train = _sbatch("train", seen["train"], profile["set-threads"]["train"])
    assert train.endswith(" --gpus=2") and " -p gpu" in train and "--cpus-per-task=8" in train
    assert " --nodes=1" in train and "percent" not in train  # OpenNMT-py's processes meet at localhost
    for rule in ("translate", "forced_score"):
        assert (seen[rule]["gpu"], seen[rule]["gpu_percent"], seen[rule]["slurm_partition"]) == ("1", "25", "gpu"), rule
        assert _sbatch(rule, seen[rule], profile["set-threads"][rule]).endswith(" --gpus=1"), rule
    assert "gpu" not in seen["bleu"] and seen["bleu"]["slurm_partition"] == "cpu"
    assert "--gpus" not in _sbatch("bleu", seen["bleu"], 1)
    # the model's OpenNMT-py config: 2 processes, one per GPU
    # (written by the workflow's own process: the dry run prints the config it writes)
    out = result.stdout + result.stderr
    assert re.search(r"world_size: 2\b", out) and re.search(r"gpu_ranks:\s*- 0\s*- 1\b", out)
    for rule, resources in profile.get("set-resources", {}).items():
        extra = str(resources.get("slurm_extra", ""))
        for pattern, what in get_forbidden_slurm_options().items():
            assert not re.search(pattern, extra), f"{rule}: slurm_extra sets the {what}"


@pytest.fixture(scope="module")
def slurm(slurm_started_by_tests):
    if os.geteuid() != 0:
        pytest.skip("a real SLURM needs root: tests/slurm/up.sh installs slurm-wlm with apt and starts its daemons")
    if not shutil.which("sbatch") and not shutil.which("apt-get"):
        pytest.skip("slurm-wlm is not installed and there is no apt-get to install it")
    was_up = any(comm.read_text().strip() == "slurmctld" for comm in Path("/proc").glob("[0-9]*/comm")
                 if comm.exists())
    up = subprocess.run(["bash", str(SLURM / "up.sh")], stdin=subprocess.DEVNULL, capture_output=True,
                        text=True, timeout=hang_guard(1200))
    assert up.returncode == 0, up.stdout + up.stderr
    if not was_up:  # stopped at the end of the session (conftest.py says why)
        slurm_started_by_tests.touch()


@pytest.fixture(scope="module")
def slurm_run(slurm, tmp_path_factory, mirror):
    """The SLURM run; the training of CANCELLED is scancel'ed once it has saved a checkpoint."""
    tmp = tmp_path_factory.mktemp("slurm")
    config = write_config(tmp, mirror, **LONG_TRAINING)
    profile_dir, profile = slurm_profile(tmp / "profile")
    model = tmp / "results/models" / CANCELLED
    targets = [str(tmp / "results/tables/baseline.csv"), str(model / "model.pt")]
    since = datetime.now().strftime("%Y-%m-%dT%H:%M:%S")
    log = tmp / "snakemake.out"
    started = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(SNAKEMAKE + targets + ["--profile", str(profile_dir), "--slurm-logdir",
                                                       str(tmp / "slurm_logs"), "--configfile", str(config)],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                                env=snakemake_env(), cwd=ROOT)
        cancelled = None
        try:
            while proc.poll() is None:
                assert time.monotonic() - started < hang_guard(1200), "the SLURM run did not finish in its hang guard"
                train_log = model / "train.log"
                if cancelled is None and train_log.exists() and "Saving checkpoint" in train_log.read_text():
                    queue = subprocess.run(["squeue", "-h", "-t", "RUNNING", "-o", "%i|%k"], capture_output=True,
                                           text=True, check=True).stdout.splitlines()
                    for job_id, comment in (line.split("|", 1) for line in queue):
                        if comment.startswith("rule_train_wildcards_multi30k_de-en_300_tiny_lowres_"):
                            subprocess.run(["scancel", job_id], check=True)
                            cancelled = job_id
                time.sleep(0.5)
        finally:
            if proc.poll() is None:  # snakemake waits for its SLURM jobs on SIGTERM
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    wall = time.monotonic() - started
    return SimpleNamespace(tmp=tmp, config=config, profile=profile, profile_dir=profile_dir, model=model,
                           returncode=proc.returncode, output=log.read_text(), since=since,
                           cancelled=cancelled, wall=wall)


@pytest.mark.slow
def test_slurm_run_finishes_after_a_cancelled_training_job(slurm_run):
    assert slurm_run.returncode == 0, slurm_run.output[-5000:]
    assert slurm_run.cancelled, f"{CANCELLED} finished training before it could be cancelled"
    print(f"SLURM run: {slurm_run.wall:.0f} s, cancelled job {slurm_run.cancelled}")


#: rules the workflow runs in its own process, never as a cluster job (rules/train.smk: the
#: model configs, built at DAG time and written with printf)
LOCAL_RULES = {"onmt_config"}


@pytest.mark.slow
def test_every_rule_ran_as_a_slurm_job(slurm_run):
    stats = job_stats(slurm_run.output)
    assert LOCAL_RULES <= set(stats)
    expected = {rule: n for rule, n in stats.items() if rule not in LOCAL_RULES}
    assert {"fetch", "bpe_learn", "train", "translate", "bleu", "study_table"} <= set(expected)
    jobs = sacct(slurm_run)
    completed: dict[str, int] = {}
    for job in jobs:
        if job["State"] == "COMPLETED":
            completed[rule_of(job["Comment"])] = completed.get(rule_of(job["Comment"]), 0) + 1
    assert completed == expected
    [cancelled] = [job for job in jobs if job["JobIDRaw"] == slurm_run.cancelled]
    assert cancelled["State"].startswith("CANCELLED") and rule_of(cancelled["Comment"]) == "train"


@pytest.mark.slow
def test_train_jobs_got_the_profiles_partition_cpus_and_memory(slurm_run):
    profile = slurm_run.profile
    train = profile["set-resources"]["train"]
    jobs = sacct(slurm_run)
    trains = [job for job in jobs if rule_of(job["Comment"]) == "train"]
    assert len(trains) == 3  # baseline, the cancelled attempt and its retry
    for job in trains:
        assert job["Partition"] == train["slurm_partition"] == "gpu"
        assert int(job["AllocCPUS"]) == profile["set-threads"]["train"]
        assert job["ReqMem"] == f"{train['mem_mb']}M"
    others = [job for job in jobs if rule_of(job["Comment"]) in ("prepare", "bpe_learn", "bleu")]
    assert others and all(job["Partition"] == profile["default-resources"]["slurm_partition"] == "cpu"
                          and job["ReqMem"] == f"{profile['default-resources']['mem_mb']}M" for job in others)


@pytest.mark.slow
def test_cancelled_training_resumed_from_its_last_checkpoint(slurm_run):
    text = (slurm_run.model / "train.log").read_text()
    resumed = re.search(r"headlab: resuming interrupted training from checkpoint \S+model_step_(\d+)\.pt", text)
    assert resumed, text[-3000:]
    assert 100 <= int(resumed[1]) < 1500
    # the retry trained only the remaining steps, up to the last one
    after = text[resumed.end():]
    assert f"Step {int(resumed[1]) + 50}/ 1500" in after and "Step 1500/ 1500" in after
    assert "Step 50/ 1500" not in after
    assert (slurm_run.model / "model.pt").is_file()
    print(resumed[0])


@pytest.mark.slow
def test_table_equals_a_local_run_of_the_same_config(slurm_run, tmp_path, mirror):
    config = write_config(tmp_path, mirror, **LONG_TRAINING)
    table = tmp_path / "results/tables/baseline.csv"
    threads = [f"{rule}={n}" for rule, n in slurm_run.profile["set-threads"].items()]
    local = run_workflow(str(table), "--cores", "2", "--set-threads", *threads, "--configfile", str(config))
    assert local.returncode == 0, local.stderr[-3000:]
    slurm_table = (slurm_run.tmp / "results/tables/baseline.csv").read_text()
    assert slurm_table.startswith("system,test_2016_flickr\nde-en,")
    assert slurm_table == table.read_text()


@pytest.mark.slow
def test_job_over_its_memory_limit_fails_naming_rule_and_resource(slurm_run):
    # another model of the same run: onmt_config, then train with a 200 MB limit
    model = slurm_run.tmp / "results/models/multi30k/de-en/300/tiny/default/1+1/1L/seed1/model.pt"
    started = time.monotonic()
    profile_dir, _ = slurm_profile(slurm_run.tmp / "profile-200mb", retries=0,
                                   **{"set-resources": {"train": {"mem_mb": 200}}})
    result = snakemake(str(model), "--profile", str(profile_dir), "--slurm-logdir", str(slurm_run.tmp / "slurm_logs"),
                       "--configfile", str(slurm_run.config), timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and not model.exists()
    assert time.monotonic() - started < hang_guard(300), "a job over its memory limit must fail, not hang"
    assert "Error in rule train" in output
    assert re.search(r"rule train exceeded its memory limit \(mem_mb=200\): raise mem_mb", output), output[-4000:]
