"""``make bench`` (headlab.bench) without running a benchmark: the CPU plan is today's, the
CUDA plan covers every head kind and mixer at n = 32..1024 in fp32 and fp16 and the
training configs it would run are valid GPU configs (``--dry-run``), and the CUDA branch
of one attention measurement runs on the simulated device of tests/simdevice.py."""
from __future__ import annotations

import os
import random

import pytest
import torch

from headlab import bench
from simdevice import SimulatedDevice


def test_cpu_plan_is_todays_and_cuda_plan_covers_every_kind_and_mixer():
    from headlab.heads import HEAD_KINDS, HEAD_MIXERS
    from headlab.heads.spec import parse_spec
    cpu = bench.attention_plan(["cpu"], precisions=["fp32", "fp16"])
    assert sorted({n for _, n, *_ in cpu}) == [32, 128, 512, 2048] and {p for _, _, p, *_ in cpu} == {"fp32"}
    cuda = bench.attention_plan(["cuda"])
    assert sorted({n for _, n, *_ in cuda}) == [32, 64, 128, 256, 512, 1024]
    assert {p for _, _, p, *_ in cuda} == {"fp32", "fp16"}
    covered = set()
    for *_, impl, spec in cuda:
        for layer in parse_spec(spec):
            covered |= {t.kind for t in layer.terms} | set(layer.mixers)
    assert covered == set(HEAD_KINDS) | set(HEAD_MIXERS)
    assert len(cuda) == 6 * 2 * len(bench.CONFIGS)


@pytest.fixture
def data(tmp_path):
    """A prepared-data folder as the workflow leaves it (bpe/{train,val}.{src,tgt}, vocab.txt)."""
    rng = random.Random(0)
    words = "a b c d e f g h@@ i j k".split()
    (tmp_path / "bpe").mkdir()
    for split, n in (("train", 30), ("val", 5)):
        lines = [" ".join(rng.choice(words) for _ in range(rng.randint(2, 6))) for _ in range(n)]
        lines = [line + " i" if line.endswith("@@") else line for line in lines]
        (tmp_path / "bpe" / f"{split}.src").write_text("\n".join(lines) + "\n")
        (tmp_path / "bpe" / f"{split}.tgt").write_text("\n".join(lines) + "\n")
    (tmp_path / "vocab.txt").write_text("".join(f"{w}\t3\n" for w in words))
    return tmp_path


def test_dry_run_plans_the_cuda_bench_and_writes_valid_gpu_training_configs(data, tmp_path, capsys):
    from headlab.engine.config import validate_yaml_file
    from headlab.heads.side import SEPARATOR
    out = tmp_path / "bench"
    assert bench.main(["--devices", "cuda", "--dry-run", "--train-data", str(data), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.count("would run:") == 6 * 2 * len(bench.CONFIGS)
    assert "--one headlab 8RHElpea 1024 16 cuda 1 fp16" in printed
    configs = sorted((out / "train-configs").glob("*/onmt.yaml"))
    assert len(configs) == 2 * len(bench.TRAIN_CONFIGS)
    dtypes = []
    for path in configs:
        options = validate_yaml_file(path)
        assert options["gpu_ranks"] == [0] and (options["enc_layers"], options["hidden_size"]) == (6, 512)
        dtypes.append(options["model_dtype"])
        if "RHElpea" in options.get("enc_heads", ""):
            # the word-boundary column, then the parse's five
            assert options["n_src_feats"] == 6 and "inferfeats" in options["transforms"]
            featured = open(options["data"]["corpus_1"]["path_src"]).read().split()
            assert all(token.count(SEPARATOR) == 6 for token in featured)
            assert all(os.path.exists(f"{options['src_vocab']}_feat{i}") for i in range(6))
        if "dhicm" in options.get("dec_heads", ""):
            assert options["cross_heads"] == "*(8L),8L|dhicm" and options["decoder_type"] == "headlab"
    assert sorted(dtypes) == ["fp16"] * len(bench.TRAIN_CONFIGS) + ["fp32"] * len(bench.TRAIN_CONFIGS)
    assert not (out / "attention.csv").exists() and not (out / "train.csv").exists()


@pytest.fixture
def fake_cuda_memory(monkeypatch):
    """torch.cuda's synchronisation and memory counters, for the simulated device."""
    counter = iter(range(0, 10 ** 9, 2 ** 20))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda *a, **k: None)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda *a, **k: next(counter))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda *a, **k: None)


@pytest.mark.parametrize("impl, spec, precision", [("onmt", "8L", "fp32"), ("headlab", "7Fword+1L", "fp16"),
                                                   ("headlab", "8RHElpea", "fp32"), ("headlab", "8L|dhicm", "bf16")])
