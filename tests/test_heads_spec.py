"""Head spec grammar and registry."""
import pytest

from headlab.errors import ConfigError
from headlab.heads import HEAD_KINDS, parse_spec, register_head_kind
from headlab.heads.base import HeadGroup
from headlab.heads.spec import LayerSpec, Term


@pytest.mark.parametrize("spec,terms", [
    ("8L", [(8, "L")]),
    ("7Ftoken+1L", [(7, "Ftoken"), (1, "L")]),
    ("7Fword+1L", [(7, "Fword"), (1, "L")]),
    ("1L", [(1, "L")]),
    ("1Lwide", [(1, "Lwide")]),
    ("8Ftoken", [(8, "Ftoken")]),
    ("8Fword", [(8, "Fword")]),
    (" 7Ftoken + L ", [(7, "Ftoken"), (1, "L")]),
])
def test_paper_a_names(spec, terms):
    layers = parse_spec(spec, 6)
    assert len(layers) == 6
    assert all(layer == LayerSpec(tuple(Term(c, k) for c, k in terms)) for layer in layers)


def test_per_layer_forms():
    layers = parse_spec("8L,8L,4*(7Ftoken+1L)", 6)
    assert [str(layer) for layer in layers] == ["8L", "8L"] + ["7Ftoken+1L"] * 4
    assert [str(layer) for layer in parse_spec("6*(7Ftoken+1L|gate)", 6)] == ["7Ftoken+1L|gate"] * 6
    assert parse_spec("2*8L,3Ftoken+5L", 3)[2].num_heads == 8


@pytest.mark.parametrize("spec,message", [
    ("7Ftokn+1L", r"term '7Ftokn'.*did you mean 'Ftoken'"),
    ("8l", r"term '8l'.*did you mean 'L'"),
    ("9Ftoken", r"term '9Ftoken'.*8 fixed patterns"),
    ("7F+1L", r"term '7F'.*unknown head kind 'F'"),
    ("7Ftoken+", r"term ''.*expected \[COUNT\]KIND"),
    ("0L", r"term '0L'.*at least 1"),
    ("8L|gat", r"term '\|gat'.*did you mean 'gate'"),
    ("8L,8L", r"describes 2 layers but the encoder self-attention has 6"),
    ("2*(8L", r"unbalanced"),
    ("", r"empty head spec"),
])
def test_bad_specs_name_spec_and_term(spec, message):
    with pytest.raises(ConfigError, match=message) as err:
        parse_spec(spec, 6)
    assert "enc_heads" in str(err.value)


def test_register_new_kind():
    @register_head_kind("Ttest")
    class TestHeads(HeadGroup):
        pass
    try:
        assert parse_spec("2Ttest+6L")[0].terms[0] == Term(2, "Ttest")
        with pytest.raises(ValueError, match="already registered"):
            register_head_kind("Ttest")(type("Other", (HeadGroup,), {}))
    finally:
        del HEAD_KINDS["Ttest"]


def test_path_forms_of_specs_parse_alike():
    """Model paths write specs without parentheses, with '~' for '|' and '.' for ','
    (headlab.naming.heads_name): the grammar reads them as the original."""
    from headlab.naming import heads_name, parse_heads_name
    spec = "*(4L),4L|dhicm"
    name = heads_name(spec, spec, "2*(4L),4L|gate")
    assert "," not in name and "(" not in name and "|" not in name
    back = parse_heads_name(name)
    assert parse_spec(back["enc"], 3) == parse_spec(spec, 3)
    assert parse_spec(back["cross"], 3, site="cross") == parse_spec("2*(4L),4L|gate", 3, site="cross")


def test_every_declared_kind_and_mixer_is_registered_by_its_module_with_its_declared_facts():
    """headlab.heads.builtin answers the spec checks without importing the modules; each
    module must then register the name, and its class carry those facts."""
    from headlab.heads import builtin
    from headlab.heads.spec import HEAD_MIXERS
    for registry, declared in ((HEAD_KINDS, builtin.KINDS), (HEAD_MIXERS, builtin.MIXERS)):
        assert set(declared) <= set(registry)
        for name, facts in declared.items():
            cls = registry[name]
            assert cls.__module__ == facts.module and registry.facts(name) is facts, name
            assert {key: getattr(cls, key) for key in builtin.Declared.ATTRIBUTES} == {
                key: getattr(facts, key) for key in builtin.Declared.ATTRIBUTES}, name
    from headlab.heads.patterns import PATTERNS
    assert builtin.KINDS["Ftoken"].most_heads == len(PATTERNS) == 8


def test_a_declared_kind_takes_its_facts_from_the_declaration_only():
    from headlab.heads.builtin import Declared
    from headlab.heads.spec import HEAD_KINDS as registry
    registry.declared["Tdecl"] = Declared(__name__, sites=("enc",), most_heads=2, most_heads_why="two at most")
    try:
        # before any class: the spec check reads the declaration
        assert parse_spec("2Tdecl")[0].terms == (Term(2, "Tdecl"),)
        with pytest.raises(ConfigError, match=r"\[enc_heads\].*'3Tdecl': two at most, not 3"):
            parse_spec("3Tdecl")
        with pytest.raises(ConfigError, match=r"\[dec_heads\].*cannot be used in decoder self"):
            parse_spec("1Tdecl", site="dec")
        with pytest.raises(LookupError, match="does not register the head kind 'Tdecl'"):
            registry["Tdecl"]
        # a class body that says a declared fact itself is refused, so is another module's
        with pytest.raises(ValueError, match="sites come from its declaration"):
            register_head_kind("Tdecl")(type("Own", (HeadGroup,), {"sites": ("enc",), "__module__": __name__}))
        with pytest.raises(ValueError, match="is declared in test_heads_spec"):
            register_head_kind("Tdecl")(type("Elsewhere", (HeadGroup,), {"__module__": "somewhere"}))
        cls = register_head_kind("Tdecl")(type("Declared", (HeadGroup,), {"__module__": __name__}))
        assert registry["Tdecl"] is cls and cls.sites == ("enc",) and cls.needs_words is False
    finally:
        del registry["Tdecl"]
    assert "Tdecl" not in registry


def test_kinds_used_names_every_kind_and_mixer_at_every_site():
    """``kinds_used`` of a model path's heads: the encoder's, and the decoder's and cross
    sites' (stock 8L where the path names none), terms and mixers alike, in every group."""
    from headlab.heads.spec import kinds_used

    assert kinds_used("7Ftoken+1L") == {"Ftoken", "L"}
    assert kinds_used("*(8L),8L|dhicm") == {"L", "dhicm"}
    assert kinds_used("8DEA,*(8L)") == {"DEA", "L"}
    assert kinds_used("7Fword+1L~gate@dec=4L|dhicm@cross=2L+2Lwide") == {"Fword", "L", "gate", "dhicm", "Lwide"}
    with pytest.raises(ConfigError, match="Fwrod"):
        kinds_used("7Fwrod+1L")
    # a site's spec is checked as that site's: the fixed patterns read the whole source
    with pytest.raises(ConfigError, match="cannot be used in decoder cross-attention"):
        kinds_used("8L@cross=2Fword+2L")
