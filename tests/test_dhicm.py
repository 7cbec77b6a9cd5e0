"""DHICM (paper B §3.1) against a direct implementation of eqs. 1-4, its KL term, its
placement and bad input; the auxiliary-loss path in real OpenNMT-py training."""
import math
import re

import pytest
import torch

from headlab.errors import ConfigError
from headlab.heads.base import HeadContext
from headlab.heads.dhicm import DHICM


def reference(heads_out, x, W, U, V, W_s, pad):
    """Eqs. 1-4 as printed, one token and one head at a time (no dropout)."""
    B, N, H, _ = heads_out.shape
    d_m = U.shape[0]
    out = torch.zeros(B, N, W_s.shape[0], dtype=torch.float64)
    G = torch.zeros(B, N, H, dtype=torch.float64)
    kls = []
    for b in range(B):
        for n in range(N):
            s = torch.stack([heads_out[b, n, h] @ W.T @ U @ x[b, n] / math.sqrt(d_m) for h in range(H)])  # eq. 2
            g = torch.exp(s) / torch.exp(s).sum()                                                 # eq. 1
            G[b, n] = g
            out[b, n] = W_s @ sum(g[h] * (V @ heads_out[b, n, h]) for h in range(H))                      # eq. 3
            if not pad[b, n]:
                kls.append(sum(g[h] * math.log(g[h] * H) for h in range(H)))                     # eq. 4
    return out, G, float(sum(kls) / len(kls))


def test_dhicm_equals_equations_1_to_4():
    torch.manual_seed(0)
    B, N, H, d_k, d, d_m = 2, 5, 4, 3, 8, 6
    mixer = DHICM(H, d, d_k, d_m).double().eval()
    mixer.record = True
    heads_out = torch.randn(B, N, H, d_k, dtype=torch.float64)
    x = torch.randn(B, N, d, dtype=torch.float64)
    pad = torch.zeros(B, N, dtype=torch.bool)
    pad[1, 3:] = True
    ctx = HeadContext(pad, (~pad).sum(1))
    # two groups (2 + 2 heads): the mixer stacks them in spec order
    out = mixer.project([heads_out[:, :, :2], heads_out[:, :, 2:]], ctx, x)
    with torch.no_grad():
        ref, G, kl = reference(heads_out, x, mixer.W.weight, mixer.U.weight, mixer.V.weight, mixer.W_s.weight, pad)
    assert torch.allclose(out, ref, atol=1e-10)
    assert torch.allclose(mixer.importance.double(), G, atol=1e-6)
    assert mixer.aux_terms()["kl"].item() == pytest.approx(kl, abs=1e-6)


def test_kl_is_zero_for_uniform_and_ln_h_for_one_hot():
    H, d = 4, 8
    mixer = DHICM(H, d, 2).eval()
    x = torch.randn(1, 3, d)
    ctx = HeadContext(torch.zeros(1, 3, dtype=torch.bool), torch.tensor([3]))
    heads_out = torch.randn(1, 3, H, 2)
    with torch.no_grad():
        mixer.W.weight.zero_()                     # all scores 0: uniform importance
        mixer.project([heads_out], ctx, x)
        assert mixer.aux_terms()["kl"].item() == pytest.approx(0.0, abs=1e-7)
        mixer.W.weight.fill_(1.0)
        mixer.U.weight.fill_(1.0)
        heads_out = torch.zeros(1, 3, H, 2)
        heads_out[:, :, 2] = 1e3                          # head 3 wins every token
        mixer.project([heads_out], ctx, torch.ones(1, 3, d))
    assert mixer.aux_terms()["kl"].item() == pytest.approx(math.log(H), abs=1e-5)


def test_parameter_delta_against_8l_at_base_size():
    from headlab.heads.attention import HeadlabAttention
    from headlab.heads.spec import parse_spec

    def count(spec):
        layer = HeadlabAttention(parse_spec(spec)[0], 512, 64, add_qkvbias=True)
        return sum(p.numel() for p in layer.parameters())
    # W, V: 512x64; U, W_s: 512x512 (+ W_s bias) instead of W_o (512x512 + bias)
    assert count("8L|dhicm") - count("8L") == 2 * 512 * 64 + 512 * 512 == 327_680


def test_dhicm_dm_and_dropout_options():
    from headlab.heads.attention import HeadlabAttention
    from headlab.heads.spec import parse_spec

    layer = HeadlabAttention(parse_spec("4L|dhicm")[0], 16, 4, mixer_options={"dhicm_dm": 10, "dhicm_dropout": 0.3})
    assert layer.output_mixer.U.weight.shape == (10, 16) and layer.output_mixer.dropout.p == 0.3
    assert not hasattr(layer, "final_linear")
    with pytest.raises(ConfigError, match=r"\[dhicm_dropout\]"):
        HeadlabAttention(parse_spec("4L|dhicm")[0], 16, 4, mixer_options={"dhicm_dropout": 1.5})


