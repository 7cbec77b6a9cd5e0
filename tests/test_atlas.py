"""The head atlas: criteria against hand-computed cases, one model's head table, agreement."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from headlab.engine.model import build_model, model_opt, save_checkpoint, toy_vocabs

import atlas_workflow


@pytest.fixture(scope="session")
def atlas_run(tmp_path_factory, mirror):
    """The workflow's atlas: one snakemake run per test session, shared by the test files."""
    return atlas_workflow.build(tmp_path_factory, mirror)


TINY = dict(hidden_size=16, heads=2, enc_heads="2L", transformer_ff=32, enc_layers=1, dec_layers=1, dropout=0.0,
            attention_dropout=0.0)


def _checkpoint(tmp_path, name="model.pt", seed=0, **kwargs):
    torch.manual_seed(seed)
    vocabs = toy_vocabs(24, share=True)
    opt = model_opt(**{**TINY, **kwargs})
    model = build_model(opt, vocabs)
    path = tmp_path / name
    save_checkpoint(model, opt, vocabs, path)
    return path, model, opt, vocabs


def _data(tmp_path, n=10, seed=3, words=None):
    rng = np.random.default_rng(seed)
    words = words or [f"w{i}" for i in range(20)]
    src = [" ".join(rng.choice(words, rng.integers(3, 9))) for _ in range(n)]
    tgt = [" ".join(rng.choice(words, rng.integers(2, 8))) for _ in range(n)]
    (tmp_path / "v.src").write_text("\n".join(src) + "\n")
    (tmp_path / "v.tgt").write_text("\n".join(tgt) + "\n")
    return str(tmp_path / "v.src"), str(tmp_path / "v.tgt"), src, tgt


def _loaded(path):
    from headlab.atlas.probe import site_modules
    from headlab.engine.export import load_model
    vocabs, model, opt = load_model(str(path))
    model.eval()
    return vocabs, model, site_modules(model, opt)


def _total_loss(model, vocabs, src, tgt):
    from onmt.constants import DefaultTokens
    from headlab.atlas.probe import batches, sentence_loss
    pad = vocabs["tgt"][DefaultTokens.PAD]
    with torch.no_grad():
        return sum(float(sentence_loss(model, b.src, b.src_len, b.tgt, pad)[0].sum())
                   for b in batches(model, vocabs, [s.split() for s in src], [t.split() for t in tgt], "cpu", 4))


def test_stock_decoder_becomes_an_equal_headlab_decoder(tmp_path):
    from headlab.engine.decoder import HeadlabDecoder
    path, *_ = _checkpoint(tmp_path, enc_layers=2, dec_layers=2)
    _, _, src, tgt = _data(tmp_path)
    from headlab.engine.export import load_model
    vocabs, stock, _ = load_model(str(path))
    stock.eval()
    assert not isinstance(stock.decoder, HeadlabDecoder)
    before = _total_loss(stock, vocabs, src, tgt)
    vocabs, model, modules = _loaded(path)
    assert isinstance(model.decoder, HeadlabDecoder) and len(modules["cross"]) == 2
    assert _total_loss(model, vocabs, src, tgt) == pytest.approx(before, rel=1e-5)


