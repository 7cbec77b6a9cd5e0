"""Paper C's redundant head enlivening (eqs. 3, 9, 10): labels, enlivening, pruning,
logging, and a tiny OpenNMT-py model with RHE/SEA kinds (forward + backward)."""
import dataclasses
import math

import pytest
import torch
from nltk import Tree

from headlab.engine.aux_loss import AuxStatistics
from headlab.errors import ConfigError
from headlab.heads import parse_spec
from headlab.heads.attention import HeadlabAttention
from headlab.heads.base import HeadContext
from headlab.heads.rhe import head_labels
from headlab.heads.sea import dep_related
from headlab.syntax.trees import FEATURES, word_facts

FIG3 = "(S (NP (NNP Bush)) (VP (VBD held) (NP (DT a) (NN talk)) (PP (IN with) (NP (NNP Sharon)))))"
FIG3_HEADS = [1, 1, 3, 1, 3, 4]
SHORT = "(S (NP (NN dogs)) (VP (VBP bark) (ADVP (RB loudly))))"
SHORT_HEADS = [1, 1, 1]


def sig(x):
    return 1 / (1 + math.exp(-x))


def test_labels_on_a_hand_made_attention_matrix():
    """3 words + 1 padding piece; dependencies 0 -> 1 <- 2, so (0, 2) and (2, 0) are the
    only unrelated real pairs."""
    related = dep_related(torch.tensor([[0, 1, 2, 0]]), torch.tensor([[1, 1, 1, 0]]),
                          torch.tensor([[False, False, False, True]]))
    assert related[0, :3, :3].tolist() == [[True, True, False], [True, True, True], [False, True, True]]
    rows = [
        [[.5, .5, 0, 0], [.2, .6, .2, 0], [0, .5, .5, 0]],        # all mass on related keys
        [[.1, .1, .8, 0], [.3, .4, .3, 0], [.8, .1, .1, 0]],      # mostly unrelated, confident
        [[1 / 3] * 3 + [0]] * 3,                                  # uniform
    ]
    att = torch.tensor([[r + [[1.0, 0, 0, 0]] for r in rows]])     # (1, 3, 4, 4), padding query row
    pad = torch.tensor([[False, False, False, True]])
    important, hconf, syn = head_labels(att, related, pad)
    assert hconf[0].tolist() == pytest.approx([(.5 + .6 + .5) / 3, (.8 + .4 + .8) / 3, 1 / 3])
    assert syn[0].tolist() == pytest.approx([1.0, (.2 + 1 + .2) / 3, (2 / 3 + 1 + 2 / 3) / 3])
    # dynamic gate sigmoid(hconf): 0.630, 0.661, 0.583
    assert [s > sig(h) for s, h in zip(syn[0].tolist(), hconf[0].tolist())] == [True, False, True]
    assert important[0].tolist() == [True, False, True]
    assert head_labels(att, related, pad, fgate=0.8)[0][0].tolist() == [True, False, False]
    assert head_labels(att, related, pad, fgate=0.45)[0][0].tolist() == [True, True, True]
    assert head_labels(att, related, pad, fgate=1.0)[0][0].tolist() == [False, False, False]


def featured(tokens, side):
    """OpenNMT-py source ids (B, N, 1 + 6): token ids, then the word-boundary column (0: every
    piece is a word here) and each FEATURES column as the id of its value in a numeric-order
    feature vocabulary (value + 4 specials), as the encoder reads them (HeadlabEncoder.context
    -> ctx.word_ids, ctx.side)."""
    from headlab.heads.side import SPECIALS
    return torch.stack([tokens, torch.zeros_like(tokens) + SPECIALS] + [side[name] + SPECIALS for name in FEATURES], 2)


def feature_vocabs(vocabs):
    """toy_vocabs plus numeric-order feature vocabularies (headlab.heads.side)."""
    from headlab.engine.model import toy_vocabs
    from headlab.heads.side import feature_names
    return {**vocabs, "src_feats": toy_vocabs(5, feats=len(feature_names()))["src_feats"]}


def facts_side(sentences, n):
    """ctx.side (B, N) columns for word-level pieces (word_ids = arange), zero-padded."""
    cols = {name: torch.zeros(len(sentences), n, dtype=torch.long) for name in FEATURES}
    for b, (tree, heads) in enumerate(sentences):
        facts = word_facts(Tree.fromstring(tree), heads)
        for name in FEATURES:
            cols[name][b, :len(heads)] = torch.tensor(facts[name])
    return cols