def test_cuda_branch_of_one_measurement_runs_on_the_simulated_device(impl, spec, precision, fake_cuda_memory):
    with SimulatedDevice() as mode:
        result = bench.attention._run_on_cuda(impl, spec, 16, 2, "cuda", 1, precision)
    assert mode.checked > 50
    assert result["fwd_bwd_ms"] > 0 and result["peak_mb"] == 1.0


def test_cuda_out_of_memory_gives_an_empty_row(monkeypatch, fake_cuda_memory):
    def oom(*args, **kwargs):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory")
    monkeypatch.setattr(bench.attention, "run_one", oom)
    assert bench.attention._run_on_cuda("headlab", "8RelPos", 1024, 16, "cuda", 1, "fp32") == {}


def test_one_cpu_measurement_in_parts():
    assert set(bench.run_one("headlab", "8L", 16, 2, "cpu", 1, part="time")) == {"fwd_bwd_ms", "cpu_ms"}
    assert set(bench.run_one("headlab", "8L", 16, 2, "cpu", 1, part="memory")) == {"peak_mb", "first_mb", "live_mb"}
    with pytest.raises(ValueError, match="part must be one of all, time, memory"):
        bench.run_one("headlab", "8L", 16, 2, "cpu", 1, part="speed")


PROBE_SCRIPT = """
import json, torch
from headlab.bench.attention import step_memory
kept = []
def step():
    held = [torch.ones(2**20) for _ in range(8)]            # 8 x 4 MiB held at once, freed on return
    held += [torch.ones(2**18) for _ in range(8)]           # 8 x 1 MiB
    if not kept:
        kept.extend(torch.ones(2**20) for _ in range(2))    # 2 x 4 MiB, the first time only, kept
    return len(held)
step.clear = lambda: None
print(json.dumps(step_memory(step)))
"""


@pytest.mark.parametrize("allocator", ["probe", "job"])
def test_memory_probe_counts_a_steps_tensors_and_not_the_allocators_reserve(allocator):
    """Hand-computed: a step that holds 40 MiB and, the first time only, keeps 8 MiB more
    grows the peak RSS by 48 MiB in its first run and 40 MiB in its second under the
    probe's allocator settings. Under the job's (heap kept, never trimmed) the second run
    reuses the first run's pages (5 MiB measured): the reserve, not the step, is what RSS shows."""
    import json
    import subprocess
    import sys

    from headlab.engine.malloc import job_environ, probe_environ
    env = probe_environ() if allocator == "probe" else job_environ({k: v for k, v in os.environ.items()
                                                                    if not k.startswith("MALLOC_")})
    proc = subprocess.run([sys.executable, "-c", PROBE_SCRIPT], capture_output=True, text=True, env=env, check=True)
    first, growth = json.loads(proc.stdout)
    assert first == pytest.approx(48, abs=2.5)
    if allocator == "probe":
        assert growth == pytest.approx(40, abs=2.5)
    else:
        assert growth < 20


def test_cpu_measurement_memory_follows_the_tensors_in_use():
    """The steady step's peak RSS under the probe is the peak of the tensors the step holds
    (``live_mb``, tracked through the dispatcher) to within 5%: 7Ftoken+1L frees many small
    temporaries, which glibc's default allocator keeps and reuses (there the RSS growth was
    3.9 MB for 6.2 MB of tensors at this size)."""
    row = bench.attention._run_on_cpu("headlab", "7Ftoken+1L", 128, 4, 1, "fp32", 300)
    assert set(row) == {"fwd_bwd_ms", "cpu_ms", "peak_mb", "first_mb", "live_mb"}
    assert row["peak_mb"] == pytest.approx(row["live_mb"], rel=0.05, abs=0.2)
    assert row["first_mb"] >= row["peak_mb"] and row["fwd_bwd_ms"] > 0


def test_throughput_parsed_from_padded_reports():
    """OpenNMT-py pads step and tokens/s ("%2d", "%3.0f/%3.0f"): small numbers too."""
    log = ("[I] Step  1/    6; acc: 3.5; ppl: 9.0; xent: 2.2; lr: 0.00100; sents:      30; bsz:   10/  10/ 2; "
           " 45/ 50 tok/s;      1 sec;\n"
           "[I] Step 10/   60; acc: 3.5; ppl: 9.0; xent: 2.2; lr: 0.00100; sents:      30; bsz:   10/  10/ 2; "
           "12345/5678 tok/s;      2 sec;\n")
    assert bench.train._TOKS.findall(log) == [("1", "45", "50"), ("10", "12345", "5678")]
