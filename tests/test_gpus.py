"""Several GPUs per model and several models per GPU, as far as a CPU can check them:
the OpenNMT-py config of a ``training.gpus: N`` model, the spawned per-GPU training
processes (they must load headlab's plugin and model selection themselves), and the
resources every GPU rule asks for and the sbatch call they make: tests/test_slurm.py."""
from __future__ import annotations

import argparse
import socket

import pytest
import torch.multiprocessing
import yaml

from headlab.errors import ConfigError
from headlab.engine import selection
from headlab.engine.config import main as onmt_config_main, resolve_preset, train_config

PATHS = dict(train_src="a.src", train_tgt="a.tgt", valid_src="v.src", valid_tgt="v.tgt",
             vocab="vocab.txt", save_dir="out")


def test_cpu_and_one_gpu_keep_the_presets_batches():
    cpu = train_config(preset="base", layers="6+6", heads="8L", **PATHS)
    assert (cpu["world_size"], cpu["gpu_ranks"], cpu["accum_count"]) == (1, [], [2])
    one = train_config(preset="base", layers="6+6", heads="8L", gpus=1, **PATHS)
    assert (one["world_size"], one["gpu_ranks"], one["accum_count"]) == (1, [0], [2])


def test_n_gpus_divide_accum_count_so_a_step_sees_as_many_tokens():
    two = train_config(preset="base", layers="6+6", heads="8L", gpus=2, **PATHS)
    assert (two["world_size"], two["gpu_ranks"], two["accum_count"]) == (2, [0, 1], [1])
    # paper C §A.1: 4 GPUs x 4,096 tokens = base_paper_C's 4 accumulated batches on one GPU
    assert resolve_preset("base_paper_C")["accum_count"] == [4]
    four = train_config(preset="base_paper_C", layers="6+6", heads="8L", gpus=4, **PATHS)
    assert (four["world_size"], four["gpu_ranks"], four["accum_count"]) == (4, [0, 1, 2, 3], [1])
    # tokens per optimizer step: batch_size x accum_count x world_size
    for gpus, options in ((1, train_config(preset="base_paper_C", layers="6+6", heads="8L", gpus=1, **PATHS)),
                          (4, four)):
        assert options["batch_size"] * options["accum_count"][0] * gpus == 4096 * 4


def test_gpus_that_do_not_divide_accum_count_are_an_error():
    with pytest.raises(ConfigError, match=r"training.gpus 4 must divide accum_count \[2\]") as err:
        train_config(preset="base", layers="6+6", heads="8L", gpus=4, **PATHS)
    assert err.value.key == "accum_count"
    with pytest.raises(ConfigError, match="must divide accum_count"):  # base_lowres accumulates nothing
        train_config(preset="base_lowres", layers="6+6", heads="8L", gpus=2, **PATHS)


def test_onmt_config_cli_writes_world_size_and_ranks(tmp_path):
    out = tmp_path / "onmt.yaml"
    args = ["--preset", "base", "--layers", "6+6", "--train", "a.src", "a.tgt", "--valid", "v.src", "v.tgt",
            "--vocab", "vocab.txt", "--save-dir", str(tmp_path), "--out", str(out)]
    assert onmt_config_main(args + ["--gpus", "2"]) == 0
    options = yaml.safe_load(out.read_text())
    assert (options["world_size"], options["gpu_ranks"], options["accum_count"]) == (2, [0, 1], [1])
    assert onmt_config_main(args + ["--gpu"]) == 0  # the old flag: one GPU
    assert yaml.safe_load(out.read_text())["gpu_ranks"] == [0]


# -- the per-GPU processes -------------------------------------------------------------

def _probe(opt, device_id):
    """process_fn in a spawned child: what train_single.main would find there."""
    import onmt.encoders
    import onmt.decoders
    from headlab.engine import selection as child_selection

    tracker = child_selection.TRACKER
    with open(opt.probe, "w") as handle:
        yaml.safe_dump({"encoder": "headlab" in onmt.encoders.str2enc, "decoder": "headlab" in onmt.decoders.str2dec,
                        "tracker": tracker.save_model if tracker else None,
                        "rows": [r["step"] for r in tracker.rows] if tracker else None,
                        "device_id": device_id}, handle)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_spawned_training_process_loads_the_plugin_and_model_selection(tmp_path):
    """OpenNMT-py starts one process per GPU with multiprocessing's "spawn": a fresh
    interpreter. headlab's spawned_train (which `headlab train` puts in OpenNMT-py's place
    when world_size > 1) must give it the plugin (-encoder_type headlab) and, on rank 0, the
    model-selection tracker of a resumed run. Run here for real in a spawned process, with
    the gloo backend and a world of one, since the CPU has no NCCL."""
    from onmt.utils.distributed import spawned_train as onmt_spawned_train

    from headlab.engine.run import spawned_train

    save_model = str(tmp_path / "model")
    (tmp_path / "model.valid.csv").write_text("step,xent,ppl,acc\n2,3.0,20.0,0.1\n4,2.0,7.4,0.2\n6,2.5,12.0,0.2\n")
    opt = argparse.Namespace(gpu_ranks=[0], world_size=1, gpu_backend="gloo", master_ip="127.0.0.1",
                             master_port=_free_port(), timeout=60, model_selection="valid_loss",
                             valid_steps=2, save_checkpoint_steps=2, save_model=save_model,
                             train_from=f"{save_model}_step_4.pt", probe=str(tmp_path / "probe.yaml"))

    def run(target) -> dict:
        context = torch.multiprocessing.get_context("spawn")
        errors = context.SimpleQueue()
        opt.master_port = _free_port()
        child = context.Process(target=target, args=(_probe, opt, 0, errors))
        child.start()
        child.join(120)
        assert child.exitcode == 0 and errors.empty(), None if errors.empty() else errors.get()[1]
        return yaml.safe_load((tmp_path / "probe.yaml").read_text())

    # resumed from step 4: the interrupted run's validation of step 6 is dropped
    assert run(spawned_train) == {"encoder": True, "decoder": True, "tracker": save_model, "rows": [2, 4],
                                  "device_id": 0}
    # OpenNMT-py's own: no headlab model could be built there (what `headlab train` did before)
    assert run(onmt_spawned_train) == {"encoder": False, "decoder": False, "tracker": None, "rows": None,
                                       "device_id": 0}


def test_model_selection_reads_the_validations_a_child_process_recorded(tmp_path):
    """The parent's tracker never sees the rank-0 child's validations: finish() reads the CSV."""
    save_model = str(tmp_path / "model")
    parent = selection.Tracker(save_model)
    child = selection.Tracker(save_model)
    stats = type("S", (), {"xent": lambda s: 1.5, "ppl": lambda s: 4.5, "accuracy": lambda s: 30.0})()
    child.record(8, stats)
    (tmp_path / "model_step_8.pt").write_bytes(b"")
    assert parent.rows == [] and selection.finish(parent) == (8, tmp_path / "model_step_8.pt")
