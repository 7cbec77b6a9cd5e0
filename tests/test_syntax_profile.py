"""Paper D §2.2: gold trees (CoNLL-U, multi-word tokens, empty nodes), the word <-> Moses
<-> BPE alignment, and the per-head syntactic profile against hand-computed numbers."""
from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from headlab.errors import DataError
from headlab.syntax.align import align, pieces_to_tokens
from headlab.syntax.conllu import load_treebank, read_conllu, texts, v1_label
from headlab.syntax.profile import OFFSETS, Profile, best_baselines, predict, word_attention

FIXTURE = Path(__file__).parent / "fixtures" / "syntax" / "mwt_empty.conllu"
#: pieces that split every word apart (s1) and gon|na at a piece boundary (s2)
PIECES = [["I", "do", "n@@", "'t", "see", "the", "U.@@", "S.", '"', "now", '"', "."],
          ["She", "was", "gon@@", "na", "go", "."]]


def trees():
    return load_treebank(FIXTURE)


# -- CoNLL-U --------------------------------------------------------------------------

def test_conllu_multiword_tokens_and_empty_nodes():
    s1, s2 = trees()
    # syntactic words are the nodes; the empty node 4.1 is skipped; the MWT is one surface token
    assert s1.forms == ["I", "do", "n't", "see", "the", "U.S.", '"', "now", '"', "."]
    assert s1.heads == [4, 4, 4, 0, 6, 4, 8, 4, 8, 4]
    assert s1.tokens[1].form == "don't" and s1.tokens[1].words == (1, 2)
    assert s1.text == 'I don\'t see the U.S. "now".'
    assert s2.forms == ["She", "was", "gon", "na", "go", "."] and s2.tokens[2].form == "gonna"
    assert texts([s1, s2])[1] == "She was gonna go."


def test_conllu_text_rebuilt_without_text_comment(tmp_path):
    body = "".join(line for line in FIXTURE.read_text().splitlines(keepends=True) if not line.startswith("# text"))
    path = tmp_path / "t.conllu.gz"
    with gzip.open(path, "wt") as handle:
        handle.write(body)
    assert [t.text for t in read_conllu(path)] == ['I don\'t see the U.S. "now".', "She was gonna go."]


def test_v2_to_v1_labels():
    assert [v1_label(x) for x in ("obj", "obl", "aux:pass", "nsubj:pass", "nmod:poss", "obl:tmod", "nsubj:outer",
                                  "acl:relcl", "flat", "compound:prt", "case")] == \
        ["dobj", "nmod", "auxpass", "nsubjpass", "nmod:poss", "nmod:tmod", "nsubj", "acl:relcl", "name",
         "compound:prt", "case"]
    assert v1_label("poss", "spacy") == "nmod:poss" and v1_label("dobj", "spacy") == "dobj"


@pytest.mark.parametrize("edit, message", [
    (lambda s: s.replace("1\tI\tI\tPRON\tPRP\t_\t4", "1\tI\tI\tPRON\tPRP\t_\t40"), r"mwt\.conllu:1: .*head 40"),
    (lambda s: s.replace("5\tthe\tthe\tDET\tDT\t_\t6\tdet\t6:det\t_", "5\tthe\tthe"), r"mwt\.conllu:9: .*10 tab"),
    (lambda s: s.replace("# text = I don't see", "# text = I do not see"), r"mwt\.conllu:1: .*spell"),
    (lambda s: s.replace("5\tthe\t", "7\tthe\t"), r"mwt\.conllu:9: word ID 7 out of order"),
    # gold trees get the parses' checks: a root, and no cycle
    (lambda s: s.replace("4\tsee\tsee\tVERB\tVB\t_\t0", "4\tsee\tsee\tVERB\tVB\t_\t2"),
     r"mwt\.conllu:1: sentence s1: .*no root"),
    (lambda s: s.replace("8\tnow\tnow\tADV\tRB\t_\t4", "8\tnow\tnow\tADV\tRB\t_\t7"),
     r"mwt\.conllu:1: sentence s1: .*cycle"),
])
def test_conllu_errors_name_file_and_line(tmp_path, edit, message):
    path = tmp_path / "mwt.conllu"
    path.write_text(edit(FIXTURE.read_text()))
    with pytest.raises(DataError, match=message):
        load_treebank(path)


