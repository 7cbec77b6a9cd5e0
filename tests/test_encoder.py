"""The headlab encoder inside real OpenNMT-py models: parameters, stock equivalence,
ablation, word boundaries, gates, options."""
import pytest
import torch

from headlab.errors import ConfigError
from headlab.engine.model import build_model, count_parameters, model_opt, toy_vocabs
from headlab.engine.params import main as params_main

TINY = dict(hidden_size=64, heads=8, transformer_ff=128, enc_layers=2, dec_layers=1,
            dropout=0.0, attention_dropout=0.0)
FIG1 = ["a", "master", "of", "science", "fic@@", "tion", "."]


def base_params(encoder_type="headlab", heads="8L"):
    opt = model_opt(encoder_type=encoder_type, enc_heads=heads)    # base: 6+6, d=512, 8 heads
    return count_parameters(build_model(opt, toy_vocabs(1000), device="meta"))


def test_base_parameter_counts_paper_a_table5():
    p8l = base_params()
    assert p8l == base_params(encoder_type="transformer")       # same count as stock
    assert p8l - base_params(heads="7Ftoken+1L") == 6 * 2 * (512 * 448 + 448)
    assert p8l - base_params(heads="8Ftoken") == 6 * 2 * (512 * 512 + 512)
    assert base_params(heads="7Fword+1L") == base_params(heads="7Ftoken+1L")
    # 1L: q, k, v of width 64 and a 64 -> 512 output projection, instead of 4 x (512 x 512)
    one_l = 3 * (512 * 64 + 64) + 64 * 512 + 512
    assert p8l - base_params(heads="1L") == 6 * (4 * (512 * 512 + 512) - one_l)
    assert base_params(heads="1Lwide") == p8l


def test_params_cli(capsys):
    assert params_main(["--preset", "base", "--layers", "6+6", "--heads", "7Ftoken+1L",
                        "--src-vocab", "31000"]) == 0
    # paper A Table 5: 88.9M for EN-DE
    assert round(int(capsys.readouterr().out) / 1e6, 1) == 89.0


def test_fixed_heads_have_no_query_key_projections():
    model = build_model(model_opt(enc_heads="7Ftoken+1L", **TINY), toy_vocabs(30), device="meta")
    names = [n for n, _ in model.encoder.named_parameters() if "transformer.0.self_attn" in n]
    assert sorted(names) == sorted([
        "transformer.0.self_attn.heads.1.linear_query.weight",
        "transformer.0.self_attn.heads.1.linear_query.bias",
        "transformer.0.self_attn.heads.1.linear_keys.weight",
        "transformer.0.self_attn.heads.1.linear_keys.bias",
        "transformer.0.self_attn.linear_values.weight",
        "transformer.0.self_attn.linear_values.bias",
        "transformer.0.self_attn.final_linear.weight",
        "transformer.0.self_attn.final_linear.bias"])
    assert model.encoder.transformer[0].self_attn.heads[1].linear_query.weight.shape == (8, 64)


def _batch(vocab_size, B=4, N=9, seed=0):
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([N, 1, 2, 6])[:B]
    src = torch.randint(4, vocab_size, (B, N, 1), generator=gen)
    src[torch.arange(N).unsqueeze(0) >= lengths.unsqueeze(1)] = 1      # <blank>
    return src, lengths


def test_8l_equals_stock_transformer_encoder():
    torch.manual_seed(0)
    vocabs = toy_vocabs(40)
    stock = build_model(model_opt(encoder_type="transformer", **TINY), vocabs).encoder.eval()
    ours = build_model(model_opt(enc_heads="8L", **TINY), vocabs).encoder.eval()
    missing = ours.load_state_dict(ours.load_stock_state_dict(stock.state_dict()), strict=True)
    assert not missing.missing_keys and not missing.unexpected_keys
    src, lengths = _batch(40)
    with torch.no_grad():
        expected, _, _ = stock(src, lengths)
        got, state, out_len = ours(src, lengths)
    assert state is None and out_len is lengths
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_checkpoint_state_dict_has_no_buffers():
    model = build_model(model_opt(enc_heads="7Fword+1L", **TINY), toy_vocabs(30, src_tokens=FIG1, feats=1))
    # OpenNMT-py's strict loader requires every buffer, even non-persistent ones, in the file
    saved = model.encoder.state_dict().keys()
    assert [name for name, _ in model.encoder.named_buffers() if name not in saved] == []
    keys = model.encoder.state_dict().keys()
    assert not [k for k in keys if "head_scale" in k]
    # word-based heads read the word-boundary column (from the text), not the vocabulary
    assert model.encoder.columns == ("continues",)
    assert build_model(model_opt(enc_heads="7Ftoken+1L", **TINY), toy_vocabs(30)).encoder.columns == ()


