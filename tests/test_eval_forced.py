"""Forced-decoding scorer on a tiny random stock-transformer OpenNMT-py model."""
from __future__ import annotations

import math
import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onmt")

SRC_WORDS = "a b c d e f g".split()
TGT_WORDS = "v w x y z u".split()
SRC = ["a b c", "d", "e f g a b c d e", "a a a a", "b c", "g f", "c d e f", "a"]
TGT = ["v w", "x y z", "z", "u u u u u u", "w", "", "v x z", "y y"]


def make_checkpoint(path):
    """Build a 2+2-layer transformer with OpenNMT's own builder and save it the way
    onmt/models/model_saver.py does ({"model", "generator", "vocab", "opt"})."""
    warnings.filterwarnings("ignore")
    import pyonmttok
    import onmt.opts as opts
    from onmt.constants import DefaultTokens, ModelTask
    from onmt.inputters.inputter import vocabs_to_dict
    from onmt.model_builder import build_base_model
    from onmt.utils.parse import ArgumentParser

    parser = ArgumentParser()
    opts.train_opts(parser)
    opt = parser.parse_args([
        "-data", "{}", "-src_vocab", "unused", "-encoder_type", "transformer",
        "-decoder_type", "transformer", "-layers", "2", "-heads", "2", "-hidden_size", "16",
        "-word_vec_size", "16", "-transformer_ff", "32", "-position_encoding", "-dropout", "0",
        "-attention_dropout", "0"])
    ArgumentParser.update_model_opts(opt)
    ArgumentParser.validate_model_opts(opt)
    specials = [DefaultTokens.UNK, DefaultTokens.PAD, DefaultTokens.BOS, DefaultTokens.EOS]
    vocabs = {"src": pyonmttok.build_vocab_from_tokens(specials + SRC_WORDS),
              "tgt": pyonmttok.build_vocab_from_tokens(specials + TGT_WORDS),
              "data_task": ModelTask.SEQ2SEQ, "decoder_start_token": DefaultTokens.BOS}
    torch.manual_seed(0)
    model = build_base_model(opt, vocabs)
    for p in model.parameters():  # non-trivial weights: scores must differ between tokens
        torch.nn.init.normal_(p, std=0.5)
    state = {k: v for k, v in model.state_dict().items() if "generator" not in k}
    torch.save({"model": state, "generator": model.generator.state_dict(),
                "vocab": vocabs_to_dict(vocabs), "opt": opt}, path)
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from headlab.eval.forced import load_model

    path = make_checkpoint(tmp_path_factory.mktemp("model") / "tiny.pt")
    model, vocabs, device = load_model(path)
    return path, model, vocabs


def test_batch_size_invariant(tiny):
    from headlab.eval.forced import score

    _, model, vocabs = tiny
    runs = [score(model, vocabs, SRC, TGT, batch_size=b) for b in (1, 3, 16)]
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            assert a.total == pytest.approx(b.total, abs=1e-5)
            assert a.tokens == b.tokens
    first = runs[0]
    assert [r.tokens for r in first] == [len(t.split()) + 1 for t in TGT]  # EOS counted
    assert all(r.total < 0 and math.isclose(r.mean, r.total / r.tokens) for r in first)
    assert len({round(r.total, 4) for r in first}) > 1


def test_matches_manual_step_by_step(tiny):
    """Teacher-forced full-sequence score == sum of stepwise log-probs (incremental decoding)."""
    from headlab.eval.forced import score

    _, model, vocabs = tiny
    src, tgt = "e f g a", "v w x"
    expected = score(model, vocabs, [src], [tgt])[0].total
    s = torch.tensor([vocabs["src"](src.split())]).unsqueeze(-1)
    enc_out, hs, _ = model.encoder(s, torch.tensor([4]))
    model.decoder.init_state(s, enc_out, hs)
    ids = vocabs["tgt"](["<s>"] + tgt.split() + ["</s>"])
    total = 0.0
    with torch.no_grad():
        for step in range(len(ids) - 1):
            inp = torch.tensor([[[ids[step]]]])
            out, _ = model.decoder(inp, enc_out, src_len=torch.tensor([4]), step=step)
            lp = torch.log_softmax(model.generator(out.squeeze(1)), -1)
            total += float(lp[0, ids[step + 1]])
    assert expected == pytest.approx(total, abs=1e-4)


def test_cli_and_translator_gold_score(tiny, tmp_path):
    """`headlab score` equals the gold score OpenNMT's translator reports for -tgt."""
    from headlab.eval.forced import main

    path, model, vocabs = tiny
    (tmp_path / "src").write_text("\n".join(SRC) + "\n")
    (tmp_path / "tgt").write_text("\n".join(TGT) + "\n")
    out = tmp_path / "scores.tsv"
    assert main(["-model", str(path), "-src", str(tmp_path / "src"), "-tgt", str(tmp_path / "tgt"),
                 "-out", str(out), "-batch_size", "3"]) == 0
    ours = [float(line.split("\t")[0]) for line in out.read_text().splitlines()]
    assert len(ours) == len(SRC)

    import onmt.opts
    from onmt.translate.translator import build_translator
    from onmt.utils.parse import ArgumentParser

    parser = ArgumentParser()
    onmt.opts.translate_opts(parser)
    opt = parser.parse_args(["-model", str(path), "-src", "x", "-max_length", "3", "-beam_size", "1"])
    translator = build_translator(opt, report_score=False, out_file=open(tmp_path / "pred", "w"))
    # OpenNMT splits an empty target on " " into one empty token (scored as <unk>);
    # we score it as EOS alone, so the comparison leaves empty targets out.
    kept = [i for i, t in enumerate(TGT) if t]
    gold = []
    with torch.no_grad():
        for i in kept:
            batch = _onmt_batch(vocabs, [SRC[i]], [TGT[i]])
            gs, _ = translator._score_target(*_encode(translator, batch))
            gold.append(float(gs[0]))
    assert [ours[i] for i in kept] == pytest.approx(gold, abs=1e-4)


