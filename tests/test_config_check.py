"""Config errors found when the DAG is built: one ConfigError naming the config key."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from headlab.workflow.config_check import check, where
from test_workflow import set_dotted
from headlab.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
SMOKE = yaml.safe_load((ROOT / "tests/configs/smoke.yaml").read_text())


def _config(**changes):
    return set_dotted(copy.deepcopy(SMOKE), changes)


def _error(config) -> str:
    with pytest.raises(ConfigError) as err:
        check(config)
    return str(err.value)


def test_the_shipped_configs_pass():
    for name in ("config.yaml", "multi30k-gpu.yaml", "paper.yaml"):
        check(yaml.safe_load((ROOT / "config" / name).read_text()))
    check(_config())


@pytest.mark.parametrize("change, expected", [
    ({"studies.baseline.heads": ["8L", "7Fbogus+1L"]},
     "[studies.baseline.heads[1]] bad head spec '7Fbogus+1L': term '7Fbogus': unknown head kind 'Fbogus'"),
    ({"studies.paper_A.eight_fixed": "8Ftokn"},
     "[studies.paper_A.eight_fixed] bad head spec '8Ftokn': term '8Ftokn': unknown head kind 'Ftokn'; "
     "did you mean 'Ftoken'?"),
    ({"studies.baseline.layers": ["2+2"], "studies.baseline.heads": ["8L,8L,8L"]},
     "[studies.baseline.heads[0]] bad head spec '8L,8L,8L': it describes 3 layers but the encoder self-attention has 2"),
    ({"studies.baseline.heads": ["8L@cross=7Ftoken+1L"]},
     "[studies.baseline.heads[0]] bad head spec '7Ftoken+1L': term '7Ftoken': head kind 'Ftoken' cannot be used in "
     "decoder cross-attention"),
    ({"studies.baseline.heads": ["8L@dec=8L~dhicmm"]},
     "[studies.baseline.heads[0]] bad head spec '8L~dhicmm': term '|dhicmm': unknown head mixer 'dhicmm'; did you mean 'dhicm'?"),
    ({"studies.baseline.overrides": {"lambda_kl": -0.1}},
     "[studies.baseline.overrides.lambda_kl] lambda_kl must be a number >= 0, got -0.1"),
    ({"studies.paper_A.lowres.preset": "tiny_lowress"},
     "[studies.paper_A.lowres.preset] unknown model preset 'tiny_lowress' (did you mean 'tiny_lowres'?)"),
    ({"training.overrides.lerning_rate": 1.0},
     "[training.overrides.lerning_rate] unknown OpenNMT-py train option 'lerning_rate'; did you mean 'learning_rate'?"),
    ({"studies.baseline.overrides": {"dropuot": [0.3]}},
     "[studies.baseline.overrides.dropuot] unknown OpenNMT-py train option 'dropuot'; did you mean 'dropout'?"),
    ({"studies.paper_A.lowres.data": {"multi30k": ["fr-en", "vi-en"]}},
     "[studies.paper_A.lowres.data.multi30k[1]] dataset 'multi30k' has no language 'vi'"),
    ({"studies.baseline.data": {"multi31k": ["de-en"]}},
     "[studies.baseline.data.multi31k] corpus 'multi31k' is not configured under corpora; did you mean 'multi30k'?"),
    ({"corpora.multi30k.dataset": "multi30"},
     "[corpora.multi30k.dataset] unknown dataset 'multi30'; did you mean 'multi30k'?"),
    ({"corpora.multi30k.tests": ["test_2016_flikr"]},
     "[corpora.multi30k.tests[0]] dataset 'multi30k' has no split 'test_2016_flikr'; did you mean 'test_2016_flickr'?"),
    # training values that would fail only inside a job, or name the generated onmt.yaml
    ({"training.overrides.report_every": 0},
     "[training.overrides.report_every] report_every must be an integer >= 1, got 0"),
    ({"training.overrides.learning_rate": -1},
     "[training.overrides.learning_rate] learning_rate must be a number > 0, got -1"),
    ({"training.overrides.train_steps": -5},
     "[training.overrides.train_steps] train_steps must be an integer >= 1, got -5"),
    ({"training.overrides.dropout": "high"},
     "[training.overrides.dropout] dropout must be a number, got 'high'"),
    ({"training.overrides.dropout": 1.5},
     "[training.overrides.dropout] dropout must be a number in [0, 1), or a list of them, got 1.5"),
    # paper A's contrastive suites: a pair they have no items for, or one the study does not train
    ({"studies.paper_A.wsd_pair": "fr-en"},
     "[studies.paper_A.wsd_pair] MuCoW has no items for 'fr-en' (Table 6 and Figure 2); it scores de-en, en-cs, "
     "en-de, en-fi, en-lt, en-ru, fi-en, lt-en, ru-en"),
    ({"studies.paper_A.sva_pair": "de-en"},
     "[studies.paper_A.sva_pair] DistilLingEval has no items for 'de-en' (Figure 3); it scores en-de"),
    ({"studies.paper_A.data": {"multi30k": ["en-de"]}, "studies.paper_A.wsd_pair": "de-en"},
     "[studies.paper_A.wsd_pair] wsd_pair 'de-en' is not one of the pairs of studies.paper_A.data (en-de): Table 6 "
     "and Figure 2 would show the paper's numbers only; name one MuCoW scores: en-de"),
    # Table 6 reads MuCoW's TED+Tatoeba average: without either it failed after training
    ({"evaluation": {"mucow_domains": ["ted", "opensubs"]}},
     "[evaluation.mucow_domains] paper A Table 6 reports MuCoW's TED+Tatoeba average: mucow_domains must include "
     "ted and tatoeba (it has: ted, opensubs)"),
    ({"studies.paper_A.data": {"multi30k": ["en-cs"]}, "studies.paper_A.wsd_pair": "en-cs"},
     "[studies.paper_A.wsd_pair] MuCoW's en-cs items come from no ted corpus: Table 6 reports their TED+Tatoeba "
     "average; name a pair with both: de-en, en-de, en-ru, ru-en (studies.paper_A.data trains none: Table 6 "
     "then shows the paper's numbers only)"),
    ({"studies.paper_A.data": {"multi30k": ["en-cs", "en-de"]}, "studies.paper_A.wsd_pair": "en-cs"},
     "[studies.paper_A.wsd_pair] MuCoW's en-cs items come from no ted corpus: Table 6 reports their TED+Tatoeba "
     "average; name a pair with both: en-de"),
    # an atlas pattern that matches no model (model paths start with the corpus)
    ({"atlas": {"models": ["multi30k/de-en/*", "en-de/*"]}},
     "[atlas.models[1]] pattern 'en-de/*' matches no model this config trains: patterns are matched against whole "
     "model paths (corpus/pair/size/preset/variant/layers/heads/seedN), e.g. 'multi30k/en-de/300/tiny/default/"),
    # a syntax head kind on a source that is not English (the parses are English)
    ({"studies.baseline.data": {"multi30k": ["de-en"]}, "studies.baseline.heads": ["8L", "8DEA,*(8L)"]},
     "[studies.baseline.heads[1]] head spec '8DEA,*(8L)' has syntax heads, which read parses of the English "
     "source; pair de-en translates from 'de': train it on an en-XX pair"),
    # gold trees of the syntactic profile: English UD test files, or a split of the corpus
    ({"atlas": {"treebank": "ud-de_pud"}},
     "[atlas.treebank] treebank 'ud-de_pud': the profile needs English gold trees (the models' source) with a test "
     "file in the ud dataset: ud-en_ewt, ud-en_pud"),
    ({"atlas": {"treebank": "spacy-test_2016_flikr"}},
     "[atlas.treebank] treebank 'spacy-test_2016_flikr': corpus multi30k has no split 'test_2016_flikr'; splits: "
     "train, val, test_2016_flickr"),
    # OpenNMT-py's own types and choices, and ranges it relies on
    ({"training.overrides.optim": "adamm"},
     "[training.overrides.optim] optim must be one of sgd, adagrad, adadelta, adam, sparseadam, adafactor, "
     "fusedadam, adamw8bit, pagedadamw8bit, pagedadamw32bit; got 'adamm'; did you mean 'adam'?"),
    ({"studies.baseline.overrides": {"transformer_ff": -5}},
     "[studies.baseline.overrides.transformer_ff] transformer_ff must be an integer >= 1, got -5"),
    ({"studies.paper_A.lowres.overrides": {"batch_size": 0}},
     "[studies.paper_A.lowres.overrides.batch_size] batch_size must be an integer >= 1, got 0"),
    ({"training.overrides.label_smoothing": 1.5},
     "[training.overrides.label_smoothing] label_smoothing must be a number in [0, 1), got 1.5"),
    ({"training.overrides.keep_checkpoint": 0},
     "[training.overrides.keep_checkpoint] keep_checkpoint must be -1 (all) or an integer >= 1 (0 saves none), got 0"),
    ({"training.overrides.batch_type": "token"},
     "[training.overrides.batch_type] batch_type must be one of sents, tokens; got 'token'; did you mean 'tokens'?"),
    ({"studies.baseline.overrides": {"attention_dropout": [1.5]}},
     "[studies.baseline.overrides.attention_dropout] attention_dropout must be a number in [0, 1), or a list of "
     "them, got [1.5]"),
    # heads that do not divide the model width: named where the count, else the width, is set
    ({"studies.baseline.overrides": {"heads": 3}},
     "[studies.baseline.overrides.heads] heads 3 does not divide the model width (hidden_size 32)"),
    ({"training.overrides.hidden_size": 36, "training.overrides.word_vec_size": 36},
     "[training.overrides.hidden_size] heads 8 does not divide the model width (hidden_size 36)"),
    ({"studies.paper_A.lowres.overrides": {"heads": 0}},
     "[studies.paper_A.lowres.overrides.heads] heads must be an integer >= 1, got 0"),
    ({"training.overrides.encoder_type": "transformer"},
     "[studies.paper_A.heads[1]] head spec '7Ftoken+1L' needs encoder_type 'headlab'"),
])
def test_bad_values_name_their_key(change, expected):
    assert expected in _error(_config(**change))


def test_a_suite_pair_no_trained_pair_could_replace_is_no_error():
    """paper A trained on fr-en only: no pair of it has MuCoW items, so the schema's default
    wsd_pair (de-en) is no mistake of the config: Table 6 shows the paper's numbers only."""
    check(_config(**{"studies.paper_A.data": {"multi30k": ["fr-en"]}, "studies.paper_A.wsd_pair": "de-en",
                     "studies.paper_A.sva_pair": "en-de"}))


