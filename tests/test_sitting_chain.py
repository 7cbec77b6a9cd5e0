"""Paper D's chain in one sitting: the runner's stages and their deadlines, and each link
prepared from a model trained earlier in the sitting (the parent's best checkpoint, the
mask from the gated model's gates), with a tiny 8L model standing in for the parent."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import yaml

from headlab.engine.model import build_model, model_opt, save_checkpoint, toy_vocabs
from headlab.workflow import sitting_chain
from headlab.workflow.gpu_runner import chain_stages, stage_deadlines

TINY = dict(hidden_size=64, heads=8, transformer_ff=128, enc_layers=2, dec_layers=1, dropout=0.0,
            attention_dropout=0.0)


def test_stages_follow_the_chain_and_scale_with_the_window():
    models = [{"name": "8L"}, {"name": "pruned", "chain": {"stage": 2}}, {"name": "gated", "chain": {"stage": 1}},
              {"name": "control", "chain": {"stage": 2}}]
    assert chain_stages(models) == [["8L"], ["gated"], ["pruned", "control"]]
    assert chain_stages([{"name": "8L"}, {"name": "8Ftoken"}]) == [["8L", "8Ftoken"]]
    # the plan's window (445 s from the call's start, its installation in it): stage 2 keeps its
    # 113 s, stage 1 its 105 s before it; the first stage gives up the installation's time
    assert stage_deadlines(445, [0, 105, 113], 445) == [445 - 218, 445 - 113, 445]
    # a rehearsal's window ending at 190 s (from the call's start, as the plan's): every
    # reservation scaled by 190/445
    ends = stage_deadlines(190, [0, 105, 113], 445)
    assert all(math.isclose(a, b) for a, b in zip(ends, [190 - 218 * 190 / 445, 190 - 113 * 190 / 445, 190]))


@pytest.fixture
def sitting(tmp_path, monkeypatch):
    """A sitting after its first stage: the parent 8L with two checkpoints, the later one
    worse on validation (so the best, step 20, is the fine-tunes' start), and a manifest
    whose chain is the shipped plan's D-gates-8L."""
    from headlab.workflow import bundle, gpu_plan

    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    vocabs = toy_vocabs(30)
    opt = model_opt(enc_heads="8L", **TINY)
    parent_dir = tmp_path / "models/8L"
    parent_dir.mkdir(parents=True)
    for step in (20, 40):
        save_checkpoint(build_model(opt, vocabs), opt, vocabs, parent_dir / f"model_step_{step}.pt")
    (parent_dir / "model.valid.csv").write_text("step,xent,ppl,acc\n20,2.5,12.18,40.0\n40,2.7,14.88,39.0\n")
    config = {"encoder_type": "headlab", "enc_layers": 2, "dec_layers": 1, "heads": 8, "hidden_size": 64,
              "enc_heads": "8L", "train_steps": 3000, "save_model": "models/8L/model", "src_vocab": "v", "data": {},
              "seed": 1, "valid_steps": 200, "save_checkpoint_steps": 200}
    (parent_dir / "onmt.yaml").write_text(yaml.safe_dump(config))
    parent = {"name": "8L", "heads": "8L", "layers": "2+1", "seed": "seed1", "corpus": "multi30k", "pair": "en-de",
              "size": "full", "dir": "models/8L", "config": "models/8L/onmt.yaml", "save_model": "models/8L/model",
              "save_every": 200, "model_dtype": "fp32"}
    choice = gpu_plan.Choice(gpu_plan.load().slice("D-gates-8L"), [1], [])
    return {"models": [parent, *bundle.chain_models(choice, [parent])]}


def test_the_bundle_names_each_link_by_the_sitting_s_models(sitting):
    links = {model["name"]: model for model in sitting["models"][1:]}
    assert list(links) == ["gated", "pruned", "control"]
    assert links["gated"]["chain"] == {"stage": 1, "parent": "8L", "options": {
        "gate": "enc", "lambda_l0": 0.1, "train_steps": 400, "warmup_steps": 100, "valid_steps": 100,
        "save_checkpoint_steps": 100}}
    assert links["pruned"]["chain"]["mask_from"] == "gated" and links["pruned"]["row"] == "Non-inverted (fine-tuned)"
    assert links["pruned"]["chain"]["initial_row"] == "Non-inverted (initial)"
    assert all("config" not in link and link["heads"] == "8L" and link["seed"] == "seed1" for link in links.values())


def test_each_link_starts_from_the_parent_s_best_checkpoint_and_the_gated_model_s_mask(sitting):
    [gated] = sitting_chain.prepare(sitting, "gated")
    segment = "/ft_gate=enc+lambda_l0=0.1+save_checkpoint_steps=100+train_steps=400+valid_steps=100+warmup_steps=100"
    assert gated["tune"] == segment and gated["dir"] == "models/8L" + segment
    assert gated["parent_step"] == 20 and gated["parent_checkpoint"].endswith("model_step_20.pt")
    written = yaml.safe_load(open(gated["config"]))
    assert written["enc_heads"] == "8L|gate" and written["train_steps"] == 400 and written["lambda_l0"] == 0.1
    assert written["train_from"] == f"{gated['dir']}/init.pt" and written["reset_optim"] == "all"
    assert gated["save_model"] == f"{gated['dir']}/model" and gated["save_every"] == 100
    # the gated model "trains": its checkpoint with gates set by hand, layer 1 keeping heads
    # 1 and 8, layer 2 keeping all but head 3 (log_alpha +-5: test-time gates exactly 1 or 0)
    checkpoint = torch.load(f"{gated['dir']}/init.pt", weights_only=False)
    keep = [[1, 0, 0, 0, 0, 0, 0, 1], [1, 1, 0, 1, 1, 1, 1, 1]]
    gates = sorted(key for key in checkpoint["model"] if key.endswith("log_alpha"))
    assert len(gates) == 2
    for key, row in zip(gates, keep):
        checkpoint["model"][key] = torch.tensor([5.0 if kept else -5.0 for kept in row]).view_as(checkpoint["model"][key])
    torch.save(checkpoint, f"{gated['dir']}/model_step_100.pt")
    sitting["models"][1] = gated
    pruned, initial = sitting_chain.prepare(sitting, "pruned")
    assert pruned["mask"]["mask"] == "10000001.11011111" and pruned["mask"]["kept"] == 9
    # its initial checkpoint (the parent masked, untrained) is evaluated as paper D's "initial" row
    assert (initial["name"], initial["row"], initial["evaluate_only"]) == ("pruned-initial", "Non-inverted (initial)", True)
    assert initial["config"] == pruned["config"] and initial["save_model"] == f"{pruned['dir']}/initial/model"
    from headlab.workflow.sitting import eval_checkpoint
    assert eval_checkpoint(initial)["step"] == 0
    assert open(f"{pruned['dir']}/initial/model_step_0.pt", "rb").read() == open(f"{pruned['dir']}/init.pt", "rb").read()
    assert pruned["mask"]["gated_step"] == 100
    written = yaml.safe_load(open(pruned["config"]))
    assert written["enc_head_mask"] == "10000001.11011111" and "gate" not in written["enc_heads"]
    assert pruned["dir"].startswith("models/8L/ft_enc_head_mask=10000001.11011111+")
    [control] = sitting_chain.prepare(sitting, "control")
    assert control["dir"] == "models/8L/ft_save_checkpoint_steps=100+train_steps=400+valid_steps=100+warmup_steps=100"
    assert "enc_head_mask" not in yaml.safe_load(open(control["config"]))


def test_a_link_whose_parent_has_no_checkpoint_is_one_line_naming_it(sitting, tmp_path, capsys):
    for path in (tmp_path / "models/8L").glob("model_step_*.pt"):
        path.unlink()
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps(sitting))
    assert sitting_chain.main(["--manifest", str(manifest), "--model", "gated", "--out", str(tmp_path / "g.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "sitting_chain: models/8L: the parent 8L has no checkpoint that loads"
    assert not (tmp_path / "g.json").exists()
    assert sitting_chain.main(["--manifest", str(manifest), "--model", "8L", "--out", str(tmp_path / "g.json")]) == 2
    assert "'8L' is not a chained model of the manifest (chained: gated, pruned, control)" in capsys.readouterr().err
    # the parent trained, the gated model never did (its stage had no time): no mask
    save_checkpoint(build_model(model_opt(enc_heads="8L", **TINY), toy_vocabs(30)), model_opt(enc_heads="8L", **TINY),
                    toy_vocabs(30), tmp_path / "models/8L/model_step_20.pt")
    assert sitting_chain.main(["--manifest", str(manifest), "--model", "pruned", "--out", str(tmp_path / "p.json")]) == 2
    assert capsys.readouterr().err.strip() == "sitting_chain: the gated model gated was never trained: no mask for pruned"


def _runner(tmp_path, monkeypatch, sitting):
    """The runner's Sitting on the ``sitting`` fixture's models (moved under WORK/headlab, as
    installed), the trainings replaced by a copy of each fine-tune's init.pt as its step-2
    checkpoint, and no CUDA suite or bench beside them: what is tested is the stages, not
    the training."""
    import argparse
    import sys

    from headlab.workflow import gpu_runner

    (tmp_path / "headlab").mkdir()
    (tmp_path / "models").rename(tmp_path / "headlab/models")
    manifest = {"commit": "abcdef0", "results": "results", "models": sitting["models"],
                "slice": {"name": "D-gates-8L", "train_window_s": 445, "chain_stage_s": {"1": 105, "2": 113}}}

    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    monkeypatch.setattr(gpu_runner, "BUNDLE", bundle)
    args = argparse.Namespace(work=str(tmp_path), out=str(tmp_path / "out"), budget=400, device="cpu", after=None,
                              eval_reserve=100, mps="off", compile="off")
    runner = gpu_runner.Sitting(args)
    runner.logs.mkdir(parents=True, exist_ok=True)
    copy = ("import shutil, sys, yaml; cfg = yaml.safe_load(open(sys.argv[1])); "
            "'train_from' in cfg and shutil.copy(cfg['train_from'], cfg['save_model'] + '_step_2.pt')")
    monkeypatch.setattr(runner, "train_args", lambda model: [sys.executable, "-c", copy, model["config"]])

    def nothing_beside(stop_at):
        while True:
            yield
    monkeypatch.setattr(runner, "side_track", nothing_beside)
    return runner


def test_the_runner_trains_the_chain_stage_by_stage(sitting, tmp_path, monkeypatch):
    runner = _runner(tmp_path, monkeypatch, sitting)
    runner.train()
    call = runner.state["calls"][-1]
    assert [stage["models"] for stage in call["stages"]] == [["8L"], ["gated"], ["pruned", "control"]]
    assert call["stages"][1]["prepared"] == ["gated"] and call["stages"][2]["prepared"] == ["pruned", "control"]
    # each stage began after the one before it ended, its deadline as the plan's shares
    for before, after in zip(call["stages"], call["stages"][1:]):
        assert after["start_s"] >= before["ended_s"]
    assert call["stages"][0]["end_by_s"] < call["stages"][1]["end_by_s"] < call["stages"][2]["end_by_s"] == 400 - 15 - 100
    resolved = {m["name"]: m for m in json.loads((tmp_path / "manifest.json").read_text())["models"]}
    assert all("config" in model for model in resolved.values()) and not runner.state.get("chain_errors")
    assert list(resolved) == ["8L", "gated", "pruned", "pruned-initial", "control"]
    assert resolved["pruned-initial"]["evaluate_only"] and "pruned-initial" not in runner.state["exited"]
    # the pruned model's mask came from the gated model's step-2 checkpoint: open gates keep every head
    assert resolved["pruned"]["mask"]["gated_step"] == 2 and resolved["pruned"]["mask"]["mask"] == "11111111.11111111"
    assert resolved["gated"]["parent_step"] == resolved["control"]["parent_step"] == 20
    assert set(runner.state["exited"]) == {"8L", "gated", "pruned", "control"}


def test_a_chain_whose_parent_left_no_checkpoint_publishes_its_lack(sitting, tmp_path, monkeypatch):
    from headlab.workflow.sitting import split_untrained

    for path in (tmp_path / "models/8L").glob("model_step_*.pt"):
        path.unlink()
    runner = _runner(tmp_path, monkeypatch, sitting)
    runner.train()
    errors = runner.state["chain_errors"]
    assert set(errors) == {"gated", "pruned", "control"}
    assert errors["gated"] == "sitting_chain: models/8L: the parent 8L has no checkpoint that loads"
    trained, untrained = split_untrained(json.loads((tmp_path / "manifest.json").read_text()))
    assert [m["name"] for m in trained["models"]] == ["8L"] and untrained == ["gated", "pruned", "control"]


def test_the_publication_labels_the_initial_checkpoint_and_names_an_untrained_link(tmp_path, monkeypatch):
    """The parent stopped at its deadline; its pruned fine-tune's initial checkpoint is as far
    along as the parent (its status), said in its stop reason; a link never prepared has no
    row and is named, with why, in lacks; the gate values the mask came from are published.
    Each row says how its checkpoint was chosen: the parent's by its validation, the initial
    checkpoint as the fine-tune's start (never the clock's step, though no validation chose it)."""
    import csv

    import torch

    from headlab.studies import published
    from headlab.workflow import sitting

    monkeypatch.chdir(tmp_path)
    parent = tmp_path / "models/8L"
    parent.mkdir(parents=True)
    (parent / "ft/initial").mkdir(parents=True)
    for checkpoint in (parent / "model_step_100.pt", parent / "ft/initial/model_step_0.pt"):
        torch.save({"model": {"w": torch.zeros(2)}, "generator": {}}, checkpoint)
    (parent / "model.valid.csv").write_text("step,xent,ppl,acc\n100,2.5,12.2,50\n")
    # every model translates the test sentence as its reference has it (a row scored on the
    # whole test set: a seed), no atlas: the rows are what this test reads
    def translate_until(jobs, *args, **kwargs):
        for job in jobs.values():
            Path(job["hyp"]).write_text("a sentence\n")
        return dict.fromkeys(jobs, 1)

    monkeypatch.setattr(sitting, "translate_until", translate_until)
    monkeypatch.setattr(sitting, "_atlas_safely", lambda *args, **kwargs: None)
    (parent / "train.log").write_text("".join(
        f"[2026-11-28 14:28:51,511 INFO] Step {step}/100000; acc: 60.0; ppl: 12.0; xent: 2.5; lr: 0.001; "
        f"sents: 100; bsz: 3432/3682/264; 11445/12278 tok/s; 280 sec;\n" for step in (50, 100)))
    (parent / "gates.csv").write_text("site,layer,head,log_alpha,gate,p_open,kept,saturated\n")
    identity = {"heads": "8L", "layers": "6+6", "seed": "seed1", "pair": "en-de", "corpus": "multi30k",
                "model_dtype": "fp32"}
    chain = {"stage": 2, "parent": "8L", "options": {"train_steps": 400}, "mask_from": "gated", "initial_of": "pruned"}
    models = [{**identity, "name": "8L", "dir": "models/8L", "config": "models/8L/onmt.yaml", "save_model": "models/8L/model"},
              {**identity, "name": "pruned-initial", "row": "Non-inverted (initial)", "dir": "models/8L/ft/initial",
               "config": "models/8L/ft/onmt.yaml", "save_model": "models/8L/ft/initial/model", "evaluate_only": True,
               "parent_step": 100, "chain": chain, "mask": {"gates": "models/8L/gates.csv"}},
              {**identity, "name": "control", "row": "Baseline (fine-tuned, no pruning)",
               "chain": {"stage": 2, "parent": "8L", "options": {"train_steps": 400}}}]
    (tmp_path / "test.src").write_text("ein Satz\n")
    (tmp_path / "test.tgt").write_text("a sentence\n")
    manifest, untrained = sitting.split_untrained({
        "commit": "abcdef0", "models": models,
        "test": {"split": "test_2016_flickr", "pair": "en-de", "src": "test.src", "ref": "test.tgt"},
        "slice": {"name": "D-gates-8L", "study": "paper_D", "table": "T3", "seeds": [1],
                  "rows": {"8L": "Baseline (converged)"}, "stop": {"valid_steps": 200, "patience": 3}}})
    assert untrained == ["control"]
    out = tmp_path / "published/D-gates-8L/s"
    state = {"chain_errors": {"control": "sitting_chain: models/8L: the parent 8L has no checkpoint that loads"}}
    sitting.evaluate(manifest, out, "cpu", state, {"sitting": "s", "gpu": "cpu", "date": "2026-11-28"}, 20,
                     tmp_path / "logs", untrained=untrained)
    rows = {row["row"]: row for row in csv.DictReader(open(out / "rows.csv"))}
    assert list(rows) == ["Baseline (converged)", "Non-inverted (initial)"]
    assert rows["Baseline (converged)"]["status"] == rows["Non-inverted (initial)"]["status"] == "deadline"
    assert rows["Non-inverted (initial)"]["stop_reason"] == ("not trained: 8L at step 100 with pruned's mask "
                                                             "(the fine-tune's initial checkpoint)")
    assert [(row["best_step"], row["selected_by"]) for row in rows.values()] == [
        ("100", published.BY_VALIDATION), ("0", published.BY_INITIAL)]
    frame = published.read(str(tmp_path / "published"))
    assert len(frame) == 2 and not published.at_the_clocks_step(frame).any()
    # each row's translation is its own model's, though the two share their heads (8L)
    assert [published.hypothesis(row) for _, row in frame.iterrows()] == [
        str(out / "8L.test_2016_flickr.txt"), str(out / "pruned-initial.test_2016_flickr.txt")]
    assert all(Path(published.hypothesis(row)).is_file() for _, row in frame.iterrows())
    lacks = json.loads((out / "provenance.json").read_text())["lacks"]
    assert lacks[0] == ("control: not trained (a fine-tune of the chain never started: sitting_chain: models/8L: "
                        "the parent 8L has no checkpoint that loads)")
    assert (out / "gates.gated.csv").read_text().startswith("site,layer,head,log_alpha")


def test_with_two_seeds_each_link_chains_its_own_seed_s_models():
    from headlab.workflow import bundle, gpu_plan

    parents = [{"name": f"8L.seed{n}", "heads": "8L", "layers": "6+6", "seed": f"seed{n}", "corpus": "multi30k",
                "pair": "en-de", "size": "full"} for n in (1, 2)]
    links = bundle.chain_models(gpu_plan.Choice(gpu_plan.load().slice("D-gates-8L"), [1, 2], []), parents)
    assert [link["name"] for link in links] == ["gated.seed1", "pruned.seed1", "control.seed1",
                                                 "gated.seed2", "pruned.seed2", "control.seed2"]
    pruned = links[4]
    assert (pruned["seed"], pruned["chain"]["parent"], pruned["chain"]["mask_from"]) == ("seed2", "8L.seed2", "gated.seed2")


def test_a_link_still_preparing_at_its_stage_s_end_is_named_as_such(sitting, tmp_path, monkeypatch):
    runner = _runner(tmp_path, monkeypatch, sitting)
    runner.write_resolved()
    assert runner.prepare_stage(["gated"], end=runner.elapsed() - 1) == []
    assert runner.state["chain_errors"] == {"gated": "its preparation was stopped at its stage's end"}


def test_every_training_is_timed_and_the_first_model_profiled(sitting, tmp_path, monkeypatch):
    from headlab.workflow import gpu_runner

    runner = _runner(tmp_path, monkeypatch, sitting)
    # the parent as bundled, a chained link as its stage prepares it (with its config)
    models = [runner.manifest["models"][0], {"name": "gated", "config": "models/8L/ft/onmt.yaml"}]
    commands = {model["name"]: gpu_runner.Sitting.train_args(runner, model) for model in models}
    first, steps = gpu_runner.PROFILE_STEPS["cpu"]
    for name, command in commands.items():
        split = command.index("--")
        assert command[1:5] == ["-m", "headlab.workflow.sitting_clock", "--out", str(runner.logs / f"clock.{name}.json")]
        assert command[split + 1:split + 3] == ["-config", next(m["config"] for m in models if m["name"] == name)]
        profiled = "--profile-from" in command[:split]
        assert profiled == (name == "8L"), name
    assert commands["8L"][commands["8L"].index("--profile-from"):][:4] == ["--profile-from", str(first),
                                                                          "--profile-steps", str(steps)]
    # the trainings' -compile is run.py's --compile, always given (an inherited $HEADLAB_COMPILE
    # never decides), and recorded where the speed rows read it
    assert all(command[-2:] == ["-compile", "off"] for command in commands.values())
    runner.args.compile = "default"
    assert gpu_runner.Sitting.train_args(runner, models[0])[-2:] == ["-compile", "default"]
    # a chain's fine-tunes train eager whatever the sitting's mode (too short to pay a compile back)
    chained = [model for model in runner.manifest["models"] if model.get("chain")]
    assert len(chained) == 3 and all(gpu_runner.Sitting.train_args(runner, {**model, "config": "c.yaml"})[-2:]
                                      == ["-compile", "off"] for model in chained)
    runner.record_extra("train_compile", "default")
    assert json.loads((runner.logs / "speed-extra.json").read_text())["train_compile"] == "default"
    assert runner.call["train_compile"] == "default"


def test_run_py_compiles_with_the_modes_headlab_train_has():
    """run.py is standard library only (it runs before headlab is installed): its own copy of
    the modes is headlab train's, and the speed rows carry the trainings' mode."""
    from headlab.engine.opts import COMPILE_MODES
    from headlab.workflow import gpu_runner, sitting_speed

    assert gpu_runner.TRAIN_COMPILE_MODES == COMPILE_MODES
    rows = sitting_speed.speed_rows([{"name": "8L", "params": 10}], {"gpu": "h100", "train_compile": "default"}, {},
                                    {}, {})
    assert rows[0]["train_compile"] == "default"
    # a chain's fine-tune trained eager in a compiled sitting says so
    rows = sitting_speed.speed_rows([{"name": "8L"}, {"name": "gated", "train_compile": "off"}],
                                    {"gpu": "h100", "train_compile": "default"}, {}, {}, {})
    assert [row["train_compile"] for row in rows] == ["default", "off"]


@pytest.mark.parametrize("device, option, plan, trains, disabled", [
    ("cuda", None, "default", "default", False),       # the plan's mode
    ("cuda", "off", "default", "off", False),          # --compile wins
    ("cuda", None, False, "off", False),               # YAML's bare off, as the bundle may have copied it
    ("cuda", None, None, "off", False),                # a manifest of before the key
    ("cpu", None, "default", "default", True),         # rehearsed: the mode passed, torch's compile a no-op
    ("cpu", "default", "off", "default", False),       # asked for on the command line: compiled for real
])
def test_run_py_trains_with_the_plans_compile_unless_its_option_says_otherwise(tmp_path, monkeypatch, device, option,
                                                                               plan, trains, disabled):
    import argparse

    from headlab.workflow import gpu_runner

    bundle = tmp_path / "bundle"
    bundle.mkdir()
    figures = {"budget_s": 570, "pack_s": 15, "eval_reserve_s": 80, **({} if plan is None else {"compile": plan})}
    (bundle / "manifest.json").write_text(json.dumps({
        "commit": "abcdef0", "results": "results", "models": [{"name": "8L", "config": "models/8L/onmt.yaml"}],
        "slice": {"name": "A-T1-deep", "sitting": figures}}))
    monkeypatch.setattr(gpu_runner, "BUNDLE", bundle)
    monkeypatch.delenv("TORCH_COMPILE_DISABLE", raising=False)
    args = argparse.Namespace(work=str(tmp_path / "work"), out=str(tmp_path / "out"), budget=None, device=device,
                              after=None, eval_reserve=None, mps="off", compile=option)
    runner = gpu_runner.Sitting(args)
    assert runner.train_args(runner.manifest["models"][0])[-2:] == ["-compile", trains]
    assert ("TORCH_COMPILE_DISABLE" in runner.env()) == disabled