# -- alignment ------------------------------------------------------------------------

def test_pieces_to_tokens():
    assert pieces_to_tokens(["U.@@", "S.", "now"]) == (["U.S.", "now"], [[0, 1], [2]])
    with pytest.raises(DataError, match="ends in '@@'"):
        pieces_to_tokens(["a", "b@@"])


def test_align_mwt_words_pieces_and_moses_contraction():
    s1, s2 = trees()
    a = align(s1, PIECES[0])
    assert a.unaligned_words == [] and a.unit_pieces[5] == [6, 7]        # U.S. = two pieces, one word
    assert a.tokens[:3] == ["I", "do", "n't"]
    # Moses' "don 't" against UD's "do n't": one unit of two words, both counted unaligned
    moses = align(s1, ["I", "don", "'t", "see", "the", "U.S.", '"', "now", '"', "."])
    assert moses.unaligned_words == [1, 2] and moses.unit_words[1] == [1, 2] and moses.unit_pieces[1] == [1, 2]
    # BPE splitting Moses' "gonna" at UD's word boundary aligns gon and na; unsplit, it does not
    assert align(s2, PIECES[1]).unaligned_words == []
    assert align(s2, ["She", "was", "gonna", "go", "."]).unaligned_words == [2, 3]
    # truecasing changes case only: still aligned
    assert align(s2, ["she", "was", "gon@@", "na", "go", "."]).unaligned_words == []


def test_align_character_mismatch_names_the_sentence():
    s1, _ = trees()
    with pytest.raises(DataError, match=r"sentence s1 \(.*mwt_empty\.conllu:1\).*character 13, treebank '\.s\.\"now\"\.', "
                                      r"model input 'snow\.'"):
        align(s1, ["I", "do", "n't", "see", "the", "US", "now", "."])


# -- word-level attention and predictions ---------------------------------------------

def test_word_attention_sums_to_and_averages_from():
    att = np.array([[0.5, 0.2, 0.3],
                    [0.1, 0.1, 0.8],
                    [0.6, 0.0, 0.4]])
    w = word_attention(att, [[0, 1], [2]])
    # to unit 0 = sum of columns 0,1; from unit 0 = mean of rows 0,1
    assert np.allclose(w, [[(0.7 + 0.2) / 2, (0.3 + 0.8) / 2], [0.6, 0.4]])
    assert np.allclose(w.sum(-1), 1.0)


def test_predict_excludes_self_and_has_two_directions():
    w = np.array([[0.9, 0.1, 0.0],
                  [0.2, 0.7, 0.1],
                  [0.3, 0.6, 0.1]])
    assert predict(w, "dep->head").tolist() == [1, 0, 1]         # row argmax, diagonal ignored
    assert predict(w, "head->dep").tolist() == [2, 2, 1]         # column: who attends most to i


def _profile(pieces, make_att):
    tb = trees()
    prof = Profile(1, 2, [["L", "Ftoken:next"]])
    for tree, p in zip(tb, pieces):
        a = align(tree, p)
        prof.add(tree, a, make_att(tree, a, len(p)))
    return prof


def _oracle_and_next(tree, a, n):
    """Head 1 attends (from every piece) to the first piece of the gold head's unit;
    head 2 to the first piece of the next unit (the last unit: the previous one)."""
    att = np.zeros((1, 2, n, n))
    for u, pieces in enumerate(a.unit_pieces):
        words = a.unit_words[u]
        gold = tree.heads[words[0]] - 1
        target = a.unit_pieces[a.word_unit[gold]][0] if gold >= 0 and gold not in words else pieces[0]
        nxt = a.unit_pieces[u + 1 if u + 1 < len(a.unit_pieces) else u - 1][0]
        for p in pieces:
            att[0, 0, p, target] = 1.0
            att[0, 1, p, nxt] = 1.0
    return att