def _onmt_batch(vocabs, src, tgt):
    from onmt.inputters.text_utils import numericalize, tensorify

    examples = []
    for i, (s, t) in enumerate(zip(src, tgt)):
        ex = {"src": {"src": s}, "tgt": {"tgt": t}, "src_original": s.split(), "tgt_original": t.split(),
              "cid": "x", "cid_line_number": i, "indices": i}
        examples.append((numericalize(vocabs, ex), i))
    return tensorify(vocabs, examples, torch.device("cpu"))


def _encode(translator, batch):
    src, enc_final_hs, enc_out, src_len = translator._run_encoder(batch)
    translator.model.decoder.init_state(src, enc_out, enc_final_hs)
    return batch, enc_out, src_len, None


def test_bad_inputs(tiny, tmp_path):
    from headlab.errors import DataError, HeadlabError
    from headlab.eval.forced import main, score

    path, model, vocabs = tiny
    (tmp_path / "src").write_text("a b\nc\n")
    (tmp_path / "tgt").write_text("v\n")
    with pytest.raises(DataError, match="src.*tgt|tgt.*src"):
        main(["-model", str(path), "-src", str(tmp_path / "src"), "-tgt", str(tmp_path / "tgt"),
              "-out", str(tmp_path / "o")])
    assert not (tmp_path / "o").exists()
    with pytest.raises(DataError, match="empty source"):
        score(model, vocabs, ["a", ""], ["v", "w"])
    (tmp_path / "tgt").write_text("v\nw\n")
    with pytest.raises(HeadlabError):  # a stock transformer has no heads to disable
        main(["-model", str(path), "-src", str(tmp_path / "src"), "-tgt", str(tmp_path / "tgt"),
              "-out", str(tmp_path / "o"), "-disable_enc_heads", "2"])
    assert not (tmp_path / "o").exists()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_gpu_matches_cpu(tiny):
    from headlab.eval.forced import load_model, score

    path, model, vocabs = tiny
    cpu = score(model, vocabs, SRC, TGT, batch_size=3)
    gpu_model, gpu_vocabs, device = load_model(path, gpu=0)
    for b in (1, 16):
        gpu = score(gpu_model, gpu_vocabs, SRC, TGT, batch_size=b, device=device)
        assert [g.total for g in gpu] == pytest.approx([c.total for c in cpu], abs=1e-4)


def test_pairs_score_accuracy_pipeline(tiny, tmp_path):
    """suite -> `contrastive pairs` -> `score` -> `contrastive json`: shapes line up end to end."""
    from pathlib import Path

    import pandas as pd
    from headlab.eval.contrastive import main as contrastive
    from headlab.eval.forced import main as score_main

    path, _, _ = tiny
    suite = Path(__file__).parent / "fixtures" / "eval" / "contrawsd.json"
    src, tgt, scores, out = (tmp_path / n for n in ("src", "tgt", "scores.tsv", "acc.csv"))
    assert contrastive(["pairs", "--suite-type", "contrawsd", "--suite", str(suite),
                        "--src-out", str(src), "--tgt-out", str(tgt)]) == 0
    assert score_main(["-model", str(path), "-src", str(src), "-tgt", str(tgt), "-out", str(scores)]) == 0
    assert contrastive(["json", "--suite-type", "contrawsd", "--suite", str(suite), "--scores", str(scores),
                        "--out", str(out), "--system", "tiny", "--tag", "config=2+2"]) == 0
    frame = pd.read_csv(out)
    overall = frame[frame.by == "all"]
    assert overall.total.item() == 3 and list(frame.columns[:2]) == ["config", "system"]


def test_headlab_encoder_and_head_ablation(tmp_path):
    """A fixed-head encoder checkpoint (the other team's builder): batch-size invariant,
    and -disable_enc_heads changes the scores (paper A Table 6 / Figure 3 "H8 disabled")."""
    onmt_model = pytest.importorskip("headlab.engine.model")
    from headlab.eval.forced import load_model, score

    torch.manual_seed(0)
    words = "a b c d e f@@ g".split()
    vocabs = onmt_model.toy_vocabs(30, src_tokens=words)
    opt = onmt_model.model_opt(enc_heads="7Ftoken+1L", hidden_size=32, heads=8, transformer_ff=64,
                               enc_layers=2, dec_layers=1, dropout=0.0, attention_dropout=0.0)
    model = onmt_model.build_model(opt, vocabs)
    for p in model.parameters():  # default init gives near-uniform outputs: make heads matter
        torch.nn.init.normal_(p, std=0.5)
    path = tmp_path / "fixed.pt"
    onmt_model.save_checkpoint(model, opt, vocabs, path)
    src = ["a b c", "d e f@@ g a", "g", "b b c d e f@@ g a b"]
    tgt = ["a b", "c", "d e f@@ g", "a"]
    loaded, v, _ = load_model(path)
    runs = [score(loaded, v, src, tgt, batch_size=b) for b in (1, 3, 16)]
    for other in runs[1:]:
        assert [r.total for r in other] == pytest.approx([r.total for r in runs[0]], abs=1e-5)
    ablated, v2, _ = load_model(path, extra_opts=["-disable_enc_heads", "8"])
    changed = score(ablated, v2, src, tgt)
    assert max(abs(a.total - b.total) for a, b in zip(changed, runs[0])) > 1e-4