def test_disable_heads_changes_output_and_is_reversible():
    torch.manual_seed(0)
    enc = build_model(model_opt(enc_heads="7Ftoken+1L", **TINY), toy_vocabs(40)).encoder.eval()
    src, lengths = _batch(40)
    with torch.no_grad():
        full = enc(src, lengths)[0]
        enc.disable_heads([2])
        assert enc.disabled_heads == [2]
        ablated = enc(src, lengths)[0]
        enc.enable_heads()
        again = enc(src, lengths)[0]
    assert (ablated - full).abs().max() > 1e-3
    torch.testing.assert_close(again, full)
    with pytest.raises(ConfigError, match="heads 1..8"):
        enc.disable_heads([9])


def test_disabling_a_head_equals_zeroing_its_value_columns():
    # head k's output is its slice of the values after the pattern: zeroing the value
    # projection rows of head 2 must give the same encoder output as disable_heads([2])
    torch.manual_seed(1)
    enc = build_model(model_opt(enc_heads="7Ftoken+1L", **TINY), toy_vocabs(40)).encoder.eval()
    src, lengths = _batch(40)
    with torch.no_grad():
        enc.disable_heads([2])
        ablated = enc(src, lengths)[0]
        enc.enable_heads()
        for layer in enc.transformer:
            layer.self_attn.linear_values.weight[8:16] = 0
            layer.self_attn.linear_values.bias[8:16] = 0
        zeroed = enc(src, lengths)[0]
    torch.testing.assert_close(ablated, zeroed)


def _word_model(vocabs):
    return build_model(model_opt(enc_heads="7Fword+1L", **TINY), vocabs).encoder.eval()


@pytest.mark.parametrize("in_vocab", [True, False])
def test_word_heads_use_text_boundaries(in_vocab):
    from headlab.engine.words import source_ids
    # issue 24: with "fic@@" out of the vocabulary (<unk>, no "@@"), words were numbered from
    # the vocabulary and "tion" became a word of its own; they come from the text now
    tokens = FIG1 if in_vocab else [t for t in FIG1 if t != "fic@@"]
    vocabs = toy_vocabs(30, src_tokens=tokens, feats=1)
    enc = _word_model(vocabs)
    src, lengths = source_ids(vocabs, [FIG1], enc.columns)
    assert (src[0, :, 0] == vocabs["src"]["<unk>"]).tolist() == [False] * 4 + [not in_vocab] + [False] * 2
    assert src[0, :, 1].tolist() == [4, 4, 4, 4, 5, 4, 4]                  # "fic@@" continues (value 1)
    assert enc.context(src, lengths).word_ids[0].tolist() == [0, 1, 2, 3, 4, 4, 5]
    maps = enc.attention(src, lengths)
    assert len(maps) == 2 and maps[0].shape == (1, 8, 7, 7)
    previous = maps[1][0, 1]                                  # head 2, 'previous word'
    assert previous[6].tolist() == pytest.approx([0, 0, 0, 0, 0.5, 0.5, 0])
    assert previous[5].tolist() == pytest.approx([0, 0, 0, 1, 0, 0, 0])
    torch.testing.assert_close(maps[0][0, 7].sum(-1), torch.ones(7))   # learned head rows


def test_word_heads_without_the_word_column_fail_clearly():
    vocabs = toy_vocabs(30, src_tokens=FIG1, feats=1)
    enc = _word_model(vocabs)
    ids = torch.tensor([vocabs["src"](FIG1)]).unsqueeze(-1)
    with pytest.raises(ConfigError, match=r"\[enc_heads\] .*need 1 source feature columns \(continues\).*"
                                          r"-n_src_feats 1 -transforms inferfeats headlab_words -src_feats_defaults _"):
        enc(ids, torch.tensor([7]))
    # the placeholder of stock files, left unfilled (the transform was not listed)
    unfilled = torch.cat([ids, torch.full_like(ids, vocabs["src_feats"][0]["_"])], 2)
    from headlab.errors import DataError
    with pytest.raises(DataError, match=r"\[transforms\] the word-boundary column .* not filled from the text"):
        enc(unfilled, torch.tensor([7]))


