"""Parser bracketing F1 (paper C Table A3): EVALB-style normalisation and PYEVALB scores on
hand-built trees, the PTB sample reader."""
import re
import zipfile

import pytest
from nltk import Tree

from headlab.syntax import evalb

GOLD = "( (S (NP-SBJ-1 (DT the) (NN cat)) (VP (VBD sat) (NP (-NONE- *-1))) (. .)) )"


def test_read_gold_from_zip(tmp_path):
    archive = tmp_path / "treebank.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("treebank/combined/wsj_0001.mrg", GOLD + "\n" + GOLD.replace("cat", "dog"))
        z.writestr("treebank/combined/README", "not a tree")
    trees = evalb.read_gold(archive)
    assert [t.leaves() for t in trees] == [["the", "cat", "sat", "*-1", "."], ["the", "dog", "sat", "*-1", "."]]
    assert evalb.read_gold(archive, limit=1)[0].label() == "S"


def test_traces_function_tags_and_punctuation_are_normalised():
    gold = evalb.strip_traces(Tree.fromstring(GOLD, remove_empty_top_bracketing=True))
    assert str(gold) == "(S (NP (DT the) (NN cat)) (VP (VBD sat)) (. .))"
    test = Tree.fromstring("(S (DT the) (NN cat) (PRT (VBD sat)) (. .))")
    g, t = evalb.normalise(gold, test)
    assert g == "(S (NP (DT w0) (NN w1)) (VP (VBD w2)))"
    assert t == "(S (DT w0) (NN w1) (ADVP (VBD w2)))"          # PRT == ADVP, '.' deleted


def test_scores_against_hand_computed_counts():
    pytest.importorskip("PYEVALB")
    gold = [evalb.strip_traces(Tree.fromstring(GOLD, remove_empty_top_bracketing=True))]
    test = [Tree.fromstring("(S (DT the) (NN cat) (VP (VBD sat)) (. .))")]
    result = evalb.score(gold, test)
    # gold brackets S, NP, VP; test S, VP: 2 matched -> P 100, R 66.67, F1 80
    assert (result["matched"], result["gold_brackets"], result["test_brackets"]) == (2, 3, 2)
    assert result["f1"] == pytest.approx(80.0)
    assert result["recall"] == pytest.approx(200 / 3)


def test_word_count_mismatch_is_an_error():
    pytest.importorskip("PYEVALB")
    from headlab.errors import DataError
    with pytest.raises(DataError, match="sentence 1"):
        evalb.score([Tree.fromstring("(S (NN a) (NN b))")], [Tree.fromstring("(S (NN a))")])


@pytest.mark.parametrize("content, says", [
    (GOLD + "\n" + GOLD.replace("(. .)) )", "(. .)"), "wsj_0001.mrg: tree 2 is not a bracketed tree "
                                                      r"\(Tree.read\(\): expected '\)' but got 'end-of-string'\)$"),
    ("parser,f1\nx,1\n", r"wsj_0001.mrg: tree 1 is not a bracketed tree \(Tree.read\(\): expected '\(' but got"),
    (b"\xff" + GOLD.encode(), r"wsj_0001.mrg: invalid UTF-8 at byte 0: not a bracketed treebank$"),
])
def test_a_malformed_treebank_is_one_line_naming_the_member_and_tree(content, says, tmp_path, capsys):
    """nltk's ValueError spans lines and names neither file nor tree; the command says both
    in one line and writes nothing."""
    from headlab.cli import main
    archive = tmp_path / "treebank.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("treebank/combined/wsj_0001.mrg", content)
    out = tmp_path / "out" / "f1.csv"
    assert main(["parser-eval", "--treebank", str(archive), "--out", str(out)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"headlab parser-eval: {archive}:treebank/combined/"), err
    assert re.search(says, err[0]), err
    assert not out.parent.exists()


def test_a_negative_limit_is_refused_by_its_option(tmp_path, capsys):
    # it read one tree: `limit and len(trees) >= limit` holds for -1 at once
    from headlab.cli import main
    with pytest.raises(SystemExit) as caught:
        main(["parser-eval", "--treebank", str(tmp_path / "treebank.zip"), "--limit", "-1",
              "--out", str(tmp_path / "f1.csv")])
    assert caught.value.code == 2 and "argument --limit: -1: must be at least 0" in capsys.readouterr().err