def make_ctx():
    n = 6
    lengths = torch.tensor([6, 3])
    pad = torch.arange(n)[None] >= lengths[:, None]
    side = facts_side([(FIG3, FIG3_HEADS), (SHORT, SHORT_HEADS)], n)
    return HeadContext(pad, lengths, word_ids=torch.arange(n).expand(2, n), side=side)


def twin(kind, base, fgate, **options):
    """An RHE layer and a layer of ``base`` kind with the same weights."""
    torch.manual_seed(3)
    rhe = HeadlabAttention(parse_spec(f"4{kind}")[0], 16, 4, mixer_options={"rhe_fgate": fgate, **options})
    plain = HeadlabAttention(parse_spec(f"4{base}")[0], 16, 4, mixer_options=options)
    missing, _ = plain.load_state_dict(rhe.state_dict(), strict=False)
    assert not missing
    return rhe.eval(), plain.eval()


@pytest.mark.parametrize("kind,sea", [("RHEdea", "DEA"), ("RHElpea", "LPEA"), ("RHErel", "RelPos"),
                                      ("RHEloc", "Local")])
def test_important_heads_untouched_redundant_heads_enlivened(kind, sea):
    ctx = make_ctx()
    x = torch.randn(2, 6, 16)
    real = ~ctx.pad_mask
    # gate 1e-9: Syn_attn > gate always (a head attends to itself): every head important
    rhe, plain = twin(kind, "L", 1e-9)
    assert torch.allclose(rhe(x, ctx)[real], plain(x, ctx)[real], atol=1e-5)
    assert torch.allclose(rhe.attention(x, ctx), plain.attention(x, ctx), atol=1e-6)
    # gate 1: Syn_attn <= 1, never > 1: every head redundant, replaced by its SEA/baseline
    rhe, enlivened = twin(kind, sea, 1.0, lpea_k=2)
    assert torch.allclose(rhe(x, ctx)[real], enlivened(x, ctx)[real], atol=1e-5)
    assert torch.allclose(rhe.attention(x, ctx), enlivened.attention(x, ctx), atol=1e-6)
    terms = rhe.aux_terms()
    assert terms["rhe_redundant"].item() == 4 and terms["rhe_heads"].item() == 4


@pytest.mark.parametrize("fused", [True, False])
def test_mixed_labels_pick_per_head_and_sentence(fused):
    ctx = make_ctx()
    torch.manual_seed(5)
    rhe = HeadlabAttention(parse_spec("8RHEdea")[0], 16, 2).eval()
    group = rhe.heads[0]
    group.record, group.fused = True, fused
    x = torch.randn(2, 6, 16) * 3
    att = rhe.attention(x, ctx)
    q, k = group._qk(x, None)
    scores = q @ k.transpose(-1, -2) / math.sqrt(2)
    keys = ctx.key_mask
    own = scores.masked_fill(~keys, -math.inf).softmax(-1)
    related = dep_related(ctx.word_ids, ctx.side["dep_head"], ctx.pad_mask).unsqueeze(1)
    dea = scores.masked_fill(~(keys & related), -math.inf).softmax(-1)
    labels = group.labels
    want, _, _ = head_labels(own, related[:, 0], ctx.pad_mask)
    assert labels.tolist() == want.tolist()
    assert 0 < labels.sum() < labels.numel()             # this seed mixes both labels
    for b in range(2):
        for h in range(8):
            ref = own if labels[b, h] else dea
            assert torch.allclose(att[b, h], ref[b, h], atol=1e-6)
    assert group.stats.shape == (2, 8, 2)
    # the fused forward (two SDPA outputs, picked per head) agrees head by head
    _, values = rhe.project_kv(x)
    v = values.view(2, 6, 8, 2)
    out = group(x, v, ctx)
    assert group.labels.tolist() == labels.tolist()
    own_out, dea_out = (p @ v.transpose(1, 2) for p in (own, dea))
    real = ~ctx.pad_mask
    for b in range(2):
        for h in range(8):
            ref = own_out if labels[b, h] else dea_out
            assert torch.allclose(out[b, real[b], h], ref[b, h, real[b]], atol=1e-5)