def test_gates_compose_with_fixed_heads():
    torch.manual_seed(0)
    enc = build_model(model_opt(enc_heads="7Ftoken+1L|gate", **TINY), toy_vocabs(40)).encoder
    src, lengths = _batch(40)
    assert enc.transformer[0].self_attn.mixers[0].log_alpha.abs().max() <= 0.1   # OpenNMT's init
    enc.reset_head_parameters()                                                  # gates' own
    assert enc.transformer[1].self_attn.mixers[0].log_alpha.tolist() == [3.0] * 8
    enc.train()
    out = enc(src, lengths)[0]
    loss = out.pow(2).mean() + 0.01 * enc.aux_loss()
    loss.backward()
    gate = enc.transformer[0].self_attn.mixers[0]
    assert gate.log_alpha.grad is not None and gate.log_alpha.grad.abs().sum() > 0
    # expected L0 with log_alpha = 3: 8 heads x 2 layers x sigmoid(3 - 0.33 log(1/11))
    import math
    expected = 16 / (1 + math.exp(-(3 - 0.33 * math.log(0.1 / 1.1))))
    assert enc.aux_loss().item() == pytest.approx(expected, rel=1e-5)
    enc.eval()
    assert gate.gates().tolist() == [1.0] * 8
    with torch.no_grad():
        for layer in enc.transformer:                      # gate closed == head disabled
            layer.self_attn.mixers[0].log_alpha[1] = -10.0
        closed = enc(src, lengths)[0]
        for layer in enc.transformer:
            layer.self_attn.mixers[0].log_alpha[1] = 3.0
        enc.disable_heads([2])
        disabled = enc(src, lengths)[0]
    torch.testing.assert_close(closed, disabled)


def test_aux_loss_is_zero_without_mixers():
    enc = build_model(model_opt(enc_heads="8L", **TINY), toy_vocabs(30)).encoder
    assert enc.aux_loss().item() == 0.0


@pytest.mark.parametrize("key,value", [("max_relative_positions", 20), ("max_relative_positions", -1),
                                       ("num_kv", 2), ("relative_positions_buckets", 32)])
def test_unsupported_options_raise(key, value):
    opt = model_opt(enc_heads="8L", **TINY)
    setattr(opt, key, value)          # (OpenNMT's own validation would also need -position_encoding off)
    with pytest.raises(ConfigError, match=key):
        build_model(opt, toy_vocabs(30), device="meta")


def test_per_layer_spec_and_bad_spec():
    enc = build_model(model_opt(enc_heads="8L,7Ftoken+1L", **TINY), toy_vocabs(30), device="meta").encoder
    assert [layer.self_attn.num_heads for layer in enc.transformer] == [8, 8]
    assert len(enc.transformer[1].self_attn.heads) == 2
    with pytest.raises(ConfigError, match="3 layers"):
        build_model(model_opt(enc_heads="3*(8L)", **TINY), toy_vocabs(30), device="meta")


@pytest.mark.parametrize("spec", ["7Fword+1L", "8Ftoken|gate", "1Lwide"])
def test_full_nmt_model_trains(spec):
    torch.manual_seed(0)
    vocabs = toy_vocabs(30, src_tokens=FIG1, feats=1)
    model = build_model(model_opt(enc_heads=spec, **{**TINY, "dropout": 0.1, "attention_dropout": 0.1}), vocabs)
    model.train()
    src, lengths = _batch(30)
    if model.encoder.columns:                            # word boundaries: every piece a word (value 0)
        src = torch.cat([src, torch.full_like(src, 4)], 2)
    tgt = torch.randint(4, 30, (src.size(0), 5, 1))
    dec_out, attns = model(src, tgt, lengths)
    loss = model.generator(dec_out).logsumexp(-1).mean() + model.encoder.aux_loss()
    loss.backward()
    grads = [p.grad for p in model.encoder.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
