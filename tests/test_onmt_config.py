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
    onmt_config._option_specs.cache_clear()
    names = onmt_config._option_names("train")
    assert {"learning_rate", "enc_heads", "embeddings_init"} <= names
    cache = onmt_config._options_cache_file("train")
    specs = json.loads(cache.read_text())
    assert cache.parent == tmp_path / "headlab" and set(specs) == names
    assert specs["optim"]["choices"][:2] == ["sgd", "adagrad"] and specs["batch_size"]["kind"] == "int"
    # the next process reads the file (here: a planted option proves it was read)
    planted = {"kind": "int", "many": False, "empty": False, "choices": [1, 2]}
    cache.write_text(json.dumps({**specs, "planted_option": planted}))
    onmt_config._option_specs.cache_clear()
    validate_options({"planted_option": 1})
    with pytest.raises(ConfigError, match=r"planted_option must be one of 1, 2; got 3"):
        validate_options({"planted_option": 3})
    # a damaged cache, or one of an older layout (a list of names), is rebuilt from OpenNMT-py's parser
    for damaged in ("{not json", json.dumps(sorted(names | {"planted_option"}))):
        cache.write_text(damaged)
        onmt_config._option_specs.cache_clear()
        with pytest.raises(ConfigError, match="planted_option"):
            validate_options({"planted_option": 1})
        assert json.loads(cache.read_text()) == specs
    onmt_config._option_specs.cache_clear()


@pytest.mark.parametrize("option, value, message", [
    # argparse's type and choices, as onmt_train applies them to the YAML it reads
    ("optim", "adamm", "optim must be one of sgd, .*; got 'adamm'; did you mean 'adam'"),
    ("decay_method", "Noam", "decay_method must be one of noam, noamwd, rsqrt, none; got 'Noam'"),
    ("batch_type", 3, "batch_type must be one of sents, tokens; got 3"),
    ("batch_size", 1.5, "batch_size must be an integer, got 1.5"),
    ("batch_size", True, "batch_size must be an integer, got True"),
    ("learning_rate", "fast", "learning_rate must be a number, got 'fast'"),
    ("transformer_ff", [1024, 2048], r"transformer_ff takes one value, got the list \[1024, 2048\]"),
    ("dropout", [], "dropout needs at least one value, got an empty list"),
    ("accum_count", [1, "x"], "accum_count must be an integer, got 'x'"),
    ("share_embeddings", "maybe", "share_embeddings is a switch: true or false, got 'maybe'"),
    # ranges argparse does not check
    ("transformer_ff", -5, r"transformer_ff must be an integer >= 1, got -5"),
    ("batch_size", 0, r"batch_size must be an integer >= 1, got 0"),
    ("label_smoothing", 1.5, r"label_smoothing must be a number in \[0, 1\), got 1.5"),
    ("label_smoothing", 1, r"label_smoothing must be a number in \[0, 1\), got 1"),
    ("accum_count", [1, 0], r"accum_count must be an integer >= 1 \(or a list of them\), got \[1, 0\]"),
    ("hidden_size", 0, r"hidden_size must be an integer >= 1 \(or -1"),
    ("warmup_steps", -1, r"warmup_steps must be an integer >= 0, got -1"),
    ("adam_beta2", 1.0, r"adam_beta2 must be a number in \[0, 1\), got 1.0"),
])
def test_a_bad_option_value_names_the_option(option, value, message):
    with pytest.raises(ConfigError, match=rf"\[{option}\] {message}"):
        train_config(preset="tiny", layers="1+1", heads="8L", overrides={option: value}, **PATHS)


@pytest.mark.parametrize("option, value", [
    ("optim", "adam"), ("batch_size", "64"), ("learning_rate", 2), ("hidden_size", -1), ("dropout", [0.1, 0.2]),
    ("share_embeddings", False), ("share_embeddings", "yes"), ("label_smoothing", 0), ("gpu_ranks", []),
    ("warmup_steps", 0), ("model_dtype", "bf16"), ("transformer_ff", None),
])
def test_values_onmt_train_accepts_are_accepted(option, value):
    options = train_config(preset="tiny", layers="1+1", heads="8L", overrides={option: value}, **PATHS)
    assert options[option] == value or option == "model_dtype"   # CPU runs train in fp32


