"""What a command that reads a checkpoint or runs on a named device says when the input is
wrong: one line naming the file or the option, exit status 1 (argparse's 2 for a bound),
nothing written. Before, a file that was no OpenNMT-py checkpoint was a ``KeyError: 'opt'``
or pickle's ``Memo value not found`` at the end of a traceback, ``--gpu 0`` on a CPU
machine torch's ``AssertionError``, ``--batch-size 0`` a ``range()`` error, and
``-beam_size 0`` torch's ``step must be nonzero`` inside the beam search."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from headlab.cli import main  # noqa: E402
from headlab.errors import ConfigError, DataError  # noqa: E402


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A 2+1-layer headlab model with gated encoder heads, saved as OpenNMT-py saves one."""
    from headlab.engine import model as onmt_model

    torch.manual_seed(0)
    vocabs = onmt_model.toy_vocabs(30, src_tokens="a b c d e f@@ g".split())
    opt = onmt_model.model_opt(enc_heads="8L|gate", hidden_size=32, heads=8, transformer_ff=64, enc_layers=2,
                               dec_layers=1, dropout=0.0, attention_dropout=0.0)
    path = tmp_path_factory.mktemp("model") / "gated.pt"
    onmt_model.save_checkpoint(onmt_model.build_model(opt, vocabs), opt, vocabs, path)
    return path


@pytest.fixture
def texts(tmp_path):
    (tmp_path / "in.src").write_text("a b c\nd e f@@ g\n")
    (tmp_path / "in.tgt").write_text("a b\nc\n")
    (tmp_path / "parent.yaml").write_text("encoder_type: headlab\n")
    (tmp_path / "gold.conllu").write_text(
        "1\ta\ta\tX\tX\t_\t0\troot\t_\t_\n2\tb\tb\tX\tX\t_\t1\tdep\t_\t_\n3\tc\tc\tX\tX\t_\t1\tdep\t_\t_\n\n"
        "1\td\td\tX\tX\t_\t0\troot\t_\t_\n2\te\te\tX\tX\t_\t1\tdep\t_\t_\n3\tfg\tfg\tX\tX\t_\t1\tdep\t_\t_\n\n")
    return tmp_path


#: every command that loads a checkpoint the user names: {model} is replaced by it, the
#: outputs all lie in out/
COMMANDS = {
    "gates": ["gates", "--model", "{model}", "--out", "{tmp}/out/gates.csv"],
    "score": ["score", "--model", "{model}", "--src", "{tmp}/in.src", "--tgt", "{tmp}/in.tgt",
              "--out", "{tmp}/out/scores.tsv"],
    "translate": ["translate", "-model", "{model}", "-src", "{tmp}/in.src", "-output", "{tmp}/out/hyp.txt"],
    "export-attention": ["export-attention", "--model", "{model}", "--src", "{tmp}/in.src",
                         "--out", "{tmp}/out/att.npz"],
    "params": ["params", "--model", "{model}", "--out", "{tmp}/out/params.json"],
    "atlas-model": ["atlas-model", "--model", "{model}", "--src", "{tmp}/in.src", "--tgt", "{tmp}/in.tgt",
                    "--name", "m/seed1", "--out", "{tmp}/out/atlas"],
    "profile-heads": ["profile-heads", "--model", "{model}", "--treebank", "{tmp}/gold.conllu", "--src", "{tmp}/in.src",
                      "--out", "{tmp}/out/profile"],
    "finetune-config": ["finetune-config", "--parent", "{model}", "--parent-config", "{tmp}/parent.yaml",
                        "--tune", "/ft_gate=enc+train_steps=40", "--save-dir", "{tmp}/out/child", "--out", "{tmp}/out/child.yaml"],
}


def _run(command: str, model, tmp, capsys, *extra: str) -> tuple[int, list[str]]:
    argv = [part.format(model=model, tmp=tmp) for part in COMMANDS[command]] + list(extra)
    capsys.readouterr()
    status = main(argv)
    return status, capsys.readouterr().err.splitlines()


def _not_a_dict(path):
    torch.save([1, 2, 3], path)


def _other_dict(path):
    torch.save({"weights": torch.zeros(3)}, path)


def _text(path):
    path.write_text("just some text\n")


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("make, says", [
    (_other_dict, r"not an OpenNMT-py checkpoint: it has no '(model|opt|vocab)'.* \(it holds 'weights'\)$"),
    (_not_a_dict, r"not an OpenNMT-py checkpoint: it holds a list, not a dict$"),
    (_text, r"not a readable checkpoint \(cut short, or not a torch.save file\): "),
])
def test_a_file_that_is_no_checkpoint_is_one_line_and_writes_nothing(command, make, says, texts, capsys):
    bad = texts / "bad.pt"
    make(bad)
    status, err = _run(command, bad, texts, capsys)
    assert status == 1 and len(err) == 1, err
    assert err[0].startswith(f"headlab {command}: {bad}: ") and re.search(says, err[0]), err
    assert not (texts / "out").exists()