@pytest.mark.parametrize("changes, message", [
    # the shipped config's mini models keep 2 checkpoints
    ({"average_last": 3}, "averaging the last 3 checkpoints needs as many kept: keep_checkpoint is 2 "),
    # 250 steps, a checkpoint every 125: two saved, whatever is kept
    ({"average_last": 3, "keep_checkpoint": -1},
     "averaging the last 3 checkpoints needs as many saved: train_steps 250 with save_checkpoint_steps 125 saves 2"),
])
def test_paper_c_averages_no_more_checkpoints_than_a_training_keeps_and_saves(changes, message):
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    study = config["studies"]["paper_C"]
    changes = dict(changes)     # the parametrized dict is shared between runs
    if "keep_checkpoint" in changes:
        config["training"].setdefault("overrides", {})["keep_checkpoint"] = changes.pop("keep_checkpoint")
    study.update(changes)
    with pytest.raises(ConfigError, match=rf"^\[studies\.paper_C\.average_last\] {message}"):
        check(config)
    study.update(average_last=2)
    check(config)


def test_paper_b_figure_sentence_is_one_the_attention_export_writes():
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    config.setdefault("evaluation", {})["attention_sentences"] = 5
    config["studies"]["paper_B"]["figure_sentence"] = 5
    with pytest.raises(ConfigError, match=r"^\[studies\.paper_B\.figure_sentence\] sentence 5 \(0-based\) of the "
                                          r"attention export is read, but evaluation.attention_sentences exports 5: "
                                          r"raise it to 6 or more"):
        check(config)
    config["studies"]["paper_B"]["figure_sentence"] = 4
    check(config)