def test_oracle_head_scores_100_and_next_head_equals_plus_one_baseline():
    prof = _profile(PIECES, _oracle_and_next)
    heads = prof.heads()
    dep = heads[heads["direction"] == "dep->head"]
    assert (dep[dep["head"] == 1]["accuracy"] == 100.0).all()
    base = prof.baselines().set_index(["relation", "offset"])
    nxt = dep[dep["head"] == 2].set_index("relation")
    for rel, row in nxt.iterrows():
        assert row["accuracy"] == pytest.approx(base.loc[(rel, 1), "accuracy_scored"])
        assert row["accuracy"] == pytest.approx(base.loc[(rel, 1), "accuracy"])    # every word aligned
    assert nxt.loc["all", "accuracy"] == pytest.approx(100 * 5 / 14)
    assert set(heads["head_kind"]) == {"L", "Ftoken:next"}
    assert list(heads.columns) == ["layer", "head", "head_kind", "relation", "direction", "accuracy", "count",
                                   "correct", "skipped", "best_baseline", "baseline_offset"]


def test_baselines_against_hand_computation():
    """The fixture's 14 non-root arcs, offsets counted by hand (see the fixture's heads)."""
    prof = _profile(PIECES, _oracle_and_next)
    base = prof.baselines().set_index(["relation", "offset"])
    hits = {-3: 1, -2: 2, -1: 1, 1: 5, 2: 2, 3: 1}
    assert {o: base.loc[("all", o), "correct"] for o in OFFSETS} == hits
    assert base.loc[("all", 1), "count"] == 14 and base.loc[("all", 1), "accuracy"] == pytest.approx(500 / 14)
    assert base.loc[("advmod", 1), "accuracy"] == 50.0
    best = best_baselines(prof.baselines())
    assert best["all"] == (pytest.approx(500 / 14), 1)
    assert best["punct"] == (25.0, 1)             # +1, -1, -3 tie at 1 of 4: the nearest, right side
    assert best["nsubj:pass"] == (100.0, 2)
    assert "root" not in best                     # root arcs are not scored


def test_unaligned_words_are_counted_and_their_arcs_skipped():
    pieces = [["I", "don", "'t", "see", "the", "U.S.", '"', "now", '"', "."], ["She", "was", "gonna", "go", "."]]
    prof = _profile(pieces, _oracle_and_next)
    summary = prof.summary()
    assert summary["unaligned_words"] == 4 and summary["aligned_words"] == 12
    # s1: do, n't (their arcs) = 2; s2: every non-root arc touches gon or na = 5
    assert summary["arcs_skipped_unaligned"] == 7 and summary["arcs_scored"] == 7 and summary["arcs"] == 14
    heads = prof.heads()
    assert heads[(heads["relation"] == "all")]["skipped"].iloc[0] == 7
    base = prof.baselines().set_index(["relation", "offset"])
    assert base.loc[("all", 1), "count"] == 14 and base.loc[("all", 1), "count_scored"] == 7
    oracle = heads[(heads["head"] == 1) & (heads["direction"] == "dep->head")]
    assert (oracle["accuracy"] == 100.0).all()


# -- end to end: a real (untrained) OpenNMT-py checkpoint through `headlab profile-heads` --

def _model(tmp_path):
    import torch
    from headlab.engine.model import build_model, model_opt, save_checkpoint, toy_vocabs

    vocabs = toy_vocabs(40, src_tokens=sorted({p for s in PIECES for p in s}), share=True)
    opt = model_opt(hidden_size=16, heads=4, transformer_ff=32, enc_layers=2, dec_layers=1, dropout=0.0,
                    attention_dropout=0.0, share_embeddings=True, enc_heads="3Ftoken+1L")
    torch.manual_seed(0)
    path = tmp_path / "model.pt"
    save_checkpoint(build_model(opt, vocabs), opt, vocabs, path)
    src = tmp_path / "ud.bpe.src"
    src.write_text("".join(" ".join(s) + "\n" for s in PIECES))
    return path, src