def test_gradient_importance_of_an_ignored_head_is_zero_and_matches_finite_differences(tmp_path):
    """A two-head encoder layer whose output projection ignores head 2: I_2 = 0. Head 1's
    score is Σ_x |dL(x)/dξ_1| (Michel et al. eq. 5), checked against central differences
    of each sentence's loss."""
    from onmt.constants import DefaultTokens
    from headlab.atlas.probe import batches, forward_pass, sentence_loss, set_probes

    path, model, opt, vocabs = _checkpoint(tmp_path)
    d_head = TINY["hidden_size"] // 2
    with torch.no_grad():
        model.encoder.transformer[0].self_attn.final_linear.weight[:, d_head:] = 0.0
    save_checkpoint(model, opt, vocabs, path)
    _, _, src, tgt = _data(tmp_path, n=6)
    vocabs, model, modules = _loaded(path)
    model.double()                     # finite differences need more than float32's digits
    pad = vocabs["tgt"][DefaultTokens.PAD]
    data = batches(model, vocabs, [s.split() for s in src], [t.split() for t in tgt], "cpu", 4)
    results, total, tokens, _ = forward_pass(model, modules, data, pad)
    grad = results["enc"].grad
    assert grad[0, 1] == 0.0 and grad[0, 0] > 0
    assert (results["dec"].grad > 0).all() and (results["cross"].grad > 0).all()
    # by hand: each sentence alone, ξ_1 = 1 ± eps
    expected, eps = 0.0, 1e-4
    for s, t in zip(src, tgt):
        [one] = batches(model, vocabs, [s.split()], [t.split()], "cpu", 1)
        losses = []
        for x in (1 + eps, 1 - eps):
            set_probes(modules, lambda site, layer, h: torch.tensor([x, 1.0], dtype=torch.float64) if site == "enc" else None)
            with torch.no_grad():
                losses.append(float(sentence_loss(model, one.src, one.src_len, one.tgt, pad)[0].double()))
        set_probes(modules, lambda *_: None)
        expected += abs(losses[0] - losses[1]) / (2 * eps)
    assert grad[0, 0] == pytest.approx(expected, rel=1e-4)
    assert total == pytest.approx(_total_loss(model, vocabs, src, tgt), rel=1e-5)


def test_loss_change_equals_a_separate_forward_with_the_head_ablated(tmp_path):
    """The atlas's per-head ablation against the model's own test-time ablation mechanism
    (head_scale, what -disable_*_heads sets), one layer at a time, in a fresh model."""
    from headlab.atlas.model import characterise
    path, *_ = _checkpoint(tmp_path, enc_layers=2, dec_layers=2)
    src_path, tgt_path, src, tgt = _data(tmp_path)
    heads = characterise(str(path), src_path, tgt_path, str(tmp_path / "atlas"), "toy", examples=2)
    assert len(heads) == 3 * 2 * 2
    for site, layer, head in [("enc", 2, 1), ("dec", 1, 2), ("cross", 2, 2)]:
        vocabs, model, modules = _loaded(path)
        full = _total_loss(model, vocabs, src, tgt)
        modules[site][layer - 1].head_scale[head - 1] = 0.0
        ablated = _total_loss(model, vocabs, src, tgt)
        row = heads[(heads.site == site) & (heads.layer == layer) & (heads["head"] == head)].iloc[0]
        tokens = sum(len(t.split()) + 1 for t in tgt)
        assert row.loss_delta == pytest.approx((ablated - full) / tokens, rel=1e-4, abs=1e-7)


def test_fixed_pattern_confidence_entropy_and_distance_follow_the_pattern(tmp_path):
    """Paper A's 'current', 'previous' and 'next' tokens: one weight of 1 per row, so
    confidence 1 and entropy 0; distance 0, and 1 for every token but the one whose row
    falls back to itself (first for previous, last for next: (n - 1)/n per sentence,
    token-weighted over the set)."""
    from headlab.atlas.model import characterise
    path, *_ = _checkpoint(tmp_path, heads=8, hidden_size=32, enc_heads="3Ftoken+5L")
    src_path, tgt_path, src, _ = _data(tmp_path)
    heads = characterise(str(path), src_path, tgt_path, str(tmp_path / "atlas"), "toy")
    enc = heads[heads.site == "enc"].set_index("head")
    assert list(enc.loc[[1, 2, 3], "kind"]) == ["Ftoken:current", "Ftoken:previous", "Ftoken:next"]
    assert list(enc.loc[[1, 4], "family"]) == ["fixed pattern", "learned"]
    n = np.array([len(s.split()) for s in src])
    np.testing.assert_allclose(enc.loc[[1, 2, 3], "confidence"], 1.0)
    np.testing.assert_allclose(enc.loc[[1, 2, 3], "entropy"], 0.0, atol=1e-9)
    assert enc.loc[1, "distance"] == pytest.approx(0.0)
    assert enc.loc[2, "distance"] == pytest.approx((n - 1).sum() / n.sum())
    assert enc.loc[3, "distance"] == pytest.approx((n - 1).sum() / n.sum())
    assert (enc.loc[4:, "confidence"] < 1).all()
    assert heads[heads.site == "cross"]["distance"].isna().all()