def test_paper_d_treebank_is_checked_when_the_dag_is_built():
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    config["studies"]["paper_D"]["treebank"] = "ud-en_gum"
    with pytest.raises(ConfigError, match=r"^\[studies\.paper_D\.treebank\] treebank 'ud-en_gum': the profile "
                                          r"needs English gold trees"):
        check(config)
    config["studies"]["paper_D"]["treebank"] = "spacy-test_2016_flickr"
    check(config)


def test_where_finds_list_items_mapping_keys_and_scalars():
    study = {"data": {"multi30k": ["de-en", "en-de"]}, "heads": ["8L", "1L"], "size": 300}
    assert where(study, "en-de", "s") == "s.data.multi30k[1]"
    assert where(study, "multi30k", "s") == "s.data.multi30k"
    assert where(study, "1L", "s") == "s.heads[1]"
    assert where(study, "300", "s") == "s.size"
    assert where(study, "nothing", "s") is None


def test_subsample_larger_than_a_mirrored_corpus_is_a_config_error(mirror, tmp_path):
    config = _config(**{"studies.paper_A.size": 29001, "results": str(tmp_path)})
    with pytest.raises(ConfigError, match=r"\[studies.paper_A.size\] a subsample of 29001 pairs is larger than "
                                          r"corpus 'multi30k', whose training split has 29000 lines"):
        check(config, mirror=str(mirror))
    check(_config(**{"studies.paper_A.size": 29000, "results": str(tmp_path)}), mirror=str(mirror))
    check(config)  # no mirror, nothing fetched: left to the prepare job


