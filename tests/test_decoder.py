"""The headlab decoder (-decoder_type headlab) inside real OpenNMT-py models: parameters and
outputs equal to stock for 8L, incremental decoding with beam tiling/reordering equal to
teacher forcing (also with DHICM), head ablation, bad specs."""
import pytest
import torch

from headlab.errors import ConfigError
from headlab.engine.model import build_model, count_parameters, model_opt, toy_vocabs
from headcases import stepwise     # incremental decoding with beam tiling and reordering

TINY = dict(hidden_size=32, heads=4, transformer_ff=64, enc_layers=2, dec_layers=2,
            dropout=0.0, attention_dropout=0.0, enc_heads="4L", dec_heads="4L", cross_heads="4L")
DHICM = "*(4L),4L|dhicm"


def _model(seed=0, **kw):
    torch.manual_seed(seed)
    model = build_model(model_opt(**{**TINY, **kw}), toy_vocabs(40))
    for p in model.parameters():   # default init gives near-uniform outputs: make heads matter
        torch.nn.init.normal_(p, std=0.3)
    return model.eval()


def _batch(B=3, S=7, T=6, seed=1):
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(4, 40, (B, S, 1), generator=gen)
    src_len = torch.tensor([S, 3, 5])[:B]
    src[torch.arange(S).unsqueeze(0) >= src_len.unsqueeze(1)] = 1
    tgt = torch.randint(4, 40, (B, T, 1), generator=gen)
    tgt[:, 0, 0] = 2                                   # <s>
    tgt[1, 4:, 0] = 1                                  # padding
    return src, src_len, tgt


def test_base_decoder_parameters_equal_stock():
    def count(**kw):
        opt = model_opt(**kw)                          # base: 6+6, d=512, 8 heads
        return count_parameters(build_model(opt, toy_vocabs(1000), device="meta").decoder)
    stock = count(decoder_type="transformer")
    assert count(decoder_type="headlab") == stock
    # DHICM replaces W_o (512x512 + bias) by W, V (512x64), U (512x512), W_s (512x512 + bias)
    one = 2 * 512 * 64 + 2 * 512 * 512 - 512 * 512
    assert count(decoder_type="headlab", dec_heads="*(8L),8L|dhicm") == stock + one
    assert count(decoder_type="headlab", dec_heads="*(8L),8L|dhicm", cross_heads="*(8L),8L|dhicm") == stock + 2 * one


def test_8L_decoder_equals_stock_with_copied_weights():
    from headlab.engine.decoder import HeadlabDecoder
    stock = _model(decoder_type="transformer")
    ours = _model(decoder_type="headlab", seed=5)
    ours.encoder.load_state_dict(stock.encoder.state_dict())
    ours.generator.load_state_dict(stock.generator.state_dict())
    ours.decoder.load_state_dict(HeadlabDecoder.load_stock_state_dict(stock.decoder.state_dict()))
    src, src_len, tgt = _batch()
    with torch.no_grad():
        a, _ = stock(src, tgt, src_len)
        b, _ = ours(src, tgt, src_len)
    assert torch.allclose(a, b, atol=1e-5)


@pytest.mark.parametrize("heads", [dict(), dict(dec_heads=DHICM, cross_heads=DHICM),
                                   dict(dec_heads="4L|gate", cross_heads="2L+2Lwide")])
def test_incremental_decoding_equals_teacher_forcing(heads):
    from onmt.utils.misc import tile
    model = _model(decoder_type="headlab", **heads)
    src, src_len, tgt = _batch()
    with torch.no_grad():
        enc_out, _, _ = model.encoder(src, src_len)
        model.decoder.init_state(src, enc_out, None)
        forced, _ = model.decoder(tgt, enc_out, src_len=src_len)
        steps = stepwise(model, (src, src_len, tgt))
    real = tile(tgt, 2)[:, :, 0].ne(1)
    assert torch.allclose(steps[real], tile(forced, 2)[real], atol=1e-5)