def test_agreement_and_claims_on_hand_made_heads():
    """rho of perfectly monotone criteria is +-1 with a degenerate interval; a claim whose
    sign is the opposite of what the paper says 'contradicts'; pruned heads are left out."""
    from headlab.atlas.agree import agreement, claims
    n = 12
    heads = pd.DataFrame({"model": ["m"] * n, "site": ["enc"] * n, "kind": ["RHElpea"] * n, "pruned": [False] * n,
                          "confidence": np.arange(n, dtype=float), "grad_importance": np.arange(n) ** 2.0,
                          "grad_raw": np.arange(n) ** 3.0,
                          "loss_delta": -np.arange(n, dtype=float), "rhe_redundant": np.arange(n) / n,
                          "gate": np.nan, "dhicm_importance": np.nan, "syn_margin": np.nan})
    heads.loc[0, "pruned"] = True
    heads.loc[0, "confidence"] = 100.0            # would break the monotone pairs if counted
    table = agreement(heads, {"m": ["paper_C"]}).set_index(["group", "a", "b"])
    row = table.loc[("all", "confidence", "grad_importance")]
    assert row.rho == pytest.approx(1.0) and row.low == pytest.approx(1.0) and row.n == n - 1
    assert table.loc[("paper_C", "confidence", "loss_delta")].rho == pytest.approx(-1.0)
    said = claims(heads).set_index("a")
    assert said.loc["rhe_redundant", "verdict"] == "contradicts"      # paper C expects a negative rho
    # Michel et al.'s claim: the raw gradient against the raw loss change, said in its row
    assert said.loc["grad_raw", "verdict"] == "contradicts" and "raw" in said.loc["grad_raw", "compares"]
    assert said.loc["gate", "verdict"] == "no data"


def test_colour_scales_ignore_switched_off_heads_and_go_log_over_a_decade():
    """The value norm of 50 live heads 1, 2, ..., 50 beside 3 pruned heads and 2 closed
    gates at 1e-6: the scale is the 2nd to 98th percentile of the live heads alone (1.98 and
    49.02 by linear interpolation: 1 + 0.02 * 49, 1 + 0.98 * 49), a span over ten times, so
    the scale is logarithmic; confidence 0.5..1 spans less and stays linear; the gate
    criterion keeps the closed gates (a closed gate is what it shows)."""
    from headlab.report.atlas import scales
    live = np.arange(1.0, 51.0)
    heads = pd.DataFrame({"model": "m", "site": "enc", "layer": 1, "head": np.arange(1, 56),
                          "pruned": [False] * 50 + [True] * 3 + [False] * 2,
                          "gate_kept": [np.nan] * 53 + [False] * 2,
                          "value_norm": np.r_[live, [1e-6] * 5], "confidence": np.r_[np.linspace(0.5, 1, 50), [0.01] * 5],
                          "gate": np.r_[[np.nan] * 50, [np.nan] * 3, [0.0, 0.0]]})
    heads.loc[:9, "gate"], heads.loc[:9, "gate_kept"] = np.linspace(0.6, 1.0, 10), True
    out = scales(heads)
    assert (out["value_norm"]["lo"], out["value_norm"]["hi"]) == (pytest.approx(1.98), pytest.approx(49.02))
    assert out["value_norm"]["log"] is True
    assert (out["confidence"]["lo"], out["confidence"]["hi"]) == (pytest.approx(0.51), pytest.approx(0.99))
    assert out["confidence"]["log"] is False
    # 12 gates: 0, 0, then 0.6 .. 1.0; the 2nd percentile interpolates between the two zeros
    assert out["gate"]["lo"] == 0.0 and out["gate"]["log"] is False
    assert out["entropy"]["lo"] is None and out["entropy"]["log"] is False