def test_the_missing_keys_and_what_the_file_holds_are_named(tmp_path):
    from headlab.checkpoints import read_checkpoint
    path = tmp_path / "other.pt"
    _other_dict(path)
    with pytest.raises(DataError) as caught:
        read_checkpoint(path)
    assert str(caught.value) == (f"{path}: not an OpenNMT-py checkpoint: it has no 'vocab', 'opt', 'model', "
                                 "'generator' and no .safetensors beside it (it holds 'weights')")
    assert read_checkpoint(path, needs=("weights",))["weights"].tolist() == [0.0, 0.0, 0.0]
    (tmp_path / "empty.pt").write_bytes(b"")
    with pytest.raises(DataError, match="empty.pt: not a readable checkpoint: the file is empty"):
        read_checkpoint(tmp_path / "empty.pt")
    with pytest.raises(DataError, match=r"gone.pt: \[model\] no such checkpoint"):
        read_checkpoint(tmp_path / "gone.pt", key="model")


def test_a_checkpoint_is_read_whole_or_mapped_alike(model):
    from headlab.checkpoints import read_checkpoint
    mapped, read = read_checkpoint(model), read_checkpoint(model, mmap=False)
    assert sorted(mapped) == sorted(read) and sorted(mapped["model"]) == sorted(read["model"])
    assert all(torch.equal(mapped["model"][name], read["model"][name]) for name in read["model"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine with a CUDA device has device 0")
@pytest.mark.parametrize("command, option", [
    ("score", "--gpu"), ("export-attention", "--gpu"), ("atlas-model", "--gpu"), ("profile-heads", "--gpu"),
    ("translate", "-gpu")])
def test_a_cuda_device_this_machine_lacks_is_one_line_and_writes_nothing(command, option, model, texts, capsys):
    status, err = _run(command, model, texts, capsys, option, "0")
    assert status == 1 and len(err) == 1, err
    assert err[0].startswith(f"headlab {command}: {option} 0: ") and \
        err[0].endswith(f"; {option} -1 runs on the CPU"), err
    assert not (texts / "out").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine with a CUDA device has device 0")
def test_training_on_a_gpu_this_machine_lacks_is_one_line_before_anything_is_written(texts, capsys):
    config = texts / "train.yaml"
    config.write_text(f"data:\n  corpus_1:\n    path_src: {texts}/in.src\n    path_tgt: {texts}/in.tgt\n"
                      f"src_vocab: {texts}/vocab\nsave_model: {texts}/out/model\ngpu_ranks: [0]\ntrain_steps: 1\n")
    assert main(["train", "-config", str(config)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("headlab train: -gpu_ranks 0 needs 1 CUDA device: ") and \
        err[0].endswith("train on the CPU without -gpu_ranks (training.device: cpu)"), err
    assert not (texts / "out").exists()


def test_gpu_ranks_are_counted_not_taken_for_device_ids(texts, capsys, monkeypatch):
    """OpenNMT-py trains process i on CUDA device i for i < len(gpu_ranks); a rank is no
    device id (one process of rank 1 trains on device 0)."""
    from headlab.engine import devices, run

    monkeypatch.setattr(devices, "cuda_devices", lambda: 1)
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(run, "_train", lambda opt: 0)       # what the check lets through
    config = texts / "train.yaml"
    config.write_text(f"data:\n  corpus_1:\n    path_src: {texts}/in.src\n    path_tgt: {texts}/in.tgt\n"
                      f"src_vocab: {texts}/vocab\nsave_model: {texts}/out/model\ntrain_steps: 1\n")
    capsys.readouterr()
    assert main(["train", "-config", str(config), "-gpu_ranks", "0", "1", "-world_size", "2"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "headlab train: -gpu_ranks 0 1 needs 2 CUDA devices: this machine has only CUDA device 0; "
        "train on the CPU without -gpu_ranks (training.device: cpu)"]
    assert main(["train", "-config", str(config), "-gpu_ranks", "1"]) == 0


def _options_only(path):
    """What ``-save_format safetensors`` writes as the .pt: options, vocabulary, optimizer."""
    torch.save({"vocab": {"src": ["a"]}, "opt": {"encoder_type": "headlab"}, "optim": None}, path)


def test_a_safetensors_checkpoint_has_its_weights_beside_it(tmp_path):
    from headlab.checkpoints import read_checkpoint
    path = tmp_path / "model_step_10.pt"
    _options_only(path)
    with pytest.raises(DataError) as caught:
        read_checkpoint(path)
    assert str(caught.value) == (f"{path}: not an OpenNMT-py checkpoint: it has no 'model', 'generator' and no "
                                 ".safetensors beside it (it holds 'opt', 'optim', 'vocab')")
    (tmp_path / "model_step_10.safetensors").write_bytes(b"{}")
    assert sorted(read_checkpoint(path)) == ["opt", "optim", "vocab"]
    with pytest.raises(DataError, match=r"it has no 'model' \(it holds"):
        read_checkpoint(path, needs=("model",))          # a reader of the weights themselves


def test_a_checkpoint_of_classes_this_install_lacks_is_named(tmp_path, monkeypatch):
    import importlib
    (tmp_path / "gone_module.py").write_text("class Options:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    gone = importlib.import_module("gone_module")
    torch.save({"opt": gone.Options()}, tmp_path / "classes.pt")
    monkeypatch.delattr(gone, "Options")
    from headlab.checkpoints import read_checkpoint
    with pytest.raises(DataError, match=r"classes.pt: not a readable checkpoint: it needs a class this install "
                                        r"lacks \(saved by another version\?\): .*Options"):
        read_checkpoint(tmp_path / "classes.pt")
    monkeypatch.delitem(sys.modules, "gone_module")
    (tmp_path / "gone_module.py").unlink()
    with pytest.raises(DataError) as caught:
        read_checkpoint(tmp_path / "classes.pt")
    assert str(caught.value) == (f"{tmp_path}/classes.pt: not a readable checkpoint: it needs module "
                                 "'gone_module', which this install lacks (saved by other software?)")


def test_a_checkpoint_that_cannot_be_mapped_is_read(model, monkeypatch):
    from headlab import checkpoints
    load = checkpoints._load

    def no_mmap(path, mmap):
        if mmap:
            raise RuntimeError("mmap is not supported on this file system")
        return load(path, mmap)

    monkeypatch.setattr(checkpoints, "_load", no_mmap)
    assert "model" in checkpoints.read_checkpoint(model)


@pytest.mark.parametrize("count, index, says", [
    (0, 0, "torch sees no CUDA device on this machine"),
    (1, 1, "this machine has only CUDA device 0"),
    (4, 7, "this machine has CUDA devices 0..3"),
])
def test_what_the_machine_has_is_said(count, index, says, monkeypatch):
    from headlab.engine import devices

    monkeypatch.setattr(devices, "cuda_devices", lambda: count)
    monkeypatch.setattr(torch.version, "cuda", "13.0")     # a CUDA build: not "a CPU build"
    with pytest.raises(ConfigError) as caught:
        devices.check_cuda_device(index, "-gpu", "-gpu -1 runs on the CPU")
    assert str(caught.value) == f"-gpu {index}: {says}; -gpu -1 runs on the CPU"
    devices.check_cuda_device(-1, "-gpu", "")        # the CPU is always there
    if count:
        devices.check_cuda_device(count - 1, "-gpu", "")


@pytest.mark.parametrize("command, option, value", [
    ("score", "--batch-size", "0"), ("export-attention", "--batch-size", "-1"),
    ("export-attention", "--max-sents", "0"), ("atlas-model", "--batch-size", "0"),
    ("atlas-model", "--valid-sentences", "0"), ("atlas-model", "--examples", "-1"),
    ("atlas-model", "--treebank-sentences", "0"), ("profile-heads", "--batch-size", "0"),
    ("profile-heads", "--max-sents", "0"), ("profile-heads", "--figure-sents", "-1")])
def test_a_count_out_of_its_range_is_refused_by_its_option(command, option, value, model, texts, capsys):
    with pytest.raises(SystemExit) as caught:
        _run(command, model, texts, capsys, option, value)
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}: {value}: must be at least" in err
    assert not (texts / "out").exists()


@pytest.mark.parametrize("option, value, bound", [
    ("-beam_size", "0", ">= 1"), ("-n_best", "0", ">= 1"), ("-batch_size", "0", ">= 1"),
    ("-max_length", "0", ">= 1"), ("-min_length", "-1", ">= 0")])
def test_a_translate_option_out_of_its_range_is_one_line(option, value, bound, model, texts, capsys):
    status, err = _run("translate", model, texts, capsys, option, value)
    assert err == [f"headlab translate: [{option[1:]}] {option} must be an integer {bound}, got {value}"]
    assert status == 1 and not (texts / "out").exists()


def test_the_atlas_of_a_model_takes_its_gradients_without_a_warning(model, texts):
    """The probes' pass needs gradients; the loss it sums for the table is read detached
    (``float()`` of a tensor that requires grad is torch's UserWarning). In a process of its
    own: torch gives that warning once a process, and another test may have had it."""
    out = texts / "out" / "atlas"
    done = subprocess.run([sys.executable, "-W", "error::UserWarning", "-m", "headlab.cli", "atlas-model", "--model", str(model),
                           "--src", str(texts / "in.src"), "--tgt", str(texts / "in.tgt"), "--name", "m/seed1",
                           "--out", str(out)], capture_output=True, text=True)
    assert done.returncode == 0 and done.stderr == "", done.stderr[-3000:]
    assert (out / "heads.csv").exists()