def test_prune_zeroes_redundant_heads_in_eval_only():
    ctx = make_ctx()
    rhe, _ = twin("RHElpea", "LPEA", 1.0)          # every head redundant
    group = rhe.heads[0]
    group.prune = True
    x = torch.randn(2, 6, 16)
    heads = rhe.head_outputs(x, ctx)[0]
    assert (heads == 0).all()
    rhe.train()
    assert (rhe.head_outputs(x, ctx)[0] != 0).any()   # training always enlivens


def test_bad_gate_names_its_key():
    for bad in (-0.1, 1.5):
        with pytest.raises(ConfigError, match=r"\[rhe_fgate\].*\(0, 1\]"):
            HeadlabAttention(parse_spec("8RHEdea")[0], 16, 2, mixer_options={"rhe_fgate": bad})
    ctx = dataclasses.replace(make_ctx(), side={"dep_head": make_ctx().side["dep_head"]})
    with pytest.raises(ConfigError, match=r"\[enc_heads\].*RHElpea.*lp_lo"):
        HeadlabAttention(parse_spec("8RHElpea")[0], 16, 2)(torch.randn(2, 6, 16), ctx)


def test_share_of_redundant_heads_is_logged():
    stats = AuxStatistics()
    stats.aux, stats.aux_share = {"rhe_redundant": 3.0 * 10, "rhe_heads": 8.0 * 10}, 10
    assert stats.aux_means() == {"rhe_heads": 8.0, "rhe_redundant": 3.0, "rhe_share": 0.375}
    assert "rhe_share=0.3750" in stats.aux_line()


@pytest.mark.parametrize("spec", ["8RHElpea,*(8L)", "2*(8RHEdea)", "8DEA,8LPEA", "8RelPos,8Local",
                                  "8RHErel,8RHEloc"])