def test_delta_bleu_counts_each_head_index_once():
    """ΔBLEU is measured per encoder head index (head k disabled in every layer): two layers
    of eight heads give 8 units, not 16, the other criterion averaged over the layers; a
    criterion on every head alone keeps all 16 rows."""
    from headlab.atlas.agree import agreement, model_pairs, units
    heads = pd.DataFrame({"model": "m", "site": "enc", "layer": np.repeat([1, 2], 8),
                          "head": np.tile(np.arange(1, 9), 2), "pruned": False, "delta_bleu": np.tile(-np.arange(8.0), 2),
                          "loss_delta": np.r_[np.arange(8.0), np.arange(8.0) + 0.5],
                          "confidence": np.linspace(0, 1, 16)})
    frame, unit = units(heads, "delta_bleu", "loss_delta")
    assert unit == "head index" and len(frame) == 8
    assert frame.set_index("head").loc[3, "loss_delta"] == pytest.approx(2.25)
    table = agreement(heads, {}).set_index(["a", "b"])
    row = table.loc[("loss_delta", "delta_bleu")]
    assert row.n == 8 and row.units == "head index" and row.rho == pytest.approx(-1.0)
    assert table.loc[("confidence", "loss_delta")].n == 16
    assert {(p["a"], p["b"]): p["n"] for p in model_pairs(heads)}[("confidence", "delta_bleu")] == 8


def test_selection_headline_and_bleu_inputs():
    import yaml
    from headlab.atlas.select import bleu_scores, run_models, selected
    config = yaml.safe_load(open("config/config.yaml"))
    models, chosen = run_models(config, "/nowhere"), selected(config, "/nowhere")
    assert set(chosen) < set(models)
    assert "multi30k/en-de/full/mini/default/2+2/8RHElpea.*8L/seed1" in chosen          # RHE
    assert "multi30k/en-de/full/mini/default/2+1/7Ftoken+1L/seed1" in chosen            # paper A T4
    assert "multi30k/en-de/full/mini/default/2+1/8L/seed1" not in chosen
    # the headline's other seeds are trained, not characterised (nor ablated for the atlas)
    assert "multi30k/en-de/full/mini/default/2+2/8RHElpea.*8L/seed2" in models
    assert not [p for p in chosen if not p.endswith("/seed1") and "/seed1/ft_" not in p]
    seed2 = models["multi30k/en-de/full/mini/default/2+2/7Ftoken+1L/seed2"]["model"]
    assert bleu_scores(config, "R", seed2) == {}
    assert "multi30k/en-de/full/mini/default/2+2/7Ftoken+1L/seed2" in selected(
        {**config, "atlas": {**config["atlas"], "models": "all"}}, "/nowhere")
    assert models["multi30k/en-de/full/mini/default/2+2/8L/seed1"]["studies"] == ["paper_A", "paper_C", "paper_D"]
    t4 = bleu_scores(config, "R", models["multi30k/en-de/full/mini/default/2+1/7Ftoken+1L/seed1"]["model"])
    assert sorted(t4) == ["1", "2", "3", "4", "5", "6", "7", "8", "full"]
    assert t4["3"].endswith("7Ftoken+1L/seed1/test_2016_flickr.no-h3.json")
    assert bleu_scores(config, "R", models["multi30k/en-de/full/mini/default/2+2/8L/seed1"]["model"]) == {}
    config["atlas"]["models"] = ["*/fr-en/*"]
    assert {p.split("/")[1] for p in selected(config, "/nowhere")} == {"fr-en"}


