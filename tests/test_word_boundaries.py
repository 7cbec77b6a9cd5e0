"""Word boundaries come from the text, not the vocabulary (issue 24 item 1): a word-based
model trained and translated through OpenNMT-py (bucketing, batching, validation, beam
search) on BPE pieces that are out of its vocabulary sees every sentence's word ids as the
text numbers them (``headlab.syntax.features.piece_word_ids``, the parse features' numbering)."""
from __future__ import annotations

import random

import pytest

from headlab.engine.config import feature_args, train_config, write_yaml
from headlab.engine.encoder import HeadlabEncoder
from headlab.syntax.features import piece_word_ids, write_feature_vocabs

#: pieces of the toy corpus; the vocabulary lacks the OOV ones (they become <unk>, no "@@")
PIECES = "a b c d e f g h@@ i j k@@ l x@@ y@@ z".split()
OOV = {"x@@", "y@@", "k@@"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("words")
    rng = random.Random(1)
    lines = []
    for _ in range(40):
        words = []
        for _ in range(rng.randint(2, 6)):
            piece = rng.choice(PIECES)
            while piece.endswith("@@"):                     # a word: pieces up to one without "@@"
                words.append(piece)
                piece = rng.choice(PIECES)
            words.append(piece)
        lines.append(" ".join(words))
    src = folder / "train.src"
    src.write_text("\n".join(lines) + "\n")
    (folder / "train.tgt").write_text("\n".join(" ".join(reversed(s.split())) for s in lines) + "\n")
    vocab = folder / "vocab.txt"
    vocab.write_text("".join(f"{p}\t1\n" for p in PIECES if p not in OOV))
    write_feature_vocabs(vocab, count=1, values=4)
    return folder, lines


class Spy:
    """Records (piece ids, word ids) of every sentence the encoder numbers words for."""

    def __init__(self, monkeypatch):
        self.rows = []
        original = HeadlabEncoder.context

        def context(encoder, src, src_len, word_ids=None):
            ctx = original(encoder, src, src_len, word_ids)
            for b, n in enumerate(src_len.tolist()):
                self.rows.append((tuple(src[b, :n, 0].tolist()), tuple(ctx.word_ids[b, :n].tolist())))
            return ctx

        monkeypatch.setattr(HeadlabEncoder, "context", context)


def expected_rows(lines, vocab) -> list:
    """(piece ids, word ids) of each line, word ids numbered from its text."""
    import pyonmttok
    tokens = [line.split("\t")[0] for line in vocab.read_text().splitlines()]
    ids = pyonmttok.build_vocab_from_tokens(tokens, special_tokens=["<unk>", "<blank>", "<s>", "</s>"])
    ids.default_id = ids["<unk>"]
    return [(tuple(ids(line.split())), tuple(piece_word_ids(line.split()))) for line in lines]


def test_training_and_beam_translation_number_words_from_the_text(corpus, monkeypatch):
    from headlab.engine import run

    folder, lines = corpus
    assert any(set(line.split()) & OOV for line in lines)
    expected = expected_rows(lines, folder / "vocab.txt")
    options = train_config(
        preset="tiny", layers="1+1", heads="7Fword+1L", train_src=str(folder / "train.src"),
        train_tgt=str(folder / "train.tgt"), valid_src=str(folder / "train.src"),
        valid_tgt=str(folder / "train.tgt"), vocab=str(folder / "vocab.txt"), save_dir=str(folder / "model"),
        overrides=dict(hidden_size=16, word_vec_size=16, transformer_ff=32, train_steps=4, valid_steps=4,
                       save_checkpoint_steps=4, warmup_steps=2, batch_size=96, bucket_size=64))
    write_yaml(options, folder / "train.yaml")
    spy = Spy(monkeypatch)
    assert run.train(["-config", str(folder / "train.yaml")]) == 0
    unk = 0
    oov_rows = [r for r in spy.rows if unk in r[0]]
    assert oov_rows, "training saw no out-of-vocabulary piece"
    assert set(spy.rows) <= set(expected)                   # every batch, validation included

    spy.rows.clear()
    out = folder / "hyp.txt"
    args = ["-model", str(folder / "model" / "model.pt"), "-src", str(folder / "train.src"),
            "-output", str(out), "-beam_size", "3", "-max_length", "6", "-batch_size", "7",
            "-batch_type", "sents"] + feature_args(("continues",)).split()
    assert run.translate(args) == 0
    assert len(out.read_text().splitlines()) == len(lines)
    assert sorted(spy.rows) == sorted(expected)             # each sentence once, before beam tiling
    assert any(unk in ids for ids, _ in spy.rows)


def test_translation_without_the_word_column_is_an_error(corpus):
    from headlab.engine import run
    from headlab.errors import ConfigError, DataError

    folder, _ = corpus
    model = folder / "model" / "model.pt"
    if not model.exists():
        pytest.skip("needs the trained toy model")
    base = ["-model", str(model), "-src", str(folder / "train.src"), "-output", str(folder / "bad.txt")]
    with pytest.raises(ConfigError, match=r"need 1 source feature columns"):
        run.translate(base)
    # the column, but not filled from the text (transform not listed)
    with pytest.raises(DataError, match=r"not filled from the text"):
        run.translate(base + ["-n_src_feats", "1", "-src_feats_defaults", "_"])
    assert not (folder / "bad.txt").exists()