def test_profile_heads_end_to_end(tmp_path):
    import json
    import pandas as pd
    from headlab.engine.export import load_attention
    from headlab.syntax.arcs import load_figure_sentences
    from headlab.syntax.run import main_profile_heads

    model, src = _model(tmp_path)
    out = tmp_path / "prof"
    assert main_profile_heads(["-model", str(model), "-treebank", str(FIXTURE), "-src", str(src),
                               "-pair", "en-de", "-out", str(out), "-figure_sents", "1"]) == 0
    heads = pd.read_csv(f"{out}.csv")
    assert len(heads) == 2 * 2 * 4 * heads["relation"].nunique()          # directions x layers x heads
    kinds = heads.drop_duplicates(["layer", "head"]).set_index(["layer", "head"])["head_kind"]
    assert kinds[(1, 2)] == "Ftoken:previous" and kinds[(2, 3)] == "Ftoken:next" and kinds[(1, 4)] == "L"
    base = pd.read_csv(f"{out}.baselines.csv").set_index(["relation", "offset"])
    dep = heads[heads["direction"] == "dep->head"]
    # paper A's fixed "next"/"previous" token heads are the +1/-1 baselines at word level
    for pattern, offset in (("Ftoken:next", 1), ("Ftoken:previous", -1)):
        for _, row in dep[dep["head_kind"] == pattern].iterrows():
            assert row["accuracy"] == pytest.approx(base.loc[(row["relation"], offset), "accuracy_scored"])
    assert json.loads(Path(f"{out}.alignment.json").read_text())["unaligned_words"] == 0
    tokens, att = load_attention(f"{out}.attention.npz")[0]
    assert tokens == PIECES[0] and att.shape == (2, 4, 12, 12)
    fig = load_figure_sentences(f"{out}.attention.npz")
    assert len(fig) == 1 and fig[0]["words"].shape == (2, 4, 10, 10) and fig[0]["deprels"][0] == "nsubj"


def test_profile_heads_bad_input(tmp_path):
    from headlab.errors import ConfigError
    from headlab.syntax.run import profile_heads

    model, src = _model(tmp_path)
    with pytest.raises(ConfigError, match=r"\[pair\] pair de-en: .*English-source"):
        profile_heads(str(model), str(FIXTURE), str(src), str(tmp_path / "x"), pair="de-en")
    short = tmp_path / "short.src"
    short.write_text(" ".join(PIECES[0]) + "\n")
    with pytest.raises(DataError, match=r"short\.src: 1 source sentences, but the treebank .*mwt_empty\.conllu has 2"):
        profile_heads(str(model), str(FIXTURE), str(short), str(tmp_path / "x"), pair="en-de")
    swapped = tmp_path / "swapped.src"
    swapped.write_text(" ".join(PIECES[1]) + "\n" + " ".join(PIECES[0]) + "\n")
    with pytest.raises(DataError, match=r"sentence s1 .*do not spell"):
        profile_heads(str(model), str(FIXTURE), str(swapped), str(tmp_path / "x"), pair="en-de")
    assert not list(tmp_path.glob("x.*"))                                 # no partial output


def test_treebank_text_and_spacy_parse(tmp_path):
    from headlab.syntax.run import main_treebank

    raw = tmp_path / "raw.src"
    assert main_treebank(["text", "--in", str(FIXTURE), "--out", str(raw)]) == 0
    assert raw.read_text() == 'I don\'t see the U.S. "now".\nShe was gonna go.\n'
    parsed = tmp_path / "parsed.conllu"
    assert main_treebank(["parse", "--in", str(raw), "--out", str(parsed), "--pair", "en-de"]) == 0
    tb = load_treebank(parsed)
    assert [t.text for t in tb] == raw.read_text().splitlines() and tb[0].scheme == "spacy"
    assert "nsubj" in tb[0].deprels and tb[0].heads.count(0) >= 1
    # a spaCy tree aligns with the model's pieces like a gold one
    assert align(tb[1], PIECES[1]).unaligned_words == []


