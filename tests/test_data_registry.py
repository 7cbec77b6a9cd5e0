"""The dataset registry: names, files, splits, and agreement with the data mirror's MANIFEST."""
from __future__ import annotations

import pytest

from headlab.data import registry
from headlab.data.fetch import read_manifest
from headlab.errors import DataError

MIRRORED = ("multi30k", "iwslt14-de-en", "iwslt15-en-vi", "mucow", "distil-lingeval", "ud", "ptb-sample")


def test_dataset_names():
    assert set(registry.DATASETS) == {*MIRRORED, "wmt19-de-en", "park-ko-en", "wmt17-de-en", "wmt16-de-en",
                                      "hindencorp", "ted-be-en", "nc11-en-de", "nc11-en-cs", "wmt14-en-de"}
    with pytest.raises(DataError, match="unknown dataset 'nope'.*multi30k"):
        registry.get("nope")


def test_multi30k_pairs_and_splits():
    data = registry.get("multi30k")
    for pair in ("de-en", "en-de", "fr-en", "en-fr", "cs-en", "en-cs", "de-fr", "cs-de"):
        src, tgt = data.pair_parts(pair, "val")
        assert src[0].rel == f"val.{pair[:2]}.gz" and tgt[0].rel == f"val.{pair[3:]}.gz"
    assert set(data.splits) == {"train", "val", "test_2016_flickr", "test_2017_flickr",
                                "test_2018_flickr", "test_2017_mscoco"}
    data.pair_parts("cs-en", "test_2018_flickr")
    for split in ("test_2017_flickr", "test_2017_mscoco"):
        with pytest.raises(DataError, match=f"no 'cs' side for split '{split}'"):
            data.pair_parts("en-cs", split)
    with pytest.raises(DataError, match="no split 'dev'"):
        data.pair_parts("de-en", "dev")
    with pytest.raises(DataError, match="no language 'vi'"):
        data.pair_parts("vi-en", "val")
    for bad in ("deen", "de-", "de-de", "de-en-fr"):
        with pytest.raises(DataError, match="bad language pair"):
            data.pair_parts(bad, "val")
    url = data.file("train.de.gz").url
    assert url == ("https://raw.githubusercontent.com/multi30k/dataset/"
                   "a3d2e0d26b56f3846f66a952536ffed4e401d05a/data/task1/raw/train.de.gz")


def test_iwslt_entries():
    iwslt14 = registry.get("iwslt14-de-en")
    tgz = iwslt14.file("de-en.tgz")
    assert tgz.url.endswith("/fairseq/data/iwslt14/de-en.tgz") and tgz.sha256 is None
    assert not tgz.verifiable_download
    test_de = [p.rel for p in iwslt14.parts("de", "test")]
    assert test_de == [f"raw/IWSLT16.{s}.de-en.de.xml" for s in
                       ("TED.dev2010", "TEDX.dev2012", "TED.tst2010", "TED.tst2011", "TED.tst2012")]
    assert iwslt14.parts("en", "train")[0].select == "not23"
    assert iwslt14.parts("en", "valid")[0].select == "every23"
    iwslt15 = registry.get("iwslt15-en-vi")
    assert iwslt15.parts("vi", "dev")[0].rel == "IWSLT15.TED.tst2012.en-vi.vi.xml"
    assert iwslt15.parts("en", "test")[0].rel == "IWSLT15.TED.tst2013.en-vi.en.xml"
    assert iwslt15.file("stanford/train.vi").url == \
        "https://nlp.stanford.edu/projects/nmt/data/iwslt15.en-vi/train.vi"
    wmt = registry.get("wmt19-de-en")
    assert wmt.file("sacrebleu/wmt14-test-full.tgz").md5 == "a8cd784e006feb32ac6f3d9ec7eb389a"
    assert set(wmt.splits) == {"train", "train_all", "train_paracrawl", "dev", "test"}
    assert wmt.files_for(["train", "dev"]) == [
        "sacrebleu/wmt13-test.tgz", "train/europarl-v9.de-en.tsv.gz",
        "train/training-parallel-commoncrawl.tgz", "train/news-commentary-v14.de-en.tsv.gz"]
    assert "train/paracrawl-release3.en-de.bicleaner07.tmx.gz" in wmt.files_for(["train_paracrawl"])
    assert registry.get("mucow").files_for(["test"]) == []  # a suite: the workflow fetches all of it


def test_park_ko_en_reads_the_tarball_members():
    park = registry.get("park-ko-en")
    src, tgt = park.pair_parts("ko-en", "test")
    assert (src[0].rel, src[0].member) == ("korean-english-park.test.tar.gz", "korean-english-park.test.ko")
    assert tgt[0].member == "korean-english-park.test.en"
    train = park.file("korean-english-park.train.tar.gz")
    assert train.url == ("https://raw.githubusercontent.com/jungyeul/korean-parallel-corpora/master/"
                         "korean-english-news-v1/korean-english-park.train.tar.gz")
    assert not train.verifiable_download          # needs --allow-unverified
    assert set(park.splits) == {"train", "dev", "test"}


