"""Featured source files (paper C): word-to-piece alignment, the parse check line by line,
numeric feature vocabularies, which models need them."""
import json

import pytest
from nltk import Tree

from headlab.errors import DataError
from headlab.syntax import features, parse

SEP = "\uffe8"


def test_piece_word_ids_and_join():
    pieces = ["Rel@@", "ations", "between", "Ob@@", "am@@", "a", "."]
    assert features.piece_word_ids(pieces) == [0, 0, 1, 2, 2, 2, 3]
    assert features.join_pieces(pieces) == ["Relations", "between", "Obama", "."]
    with pytest.raises(DataError, match="ends"):
        features.join_pieces(["a", "b@@"])
    with pytest.raises(DataError, match="ends"):
        features.piece_word_ids(["a", "b@@"])


def test_featurize_line_copies_word_values_onto_pieces():
    facts = {"dep_head": [1, 1, 1], "lp_lo": [0, 0, 2]}
    line = features.featurize_line(["a@@", "b", "c", "d"], facts, ("dep_head", "lp_lo"))
    assert line == f"a@@{SEP}1{SEP}0 b{SEP}1{SEP}0 c{SEP}1{SEP}0 d{SEP}1{SEP}2"
    with pytest.raises(DataError, match="outside"):
        features.featurize_line(["a"], {"dep_head": [features.VALUES]}, ("dep_head",))
    with pytest.raises(DataError, match="separator"):
        features.featurize_line([f"a{SEP}b"], {"dep_head": [0]}, ("dep_head",))


def _cache(path, sentences):
    """A parse cache of flat trees: (X (NN w) ...), heads all -> 0."""
    with open(path, "w") as handle:
        for n, words in enumerate(sentences, 1):
            tree = Tree("X", [Tree("NN", [w]) for w in words])
            p = parse.Parse(words, ["NN"] * len(words), [0] * len(words), ["dep"] * len(words), tree)
            handle.write(json.dumps(parse.record(n, p, "depconv")) + "\n")


def test_featurize_file_against_trees_word_facts(tmp_path):
    from headlab.syntax.trees import FEATURES, word_facts
    _cache(tmp_path / "p.jsonl", [["the", "cat", "sat"], ["hello"]])
    bpe = tmp_path / "test.src"
    bpe.write_text("The c@@ at sat\nhel@@ lo\n")             # truecased side: "The"
    out = tmp_path / "feat.src"
    assert features.featurize_file(bpe, tmp_path / "p.jsonl", out, parser="depconv") == 2
    first = [tok.split(SEP) for tok in out.read_text().splitlines()[0].split()]
    assert [t[0] for t in first] == ["The", "c@@", "at", "sat"]
    facts = word_facts(Tree("X", [Tree("NN", [w]) for w in ["the", "cat", "sat"]]), [0, 0, 0])
    # the word-boundary column first (the piece's own: "c@@" continues), then the word's facts
    for piece, word, continued in zip(first, [0, 1, 1, 2], [0, 1, 0, 0]):
        assert [int(v) for v in piece[1:]] == [continued] + [facts[name][word] for name in FEATURES]
    assert len(first[0]) == 2 + len(FEATURES)


@pytest.mark.parametrize("text, line, message", [
    # another sentence on line 2
    ("the cat sat\nhel@@ lo there\n", 2, "stale or shuffled parse: it parsed 'hello', the text line is 'hello there'"),
    # shuffled lines: the first line already differs
    ("hel@@ lo\nthe cat sat\n", 1, "stale or shuffled parse: it parsed 'the cat sat', the text line is 'hello'"),
    ("the cat sat\n", 2, "the parse file has more lines than the text"),
    ("the cat sat\nhel@@ lo\nagain\n", 3, "the parse file has 2 lines, the text more"),
])
def test_mismatches_name_file_and_line_and_write_nothing(tmp_path, text, line, message):
    _cache(tmp_path / "p.jsonl", [["the", "cat", "sat"], ["hello"]])
    bpe = tmp_path / "test.src"
    bpe.write_text(text)
    out = tmp_path / "feat.src"
    with pytest.raises(DataError) as err:
        features.featurize_file(bpe, tmp_path / "p.jsonl", out)
    assert str(err.value) == f"{tmp_path / 'p.jsonl'}:{line}: {message}"     # the exact file:line
    assert (err.value.path, err.value.line) == (str(tmp_path / "p.jsonl"), line)
    assert not out.exists()