def test_search_through_dhicm_decoder_matches_teacher_forcing(tmp_path):
    """Translate through a DHICM decoder (KV cache, beam tiling and reordering inside
    OpenNMT-py's own Translator): every greedy hypothesis is the argmax chain that
    teacher-forced scoring of that hypothesis implies, and every beam hypothesis's score
    (n-best, no length or coverage penalty: the score is the plain sum of log-probabilities)
    equals the teacher-forced log-probability of its tokens and its EOS."""
    from headlab.eval.forced import load_model
    from headlab.engine.model import save_checkpoint
    from headlab.engine.run import translate

    vocabs = toy_vocabs(30, src_tokens="a b c d e".split(), share=True)
    torch.manual_seed(0)
    opt = model_opt(**{**TINY, "decoder_type": "headlab", "dec_heads": DHICM, "cross_heads": DHICM,
                       "share_embeddings": True})
    model = build_model(opt, vocabs)
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.5)
    with torch.no_grad():          # hypotheses that end
        model.generator.bias[vocabs["tgt"]["</s>"]] += 4.0     # (3.5: every hypothesis runs to the limit)
    path = tmp_path / "dhicm.pt"
    save_checkpoint(model, opt, vocabs, path)
    src = ["a b c", "d e a b", "c"]
    (tmp_path / "src.txt").write_text("\n".join(src) + "\n")
    hyps = {}
    # -max_length_ratio 0: the length limit is -max_length (12) alone
    limit = 12
    exact = ["-length_penalty", "none", "-alpha", "0", "-coverage_penalty", "none", "-beta", "0",
             "-max_length", str(limit), "-max_length_ratio", "0", "-with_score"]
    for beam in (1, 3):
        out = tmp_path / f"hyp{beam}.txt"
        assert translate(["-model", str(path), "-src", str(tmp_path / "src.txt"), "-output", str(out),
                          "-beam_size", str(beam), "-n_best", str(beam)] + exact) == 0
        hyps[beam] = [line.rsplit("\t", 1) for line in out.read_text().splitlines()]
        assert len(hyps[beam]) == 3 * beam
    loaded, v, _ = load_model(path)

    def forced(source, hyp):
        """Teacher-forced log-probability of each token of ``hyp`` and of the EOS after it."""
        s = torch.tensor(v["src"](source.split())).view(1, -1, 1)
        t = torch.tensor(v["tgt"](["<s>"] + hyp.split() + ["</s>"])).view(1, -1, 1)
        with torch.no_grad():
            out, _ = loaded(s, t, torch.tensor([s.size(1)]))   # NMTModel drops the last input
            log_probs = torch.log_softmax(loaded.generator(out).float(), -1)[0]
        return log_probs, log_probs.gather(1, t[0, 1:]).squeeze(1), t[0, 1:, 0]

    for source, (hyp, _) in zip(src, hyps[1]):
        log_probs, _, gold = forced(source, hyp)
        chain = log_probs.argmax(-1)
        ended = len(hyp.split()) < limit                        # by EOS, not by the limit
        n = len(gold) if ended else len(gold) - 1
        assert chain[:n].tolist() == gold[:n].tolist()          # the EOS included where it ended
    ended = 0
    for beam in (1, 3):
        sources = [x for x in src for _ in range(beam)]        # n-best lines: each source's in a row
        for source, (hyp, reported) in zip(sources, hyps[beam]):
            _, token_lp, _ = forced(source, hyp)
            # a hypothesis ended by EOS scores its EOS; one cut at the length limit has none
            expected = token_lp.sum() if len(hyp.split()) < limit else token_lp[:-1].sum()
            ended += len(hyp.split()) < limit
            assert float(reported) == pytest.approx(float(expected), abs=1e-4), (beam, hyp)
    assert all(len({h for h, _ in hyps[3][3 * k:3 * k + 3]}) == 3 for k in range(3))   # a real n-best
    assert ended >= 8 and any(len(h.split()) >= 2 for h, _ in hyps[3])   # EOS after words, not only at once
    # the best of each beam is at least as likely as greedy's
    for k in range(3):
        assert float(hyps[3][3 * k][1]) >= float(hyps[1][k][1]) - 1e-5


def test_decoder_head_ablation_changes_outputs_and_checks_range():
    model = _model(decoder_type="headlab")
    src, src_len, tgt = _batch()
    with torch.no_grad():
        full, _ = model(src, tgt, src_len)
        model.decoder.disable_heads("cross", [2])
        ablated, _ = model(src, tgt, src_len)
    assert not torch.allclose(full, ablated, atol=1e-4)
    assert model.decoder.attentions("cross")[0].head_scale.tolist() == [1.0, 0.0, 1.0, 1.0]
    with pytest.raises(ConfigError, match=r"disable_cross_heads.*cannot disable head 5"):
        model.decoder.disable_heads("cross", [5])


@pytest.mark.parametrize("kw, message", [
    (dict(dec_heads="7Ftoken+1L"), r"\[dec_heads\].*cannot be used in decoder self-attention"),
    (dict(cross_heads="4L|dhicmm"), r"\[cross_heads\].*did you mean 'dhicm'"),
    (dict(cross_heads="1L+1Lwide|dhicm"), r"\[cross_heads\].*dhicm needs heads of one width"),
    (dict(dec_heads="4L|dhicm|gate"), r"\[dec_heads\].*must be the last mixer"),
    (dict(dec_heads="3*(4L)"), r"\[dec_heads\].*describes 3 layers but the decoder self-attention has 2"),
])
def test_bad_decoder_specs(kw, message):
    with pytest.raises(ConfigError, match=message):
        build_model(model_opt(decoder_type="headlab", **{**TINY, **kw}), toy_vocabs(40), device="meta")