def test_tiny_onmt_model_forward_backward(spec):
    from headlab.engine.aux_loss import model_terms
    from headlab.engine.model import build_model, model_opt, toy_vocabs

    torch.manual_seed(0)
    opt = model_opt(enc_heads=spec, hidden_size=32, heads=8, transformer_ff=64, enc_layers=2,
                    dec_layers=1, dropout=0.1, attention_dropout=0.1, extra=["-lpea_k", "2"])
    assert opt.lpea_k == 2 and opt.rhe_fgate == 0.0
    model = build_model(opt, toy_vocabs(30)).train()
    encoder = model.encoder
    assert encoder.needs_syntax == any(kind in spec for kind in ("DEA", "LPEA", "RHE"))
    side = facts_side([(FIG3, FIG3_HEADS), (SHORT, SHORT_HEADS)], 6)
    tokens = torch.randint(4, 30, (2, 6))
    tokens[1, 3:] = 1
    src = featured(tokens, side) if encoder.needs_syntax else tokens.unsqueeze(2)
    lengths = torch.tensor([6, 3])
    if encoder.needs_syntax:                 # the encoder reads the parse from the feature columns
        ctx = encoder.context(src, lengths)
        assert all(torch.equal(ctx.side[name][0], side[name][0]) for name in FEATURES)
    if encoder.needs_syntax:
        assert encoder.context(src, lengths).word_ids[0].tolist() == list(range(6))
    tgt = torch.randint(4, 30, (2, 5, 1))
    dec_out, _ = model(src, tgt, lengths)
    loss = model.generator(dec_out).logsumexp(-1).mean()
    loss.backward()
    grads = [p.grad for p in encoder.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    terms = model_terms(model)
    if "RHE" in spec:
        assert terms["rhe_heads"].item() == 8 * spec.count("RHE") * (2 if spec.startswith("2*") else 1)
        assert 0 <= terms["rhe_redundant"].item() <= terms["rhe_heads"].item()
    else:
        assert "rhe_heads" not in terms


def tiny_rhe_model(extra=()):
    from headlab.engine.model import build_model, model_opt, toy_vocabs

    torch.manual_seed(0)
    opt = model_opt(enc_heads="8RHElpea,*(8L)", hidden_size=32, heads=8, transformer_ff=64, enc_layers=2,
                    dec_layers=1, dropout=0.0, attention_dropout=0.0, extra=list(extra))
    vocabs = toy_vocabs(30)
    return build_model(opt, vocabs), opt, vocabs


def test_options_stored_in_checkpoint_and_prune_at_load(tmp_path):
    from headlab.engine.export import load_model
    from headlab.engine.model import save_checkpoint

    model, opt, vocabs = tiny_rhe_model(["-lpea_k", "2", "-rhe_fgate", "0.3", "-lpea_outside", "learned"])
    path = tmp_path / "rhe.pt"
    save_checkpoint(model, opt, vocabs, path)
    _, loaded, model_opt = load_model(str(path))
    assert (model_opt.lpea_k, model_opt.rhe_fgate, model_opt.lpea_outside) == (2, 0.3, "learned")
    group = loaded.encoder.transformer[0].self_attn.heads[0]
    assert (group.phrase.k, group.fgate, group.prune) == (2, 0.3, False)
    assert group.phrase.relative_phrase_embeddings.num_embeddings == 6
    _, pruned, _ = load_model(str(path), rhe_prune=True)
    assert pruned.encoder.transformer[0].self_attn.heads[0].prune


def test_prune_on_a_model_without_rhe_names_its_key(tmp_path):
    from headlab.engine.export import load_model
    from headlab.engine.model import build_model, model_opt, save_checkpoint, toy_vocabs

    opt = model_opt(enc_heads="8LPEA", hidden_size=32, heads=8, transformer_ff=64, enc_layers=1, dec_layers=1)
    vocabs = toy_vocabs(30)
    save_checkpoint(build_model(opt, vocabs), opt, vocabs, tmp_path / "lpea.pt")
    with pytest.raises(ConfigError, match=r"\[rhe_prune\]"):
        load_model(str(tmp_path / "lpea.pt"), rhe_prune=True)


@pytest.mark.parametrize("flag,value", [("-rhe_fgate", "1.5"), ("-rhe_fgate", "-0.2"), ("-lpea_k", "-1"),
                                        ("-relpos_k", "0")])
def test_bad_option_values_name_their_option(flag, value):
    """One line naming the option (model_opt's parser raises ConfigError, not argparse's usage)."""
    with pytest.raises(ConfigError) as caught:
        tiny_rhe_model([flag, value])
    assert str(caught.value).startswith(f"[{flag[1:]}] bad value for {flag}: ")
    assert "\n" not in str(caught.value) and value in str(caught.value)


@pytest.mark.parametrize("key,value", [("lpea_k", -1), ("relpos_k", 0), ("rhe_fgate", 1.2), ("rhe_fgate", -1)])
def test_config_check_names_the_key(key, value):
    from headlab.engine.config import check_values
    with pytest.raises(ConfigError, match=rf"\[{key}\]"):
        check_values({key: value}, source="test.yaml")


def test_export_shows_the_enlivened_attention_and_labels():
    from headlab.engine.export import site_attention

    model, _, vocabs = tiny_rhe_model(["-rhe_fgate", "1.0"])       # every RHE head redundant
    model.eval()
    side = facts_side([(FIG3, FIG3_HEADS), (SHORT, SHORT_HEADS)], 6)
    sep = "\uffe8"
    src = [[sep.join([f"w{i}", "0"] + [str(int(side[name][b, i])) for name in FEATURES]) for i in range(n)]
           for b, n in enumerate([6, 3])]
    assert len(next(site_attention(model, feature_vocabs(vocabs), src, None, "enc"))) == 3
    out = list(site_attention(model, feature_vocabs(vocabs), src, None, "enc", extras=True))
    (_, att, imp, extra), second = out[0], out[1]
    labels, raw = extra["rhe"], extra["raw"]
    assert att.shape == raw.shape == (2, 8, 6, 6) and imp is None
    assert labels.shape == (2, 8) and (labels[0] == 0).all() and torch.isnan(torch.tensor(labels[1])).all()
    # enlivened: row "talk" (3) never attends outside its local phrase: with (4), Sharon (5)
    assert (att[0, :, 3, 4:] == 0).all() and (att[1, :, 3, 4:] > 0).all()
    # raw: the heads' own attention before enlivening sees every word; other layers as att
    assert (raw[0, :, 3, 4:] > 0).all() and (raw[1] == att[1]).all()
    assert torch.allclose(torch.tensor(raw[0]).sum(-1), torch.ones(8, 6), atol=1e-5)
    assert second[1].shape == (2, 8, 3, 3) and second[3]["raw"].shape == (2, 8, 3, 3)