# -- Table 1 ---------------------------------------------------------------------------

def test_table1_best_head_baseline_bold_and_paper_numbers(tmp_path):
    from headlab.report.tables import to_csv, to_markdown
    from headlab.studies.syntax_tables import table1

    prof = _profile(PIECES, _oracle_and_next)
    prof.heads().to_csv(tmp_path / "p.csv", index=False)
    prof.baselines().to_csv(tmp_path / "p.baselines.csv", index=False)
    table, tidy = table1(tmp_path / "p.csv", top=3)
    rows = tidy.set_index("relation")
    # the oracle (layer 1, head 1) is best everywhere; "all" against the +1 baseline, 5 of 14
    assert (tidy["head"] == "1-1").all() and (tidy["accuracy"] == 100.0).all()
    assert rows.loc["All", "baseline"] == pytest.approx(500 / 14) and rows.loc["All", "offset"] == 1
    # v2 labels under the paper's v1 names, counts summed: nsubj:pass -> nsubjpass, obj -> dobj
    assert rows.loc["dobj", "baseline"] == 100.0 and rows.loc["dobj", "offset"] == -2    # U.S. -> see
    assert rows.loc["auxpass", "baseline"] == 100.0 and rows.loc["auxpass", "offset"] == 1   # was -> gon
    # bold: 20+ points above the baseline (advmod: n't +1, now -4: 50%)
    assert rows.loc["advmod", "bold"] and rows.loc["All", "bold"] and not rows.loc["dobj", "bold"]
    # the three most frequent (punct, conj, cc, root excluded): advmod (2), then by name among 1s
    assert list(tidy["relation"][:4]) == ["All", "advmod", "aux", "auxpass"]
    # every paper row is there, with the paper's numbers and bold beside ours
    text = to_markdown(table)
    assert "| det | 1-1 | 2-4 | 100.0 | **90.5** | 100.0 | 55.0 | 1 | 1 |" in text
    assert "| advmod | 1-1 | 2-4 | **100.0** | 52.9 | 50.0 | 45.1 | 1 | 1 |" in text
    # no compound arc here: n/a, and the caption names every relation without one
    assert "| compound | n/a | 2-4 |  | 75.5 |" in text
    missing = [row for row in table.values.index if row not in set(tidy["relation"])]
    assert "compound" in missing
    assert table.caption.endswith(f" n/a: no scored arc in our profile ({', '.join(missing)}).")
    csv = to_csv(table)
    assert "Accuracy ours bold" in csv and "Accuracy paper bold" in csv


# -- Figures 1-2 (arcs) ----------------------------------------------------------------

