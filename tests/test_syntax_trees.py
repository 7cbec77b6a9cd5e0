"""Per-word facts of constituency + dependency trees (paper C Rule 1, Fig. 3)."""
import pytest
from nltk import Tree

from headlab.errors import DataError
from headlab.syntax.trees import FEATURES, local_phrase_related, word_facts

#: paper C Fig. 3's sentence; held is the root, "with Sharon" attaches to talk
FIG3 = "(S (NP (NNP Bush)) (VP (VBD held) (NP (DT a) (NN talk)) (PP (IN with) (NP (NNP Sharon)))))"
FIG3_HEADS = [1, 1, 3, 1, 3, 4]


def test_fig3_facts_by_hand():
    facts = word_facts(Tree.fromstring(FIG3), FIG3_HEADS)
    assert tuple(facts) == FEATURES
    assert facts["dep_head"] == FIG3_HEADS
    # Bush: NP has one word -> S (0..5); held: VP (1..5); a, talk: NP (2..3);
    # with, Sharon: PP (4..5) (Sharon's own NP has one word)
    assert facts["lp_lo"] == [0, 1, 2, 2, 4, 4]
    assert facts["lp_hi"] == [5, 5, 3, 3, 5, 5]
    assert facts["lp_depth"] == [0, 1, 2, 2, 2, 2]
    # leaf depths: held on layer 3, talk on layer 4 ("Layer3 - Layer4 = -1")
    assert facts["word_depth"] == [3, 3, 4, 4, 4, 5]


def test_fig3_rule2_symmetry():
    related = local_phrase_related(word_facts(Tree.fromstring(FIG3), FIG3_HEADS))
    assert related[1][3] and related[3][1]            # held, talk: same local phrase
    assert not related[3][5] and not related[5][3]    # talk, Sharon: RP = inf in the text
    # Rule 2: Bush's local phrase is the whole sentence, so every word sees Bush
    assert all(related[i][0] for i in range(6))
    assert all(related[i][i] for i in range(6))


def test_one_word_and_unary_chains():
    facts = word_facts(Tree.fromstring("(S (NP (NN hello)))"), [0])
    assert facts == {"dep_head": [0], "lp_lo": [0], "lp_hi": [0], "word_depth": [3], "lp_depth": [0]}
    # a unary chain above a word is skipped until a node with two words
    facts = word_facts(Tree.fromstring("(S (X (Y (Z a))) (W b))"), [1, 1])
    assert facts["lp_lo"] == [0, 0] and facts["lp_hi"] == [1, 1] and facts["lp_depth"] == [0, 0]
    assert facts["word_depth"] == [4, 2]


def test_bad_input():
    with pytest.raises(DataError, match="5 leaves but the dependency parse has 6"):
        word_facts(Tree.fromstring("(S (A a) (B b) (C c) (D d) (E e))"), FIG3_HEADS)
    with pytest.raises(DataError, match="word 1: dependency head 7"):
        word_facts(Tree.fromstring("(S (A a) (B b))"), [0, 7])
    with pytest.raises(DataError, match="nltk.Tree"):
        word_facts("(S (A a))", [0])
