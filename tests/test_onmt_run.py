"""The OpenNMT-py wrappers: option validation, resume after interruption, atomic outputs,
and the compat fixes (torch>=2.6 checkpoint loading, -with_score), on a toy corpus."""
from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from headlab.errors import ConfigError
from headlab.engine.config import train_config, write_yaml

HEADLAB = [sys.executable, "-m", "headlab.cli"]


def run(args, **kwargs):
    return subprocess.run(args, capture_output=True, text=True, **kwargs)


def toy_corpus(folder: Path, n: int = 60) -> tuple[Path, Path]:
    rng = random.Random(0)
    words = "a b c d e f g h@@ i j k l".split()
    src = [" ".join(rng.choice(words) for _ in range(rng.randint(2, 7))) for _ in range(n)]
    tgt = [" ".join(reversed(s.split())) for s in src]
    (folder / "train.src").write_text("\n".join(src) + "\n")
    (folder / "train.tgt").write_text("\n".join(tgt) + "\n")
    return folder / "train.src", folder / "train.tgt"


def toy_training(folder: Path, name: str = "train", model: str = "model", **overrides) -> Path:
    """``folder/name.yaml``: a 1+1 toy model (d = 16) on the toy corpus of ``folder``
    (written, with its vocabulary, the first time), saved under ``folder/model``."""
    src, tgt = folder / "train.src", folder / "train.tgt"
    if not (folder / "vocab.txt").is_file():
        toy_corpus(folder)
        result = run(HEADLAB + ["vocab", "--train", str(src), str(tgt), "--out", str(folder / "vocab.txt")])
        assert result.returncode == 0, result.stderr
    options = train_config(
        preset="tiny", layers="1+1", heads="7Ftoken+1L", train_src=str(src), train_tgt=str(tgt),
        valid_src=str(src), valid_tgt=str(tgt), vocab=str(folder / "vocab.txt"), save_dir=str(folder / model),
        overrides={**dict(hidden_size=16, word_vec_size=16, transformer_ff=32, warmup_steps=2, batch_size=64,
                          bucket_size=64), **overrides})
    write_yaml(options, folder / f"{name}.yaml")
    return folder / f"{name}.yaml"


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """A toy corpus, its vocabulary and a 6-step training config (checkpoints every 3)."""
    folder = tmp_path_factory.mktemp("toy")
    toy_training(folder, train_steps=6, save_checkpoint_steps=3)
    return folder


def test_vocab_is_shared_and_counted(toy):
    lines = (toy / "vocab.txt").read_text().splitlines()
    tokens = dict(line.split("\t") for line in lines)
    assert {"a", "h@@", "l"} <= set(tokens)
    assert all(int(c) > 0 for c in tokens.values())


