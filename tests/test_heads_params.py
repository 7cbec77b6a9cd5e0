"""Parameter counts of paper C's variants (headlab params), by hand."""
import pytest

from headlab.engine.params import count, main


def extra(heads, **options):
    return count("base", "6+6", heads, src_vocab=1000, options=options) - count("base", "6+6", "8L", src_vocab=1000)


def test_paper_c_parameter_counts():
    dh = 64
    assert extra("8DEA,*(8L)") == 0 == extra("8RHEdea,*(8L)")
    lpea = 13 * dh + dh * dh + dh + dh                      # w_-6..6, W_P, b_P, U_P
    assert extra("8LPEA,*(8L)") == lpea == extra("8RHElpea,*(8L)")
    assert extra("2*(8RHElpea),*(8L)") == 2 * lpea
    assert extra("8LPEA,*(8L)", lpea_k=2) == 5 * dh + dh * dh + 2 * dh
    assert extra("8LPEA,*(8L)", lpea_k=2, lpea_outside="learned") == 6 * dh + dh * dh + 2 * dh
    assert extra("8RelPos") == 6 * 33 * dh                  # one (2k+1, d_h) table per layer, k=16
    assert extra("8RHErel,*(8L)", relpos_k=4) == 9 * dh
    assert extra("8Local") == 6 * (dh * dh + 2 * 8 * dh)     # W_p shared, U_p/U_d per head
    assert extra("8RHEloc,*(8L)") == dh * dh + 2 * 8 * dh


def test_params_cli_option(capsys):
    assert main(["--preset", "base", "--heads", "8LPEA,*(8L)", "--src-vocab", "1000", "--option", "lpea_k=0"]) == 0
    with_k0 = int(capsys.readouterr().out)
    assert with_k0 - count("base", "6+6", "8L", src_vocab=1000) == 64 + 64 * 64 + 128
    from headlab.errors import ConfigError
    with pytest.raises(ConfigError, match=r"\[option\]"):
        main(["--heads", "8LPEA", "--option", "lpea_k"])


@pytest.mark.parametrize("option, said", [
    # a misspelt name once left the count as it was, without a word
    ("lpea_kk=4", "--option: [lpea_kk] unknown OpenNMT-py train option 'lpea_kk'; did you mean 'lpea_k'?"),
    # a bad value: OpenNMT-py's usage (~250 lines) before its message, or torch's traceback
    ("lpea_k=x", "[lpea_k] bad value for -lpea_k: invalid int value: 'x'"),
    ("lpea_k=-3", "[lpea_k] bad value for -lpea_k: must be >= 0, got -3"),
    ("transformer_ff=-5", "--option: [transformer_ff] transformer_ff must be an integer >= 1, got '-5'"),
])
def test_params_cli_option_names_and_values_are_checked(option, said):
    from headlab.errors import ConfigError
    with pytest.raises(ConfigError) as caught:
        main(["--preset", "mini", "--heads", "8LPEA", "--option", option])
    assert str(caught.value) == said