# -- training: the auxiliary-loss path -------------------------------------------------

def _train(tmp_path, name, lambda_kl, steps=30):
    from headlab.engine.config import train_config, write_yaml
    from test_onmt_run import HEADLAB, run, toy_corpus

    folder = tmp_path / name
    folder.mkdir()
    src, tgt = toy_corpus(folder, n=80)
    assert run(HEADLAB + ["vocab", "--train", str(src), str(tgt), "--out", str(folder / "vocab.txt")]).returncode == 0
    options = train_config(
        preset="tiny", layers="1+1", heads="4L|dhicm@dec=4L|dhicm@cross=4L|dhicm", train_src=str(src),
        train_tgt=str(tgt), valid_src=str(src), valid_tgt=str(tgt), vocab=str(folder / "vocab.txt"),
        save_dir=str(folder / "model"),
        overrides=dict(hidden_size=16, word_vec_size=16, transformer_ff=32, heads=4, train_steps=steps,
                       save_checkpoint_steps=10, valid_steps=10, warmup_steps=5, batch_size=128,
                       bucket_size=128, report_every=10, lambda_kl=lambda_kl, seed=3,
                       model_selection="valid_loss", keep_checkpoint=1))
    write_yaml(options, folder / "train.yaml")
    result = run(HEADLAB + ["train", "-config", str(folder / "train.yaml")])
    assert result.returncode == 0, result.stderr[-3000:]
    return folder, result.stderr


def _kl(log):
    return [float(v) for v in re.findall(r"Step \d+ aux: kl=([0-9.]+)", log)]


def test_kl_term_is_logged_apart_and_raised_by_lambda(tmp_path):
    _, plain = _train(tmp_path, "plain", 0.0)
    folder, pushed = _train(tmp_path, "pushed", 5.0)
    assert len(_kl(plain)) == 3 and len(_kl(pushed)) == 3
    assert _kl(pushed)[-1] > _kl(plain)[-1] + 0.05          # sharper head importance
    # the reported cross-entropy/perplexity is pure: the KL bonus (-5 * KL) would make
    # the total loss negative-going, but xent stays a cross-entropy (> 0)
    xents = [float(v) for v in re.findall(r"xent: ([0-9.]+)", pushed)]
    assert xents and min(xents) > 0
    assert "Validation aux: kl=" in pushed
    # model selection: the final model is the best validation step, which is kept
    import csv
    import json
    rows = list(csv.DictReader(open(folder / "model" / "model.valid.csv")))
    assert [int(r["step"]) for r in rows] == [10, 20, 30]
    best = json.loads((folder / "model" / "model.best.json").read_text())
    assert best["step"] == int(min(rows, key=lambda r: float(r["xent"]))["step"])
    assert float(best["xent"]) == min(float(r["xent"]) for r in rows)
    assert (folder / "model" / f"model_step_{best['step']}.pt").is_file()
    assert "best validation cross-entropy" in pushed


def test_negative_lambda_is_a_config_error(tmp_path):
    from headlab.engine.config import train_config
    with pytest.raises(ConfigError, match=r"\[lambda_kl\].*>= 0"):
        train_config(preset="tiny", layers="1+1", heads="8L", train_src="s", train_tgt="t", valid_src="s",
                     valid_tgt="t", vocab="v", save_dir=str(tmp_path), overrides={"lambda_kl": -0.1})
    with pytest.raises(ConfigError, match=r"\[valid_steps\].*multiple of save_checkpoint_steps"):
        train_config(preset="tiny", layers="1+1", heads="8L", train_src="s", train_tgt="t", valid_src="s",
                     valid_tgt="t", vocab="v", save_dir=str(tmp_path),
                     overrides={"model_selection": "valid_loss", "valid_steps": 15, "save_checkpoint_steps": 10})


