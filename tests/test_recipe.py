"""A published GPU model's recipe (headlab.workflow.recipe): what trained it, so that its seeds
are pooled, counted and rebuilt only with seeds trained the same way."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from headlab.workflow import recipe

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "results" / "published" / "A-T1-deep"
SITTINGS = ("2026-11-26-h200-e327191", "2026-11-27-h100-65e2124", "2026-11-27-h100-993e600")


def _options(root: Path) -> dict:
    """A training config reading three files under ``root`` (as a sitting's onmt.yaml does)."""
    for name, text in (("bpe/train.src", "ein hund\n"), ("bpe/train.tgt", "a dog\n"), ("vocab.txt", "a\t1\n")):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return {"learning_rate": 1.0, "warmup_steps": 1000, "seed": 3, "save_model": "models/x/model",
            "train_steps": 100000, "enc_heads": "8L", "early_stopping": 3,
            "data": {"corpus_1": {"path_src": "bpe/train.src", "path_tgt": "bpe/train.tgt"}},
            "src_vocab": "vocab.txt", "tgt_vocab": "vocab.txt"}


def test_a_recipe_holds_what_trains_a_model_and_names_files_by_their_content(tmp_path):
    first, second = tmp_path / "here", tmp_path / "there"
    options = _options(first)
    made = recipe.of(options, first)
    assert made == {"data": {"corpus_1": {"path_src": recipe.file_digest(first / "bpe/train.src"),
                                          "path_tgt": recipe.file_digest(first / "bpe/train.tgt")}},
                    "early_stopping": 3, "enc_heads": "8L", "learning_rate": 1.0,
                    "src_vocab": recipe.file_digest(first / "vocab.txt"),
                    "tgt_vocab": recipe.file_digest(first / "vocab.txt"), "warmup_steps": 1000}
    # the same files in another folder, another seed, place and bound: the same recipe
    _options(second)
    moved = {**options, "seed": 1, "save_model": "elsewhere/model", "train_steps": 5}
    assert recipe.digest(recipe.of(moved, second)) == recipe.digest(made)
    # one changed option, or one changed file: another recipe, and what changed is said
    assert recipe.differences(made, recipe.of({**options, "learning_rate": 2.0}, first)) == [
        "learning_rate 1.0 -> 2.0"]
    (second / "bpe/train.src").write_text("ein kleiner hund\n")
    assert recipe.differences(made, recipe.of(options, second)) == ["data.corpus_1.path_src: another file"]
    assert recipe.differences(made, recipe.of({**options, "valid_steps": 200}, first)) == ["valid_steps (none) -> 200"]


def test_a_source_features_vocabulary_read_from_beside_the_source_vocabulary_is_in_the_recipe(tmp_path):
    options = {**_options(tmp_path), "n_src_feats": 2}
    for index in range(2):
        (tmp_path / f"vocab.txt_feat{index}").write_text(f"{index}\t1\n")
    before = recipe.of(options, tmp_path)
    assert before["src_vocab_feat1"] == recipe.file_digest(tmp_path / "vocab.txt_feat1")
    (tmp_path / "vocab.txt_feat1").write_text("7\t1\n")
    assert recipe.differences(before, recipe.of(options, tmp_path)) == ["src_vocab_feat1: another file"]


def test_the_runners_command_line_options_are_read_as_the_config_would_hold_them():
    from headlab.workflow.gpu_runner import training_overrides

    options = {"model_dtype": "fp16", "batch_size": 4096, "gpu_ranks": [0], "accum_count": [1]}
    assert recipe.with_overrides(options, ["-model_dtype", "fp32", "-batch_size", "256", "-gpu_ranks",
                                           "-accum_count", "2", "4", "-label_smoothing", "0.1"]) == {
        "model_dtype": "fp32", "batch_size": 256, "gpu_ranks": [], "accum_count": [2, 4], "label_smoothing": 0.1}
    assert training_overrides("cuda") == []         # a GPU trains its config as the bundle wrote it
    cpu = recipe.with_overrides(options, training_overrides("cpu"))
    assert cpu["model_dtype"] == "fp32" and cpu["valid_steps"] == 10**6 and cpu["world_size"] == 1


def test_every_option_a_recipe_leaves_out_is_one_opennmt_py_trains_with():
    """The options left out are real training options (a misspelt one would leave its option
    in every recipe), and no other option is left out: changing any one of them names
    another recipe, as a property over every option of the training parser."""
    from headlab.engine.config import _option_names

    known = _option_names("train")
    assert recipe.IGNORED | recipe.DERIVED <= known, sorted((recipe.IGNORED | recipe.DERIVED) - known)
    for name in sorted(known):
        changed = recipe.digest(recipe.of({name: "a"})) != recipe.digest(recipe.of({name: "b"}))
        assert changed == (name not in recipe.IGNORED), name
        chained = recipe.digest(recipe.of({name: "a"}, chain={"parent": "p"})) != recipe.digest(
            recipe.of({name: "b"}, chain={"parent": "p"}))
        assert chained == (name not in recipe.IGNORED | recipe.DERIVED), name


def test_the_shipped_sittings_recipes_differ_by_what_their_documents_say():
    """Rebuilt from each sitting's commit: the first (H200, diverged) kept the preset's noam
    factor 2.0; the second trained at 1.0 without validation; the third added the stop rule,
    which the plan's next sittings keep (its rows' digests are its provenance's recipes')."""
    made = {}
    for sitting in SITTINGS:
        provenance = json.loads((SHIPPED / sitting / "provenance.json").read_text())
        made[sitting] = {name: model["recipe"] for name, model in provenance["models"].items()}
        rows = (SHIPPED / sitting / "rows.csv").read_text().splitlines()
        heads = rows[0].split(",").index("heads")
        for line in rows[1:]:
            assert line.endswith("," + recipe.digest(made[sitting][line.split(",")[heads]]))
    for name in ("8L", "7Ftoken+1L", "8Ftoken"):
        assert recipe.differences(made[SITTINGS[0]][name], made[SITTINGS[1]][name]) == ["learning_rate 2.0 -> 1.0"]
        assert recipe.differences(made[SITTINGS[1]][name], made[SITTINGS[2]][name]) == [
            "early_stopping (none) -> 3", 'early_stopping_criteria (none) -> ["ppl"]',
            'model_selection (none) -> "valid_loss"', "valid_steps 1000000 -> 200"]


def _config(root: Path, name: str, options: dict) -> str:
    path = root / name / "onmt.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(options))
    return str(path.relative_to(root))


def test_a_chained_fine_tune_is_named_by_its_parents_recipes_not_by_what_they_made(tmp_path):
    """Paper D's chain: the fine-tune starts from its parent's checkpoint of this sitting and
    takes its mask from the gated model's gates; its recipe names their recipes and the rule,
    so a parent trained otherwise is another fine-tune, and another sitting's checkpoint or
    mask is not. Its initial checkpoint (evaluated untrained) holds those alone."""
    from headlab.workflow.sitting import recipes

    def manifest(parent_rate: float, init: str, mask: str) -> dict:
        root = tmp_path / f"{parent_rate}-{init}-{mask}"
        (root / "ft").mkdir(parents=True)
        (root / "ft/init.pt").write_text(init)
        chain = {"parent": "8L", "mask_from": "gated", "mask": "mask", "stage": 2}
        models = [{"name": "8L", "config": _config(root, "8L", {"learning_rate": parent_rate})},
                  {"name": "gated", "config": _config(root, "gated", {"lambda_l0": 0.01}), "chain": {
                      "parent": "8L", "stage": 1}},
                  {"name": "pruned", "config": _config(root, "pruned", {"train_from": "ft/init.pt",
                                                                        "enc_head_mask": mask, "train_steps": 500}),
                   "chain": chain},
                  {"name": "pruned-initial", "config": "pruned/onmt.yaml", "evaluate_only": True,
                   "chain": {**chain, "initial_of": "pruned"}}]
        return recipes({"models": models}, "cuda", root)

    made = manifest(1.0, "weights A", "11110000")
    assert "train_from" not in made["pruned"] and "enc_head_mask" not in made["pruned"]
    assert made["pruned"]["chain"] == {"parent": recipe.digest(made["8L"]), "mask_from": recipe.digest(made["gated"]),
                                       "mask": "mask"}
    assert made["pruned-initial"] == {"chain": {**made["pruned"]["chain"], "untrained": True}}
    other_sitting = manifest(1.0, "weights B", "11001100")
    assert {name: recipe.digest(found) for name, found in other_sitting.items()} == {
        name: recipe.digest(found) for name, found in made.items()}
    parent_otherwise = manifest(2.0, "weights A", "11110000")
    assert all(recipe.digest(parent_otherwise[name]) != recipe.digest(made[name]) for name in made)


@pytest.mark.parametrize("device,dtype", [("cuda", "fp16"), ("cpu", "fp32")])
def test_a_sitting_records_the_recipe_its_trainings_ran(tmp_path, device, dtype):
    from headlab.workflow.sitting import recipes

    config = _config(tmp_path, "8L", {**_options(tmp_path), "model_dtype": "fp16"})
    made = recipes({"models": [{"name": "8L", "config": config}]}, device, tmp_path)["8L"]
    assert made["model_dtype"] == dtype and made["src_vocab"] == recipe.file_digest(tmp_path / "vocab.txt")