def test_other_suites_by_name():
    key = registry.get("mucow").file("translation/de-en.key.txt")
    assert key.sha256 == "3e38685af3ab02b09300e4d8bbc97b6fa225e41ff29885c80afb3570a75758e8"
    assert "translation%20test%20suite/txt/de-en.key.txt" in key.url
    svo = registry.get("distil-lingeval").file("subj_verb_agreement.mt/src.en.gz")
    assert svo.gzip_after_download and svo.url.endswith("/data/subj_verb_agreement.mt/src.en")
    assert registry.get("ud").file("en_ewt-ud-train.conllu.gz").url is None  # rebuilt by the mirror
    assert registry.get("ptb-sample").file("treebank.zip").url.endswith("/packages/corpora/treebank.zip")
    with pytest.raises(DataError, match="no file 'nope.txt' in dataset 'mucow'"):
        registry.get("mucow").file("nope.txt")


def test_registry_matches_the_mirror_manifest(mirror):
    manifest = read_manifest(mirror)
    registered = {f"{name}/{rel}": rf.sha256 for name in MIRRORED
                  for rel, rf in registry.get(name).files.items() if rf.sha256}
    assert {path: sha for path, sha in manifest.items()} == registered


def test_paper_b_entries():
    """Paper B §4.1: WMT17-CS, HindEnCorp 0.5, TED be-en (Qi et al. 2018)."""
    wmt17 = registry.get("wmt17-de-en")
    assert wmt17.files_for(["train"]) == [
        "train/training-parallel-europarl-v7.tgz", "train/training-parallel-commoncrawl.tgz",
        "train/training-parallel-nc-v12.tgz", "train/rapid2016.tgz"]
    assert wmt17.file("train/rapid2016.tgz").url == "https://data.statmt.org/wmt17/translation-task/rapid2016.tgz"
    assert all(not wmt17.file(rel).verifiable_download for rel in wmt17.files_for(["train"]))
    assert wmt17.file("sacrebleu/wmt17-test.tgz").md5 == "86a1724c276004aa25455ae2a04cef26"  # sacreBLEU's
    assert [(p.rel, p.member) for p in wmt17.parts("de", "test")] == [
        ("sacrebleu/wmt14-test-full.tgz", "test-full/newstest2014-deen-src.de.sgm"),
        ("sacrebleu/wmt17-test.tgz", "test/newstest2017-deen-src.de.sgm")]
    assert wmt17.parts("en", "dev") == registry.get("wmt19-de-en").parts("en", "dev")  # newstest2013
    assert wmt17.parts("en", "test")[1].member == "test/newstest2017-deen-ref.en.sgm"

    hindencorp = registry.get("hindencorp")
    [rel] = hindencorp.files
    assert rel == "hindencorp05.plaintext.gz" and not hindencorp.file(rel).verifiable_download
    assert "11858/00-097C-0000-0023-625F-0/hindencorp05.plaintext.gz" in hindencorp.file(rel).url
    assert {split: hindencorp.parts("hi", split)[0].select for split in hindencorp.splits} == {
        "valid": "sample:1:0:7000", "test": "sample:1:7000:14000", "train": "sample:1:14000:"}
    assert (hindencorp.parts("en", "test")[0].column, hindencorp.parts("hi", "test")[0].column) == (3, 4)

    ted = registry.get("ted-be-en")
    assert ted.file("qi18naacl-dataset.tar.gz").url == "http://www.phontron.com/data/qi18naacl-dataset.tar.gz"
    be = ted.parts("be", "test")[0]
    assert (be.member, be.detokenize, be.unescape) == ("datasets/be_to_en/be.test", "be", True)
    assert set(ted.splits) == {"train", "dev", "test"}


def test_wmt16_de_en_for_paper_d():
    wmt16 = registry.get("wmt16-de-en")
    assert wmt16.files_for(["train"]) == ["train/training-parallel-europarl-v7.tgz",
                                          "train/training-parallel-commoncrawl.tgz",
                                          "train/training-parallel-nc-v11.tgz"]
    assert wmt16.file("train/training-parallel-nc-v11.tgz").url == \
        "https://data.statmt.org/wmt16/translation-task/training-parallel-nc-v11.tgz"
    assert wmt16.file("sacrebleu/wmt16-test.tgz").md5 == "3d809cd0c2c86adb2c67034d15c4e446"  # sacreBLEU's
    assert [(p.rel, p.member) for p in wmt16.parts("en", "test")] == [
        ("sacrebleu/wmt16-test.tgz", "test/newstest2016-deen-ref.en.sgm")]
    assert wmt16.parts("de", "dev")[0].member == "test/newstest2015-deen-src.de.sgm"