def test_bad_value_in_a_yaml_file_names_file_and_line(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("save_model: m\nbatch_size: 10\noptim: adamm\n")
    with pytest.raises(ConfigError, match=rf"{path}:3: \[optim\] optim must be one of"):
        validate_yaml_file(path)


def _edges():
    """(option, a value at its bound that must pass, one past it that must fail) of every
    range headlab checks: the bounds as RANGES states them, each tried on both sides."""
    from headlab.engine.option_values import RANGES

    for option, bounds in RANGES.items():
        low, high, extra = bounds.low, bounds.high, bounds.extra
        integer = float(low).is_integer() and high is None and not bounds.above
        if bounds.above:        # the bound itself is outside
            yield option, low + 0.01, low
        else:
            below = int(low) - 1 if integer else low - 0.01
            if below in extra:
                below -= 1
            yield option, int(low) if integer else low, below
        if high is not None:
            yield option, high - 0.01, high
        for allowed in extra:
            yield option, allowed, None


@pytest.mark.parametrize("option, inside, outside", list(_edges()))
def test_every_checked_range_holds_at_its_bound(option, inside, outside):
    assert train_config(preset="tiny", layers="1+1", heads="8L", overrides={option: inside}, **PATHS)[option] == inside
    if outside is not None:
        with pytest.raises(ConfigError, match=rf"\[{option}\] {option} must be .*, got {outside!r}"):
            train_config(preset="tiny", layers="1+1", heads="8L", overrides={option: outside}, **PATHS)


class _Rejected(Exception):
    pass


#: (option, value) as a YAML config gives them: what onmt_train accepts and rejects
PARSER_CASES = [
    ("optim", "adamm"), ("optim", "adam"), ("decay_method", "Noam"), ("batch_type", 3), ("batch_type", "tokens"),
    ("batch_size", 1.5), ("batch_size", True), ("batch_size", "64"), ("learning_rate", "fast"),
    ("learning_rate", "1e-3"), ("transformer_ff", [1024, 2048]), ("dropout", []), ("dropout", [0.1, 0.2]),
    ("dropout", ""), ("dropout", 0.1), ("accum_count", [1, "x"]), ("share_embeddings", "maybe"),
    ("share_embeddings", "yes"), ("share_embeddings", False), ("share_embeddings", 1), ("gpu_ranks", []),
    ("transforms", []), ("transforms", ["headlab_words"]), ("transforms", ["bpee"]), ("model_dtype", "bf16"),
    ("model_dtype", "fp8"), ("seed", -3), ("heads", "8"), ("enc_heads", "7Ftoken+1L"), ("src_vocab", 5),
]


def test_value_checks_agree_with_onmt_trains_own_parser(tmp_path):
    """Each case through OpenNMT-py's parser (configargparse reading the YAML, as onmt_train
    does, headlab's options added) and through headlab's replay of it: the same verdict."""
    import headlab.engine.plugin  # noqa: F401
    import onmt.opts
    from onmt.utils.parse import ArgumentParser

    from headlab.engine.config import _option_specs
    from headlab.engine.option_values import problem

    def reject(message):
        raise _Rejected(message)

    specs = _option_specs("train")
    for option, value in PARSER_CASES:
        path = tmp_path / "run.yaml"
        path.write_text(yaml.safe_dump({"data": {}, "src_vocab": "v", option: value}))
        parser = ArgumentParser()
        onmt.opts.train_opts(parser)
        parser.error = reject
        try:
            parser.parse_known_args(["-config", str(path)])
            accepted = True
        except _Rejected:
            accepted = False
        assert accepted == (problem(option, value, specs[option]) is None), (option, value, accepted)


@pytest.mark.parametrize("argv, says", [
    (["--seed", "0"], "argument --seed: 0: must be at least 1"),
    (["--seed", "-1"], "argument --seed: -1: must be at least 1"),
    (["--gpus", "-1"], "argument --gpus: -1: must be at least 0"),
    (["--set", "seed=0"], "[seed] seed must be an integer >= 1 (OpenNMT-py seeds nothing at 0 or below"),
])
def test_a_seed_opennmt_would_ignore_is_refused(argv, says, tmp_path, capsys):
    """``onmt.utils.misc.set_random_seed`` seeds nothing for a seed <= 0: the config would
    describe a training that no one can repeat, with nothing said."""
    from headlab.cli import main
    base = ["onmt-config", "--preset", "mini", "--layers", "2+2", "--train", "a.src", "a.tgt", "--valid", "v.src",
            "v.tgt", "--vocab", "vocab.txt", "--save-dir", str(tmp_path / "m"), "--out", str(tmp_path / "onmt.yaml")]
    try:
        status = main(base + argv)
    except SystemExit as stop:      # argparse's own refusal
        status = stop.code
    assert status in (1, 2) and says in capsys.readouterr().err
    assert not (tmp_path / "onmt.yaml").exists()