def test_arc_figures_pick_the_best_and_the_functional_head(tmp_path):
    import pandas as pd
    from headlab.report.figures import plot
    from headlab.syntax.arcs import arc_rows, best_head, figure, functional_head
    from headlab.syntax.arcs import load_figure_sentences
    from headlab.syntax.run import profile_heads

    model, src = _model(tmp_path)
    out = str(tmp_path / "prof")
    profile_heads(str(model), str(FIXTURE), str(src), out, pair="en-de", figure_sents=2)
    # make the choice known: layer 2 head 4 perfect on nsubj, layer 1 head 3 on every functional relation
    heads = pd.read_csv(f"{out}.csv")
    heads.loc[(heads["layer"] == 2) & (heads["head"] == 4) & (heads["relation"] == "nsubj"), "correct"] = 1
    functional = heads["relation"].isin(["det", "aux", "advmod", "mark", "aux:pass"])
    heads.loc[(heads["layer"] == 1) & (heads["head"] == 3) & functional, "correct"] = heads["count"]
    heads.to_csv(f"{out}.csv", index=False)
    assert best_head(f"{out}.csv", "nsubj")[:2] == (2, 4)
    assert functional_head(f"{out}.csv") == (1, 3, 100.0)
    with pytest.raises(DataError, match="no 'csubj' arc"):
        best_head(f"{out}.csv", "csubj")

    entry = load_figure_sentences(f"{out}.attention.npz")[0]
    rows = arc_rows(entry, 2, 4, ("nsubj",), "p", 0)
    assert len(rows) == 10 * 10 and [r["red"] for r in rows if r["j"] == 0][:2] == [True, False]   # I = nsubj
    assert sum(r["weight"] for r in rows if r["i"] == 3) == pytest.approx(1.0, abs=1e-5)    # a word's row sums to 1
    tidy, style = figure(out, "F1")
    assert style["kind"] == "arcs" and tidy["panel"].nunique() == 2
    assert tidy["panel"].iloc[0].startswith("nsubj: head 2-4 (100.0%)")
    tidy2, style2 = figure(out, "F2")
    assert tidy2["panel"].iloc[0].startswith("functional: head 1-3 (100.0%)")
    fig = plot(tidy, **style)
    assert len([ax for ax in fig.axes if ax.get_title()]) == 2


def test_syntactic_heads_beat_their_baseline_by_the_threshold(tmp_path):
    from headlab.studies.syntax_tables import syntactic_heads

    prof = _profile(PIECES, _oracle_and_next)
    prof.heads().to_csv(tmp_path / "p.csv", index=False)
    prof.baselines().to_csv(tmp_path / "p.baselines.csv", index=False)
    found = syntactic_heads(tmp_path / "p.csv", min_count=2)
    # the oracle (1-1) beats advmod's 50% and punct's 25% baselines; the "next" head (1-2)
    # is the +1 baseline itself, never 20 points above it
    assert set(zip(found["layer"], found["head"])) == {(1, 1)}
    assert dict(zip(found["relation"], found["margin"])) == {"punct": 75.0, "advmod": 50.0}
    assert found["head_kind"].iloc[0] == "L"
    assert syntactic_heads(tmp_path / "p.csv", min_count=2, threshold=60)["relation"].tolist() == ["punct"]
    assert syntactic_heads(tmp_path / "p.csv").empty                   # no relation has 20 arcs here


def test_profile_prefix_is_the_rule_output(monkeypatch):
    """What paper D's tables read (``profile_prefix`` + ``.csv``) is what the shipped
    workflow's ``profile_heads`` rule writes, wildcards filled with the same model."""
    from snakemake.api import ConfigSettings, OutputSettings, ResourceSettings, SnakemakeApi
    from snakemake.io import apply_wildcards, strip_wildcard_constraints
    from snakemake.settings.enums import Quietness
    from headlab.studies.syntax_tables import profile_prefix

    root = Path(__file__).resolve().parents[1]
    m = dict(corpus="multi30k", pair="en-de", size="full", preset="mini", variant="default", layers="2+2",
             heads="8L", seed="1")
    assert profile_prefix("res", m, "ud-en_pud") == "res/scores/multi30k/en-de/full/mini/default/2+2/8L/seed1/profile/ud-en_pud"
    monkeypatch.chdir(root)
    with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
        workflow = api.workflow(resource_settings=ResourceSettings(cores=1), snakefile=root / "Snakefile", workdir=root,
                                config_settings=ConfigSettings(configfiles=[root / "config/config.yaml"],
                                                               config={"results": "res"}))._workflow
        csv = str(workflow.get_rule("profile_heads").output.csv)
    written = apply_wildcards(strip_wildcard_constraints(csv), {**m, "tune": "", "treebank": "ud-en_pud"})
    assert written == profile_prefix("res", m, "ud-en_pud") + ".csv"