def test_feature_vocabs_numeric_order(tmp_path):
    paths = features.write_feature_vocabs(tmp_path / "vocab.txt", count=2, values=5)
    assert paths == [f"{tmp_path}/vocab.txt_feat0", f"{tmp_path}/vocab.txt_feat1"]
    assert open(paths[1]).read() == "0\n1\n2\n3\n4\n"


def test_feature_vocab_ids_are_value_plus_4(tmp_path):
    pyonmttok = pytest.importorskip("pyonmttok")
    from onmt.constants import DefaultTokens
    (path,) = features.write_feature_vocabs(tmp_path / "v", count=1, values=12)
    tokens = open(path).read().split()
    specials = [DefaultTokens.UNK, DefaultTokens.PAD, DefaultTokens.BOS, DefaultTokens.EOS]
    vocab = pyonmttok.build_vocab_from_tokens(tokens, maximum_size=0, minimum_frequency=1,
                                              special_tokens=specials)
    assert [vocab[str(v)] for v in (0, 7, 11)] == [4, 11, 15]


def test_needs_syntax_only_for_syntax_kinds(monkeypatch):
    from headlab.heads import spec
    from headlab.heads.kinds import LearnedHeads

    assert not spec.needs_syntax("8L")
    assert not spec.needs_syntax("7Ftoken+1L@dec=*(4L).4L~dhicm")

    class SynHeads(LearnedHeads):
        needs_syntax = True

    monkeypatch.setitem(spec.HEAD_KINDS, "TestSyn", SynHeads)
    assert spec.needs_syntax("2*(4TestSyn+4L).*(8L)")


def _config(heads, **overrides):
    from headlab.engine.config import train_config
    return train_config(preset="tiny", layers="2+1", heads=heads, train_src="t.src", train_tgt="t.tgt",
                        valid_src="v.src", valid_tgt="v.tgt", vocab="vocab.txt", save_dir="m", overrides=overrides)


def test_train_config_switches_features_on_for_word_and_syntax_models_only():
    from headlab.syntax.trees import FEATURES
    syntax = _config("8DEA.*8L")
    # featured files: the word-boundary column and the parse's; the transform rewrites the first from the text
    assert syntax["n_src_feats"] == 1 + len(FEATURES) and syntax["transforms"] == ["inferfeats", "headlab_words"]
    assert "src_feats_defaults" not in syntax
    words = _config("7Fword+1L", transforms=["filtertoolong"])
    # stock BPE files: one column, a placeholder the transform overwrites
    assert (words["n_src_feats"], words["src_feats_defaults"]) == (1, "_")
    assert words["transforms"] == ["filtertoolong", "inferfeats", "headlab_words"]
    for heads in ("8L", "7Ftoken+1L"):
        plain = _config(heads)
        assert "n_src_feats" not in plain and "inferfeats" not in (plain.get("transforms") or [])
    assert _config("8LPEA.*8L", syntax_parser="benepar")["syntax_parser"] == "benepar"


def test_syntax_parser_on_a_model_without_syntax_heads_is_an_error():
    from headlab.errors import ConfigError
    with pytest.raises(ConfigError, match=r"\[syntax_parser\]"):
        _config("8L", syntax_parser="benepar")


@pytest.mark.parametrize("values", ["0", "-3", str(features.VALUES - 1)])
def test_too_few_feature_values_are_refused_before_any_vocabulary_is_written(values, tmp_path, capsys):
    """Fewer values than featurize writes left the larger word indices unknown, silently
    (0 or below wrote empty vocabularies)."""
    from headlab.cli import main
    with pytest.raises(SystemExit) as caught:
        main(["feature-vocab", "--src-vocab", str(tmp_path / "out" / "vocab.txt"), "--values", values])
    assert caught.value.code == 2
    assert f"argument --values: {values}: must be at least {features.VALUES}" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    assert main(["feature-vocab", "--src-vocab", str(tmp_path / "out" / "vocab.txt")]) == 0
    assert (tmp_path / "out" / "vocab.txt_feat0").read_text().splitlines()[-1] == str(features.VALUES - 1)
