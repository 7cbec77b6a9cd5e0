"""Model presets -> OpenNMT-py configs, and option validation (onmt_train ignores typos)."""
from __future__ import annotations

import json

import pytest
import yaml

from headlab.errors import ConfigError
from headlab.engine.config import (parse_layers, resolve_preset, train_config, validate_options,
                                 validate_yaml_file, write_yaml)

PATHS = dict(train_src="a.src", train_tgt="a.tgt", valid_src="v.src", valid_tgt="v.tgt",
             vocab="vocab.txt", save_dir="out")


def test_parse_layers():
    assert parse_layers("6+1") == (6, 1)
    assert parse_layers(" 2 + 3 ") == (2, 3)
    for bad in ("6", "6+0", "a+b", "6+6+6"):
        with pytest.raises(ConfigError, match="layers"):
            parse_layers(bad)


def test_presets_extend_and_override():
    base = resolve_preset("base")
    assert base["hidden_size"] == 512 and base["transformer_ff"] == 2048 and base["heads"] == 8
    assert base["encoder_type"] == "headlab"  # inherited from tiny
    low = resolve_preset("base_lowres")
    # paper A §4.2: 1k-token batches, dropout 0.3, tied embeddings
    assert low["batch_size"] == 1024 and low["dropout"] == [0.3]
    assert low["share_embeddings"] and low["share_decoder_embeddings"]
    assert low["hidden_size"] == 512
    assert "extends" not in low


def test_unknown_preset_suggests():
    with pytest.raises(ConfigError, match="did you mean 'tiny_lowres'"):
        resolve_preset("tiny-lowres")


def test_train_config_fills_grid_values():
    options = train_config(preset="tiny", layers="6+1", heads="7Ftoken+1L", seed=3, **PATHS)
    assert options["enc_layers"] == 6 and options["dec_layers"] == 1
    assert options["enc_heads"] == "7Ftoken+1L" and options["seed"] == 3
    assert options["save_model"] == "out/model"
    assert options["data"]["corpus_1"] == {"path_src": "a.src", "path_tgt": "a.tgt"}


def test_a_seed_changes_the_seed_option_and_nothing_else():
    """Two seeds of one model: the OpenNMT-py configs differ in ``seed`` only (initialisation,
    dropout and batch order all follow it: headlab.studies.common), and in the model's own
    folder, whose path names the seed."""
    one = train_config(preset="mini", layers="2+2", heads="7Ftoken+1L", seed=1, **PATHS)
    two = train_config(preset="mini", layers="2+2", heads="7Ftoken+1L", seed=2, **PATHS)
    assert {k for k in one.keys() | two.keys() if one.get(k) != two.get(k)} == {"seed"}
    elsewhere = train_config(preset="mini", layers="2+2", heads="7Ftoken+1L", seed=2, **dict(PATHS, save_dir="m2"))
    assert {k for k in one if one[k] != elsewhere[k]} == {"seed", "save_model", "save_data"}


def test_one_vocabulary_is_shared_two_are_per_side():
    shared = train_config(preset="tiny", layers="1+1", heads="8L", **PATHS)
    assert shared["share_vocab"] is True and shared["src_vocab"] == shared["tgt_vocab"]
    assert shared["share_embeddings"] is True
    paths = dict(PATHS, vocab=["v.src", "v.tgt"])
    separate = train_config(preset="tiny_lowres", layers="1+1", heads="8L", **paths)
    assert (separate["src_vocab"], separate["tgt_vocab"], separate["share_vocab"]) == ("v.src", "v.tgt", False)
    # paper A §4.2 KO-EN: independent BPE, so only the decoder's embeddings stay tied
    assert separate["share_embeddings"] is False and separate["share_decoder_embeddings"] is True
    with pytest.raises(ConfigError, match="two .source, target. vocabularies, got 3"):
        train_config(preset="tiny", layers="1+1", heads="8L", **dict(PATHS, vocab=["a", "b", "c"]))


def test_misspelled_override_is_an_error_with_suggestion():
    with pytest.raises(ConfigError, match=r"unknown OpenNMT-py train option 'lerning_rate'; did you mean 'learning_rate'"):
        train_config(preset="tiny", layers="1+1", heads="8L", overrides={"lerning_rate": 1.0}, **PATHS)


def test_headlab_options_are_known_options():
    options = train_config(preset="tiny", layers="1+1", heads="8L", overrides={"enc_heads": "8L"}, **PATHS)
    assert options["enc_heads"] == "8L"


def test_yaml_file_typo_names_file_and_line(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("save_model: m\nbatch_size: 10\nwarmup_step: 4\n")
    with pytest.raises(ConfigError) as err:
        validate_yaml_file(path)
    assert f"{path}:3:" in str(err.value) and "'warmup_step'" in str(err.value)
    assert "did you mean 'warmup_steps'" in str(err.value)


def test_write_yaml_round_trip(tmp_path):
    options = train_config(preset="tiny", layers="2+2", heads="8L", **PATHS)
    write_yaml(options, tmp_path / "x.yaml")
    assert yaml.safe_load((tmp_path / "x.yaml").read_text()) == options
    assert validate_yaml_file(tmp_path / "x.yaml") == options


def test_option_names_are_cached_per_onmt_version_and_rebuilt_when_unreadable(tmp_path, monkeypatch):
    from headlab.engine import config as onmt_config

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    onmt_config._option_names.cache_clear()
    names = onmt_config._option_names("train")
    assert {"learning_rate", "enc_heads", "embeddings_init"} <= names
    cache = onmt_config._options_cache_file("train")
    assert cache.parent == tmp_path / "headlab" and set(json.loads(cache.read_text())) == names
    # the next process reads the file (here: a planted name proves it was read)
    cache.write_text(json.dumps(sorted(names | {"planted_option"})))
    onmt_config._option_names.cache_clear()
    validate_options({"planted_option": 1})
    # a damaged cache is rebuilt from OpenNMT-py's parser
    cache.write_text("{not json")
    onmt_config._option_names.cache_clear()
    with pytest.raises(ConfigError, match="planted_option"):
        validate_options({"planted_option": 1})
    assert set(json.loads(cache.read_text())) == names
    onmt_config._option_names.cache_clear()