@pytest.mark.slow
def test_end_to_end_atlas(atlas_run):
    """The rules on the smoke config (tests/atlas_workflow.py: a stock 8L model and DHICM at
    every site): every criterion written, the explorer and the agreement outputs."""
    from atlas_workflow import DHICM, MODEL_DIR, SPECS
    atlas = atlas_run / "results/atlas"
    for heads_spec in SPECS:
        folder = atlas / MODEL_DIR.format(heads_spec)
        heads = pd.read_csv(folder / "heads.csv")
        assert len(heads) == (2 + 1 + 1) * 8
        enc = heads[heads.site == "enc"]
        assert enc["syn_margin"].notna().any() and heads["grad_importance"].notna().all()
        assert heads["value_norm"].notna().all() and (heads["value_norm"] > 0).all()
        assert json.loads((folder / "timing.json").read_text())["sentences"] == 12
    dh = pd.read_csv(atlas / MODEL_DIR.format(DHICM) / "heads.csv")
    enc = dh[dh.site == "enc"]
    assert enc[enc.layer == 2]["dhicm_importance"].notna().all() and enc[enc.layer == 1]["dhicm_importance"].isna().all()
    assert dh[dh.site == "cross"]["dhicm_importance"].notna().all()
    assert (atlas / "index.html").read_text().count('<base href="explorer/">') == 1
    assert len(list((atlas / "explorer/data").glob("m*.js"))) == 2
    assert pd.read_csv(atlas / "agreement.csv")["group"].iloc[0] == "all"
    assert (atlas / "agreement.png").stat().st_size > 0


def test_spearman_with_ties_equals_pearson_of_average_ranks():
    from headlab.atlas.agree import spearman, spearman_ci
    a = np.array([1.0, 2.0, 2.0, 3.0, 5.0, 4.0])
    b = np.array([2.0, 1.0, 4.0, 4.0, 6.0, 3.0])
    ra, rb = pd.Series(a).rank().to_numpy(), pd.Series(b).rank().to_numpy()
    assert spearman(a, b) == pytest.approx(np.corrcoef(ra, rb)[0, 1])
    rho, low, high = spearman_ci(a, b)
    assert low <= rho <= high and -1 <= low and high <= 1
    assert math.isnan(spearman(a, np.ones(6)))


def test_value_norm_of_a_hand_set_layer():
    """Kobayashi et al.'s ‖Σ_j α_ij f(x_j)‖ by hand: two width-1 learned heads whose query
    and key weights are 0 (uniform attention, α = 1/2), x1 = (1, 0), x2 = (0, 1), values
    head 1 = x·(1, 0) and head 2 = x·(0, 2), so o_1 = 1/2 and o_2 = 1 at both queries; the
    output projection maps head 1 to (3, 4) and head 2 to (0, 1): norms 2.5 and 1. A third,
    padded query token with large inputs must not count."""
    from headlab.atlas.probe import _OutputRecorder, head_projections, value_norm_sums
    from headlab.heads.attention import HeadlabAttention
    from headlab.heads.base import HeadContext
    from headlab.heads.spec import parse_spec

    [layer] = parse_spec("2L", 1, "enc")
    attn = HeadlabAttention(layer, d_model=2, default_d_head=1)
    with torch.no_grad():
        for p in attn.parameters():
            p.zero_()
        attn.linear_values.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 2.0]]))
        attn.final_linear.weight.copy_(torch.tensor([[3.0, 0.0], [4.0, 1.0]]))
    x = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [50.0, 70.0]]])
    pad = torch.tensor([[False, False, True]])
    recorder = _OutputRecorder(attn)
    try:
        attn(x, HeadContext(pad_mask=pad, lengths=torch.tensor([2])))
        sums = value_norm_sums(recorder.outs, head_projections(attn), torch.tensor([2]))
    finally:
        recorder.close()
    np.testing.assert_allclose(sums.numpy() / 2, [2.5, 1.0], rtol=1e-6)
    assert "head_outputs" not in vars(attn)                 # the method is back
    # DHICM's G scales each head's vector first: G = (0.2, 0.8) at both tokens
    outs = [torch.tensor([[[[0.5], [1.0]], [[0.5], [1.0]]]])]
    weighted = value_norm_sums(outs, head_projections(attn), torch.tensor([2]), torch.tensor([[[0.2, 0.8]] * 2]))
    np.testing.assert_allclose(weighted.numpy() / 2, [0.5, 0.8], rtol=1e-6)