def test_export_decoder_sites_and_importance(tmp_path):
    """Attention and DHICM importance of all three sites through `headlab export-attention`."""
    import numpy as np
    from headlab.engine.export import load_attention, load_importance, main as export_main
    from headlab.engine.model import build_model, model_opt, save_checkpoint, toy_vocabs

    vocabs = toy_vocabs(30, src_tokens="a b c d e".split(), share=True)
    spec = "*(4L),4L|dhicm"
    opt = model_opt(hidden_size=16, heads=4, transformer_ff=32, enc_layers=2, dec_layers=2, dropout=0.0,
                    attention_dropout=0.0, share_embeddings=True, decoder_type="headlab",
                    enc_heads=spec, dec_heads="4L", cross_heads=spec)
    torch.manual_seed(0)
    model = build_model(opt, vocabs)
    path = tmp_path / "m.pt"
    save_checkpoint(model, opt, vocabs, path)
    (tmp_path / "src").write_text("a b c\nd e\n")
    (tmp_path / "tgt").write_text("c b\ne d a\n")
    shapes = {}
    for site in ("enc", "dec", "cross"):
        out = tmp_path / f"{site}.npz"
        args = ["-model", str(path), "-src", str(tmp_path / "src"), "-out", str(out), "-site", site]
        assert export_main(args + ([] if site == "enc" else ["-tgt", str(tmp_path / "tgt")])) == 0
        att = load_attention(str(out))
        shapes[site] = [a.shape for _, a in att]
        for _, a in att:
            assert np.allclose(a.sum(-1), 1.0, atol=1e-5)
        imp = load_importance(str(out))
        if site == "dec":
            assert imp == []
        else:
            assert len(imp) == 2
            tokens, g = imp[1]
            assert g.shape == (2, len(tokens), 4) and np.isnan(g[0]).all()     # layer 1: no DHICM
            assert np.allclose(g[1].sum(-1), 1.0, atol=1e-5)
    assert shapes["enc"] == [(2, 4, 3, 3), (2, 4, 2, 2)]
    assert shapes["dec"] == [(2, 4, 3, 3), (2, 4, 4, 4)]        # <s> + target tokens
    assert shapes["cross"] == [(2, 4, 3, 3), (2, 4, 4, 2)]      # target rows, source columns
    with pytest.raises(ConfigError, match=r"\[tgt\]"):
        export_main(["-model", str(path), "-src", str(tmp_path / "src"), "-out", str(tmp_path / "x.npz"),
                     "-site", "cross"])


@pytest.mark.parametrize("spec, site, message", [
    ("1L|dhicm", "enc", r"\[enc_heads\].*at least 2 heads"),
    ("*(4L),1L|dhicm", "cross", r"\[cross_heads\].*at least 2 heads"),
    ("4L|dhicmm", "dec", r"\[dec_heads\].*unknown head mixer 'dhicmm'; did you mean 'dhicm'"),
    ("4L|dhicm|gate", "enc", r"\[enc_heads\].*'dhicm' replaces the output projection"),
])
def test_dhicm_where_it_cannot_go(spec, site, message):
    from headlab.heads.spec import parse_spec
    with pytest.raises(ConfigError, match=message):
        parse_spec(spec, 2, site=site)


def test_aux_share_is_the_trainers_normalisation():
    """With accumulation the trainer divides the summed loss of all sub-batches by the summed
    token count (Trainer._accum_batches): each sub-batch's term x its share then adds up to
    exactly lambda x term per step, as the mean cross-entropy does."""
    from headlab.engine.aux_loss import AuxLossCompute

    compute = object.__new__(AuxLossCompute)
    torch.nn.Module.__init__(compute)
    compute.criterion = torch.nn.CrossEntropyLoss(ignore_index=1)   # padding_idx reads it
    compute.norm_method = "tokens"
    tgt = torch.tensor([[2, 5, 6, 3, 1], [2, 7, 3, 1, 1]]).unsqueeze(-1)   # BOS ... EOS pad
    batch = {"tgt": tgt}
    # trainer: non-pad tokens after BOS (3 + 2, EOS included) minus one EOS per sentence
    assert compute.share(batch) == 5 - 2 == 3       # the real tokens 5, 6 and 7
    compute.norm_method = "sents"
    assert compute.share(batch) == 2
    # two accumulated sub-batches: sum_k term * share_k / sum_k share_k == term
    shares = [4, 9]
    assert sum(0.7 * s for s in shares) / sum(shares) == pytest.approx(0.7)


def test_validation_loss_has_no_label_smoothing():
    """Model selection compares validation cross-entropy across label-smoothing values, so
    the validation criterion is the plain NLL whatever the training one is."""
    from headlab.engine.aux_loss import AuxLossCompute
    from headlab.engine.model import build_model, model_opt, toy_vocabs

    opt = model_opt(hidden_size=16, heads=4, transformer_ff=32, enc_layers=1, dec_layers=1, enc_heads="4L",
                    extra=["-label_smoothing", "0.2"])
    vocabs = toy_vocabs(20)
    model = build_model(opt, vocabs, device="meta")
    train = AuxLossCompute.from_opts(opt, model, vocabs["tgt"], train=True)
    valid = AuxLossCompute.from_opts(opt, model, vocabs["tgt"], train=False)
    assert train.criterion.label_smoothing == 0.2 and valid.criterion.label_smoothing == 0.0


def test_params_cli_counts_all_three_sites(capsys):
    from headlab.engine.params import main as params_main
    counts = []
    for heads in ("8L", "*(8L),8L|dhicm@dec=*(8L),8L|dhicm@cross=*(8L),8L|dhicm"):
        assert params_main(["--preset", "base", "--layers", "6+6", "--heads", heads, "--src-vocab", "1000"]) == 0
        counts.append(int(capsys.readouterr().out))
    assert counts[1] - counts[0] == 3 * 327_680          # paper B's three DHICM layers