def test_fewer_steps_than_report_every_is_an_error_when_the_dag_is_built():
    # issue 24 item 7: every model trained, then the learning-curve figure found no step
    message = _error(_config(**{"training.overrides.train_steps": 1}))
    assert message.startswith("[training.overrides.train_steps] train_steps 1 is below report_every 2 (model ")
    assert message.endswith("set training.overrides.report_every to at most 1")
    overrides = {k: v for k, v in SMOKE["training"]["overrides"].items() if k != "train_steps"}
    message = _error(_config(**{"training.overrides": {**overrides, "report_every": 10 ** 9}}))
    assert message.startswith("[training.overrides.report_every] train_steps ")


def _schema_errors(config) -> list[str]:
    import jsonschema

    schema = yaml.safe_load((ROOT / "config/schema.yaml").read_text())
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
            for e in jsonschema.Draft202012Validator(schema).iter_errors(config)]


def test_seed_keys_in_the_schema():
    """Every study takes ``seeds``, the papers ``headline_seeds``; seed 0 (OpenNMT-py leaves it
    unseeded), a repeated seed and the old single ``seed`` are errors naming the key."""
    shipped = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    assert _schema_errors(shipped) == []
    assert all(shipped["studies"][s]["headline_seeds"] == [1, 2, 3] for s in ("paper_A", "paper_B", "paper_C", "paper_D"))
    for name in ("multi30k-gpu.yaml", "paper.yaml"):
        config = yaml.safe_load((ROOT / "config" / name).read_text())
        assert {s: study.get("seeds") for s, study in config["studies"].items()} == {
            s: [1, 2, 3] for s in config["studies"]}, name
    bad = {"studies.paper_B.seeds": [0], "studies.paper_C.headline_seeds": [2, 2], "studies.paper_D.seed": 1,
           "studies.baseline.headline_seeds": [1, 2]}
    for key, value in bad.items():
        config = copy.deepcopy(shipped)
        set_dotted(config, {key: value})
        errors = _schema_errors(config)
        study, field = key.rsplit(".", 1)
        assert len(errors) == 1 and errors[0].startswith(study) and field in errors[0], errors