def test_value_norm_is_what_the_head_adds_to_the_layer_output(tmp_path):
    """In a real model: the value norm of each encoder head equals the mean norm of the
    change of its layer's output when that head alone is disabled (the output projection is
    linear), and a head the projection ignores has value norm 0."""
    from headlab.atlas.model import characterise
    from headlab.atlas.probe import batches

    path, model, opt, vocabs = _checkpoint(tmp_path)
    d_head = TINY["hidden_size"] // 2
    with torch.no_grad():
        model.encoder.transformer[0].self_attn.final_linear.weight[:, d_head:] = 0.0
    save_checkpoint(model, opt, vocabs, path)
    src_path, tgt_path, src, tgt = _data(tmp_path, n=5)
    heads = characterise(str(path), src_path, tgt_path, str(tmp_path / "atlas"), "toy")
    enc = heads[heads.site == "enc"].set_index("head")
    assert enc.loc[2, "value_norm"] == 0.0 and enc.loc[1, "value_norm"] > 0
    assert (heads["value_norm"] >= 0).all() and heads["value_norm"].notna().all()
    vocabs, model, modules = _loaded(path)
    attn = modules["enc"][0]
    seen = {}
    attn.register_forward_hook(lambda m, args, out: seen.__setitem__("out", out))
    norms, tokens = 0.0, 0
    with torch.no_grad():
        for b in batches(model, vocabs, [s.split() for s in src], [t.split() for t in tgt], "cpu", 8):
            model.encoder(b.src, b.src_len)
            full = seen["out"]
            attn.head_scale[0] = 0.0
            model.encoder(b.src, b.src_len)
            attn.head_scale[0] = 1.0
            real = torch.arange(full.size(1)).view(1, -1) < b.src_len.view(-1, 1)
            norms += float(((full - seen["out"]).norm(dim=-1) * real).sum())
            tokens += int(b.src_len.sum())
    assert enc.loc[1, "value_norm"] == pytest.approx(norms / tokens, rel=1e-4)


GPU_SITTING = "A-T1-deep/2026-11-27-h100-65e2124"


def test_the_atlas_reads_the_published_gpu_heads_as_models_of_their_own(tmp_path):
    """A sitting's ``atlas/<model>/heads.csv`` (written on the GPU machine by atlas-model;
    no checkpoint comes back) is a model of the explorer and the agreement, named as GPU-scale;
    a published table that lacks a column is one error naming its file."""
    from headlab.atlas.model import characterise
    from headlab.errors import DataError
    from headlab.report.atlas import build

    path, *_ = _checkpoint(tmp_path, heads=4, enc_heads="4L")      # 12 heads: enough for a rank agreement
    src_path, tgt_path, _, _ = _data(tmp_path)
    published = tmp_path / "published"
    folder = published / GPU_SITTING / "atlas/8L"
    characterise(str(path), src_path, tgt_path, str(folder), "named on the GPU machine", examples=1)
    out = tmp_path / "atlas"
    sizes = build({"studies": {}}, str(tmp_path / "results"), str(out), published=str(published))
    label = "GPU A-T1-deep 2026-11-27-h100-65e2124 8L"
    assert list(sizes) == [label]
    page = (out / "index.html").read_text()
    assert f'"label":"{label}"' in page and '"studies":["GPU sittings"]' in page
    data = (out / "explorer/data/m0001.js").read_text()
    assert f'"path":"{label}"' in data and "named on the GPU machine" not in data
    assert "GPU sittings" in set(pd.read_csv(out / "agreement.csv")["group"])
    broken = published / "A-T1-deep/2026-11-28-h200-bbbbbbb/atlas/8L"
    broken.mkdir(parents=True)
    pd.read_csv(folder / "heads.csv").drop(columns=["entropy", "confidence"]).to_csv(broken / "heads.csv", index=False)
    with pytest.raises(DataError, match=r"2026-11-28-h200-bbbbbbb/atlas/8L/heads.csv: .*lacks column\(s\) confidence, entropy"):
        build({"studies": {}}, str(tmp_path / "results"), str(out), published=str(published))