def test_separate_vocabularies_one_per_side(tmp_path):
    (tmp_path / "s").write_text("a b a\nb c\n")
    (tmp_path / "t").write_text("X Y\nX X Z\n")
    result = run(HEADLAB + ["vocab", "--train", str(tmp_path / "s"), str(tmp_path / "t"),
                            "--out", str(tmp_path / "v.src"), "--out-tgt", str(tmp_path / "v.tgt")])
    assert result.returncode == 0, result.stderr
    src = dict(line.split("\t") for line in (tmp_path / "v.src").read_text().splitlines())
    tgt = dict(line.split("\t") for line in (tmp_path / "v.tgt").read_text().splitlines())
    assert src == {"a": "2", "b": "2", "c": "1"}
    assert tgt == {"X": "3", "Y": "1", "Z": "1"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s", "t", "v.src", "v.tgt"]  # no temp files left


def test_unknown_cli_option_is_an_error(toy):
    result = run(HEADLAB + ["train", "-config", str(toy / "train.yaml"), "-lerning_rate", "1"])
    assert result.returncode == 1
    assert "unknown OpenNMT-py train option '-lerning_rate'" in result.stderr
    assert "did you mean '-learning_rate'" in result.stderr
    assert not (toy / "model").exists() or not list((toy / "model").glob("*.pt"))


def test_bad_option_value_is_one_line_naming_the_option(toy, tmp_path, capsys):
    # issue 24 item 3: argparse printed OpenNMT-py's whole usage (~250 lines) first
    result = run(HEADLAB + ["train", "-config", str(toy / "train.yaml"), "-lambda_kl", "-1"])
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "headlab train: [lambda_kl] bad value for -lambda_kl: must be >= 0, got -1"]
    from headlab.cli import main
    assert main(["train", "-config", str(toy / "train.yaml"), "-dhicm_dm", "-3"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "headlab train: [dhicm_dm] bad value for -dhicm_dm: must be >= 0, got -3"]
    config = tmp_path / "bad.yaml"
    config.write_text((toy / "train.yaml").read_text() + "lambda_kl: -1\n")
    line = len(config.read_text().splitlines())
    assert main(["train", "-config", str(config)]) == 1           # from the YAML: its file and line
    assert capsys.readouterr().err.splitlines() == [
        f"headlab train: {config}:{line}: [lambda_kl] bad value for -lambda_kl: must be >= 0, got -1"]
    assert main(["translate", "-model", "m.pt", "-src", "s", "-beam_size", "x"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "headlab translate: [beam_size] bad value for -beam_size: invalid int value: 'x'"]


def test_interrupted_training_resumes_from_last_readable_checkpoint(toy):
    config = str(toy / "train.yaml")
    # "interrupted" at step 3: the same config stopped early (deterministic stand-in for kill -9)
    first = run(HEADLAB + ["train", "-config", config, "-train_steps", "3"])
    assert first.returncode == 0, first.stderr[-2000:]
    model_dir = toy / "model"
    assert (model_dir / "model_step_3.pt").exists()
    (model_dir / "model.pt").unlink()
    # a newer checkpoint cut short while being written
    (model_dir / "model_step_4.pt").write_bytes((model_dir / "model_step_3.pt").read_bytes()[:200])

    second = run(HEADLAB + ["train", "-config", config])
    assert second.returncode == 0, second.stderr[-2000:]
    assert "model_step_4.pt is unreadable" in second.stderr
    assert "resuming interrupted training from checkpoint" in second.stderr
    assert "model_step_3.pt" in second.stderr
    final = torch.load(model_dir / "model.pt", map_location="cpu", weights_only=False)
    assert final["optim"]["training_step"] == 7  # onmt counts the next step to run
    assert final["opt"].enc_heads == "7Ftoken+1L" and final["opt"].encoder_type == "headlab"


def test_interrupted_finetune_resumes_from_its_last_checkpoint(toy, tmp_path, capfd):
    # issue 24 item 5: a fine-tune (train_from: init.pt, reset_optim: all) restarted from
    # init.pt; it resumes from its own last checkpoint, with its own optimizer state
    import yaml
    from headlab.engine import run as onmt_run
    from headlab.engine.finetune import write_finetune

    parent = yaml.safe_load((toy / "train.yaml").read_text())
    parent.update(save_model=str(tmp_path / "parent" / "model"), save_data=str(tmp_path / "parent"), train_steps=3)
    write_yaml(parent, tmp_path / "parent.yaml")
    assert onmt_run.train(["-config", str(tmp_path / "parent.yaml")]) == 0
    child = tmp_path / "child"
    write_finetune(str(tmp_path / "parent" / "model.pt"), str(tmp_path / "parent.yaml"),
                   {"enc_head_mask": "11110000", "train_steps": 6, "save_checkpoint_steps": 3, "report_every": 1},
                   str(child), str(child / "onmt.yaml"))
    capfd.readouterr()
    # "interrupted" after the checkpoint of step 3 (the deterministic stand-in for kill -9 of
    # the resume test above): the same config stopped early
    assert onmt_run.train(["-config", str(child / "onmt.yaml"), "-train_steps", "3"]) == 0
    assert (child / "model_step_3.pt").exists()
    (child / "model.pt").unlink()
    capfd.readouterr()
    assert onmt_run.train(["-config", str(child / "onmt.yaml")]) == 0
    log = capfd.readouterr().err
    assert f"headlab: resuming interrupted training from checkpoint {child / 'model_step_3.pt'}" in log
    import re
    assert re.findall(r"Step +(\d+)/ +6", log) == ["4", "5", "6"]                   # steps 4-6 only
    final = torch.load(child / "model.pt", map_location="cpu", weights_only=False)
    assert final["optim"]["training_step"] == 7
    assert final["opt"].enc_head_mask == "11110000"


def test_only_the_newest_checkpoint_keeps_the_optimizer(toy, tmp_path, capfd):
    # older checkpoints are kept for averaging and model selection: weights only (a base
    # checkpoint is 1/3 weights, 2/3 Adam moments); resuming needs the newest's optimizer
    import yaml
    from headlab.engine import run as onmt_run

    config = yaml.safe_load((toy / "train.yaml").read_text())
    config.update(save_model=str(tmp_path / "model"), save_data=str(tmp_path), train_steps=6,
                  save_checkpoint_steps=2, keep_checkpoint=-1)
    write_yaml(config, tmp_path / "train.yaml")
    assert onmt_run.train(["-config", str(tmp_path / "train.yaml"), "-train_steps", "4"]) == 0
    def load(step):
        return torch.load(tmp_path / f"model_step_{step}.pt", map_location="cpu", weights_only=False)
    assert load(2)["optim"] is None and load(4)["optim"]["training_step"] == 5
    assert set(load(2)["model"]) == set(load(4)["model"]) and load(2)["generator"] is not None
    assert not list(tmp_path.glob("*.tmp"))
    (tmp_path / "model.pt").unlink()
    capfd.readouterr()
    assert onmt_run.train(["-config", str(tmp_path / "train.yaml")]) == 0     # resumes at 4
    assert f"resuming interrupted training from checkpoint {tmp_path / 'model_step_4.pt'}" in capfd.readouterr().err
    assert [load(s)["optim"] is None for s in (2, 4, 6)] == [True, True, False]
    assert torch.load(tmp_path / "model.pt", weights_only=False)["optim"]["training_step"] == 7
    out = tmp_path / "avg.pt"
    assert onmt_run.main_average(["-save_model", str(tmp_path / "model"), "-last", "3", "-output", str(out)]) == 0
    name = next(iter(load(6)["model"]))
    mean = sum(load(s)["model"][name] for s in (2, 4, 6)) / 3
    assert torch.allclose(torch.load(out, weights_only=False)["model"][name], mean)
    # a stripped checkpoint is never resumed from (its optimizer state is gone): the newest
    # full one is, here none (model_step_6.pt removed), so training starts again
    (tmp_path / "model_step_6.pt").unlink()
    (tmp_path / "model.pt").unlink()
    capfd.readouterr()
    assert onmt_run.train(["-config", str(tmp_path / "train.yaml"), "-train_steps", "4"]) == 0
    log = capfd.readouterr().err
    assert "model_step_4.pt holds no optimizer state: not resumed from" in log
    assert "resuming interrupted training" not in log
    assert load(4)["optim"]["training_step"] == 5


def test_translate_with_score_and_atomic_output(toy):
    model = toy / "model" / "model.pt"
    if not model.exists():
        pytest.skip("needs the trained toy model")
    out = toy / "hyp.txt"
    result = run(HEADLAB + ["translate", "-model", str(model), "-src", str(toy / "train.src"),
                            "-output", str(out), "-max_length", "5", "-beam_size", "2", "-with_score"])
    assert result.returncode == 0, result.stderr[-2000:]
    lines = out.read_text().splitlines()
    assert len(lines) == 60
    assert all("\t" in line and float(line.rsplit("\t", 1)[1]) <= 0 for line in lines)
    assert not list(toy.glob(".hyp.txt*"))


def test_translate_failure_leaves_no_output(toy):
    out = toy / "bad.txt"
    result = run(HEADLAB + ["translate", "-model", str(toy / "missing.pt"), "-src",
                            str(toy / "train.src"), "-output", str(out)])
    assert result.returncode != 0
    assert not out.exists() and not list(toy.glob(".bad.txt*"))


def test_stock_onmt_translate_loads_headlab_checkpoint_after_plugin_import(toy):
    model = toy / "model" / "model.pt"
    if not model.exists():
        pytest.skip("needs the trained toy model")
    out = toy / "stock.txt"
    code = ("import sys, headlab.engine.plugin; from onmt.bin.translate import main; "
            "sys.argv = ['onmt_translate'] + sys.argv[1:]; main()")
    result = run([sys.executable, "-c", code, "-model", str(model), "-src", str(toy / "train.src"),
                  "-output", str(out), "-max_length", "5"])
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(out.read_text().splitlines()) == 60


def test_average_last_checkpoints(tmp_path):
    """``headlab average`` = OpenNMT-py's average_models over the newest N ``_step_`` files
    (by step number, not name order: step 10 is newer than step 9)."""
    from headlab.engine.model import build_model, model_opt, save_checkpoint, toy_vocabs
    from headlab.engine.run import main_average

    opt = model_opt(enc_layers=1, dec_layers=1, hidden_size=16, heads=2, transformer_ff=32,
                    share_embeddings=True, extra=("-share_decoder_embeddings",))
    vocabs = toy_vocabs(12, share=True)
    model = build_model(opt, vocabs)
    name = "encoder.transformer.0.layer_norm.weight"
    # tied: the encoder's and decoder's embeddings and the generator are one tensor (every
    # preset ties them); upstream average_models updated it once per name, 3 times
    tied = "encoder.embeddings.make_embedding.emb_luts.0.weight"
    assert model.generator.weight is model.state_dict(keep_vars=True)[tied]
    for step, value in ((7, 50.0), (8, 100.0), (9, 1.0), (10, 3.0)):
        with torch.no_grad():
            model.state_dict()[name].fill_(value)
            model.generator.weight.fill_(-value)
        save_checkpoint(model, opt, vocabs, tmp_path / f"model_step_{step}.pt")
    out = tmp_path / "model.avg3.pt"
    assert main_average(["-save_model", str(tmp_path / "model"), "-last", "3", "-output", str(out)]) == 0
    averaged = torch.load(out, weights_only=False)
    assert torch.allclose(averaged["model"][name], torch.full((16,), (100.0 + 1 + 3) / 3))
    for weight in (averaged["model"][tied], averaged["model"]["decoder.embeddings.make_embedding.emb_luts.0.weight"],
                   averaged["generator"]["weight"]):
        assert torch.allclose(weight, torch.full_like(weight, -(100.0 + 1 + 3) / 3))
    assert averaged["generator"]["weight"].data_ptr() == averaged["model"][tied].data_ptr()   # still tied
    with pytest.raises(ConfigError, match=r"\[keep_checkpoint\].*has 4"):
        main_average(["-save_model", str(tmp_path / "model"), "-last", "5", "-output", str(tmp_path / "x.pt")])
    assert not (tmp_path / "x.pt").exists()


def _translate_errors(capsys, model, src, out) -> list[str]:
    from headlab.cli import main
    assert main(["translate", "-model", str(model), "-src", str(src), "-output", str(out)]) == 1
    return capsys.readouterr().err.splitlines()


def test_translate_missing_model_or_source_is_one_line(tmp_path, capsys):
    src, out = tmp_path / "in.src", tmp_path / "out" / "hyp.txt"
    src.write_text("a b c\n")
    assert _translate_errors(capsys, tmp_path / "missing.pt", src, out) == [
        f"headlab translate: {tmp_path / 'missing.pt'}: [model] no such model file"]
    assert _translate_errors(capsys, tmp_path / "missing.pt", tmp_path / "gone.src", out) == [
        f"headlab translate: {tmp_path / 'gone.src'}: [src] no such source file"]
    assert not out.parent.exists()


@pytest.mark.parametrize("content", [b"", b"just some text\n", b"PK\x03\x04" + bytes(200)])
def test_translate_unreadable_checkpoint_is_one_line(tmp_path, capsys, content):
    # empty, text, and a zip cut short (torch's own errors: EOFError, UnpicklingError,
    # PytorchStreamReader) each become one line naming the file
    model, src, out = tmp_path / "model.pt", tmp_path / "in.src", tmp_path / "hyp.txt"
    model.write_bytes(content)
    src.write_text("a b c\n")
    errors = _translate_errors(capsys, model, src, out)
    assert len(errors) == 1 and errors[0].startswith(f"headlab translate: {model}: [model] not a readable checkpoint")
    assert not out.exists() and not list(tmp_path.glob(".hyp.txt*"))


def test_translate_truncated_real_checkpoint_is_one_line(tmp_path, capsys):
    model, src, out = tmp_path / "model.pt", tmp_path / "in.src", tmp_path / "hyp.txt"
    torch.save({"model": {"w": torch.zeros(1000)}}, model)
    model.write_bytes(model.read_bytes()[:2000])
    src.write_text("a b c\n")
    errors = _translate_errors(capsys, model, src, out)
    assert len(errors) == 1 and "not a readable checkpoint" in errors[0]