@pytest.mark.parametrize("study, option", [("paper_B", "transformer_ff"), ("paper_C", "lpea_k")])
def test_a_global_override_of_an_option_a_study_varies_is_an_error(study, option):
    """A grid value equal to the preset's has no override in its model path, so a global
    override would silently replace it there alone (the CPU overlay's transformer_ff: 64
    trained paper B's 2048 candidates at 64)."""
    config = yaml.safe_load((ROOT / "config/multi30k-gpu.yaml").read_text())
    config["studies"] = {study: config["studies"][study]}
    config["training"]["overrides"][option] = 64
    assert _error(config).startswith(f"[training.overrides.{option}] training.overrides sets {option!r}, which study "
                                     f"{study} varies")


def test_a_grid_head_count_that_does_not_divide_the_width_names_the_grid():
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    config["studies"]["paper_B"]["grid"]["stage1"]["heads"] = [4, 6]
    with pytest.raises(ConfigError, match=r"^\[studies.paper_B.grid.stage1.heads\] heads 6 does not divide the "
                                          r"model width \(hidden_size 64\)"):
        check({**config, "studies": {"paper_B": config["studies"]["paper_B"]}})


def test_an_untrained_wsd_pair_leaves_table_6_the_papers_numbers():
    """paper A trains only en-cs, whose MuCoW items have no TED: no trained pair could stand
    in Table 6, so a wsd_pair it does not train is no error (Table 6 shows the paper's numbers)."""
    check(_config(**{"studies.paper_A.data": {"multi30k": ["en-cs"]}, "studies.paper_A.wsd_pair": "de-en"}))


def test_the_wsd_pairs_corpora_are_read_from_its_key_file_when_fetched(tmp_path):
    """A key file on disk (the mirror, or the fetched raw data) says which corpora the pair
    has, over the table in the code."""
    folder = tmp_path / "mucow" / "translation"
    folder.mkdir(parents=True)
    (folder / "de-en.key.txt").write_text("1\tted\tbank\tbank\tbench\n2\topensubs\tbank\tbank\tbench\n")
    assert "[studies.paper_A.wsd_pair] MuCoW's de-en items come from no tatoeba corpus" in _error_with(
        _config(), mirror=str(tmp_path))
    check(_config())      # the table: de-en has both


def _error_with(config, **kwargs) -> str:
    with pytest.raises(ConfigError) as err:
        check(config, **kwargs)
    return str(err.value)


def test_the_mucow_domain_enum_holds_the_corpora_of_the_key_files():
    """No MuCoW key file has europarl, jrc or news items: naming one scored nothing."""
    from headlab.eval.mucow import CORPORA

    schema = yaml.safe_load((ROOT / "config/schema.yaml").read_text())
    enum = schema["properties"]["evaluation"]["properties"]["mucow_domains"]["items"]["enum"]
    assert sorted(enum) == sorted(set().union(*CORPORA.values()))
    assert _schema_errors({**SMOKE, "evaluation": {"mucow_domains": ["ted", "tatoeba", "news"]}})


def test_atlas_patterns_of_models_a_search_names_later_are_not_judged_yet():
    """paper B's T-optimal and DHICM finals and paper D's pruned fine-tunes are models only
    once their search stages ran: a pattern that can match only them matches nothing when the
    DAG is first built, and is no error; one for another corpus/pair is."""
    from headlab.atlas.select import run_models
    from fnmatch import fnmatch

    shipped = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    later = ["multi30k/de-en/full/mini_paper_B/dropout=*", "multi30k/en-de/*/ft_*enc_head_mask=*"]
    known = list(run_models(shipped, None))
    assert not [path for path in known for pattern in later if fnmatch(path, pattern)]
    check({**shipped, "atlas": {"models": later}})
    message = _error({**shipped, "atlas": {"models": ["multi30k/fr-de/*"]}})
    assert message.startswith("[atlas.models[0]] pattern 'multi30k/fr-de/*' matches no model this config trains")


