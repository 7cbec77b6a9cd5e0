"""Checkpoint round trip through OpenNMT-py's own loader; attention export."""
import numpy as np
import pytest
import torch

from headlab.engine.export import export_attention, load_attention, load_model, main
from headlab.engine.model import build_model, model_opt, save_checkpoint, toy_vocabs

TINY = dict(hidden_size=64, heads=8, transformer_ff=128, enc_layers=2, dec_layers=1,
            dropout=0.0, attention_dropout=0.0)
FIG1 = ["a", "master", "of", "science", "fic@@", "tion", "."]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    torch.manual_seed(0)
    vocabs = toy_vocabs(30, src_tokens=FIG1, feats=1)        # a word model's word-boundary column
    opt = model_opt(enc_heads="7Fword+1L", **TINY)
    model = build_model(opt, vocabs)
    path = tmp_path_factory.mktemp("ckpt") / "model.pt"
    save_checkpoint(model, opt, vocabs, path)
    return path, model, vocabs


def test_load_test_model_round_trip_and_ablation(checkpoint):
    path, model, vocabs = checkpoint
    _, loaded, model_opt_ = load_model(path)
    assert model_opt_.enc_heads == "7Fword+1L"
    from headlab.engine.words import source_ids
    src, lengths = source_ids(vocabs, [FIG1], model.encoder.columns)
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded.encoder(src, lengths)[0], model.encoder(src, lengths)[0])
        _, ablated, _ = load_model(path, disable_heads=[2, 8])
        assert ablated.encoder.disabled_heads == [2, 8]
        assert (ablated.encoder(src, lengths)[0] - model.encoder(src, lengths)[0]).abs().max() > 1e-3


def test_export_attention(checkpoint, tmp_path, capsys):
    path, _, _ = checkpoint
    src = tmp_path / "src.txt"
    src.write_text(" ".join(FIG1) + "\nof science .\nmaster\n", encoding="utf-8")
    out = tmp_path / "att.npz"
    assert main(["-model", str(path), "-src", str(src), "-out", str(out), "-max_sents", "2"]) == 0
    sents = load_attention(out)
    assert [toks for toks, _ in sents] == [FIG1, ["of", "science", "."]]
    att = sents[0][1]
    assert att.shape == (2, 8, 7, 7) and sents[1][1].shape == (2, 8, 3, 3)
    np.testing.assert_allclose(att.sum(-1), 1.0, atol=1e-5)
    # word-based 'next' (head 3) of 'science' attends 'fic@@ tion' with 1/2 each, every layer
    np.testing.assert_allclose(att[:, 2, 3], [[0, 0, 0, 0, 0.5, 0.5, 0]] * 2, atol=1e-6)
    # the same sentence alone or in a padded batch gives the same learned-head rows
    assert export_attention(path, src, tmp_path / "one.npz", max_sents=1, batch_size=1) == 1
    np.testing.assert_allclose(load_attention(tmp_path / "one.npz")[0][1], att, atol=1e-5)