def test_each_study_checks_what_it_needs_of_the_rest_of_the_config(monkeypatch, tmp_path):
    """A study's ``check_in`` hook sees the whole config and the data roots (paper A's Table 6
    reads evaluation.mucow_domains and the fetched MuCoW key files): the generic check calls
    it for every configured study, and names no study's module itself."""
    from headlab.studies import STUDIES

    seen = {}

    def spy(name):
        def check_in(study, config, roots):
            seen[name] = (study is config["studies"][name], config is whole, roots)
        return check_in

    for name in SMOKE["studies"]:
        monkeypatch.setattr(STUDIES[name], "check_in", spy(name))
    whole = _config()
    check(whole, mirror=str(tmp_path))
    assert seen == {name: (True, True, (f"{SMOKE.get('results', 'results')}/data/raw", str(tmp_path)))
                    for name in SMOKE["studies"]}
    source = (ROOT / "src/headlab/workflow/config_check.py").read_text()
    assert "headlab.studies.paper_" not in source


def test_a_study_without_its_own_check_in_checks_nothing_more():
    from headlab.studies.base import Study

    assert Study.check_in(object(), {}, {"evaluation": {}}, ()) is None


@pytest.mark.parametrize("pattern, later", [
    ("*/seed1/ft_enc_head_mask=1*", True),          # paper D's pruned fine-tunes, mask unknown
    ("*enc_head_mask=*0.0*", True),
    ("*mini_paper_B/dropout=0.0+*label_smoothing=0.0*/seed2", True),   # paper B's finals at a choice
                                                    # its grids allow (0.1 is the preset's: not named)
    ("*/en-fr/*", False),                           # a leading wildcard judged too: no such pair
    ("*enc_head_mask=2*", False),                   # a mask holds 0, 1 and dots only
    ("*mini_paper_B/*dropout=0.3*", False),         # not a value of the grid
    ("*/seed9/*", False),
])
def test_a_pattern_for_a_later_model_is_judged_against_what_the_search_may_name(pattern, later):
    """The models a search names later, with what the search decides: paper B's finals at
    each choice its grids allow, paper D's pruned fine-tunes with any 0/1 head mask. A
    pattern that starts with a wildcard once passed whenever a search was configured."""
    from headlab.atlas.select import run_models
    from fnmatch import fnmatch

    shipped = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    assert not [path for path in run_models(shipped, None) if fnmatch(path, pattern)]
    config = {**shipped, "atlas": {"models": ["multi30k/*", pattern]}}
    if later:
        check(config)
    else:
        assert _error(config).startswith(f"[atlas.models[1]] pattern {pattern!r} matches no model this config trains")


@pytest.mark.parametrize("first, second, both", [
    ("a*", "*b", True), ("abc", "a?c", True), ("abc", "abd", False), ("*x*", "ab", False), ("*", "", True),
    ("a[bc]d", "a[!b]d", True), ("a[b]d", "a[!b]d", False), ("[a-c]", "b", True), ("[a-c]", "d", False),
    ("[", "[", True), ("*x", "y*", True), ("a*b*c", "a*c", True), ("ab*", "ba*", False),
])
def test_two_patterns_overlap_when_one_string_matches_both(first, second, both):
    from fnmatch import fnmatch

    from headlab.globs import HEAD_MASK, overlap

    assert overlap(first, second) == overlap(second, first) == both
    witness = {("a*", "*b"): "ab", ("a*b*c", "a*c"): "abc", ("*x", "y*"): "yx", ("a[bc]d", "a[!b]d"): "acd"}
    if (first, second) in witness:
        assert fnmatch(witness[first, second], first) and fnmatch(witness[first, second], second)
    # the head-mask placeholder reads 0, 1 and dots only
    assert overlap(f"m=x{HEAD_MASK}+s", "m=x1?0.*+s") and not overlap(f"m=x{HEAD_MASK}+s", "m=x*8*")
