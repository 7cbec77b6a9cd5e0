"""The dataset registry: every corpus and test suite headlab can fetch, and how to read it.

A dataset is a folder of files. Each :class:`RemoteFile` has a path relative to that
folder (``rel``, the same layout as the offline data mirror: ``<mirror>/<dataset>/<rel>``),
the upstream URL it comes from, and the sha256 of the stored bytes. Files the mirror
stores gzipped although upstream serves them plain carry a second checksum,
``upstream_sha256``, of the bytes the URL returns (= of the decompressed stored file);
fetch verifies the download with it and then gzips it, so both routes give the same text.

Corpora also say how to extract each (language, split) as a sequence of
:class:`Part` s (file + format), which :mod:`headlab.data.prepare` concatenates.

The sha256 below are those of the offline mirror's MANIFEST.tsv; the mirror files are
unchanged copies of the upstream files at the pinned commits, so they are the upstream
checksums too. ``sha256=None`` means no trustworthy checksum is known: fetch then refuses
the download unless explicitly told ``allow_unverified``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import quote

from headlab.errors import DataError


@dataclass(frozen=True)
class RemoteFile:
    rel: str                              #: path inside the dataset folder (mirror layout)
    url: str | None                       #: upstream URL; None: only obtainable from the mirror
    sha256: str | None                    #: of the stored file; None: unverifiable
    upstream_sha256: str | None = None    #: of the downloaded bytes, where the stored file is their gzip
    md5: str | None = None                #: where upstream publishes only md5 (sacreBLEU's test sets)
    note: str = ""

    @property
    def gzip_after_download(self) -> bool:
        return self.upstream_sha256 is not None

    @property
    def verifiable_download(self) -> bool:
        return (self.upstream_sha256 if self.gzip_after_download else self.sha256) is not None \
            or self.md5 is not None


@dataclass(frozen=True)
class Part:
    """One piece of one side of a split: a file and how to read its sentences."""

    rel: str
    fmt: str = "text"          #: "text" (one sentence a line, .gz ok), "xml" (<seg id=..>), "tags" (train.tags),
                               #: "tsv" (field ``column`` of src<TAB>tgt lines), "tmx" (the ``lang`` segments)
    member: str | None = None  #: member of the ``rel`` tar/zip archive to read instead of ``rel`` itself
    select: str | None = None  #: "every23" / "not23": fairseq's IWSLT14 valid/train split by line number;
                               #: "sample:SEED:START:STOP": a seeded random split (see prepare.select_lines)
    unescape: bool = False     #: undo Moses XML escapes (&apos; &quot; &amp; ...), e.g. Stanford's files
    column: int | None = None  #: "tsv": which field (0-based)
    fields: int = 2            #: "tsv": fields a line has (2: src<TAB>tgt; more where columns carry metadata)
    lang: str | None = None    #: "tmx": which language's segments
    detokenize: str | None = None  #: upstream text is Moses-tokenised: detokenise it with this language's
                                   #: rules, so that every corpus enters the pipeline as plain text


@dataclass(frozen=True)
class Dataset:
    name: str
    description: str
    licence: str
    upstream: str
    files: dict[str, RemoteFile]
    languages: tuple[str, ...] = ()
    #: split -> language -> parts concatenated in order (empty for test suites / treebanks)
    splits: dict[str, dict[str, tuple[Part, ...]]] = field(default_factory=dict)
    #: splits whose pairs with an empty side are dropped by prepare (never a test set)
    train_splits: tuple[str, ...] = ("train",)
    #: split -> pair filter applied to the whole parts before their ``select`` (prepare.clean_pairs),
    #: e.g. "moses:1.5:1:175", Moses clean-corpus-n.perl as fairseq's prepare-iwslt14.sh runs it
    clean: dict[str, str] = field(default_factory=dict)
    note: str = ""

    def file(self, rel: str) -> RemoteFile:
        try:
            return self.files[rel]
        except KeyError:
            raise DataError(f"no file {rel!r} in dataset {self.name!r}; known files: "
                            f"{', '.join(sorted(self.files))}", key=rel) from None

    def files_for(self, splits) -> list[str]:
        """The files that the given splits read (both languages), in registry order: what a
        workflow must fetch for them. Unknown split names are left for ``parts`` to report."""
        needed = {part.rel for split in splits for parts in self.splits.get(split, {}).values()
                  for part in parts}
        return [rel for rel in self.files if rel in needed]

    def parts(self, lang: str, split: str) -> tuple[Part, ...]:
        if split not in self.splits:
            raise DataError(f"dataset {self.name!r} has no split {split!r}; splits: "
                            f"{', '.join(self.splits) or '(none: not a parallel corpus)'}", key=split)
        by_lang = self.splits[split]
        if lang not in by_lang:
            raise DataError(f"dataset {self.name!r} has no {lang!r} side for split {split!r}; "
                            f"languages there: {', '.join(sorted(by_lang))}", key=f"{lang}/{split}")
        return by_lang[lang]

    def pair_parts(self, pair: str, split: str) -> tuple[tuple[Part, ...], tuple[Part, ...]]:
        src, tgt = split_pair(pair)
        for lang in (src, tgt):
            if lang not in self.languages:
                raise DataError(f"dataset {self.name!r} has no language {lang!r}; languages: "
                                f"{', '.join(self.languages)}", key=pair)
        return self.parts(src, split), self.parts(tgt, split)


def split_pair(pair: str) -> tuple[str, str]:
    src, sep, tgt = pair.partition("-")
    if not sep or not src or not tgt or "-" in tgt or src == tgt:
        raise DataError(f"bad language pair {pair!r}; expected SRC-TGT such as de-en", key=pair)
    return src, tgt


def _github(repo: str, commit: str, path: str) -> str:
    return f"https://raw.githubusercontent.com/{repo}/{commit}/{quote(path)}"


def _files(table, url_of) -> dict[str, RemoteFile]:
    """Build RemoteFiles from (rel, sha256, upstream_sha256) rows and a rel -> URL mapping."""
    return {rel: RemoteFile(rel, url_of(rel), sha, up) for rel, sha, up in table}


# --- checksums from the data mirror's MANIFEST.tsv (upstream_sha256: of the decompressed file)
_DISTIL_LINGEVAL_SHA256 = (
    ("LICENSE", "f936929039962b981f36a7ef7ad10e24b93054d27ae9ff8f193370d5d5a9b870", None),
    ("README.upstream.md", "78cbe254f36f019af5f2e0f78bb7b0841574c8b103ced1905ac7c1500f6e241c", None),
    ("clause_omission.mt/src.en.gz", "4c3cb66dc145ca56cd417b4b75cd25ba246d6483c50d7bb351031d91601cc7de",
     "b6c770b2ab500ccd4c75e0fa3e685f9c9fbc5d68ac048e98e6a8e9f4987336bc"),
    ("clause_omission.mt/tgt.correct.de.gz", "b35fefe5d267f13daf254e5f07bff6216894a93db854d7bd32e36f726c45da36",
     "08f522509a16148c1c8977161d8164cc02a509ecd2568628c4a77b9d08968f64"),
    ("clause_omission.mt/tgt.incorrect.de.gz", "bdd9986d472b5348c8c3e45f9bcc6fb3511b488691d2086b985ae236d46ebdd4",
     "dbf5ff31edcba398e292f3710dc6e3cb7da0d209dcf4190ee1f5dc8f6e580e94"),
    ("hypercorrect_genitive.mt/src.en.gz", "2b5b45716675b350778034f50a20a0d6831942ae481c6632271f906c1516e60f",
     "dfbf59fea9431116537070efe71a11e6a40af0e075fa592c54cd15554eb16d7d"),
    ("hypercorrect_genitive.mt/tgt.correct.de.gz", "51578aad0f74bb30ffa5b1463ab08dc47c96d5ddd92fcf3143700173f1ff0c02",
     "b26df3363a963e042da881903bd1090ca4b2d0dc0b0c4b6c167bc1a2b2441550"),
    ("hypercorrect_genitive.mt/tgt.incorrect.de.gz", "b4284720cffba4dbf4ea821dc532e8f0f3c08037eb2dd03c6f6e08eab5bfa281",
     "f3c56f5a0b27788dc9ab4291202a7cad595767ee47c930bb57a7b53b220bb26c"),
    ("np_agreement.mt/src.en.gz", "03b6de6d6ed0acbbc9e5a5fe93652f81d1b5f07869b1ebcb6bdf5398ea4b2d9f",
     "3770804a78516287a25631530f5ae0f4ce253b05a3ae1639d67d943e783d09d6"),
    ("np_agreement.mt/tgt.correct.de.gz", "6d3714149745bb154180060c0957d5b0949a6fb2e8c8bb627e960e9022763f47",
     "cd58b4c2ae1eb5020c37813507ddf8e5a83339effdffcd5100e76739ea950722"),
    ("np_agreement.mt/tgt.incorrect.de.gz", "b20776cc73f2f6d9e16f722a9d4f79ee25ccdd70086a13ca1b195ccb074cd02e",
     "42ce351d85a69425d81c1aed6c14e2f23d825013cb31e85680bd6ddfba5931f8"),
    ("placeholder_ding.mt/src.en.gz", "dca1efe190950d3265bff4d5b150ef42b10b41e15319cfb0c72510b7bb46d5e0",
     "2ab9fdbbab1e04687329ce83d5fe2d902bdcc9a0d6a30c9d542f77039359e330"),
    ("placeholder_ding.mt/tgt.correct.de.gz", "2be810a42719d14a69a858edf3b5ce475a985fdb87ac750906c44ca217725db1",
     "c35907a6079df4ed70ae809ce6b5b6e6c4e659cde077d2e316cdc249e49d0e1a"),
    ("placeholder_ding.mt/tgt.incorrect.de.gz", "60fcf0c0581a8373a42a94110e3f64c22547a34991e0bd83b0942919d789f4cd",
     "5b11c7ef083f15d35d94016af096f2f9a281655264aef680d04826815f5174fe"),
    ("polarity_affix_del.mt/src.en.gz", "9dde15c361af3a2faf13d6a3721e4ac4fb80994df0630e9e1c59c02054728c97",
     "d170164b889409224162cd876557f8ef7107ed41bd4303e79ab5af5802c78ec1"),
    ("polarity_affix_del.mt/tgt.correct.de.gz", "244159ad0f7e0246cae09b29b1485afef5ef7acb86494af1e98e04e98fb2a76b",
     "9ff5624f496f9a04b304850681228a46cfb5774386b32d26788df1788143b89b"),
    ("polarity_affix_del.mt/tgt.incorrect.de.gz", "88f5e9b5fa4ea89e0dad7e5e393b52d26f9080504e0eee08511d95f39dc63cc6",
     "8df9d62ce0c591c149f03499cefff6c5ff7c0604c7fc59538df0918dd33e50e1"),
    ("polarity_particle_kein_del.mt/src.en.gz", "2b5fa325b53cb82d9a6048b759fdd1f5693a4420d080a1183c4f261389ad8527",
     "a987d64faf35449d84709360de4c307778d0a28f9c509cdfde0b1ef2c4324ba4"),
    ("polarity_particle_kein_del.mt/tgt.correct.de.gz", "76706d01dbb330c72c3fb3c5636f598256dd433cb11d8c5d9ae7b6d2af4b5d37",
     "4ab3f3f3015a6e60926e9303c23f9e3e019c932e7a551197887e6cbf0f874c19"),
    ("polarity_particle_kein_del.mt/tgt.incorrect.de.gz", "10f63bc5bbdafe0a1bab4c8e5ffba1c9e92fbfbe9a1a15bc8cc5c7b6d71d3df1",
     "942825accf7f980e053b17ac6ad54fa112040161a7afa525ebe1aeee77cb62b9"),
    ("polarity_particle_nicht_del.mt/src.en.gz", "5cd1d0f9ac205e0aba5f431274e0f9688719c973d979c4e81d20cdcb5032a280",
     "77ddb44a44f6db6d777c369351a96c05a100c8724bb512e04c4f08e8ca36fbc9"),
    ("polarity_particle_nicht_del.mt/tgt.correct.de.gz", "011915ccc5442fc61eca6a50bdbe2411e5d55133f0546191abcaac1deff7272b",
     "ff0e8111af073745f053af8085fc72019760d6c9c5f3e8f25a52d979b282f82e"),
    ("polarity_particle_nicht_del.mt/tgt.incorrect.de.gz", "a7f53bac3f9c8bcd66bb7e4861c93a78a70097d51bd3d8c3e6145b8f2daa90c9",
     "4858a687aed2577f7d0fdca25689a6ed8a0b90ea7876680e57fd412a406434e8"),
    ("subj_verb_agreement.mt/src.en.gz", "08756f49c441d32796d15338ecb3e769acf4fcbb02340747c7f0922e26e0f576",
     "273fe6e6cf24859bafe8e1fb57db3c30dcbfc7ab51a8105ebcf2487d176f06fd"),
    ("subj_verb_agreement.mt/tgt.correct.de.gz", "07a65c7a8fcd4d19acce73102bfd7544334b0d240a69a489b61cee3ec45957d4",
     "6ac9189afd46463080e9e390ca113159a2bda346c476e965e289476a6e297a6c"),
    ("subj_verb_agreement.mt/tgt.incorrect.de.gz", "ad192f1e696885aa689b819a8698266a10ff0096def5105a145289f65bc15402",
     "c77fbe898c123b5b3913ebf5478b98656187232975335195af4dbf051e914539"),
)

_IWSLT14_DE_EN_SHA256 = (
    ("raw/IWSLT16.TED.dev2010.de-en.de.xml", "669c478b2c76f8457fb78f87fd3a6db2d84d47bb635b178bcd7233facb20fd00", None),
    ("raw/IWSLT16.TED.dev2010.de-en.en.xml", "6c65bd89a391a0c3ce855e04169b05eba49a40c9189149dd60a20b62ad51bcb1", None),
    ("raw/IWSLT16.TED.tst2010.de-en.de.xml", "26a5f366f2f90c05f39f32f4923cde7ef40cc1d91701630912c95486197fc264", None),
    ("raw/IWSLT16.TED.tst2010.de-en.en.xml", "39861d2c211341aa83664c153a307489aa4b57408ec2c59cfcb1adb10c7786d0", None),
    ("raw/IWSLT16.TED.tst2011.de-en.de.xml", "9ea773ecd3235ed60c7b24a9ed0a78360ebf3c433e1a04f8793ce5cacd343abf", None),
    ("raw/IWSLT16.TED.tst2011.de-en.en.xml", "f722f875a666c536c2bc905fd808ee9eb435dd7ba33bdd6f7596992dd9c0c6e3", None),
    ("raw/IWSLT16.TED.tst2012.de-en.de.xml", "f020f769a8e63a91990ff89ea6f40f7416d32bd8f331fe3cc2bc4137b5c99ef0", None),
    ("raw/IWSLT16.TED.tst2012.de-en.en.xml", "d6afe2c04f84833ecdb293fe9b8ad7ad87b1a04d1397106cb3fb14aa8d788555", None),
    ("raw/IWSLT16.TED.tst2013.de-en.de.xml", "5b74a7292fcb8f71cf6de9bcf9c9a24b87ab2904fd8c4b73c1e81f353f79b407", None),
    ("raw/IWSLT16.TED.tst2013.de-en.en.xml", "479fec5ca4c5e8b8fe7932f639909d925987a9fb37db17e425aacf64707c70bb", None),
    ("raw/IWSLT16.TED.tst2014.de-en.de.xml", "e9b233372416169e3b36391b1d9005ba2a28bf51751f406171b59e09a9018f9e", None),
    ("raw/IWSLT16.TED.tst2014.de-en.en.xml", "bcbbf0904ee6275aa8ba1636ff2211e0621ba7f5c92bf2292b1e27671219cc9e", None),
    ("raw/IWSLT16.TEDX.dev2012.de-en.de.xml", "cf5a009eef1c79f172c0a1291a15f0d1d6e2376fbf1db3063789c7b758cbe5b3", None),
    ("raw/IWSLT16.TEDX.dev2012.de-en.en.xml", "67fcee46297011117c4a39508b7270277a4d949596398c341a6614cab7948214", None),
    ("raw/IWSLT16.TEDX.tst2013.de-en.de.xml", "e8e9575bccc617b9ee7e7667f1f0a53a746ce17dd59591fd5cf605061b14b0c4", None),
    ("raw/IWSLT16.TEDX.tst2013.de-en.en.xml", "fdf74b416ca2c6c0a05c1aa82c15e9690a294efc98c771cff77b899926a0552d", None),
    ("raw/IWSLT16.TEDX.tst2014.de-en.de.xml", "ec6f626c956c1839b19b52cf452464fdd7d950ddfec281f821e90104ec90a74d", None),
    ("raw/IWSLT16.TEDX.tst2014.de-en.en.xml", "173099872d12789dfb4b9d2f4d9e6609ccaa3578e441863da668da1247896e50", None),
    ("raw/README", "8415920b902d3fd23fc56500170fa1da519c31d534e0f866ab08a9a948e4a1fc", None),
    ("tok/test.de", "e718c783e33160b7d72af8f733756a466e0d0c016eff8ab624c1b0d1d01cbbdf", None),
    ("tok/test.en", "4b127beb9050511a3e6209cd837ff36f623a3a423666b32aba6e208b7330cf4c", None),
    ("tok/valid.de", "3f051579c9d8c7281a6ea8c72ad4ae09dbaa9bb24dfd41166f2c3a3df7cd940a", None),
    ("tok/valid.en", "e6d7317a9772cd1ed970910c611e9e7dada1f34439269b44a9d801334bff948d", None),
)

_IWSLT15_EN_VI_SHA256 = (
    ("IWSLT15.TED.dev2010.en-vi.en.xml", "770a64739be5233768411e7f1fc740b20df75d2b3bd55b9b3747802456909833", None),
    ("IWSLT15.TED.dev2010.en-vi.vi.xml", "f539bbb3cbeafa9ec0341c642881275764d33e4e2735a7e2bd8024e0819d6325", None),
    ("IWSLT15.TED.tst2010.en-vi.en.xml", "525b2c033db139667e41b3405e618bb70f511bb492955100b5f7fafbb20f70d2", None),
    ("IWSLT15.TED.tst2010.en-vi.vi.xml", "480e36797fd43a028f2577a1fd3576c07cddc4334e00aeb7a70c8b381064625a", None),
    ("IWSLT15.TED.tst2011.en-vi.en.xml", "e175b78ba14635097676c30d3b018078628ba65050e567577a9e4d06aaba644b", None),
    ("IWSLT15.TED.tst2011.en-vi.vi.xml", "82cbda2830d811ffe063dd4f5694db9905ebf203436ed37790ab800eff48040f", None),
    ("IWSLT15.TED.tst2012.en-vi.en.xml", "f8cf3b7efb39775d08865061965dbc764a91b0fb87d25a48fbd662b6a028c0ed", None),
    ("IWSLT15.TED.tst2012.en-vi.vi.xml", "846b97080f03d9e8789b2e43767aedfccd389344edbe8cee8829672614b13201", None),
    ("IWSLT15.TED.tst2013.en-vi.en.xml", "887182109016a4a1abbd421f9a620b0a0fa5fd0977d846e9b84db3cf5798afa4", None),
    ("IWSLT15.TED.tst2013.en-vi.vi.xml", "9208fb706c5f1483bf857c4d1f8f8697a202ed524a25921e0ed3303e796c1e32", None),
)

_MUCOW_SHA256 = (
    ("LICENSE", "f5b745ef98087f531e719ee8ca6a96809444573ecc7173c6fa68eaad39b3cc3f", None),
    ("scoring/README.upstream.md", "bc8fdc0160551fc3a0f4c8c9daf8e9eb7d5e2cc91882d74cd0304e2e6b9b6e27", None),
    ("scoring/cs-en.mucow.scoring.json.gz", "4581d6fa5c0f6f702324fa50e83053c79dd6d3184d3374fe70ed42f8a97fadf9",
     "044da1df7b5c391b1c3199c229f24386c94f703490f999f45f059baa20c2a183"),
    ("scoring/et-en.mucow.scoring.json.gz", "74cb9ed2a1372e813b32a2e8c1e2515fbd974683b66898cdad6b35261d7e9570",
     "8e314c40dc65f358a019a606dbb49d8632a9367aa60819e25d0b8bd523fbafce"),
    ("scoring/lt-en.mucow.scoring.json.gz", "55a27a303dc01a71f3e1454c52331f4411b1dbfeceacddf3a05c9ae918206853",
     "792e189773738079fc79682bc1cd86cee0c8b4b2c11ba8397def9ae2318c36bc"),
    ("scoring/lv-en.mucow.scoring.json.gz", "91db693dff2c06b71457467c91e52ef0a2a57cafc69a4f0de2ca8a6e506ab084",
     "2cf9255edf57465d0a7bf1510c0c48e823beb87210bee0670a80b7d1bf1da98a"),
    ("scoring/ro-en.mucow.scoring.json.gz", "70bead7917eef17d875b3f435708f5964b522b77b0bee563ba99726cf4133c3b",
     "7516f5c575adc2dff1d7cd3b1a0391acbd3785c52d234c3adf994e60b7134f6e"),
    ("scoring/ru-en.mucow.scoring.json.gz", "6f8350b22313a4a55e62edbda68fdd152968fabb28b7e09b8c850d4a96a35b75",
     "021fe43263206441ca68ad70c43f83fbc7d219d1d1afa109a7fb2abd2c35a6c8"),
    ("scoring/tr-en.mucow.scoring.json.gz", "76b3e14d7e528a816ac96c91c5c128848cb96e9b5365a703a24d81e6ac263e56",
     "11c5f24608a753b79665e5a78488b1cf0f09cb23ab6c302ecb99ca9b7ff9ed1d"),
    ("translation/README.upstream.md", "de71df02eb20bc224b0c1c1fb9b59226f7fae72ec3c6d76af9743bde86fadf41", None),
    ("translation/de-en.domain.txt", "69b3a6c1762bfc377a0e1f40aed490744221c179f00569755c11a17b0a1b0786", None),
    ("translation/de-en.key.txt", "3e38685af3ab02b09300e4d8bbc97b6fa225e41ff29885c80afb3570a75758e8", None),
    ("translation/de-en.ref.txt", "5d23307e7aac3790f78153f1c310c93c44aeeac7b0ca9e5c63dd2c8f68dbbaf2", None),
    ("translation/de-en.text.txt", "0abd212179243f07e7cc844a09a83a9773f81866f6ca1ca4cfb62f215545d92b", None),
    ("translation/en-cs.domain.txt", "9d7c85ddfb13505d2034637054a8fb7a144fff0d6ec3d5e7c3b761147e2f693b", None),
    ("translation/en-cs.key.txt", "c6c4304cd3f124464c32dd85ca6dd5fdfa05f35095a2e339cfb65f1653745362", None),
    ("translation/en-cs.ref.txt", "be056b51c4720ea38211f263c9598995cd87bfc1d1bf2a3f089e81e9d240f2f0", None),
    ("translation/en-cs.text.txt", "31b4eb8fd4d8f642decab1500440447d3c228b35c02d037a49936eb6a4fc389c", None),
    ("translation/en-de.domain.txt", "9b53c2d320baffc0b8bb71a231349966168a2271b07a145568481328a6d0e086", None),
    ("translation/en-de.key.txt", "f05b6994d614a4031ddf113214c71d90a181f4f384a8517fbf8303038efb2d77", None),
    ("translation/en-de.ref.txt", "5b7d7a308fe1b7732ca7a3486163f8ebf4fa80b7e2f510df4f90c1285cb5dc6b", None),
    ("translation/en-de.text.txt", "e45b6862d4ce67f27bf7f4bfb2f601839a9cbe7640e84caf86ba8881eae47402", None),
    ("translation/en-fi.domain.txt", "2b3e33057bca52d4284ec1c41afab6b6b27c37046d36ae24adfda388ebe7adc0", None),
    ("translation/en-fi.key.txt", "2fa91a942ca56e809a24ef4f5a32737613ea705d8e6bd165f0b290ec30233f33", None),
    ("translation/en-fi.ref.txt", "9cd68969e1a20ae18091c74117819df06bb599ced8fcdf18c2f4cb18c9487eb4", None),
    ("translation/en-fi.text.txt", "31cbb3e681e180b04e99da2dba6eb5edade8c16d7a72d6f817d0f46ba6904894", None),
    ("translation/en-lt.domain.txt", "d1bcec0ceb9eb97b1fa902b0f7c72851e8b78d4efb60c51597c9c2ad297f2169", None),
    ("translation/en-lt.key.txt", "dd764f60f418265f41c7ffbb463b55dc8cf143c40dbd6c61e726d872b1601ac9", None),
    ("translation/en-lt.ref.txt", "911ccab348cecbd3af2cd1a7713cefed217d749ffcf09568a08d1f8a3e123f16", None),
    ("translation/en-lt.text.txt", "d7d18771b1b64e90d42badf82195df3bd46e82b629c4afddd7922ac5310970fe", None),
    ("translation/en-ru.domain.txt", "7a816d54cf411587e967d2fbb7c99a458485d67be89643b52b9cd3b33ac6e453", None),
    ("translation/en-ru.key.txt", "57ca4a15987d51b931d1dafa4844932d858f8e857a28b902c5adeb7bab0f04e9", None),
    ("translation/en-ru.ref.txt", "6b8e96af972aedcc6e321e898ad636df22c6dfe783de9bb5f0774be759935525", None),
    ("translation/en-ru.text.txt", "1d9f9c022f7f751c2895bbcc1258bf6256fc51401709ba26d04e4d2f8421f7ed", None),
    ("translation/fi-en.domain.txt", "0e98a18920bb99eaf52ba5b3340d3316c6576afd065606d8b632ed7dfaf7c6cd", None),
    ("translation/fi-en.key.txt", "7f9cdd939db8475e7a58465568a2fa1443bccc080eae375e5aea8d573604a714", None),
    ("translation/fi-en.ref.txt", "e47f54e4f4d4bc5f7659603fd31a65b26b914bfc91bd4e32150ad7dcab0c61a1", None),
    ("translation/fi-en.text.txt", "0141af94d815c06ee3ae338010648b6753a87de800c7efe619c7f670f109ddb2", None),
    ("translation/lt-en.domain.txt", "64263cd7c9409036bf5915028bb69f5b0f50635c96107e322aff949f1f7c7e4c", None),
    ("translation/lt-en.key.txt", "ee88b2d53f3eb3c7ace13452214e66f19314b0b403dfc4f6302d9f66633ecffa", None),
    ("translation/lt-en.ref.txt", "8fee94ed4728f18502cc7aec2b4bfd335dcfdf7a03ceb2e9cf1de8388e891ad3", None),
    ("translation/lt-en.text.txt", "a0042c632a426e6db0f810aba84c65e58bb27d057822c2aba49a5c8ad537b7f0", None),
    ("translation/ru-en.domain.txt", "69a1e2170fd6a5a4b63b3e44ebc2001d82eeb38e673041fee75b8778e6945afb", None),
    ("translation/ru-en.key.txt", "76c6c21ec29a76bb273b196e8bb879baaca5edda1bf4c9080a19bdac35b986cd", None),
    ("translation/ru-en.ref.txt", "30359d29250cad3520b99a2b0d411e13f309ab71d8be24c70eec4417b30ceaa8", None),
    ("translation/ru-en.text.txt", "5ba30b277e2b5f6fc04a63e400c85fe557363f4a57f582df7711604c472878c0", None),
)

_MULTI30K_SHA256 = (
    ("test_2016_flickr.cs.gz", "200a4a74cc9560f051924abb9803be008d1908d77f747e9141aeb86dfd2797f1", None),
    ("test_2016_flickr.de.gz", "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8", None),
    ("test_2016_flickr.en.gz", "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9", None),
    ("test_2016_flickr.fr.gz", "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90", None),
    ("test_2017_flickr.de.gz", "a2c89666db00c495cd8513b9d708d5a3acc205d7de312ef2bf5fb7ebc1540aee", None),
    ("test_2017_flickr.en.gz", "76a444ee25172e72695cddb13ae4a3bda59430617be88e0bb46b60504f054074", None),
    ("test_2017_flickr.fr.gz", "3ba671ceb2299f3304ffafefea7a833d08632fbaf0ba18546f8a2ec2391af496", None),
    ("test_2017_mscoco.de.gz", "799e4854c25d601cb6cb6be29eabe5667734c61ace2f495e03e429031a0bc338", None),
    ("test_2017_mscoco.en.gz", "aab300bfb4427697987e02cd0aacd44bfe8aa50456231b6474c08038bbed2b58", None),
    ("test_2017_mscoco.fr.gz", "754f3072ba9f124569ba5258b32730fc1d214bbf8e0c6dfb2b74401676220db0", None),
    ("test_2018_flickr.cs.gz", "7d0a9db904f94c554a8c58049a9f3a5357c27f46cc3d710d70cb0b4a2585b8c2", None),
    ("test_2018_flickr.de.gz", "ddd0130c7d97482dc5197a02141dae8dd79f20f03586c480d675c09a32daf608", None),
    ("test_2018_flickr.en.gz", "ef4f4844037d4c5dea75c9a8ed5fd78905967a26f67c255e230cc9780032654d", None),
    ("test_2018_flickr.fr.gz", "fb2b83fcceb937a4f7e3e93c1c51c22aba92f1e342391e6b5ba392b16a920501", None),
    ("train.cs.gz", "a65adb8b32e3bc664f21ecba7a6e7f6950fd1f405e135f7c312faabdb6255077", None),
    ("train.de.gz", "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6", None),
    ("train.en.gz", "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f", None),
    ("train.fr.gz", "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c", None),
    ("val.cs.gz", "b63226e05c4bd5dd6a42897d74b86a1b9d2c31498252c572b1ea7f7996927fcc", None),
    ("val.de.gz", "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a", None),
    ("val.en.gz", "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28", None),
    ("val.fr.gz", "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9", None),
)

_PTB_SAMPLE_SHA256 = (
    ("dependency_treebank.zip", "0df483999f1391f32b141d6047d8ce19efd0a5a3e63ca019bfc4af8530f51fbd", None),
    ("treebank.zip", "9da92d76c3666cfb6cddeaed0f7e86b344cce0f0928a286d439e555f19c37399", None),
)

_UD_SHA256 = (
    ("LICENSE.English-EWT.txt", "b3d1b0f4c6ae151f7eb78738f46ebd5ee140f8a7f76501ba26af123140d35ae7", None),
    ("LICENSE.English-PUD.txt", "b278eb53fe50b8bb7fa0d90fb8536c35fdcaa80f9d63812cb51db539555d2a89", None),
    ("LICENSE.German-GSD.txt", "899b1804a12ebc090b96339614eede1b64b686721b650a71430b55b5235f7f79", None),
    ("LICENSE.German-PUD.txt", "b278eb53fe50b8bb7fa0d90fb8536c35fdcaa80f9d63812cb51db539555d2a89", None),
    ("de_gsd-ud-dev.conllu.gz", "232290e9f3c330fed9b41ed6239914491560ec3237352d9ac6aab58acfef051a",
     "00431f2624cbbf66796c097a9303bbc8f8e8ca88ef35c4c5664aa396b2d674c9"),
    ("de_gsd-ud-test.conllu.gz", "54cb0d43bc5c8e95a7dd6600bd98406108a3d3007813d4f2a6511f6fa8b259c9",
     "bceb8e867ba3ee7f1449d44fb31538d63a514f07e6763e7d9a5ffe794407bed4"),
    ("de_pud-ud-test.conllu.gz", "a106d715a3be3812dcda09ee70af5b5119f06762b0c5b07e92e5064d18aedb4d",
     "a530bdb50349bbd7c13706b6a759a9d73e8f514fff41fbf27149e914b0c3e723"),
    ("en_ewt-ud-dev.conllu.gz", "41086e3afc9ae572f899c9123f874d6d04a52e374a3d2ac7a6667ce48e3bf3e3",
     "531a54ff90d6ab12201c5a50c3e78e6ddac4de69abc4bce5d275d3cd29efe2b6"),
    ("en_ewt-ud-test.conllu.gz", "29c151eee8846d3f3ef7806c126ecac9932af2317c008c6d6b076c5e14950dbe",
     "e266e515a0a7547657ed3d90d9ba46487d6bd251f27ad4269d4e8a427c8555cd"),
    ("en_ewt-ud-train.conllu.gz", "bd47e08c9e18ec12d319e84df2ccdb272ff6de1d0dba5761117d3caf8b358f7b",
     "3fb78e2b55482c8ee00caa653af436c88c9e5bc9a73ce26e4ae3ddc79d2b7e7b"),
    ("en_pud-ud-test.conllu.gz", "9f5d22faed24d5c7d98f77e773727455407895755f32806f207ede41343f6748",
     "c80584f2bc2b31d5bada78a1136f9feec7ac49e5e18898db02dea434b5b8f0aa"),
)

# --- upstream locations --------------------------------------------------------------

MULTI30K_COMMIT = "a3d2e0d26b56f3846f66a952536ffed4e401d05a"
IWSLT_BACKUP_COMMIT = "73a09324ed3cb15d60f489b322ea9df4b431ea43"      # maroxtn/IWSLT-BACKUP
IWSLT14_TOK_COMMIT = "7750e75a0379bacdc3ad2f49da883116a69b3691"       # johntzwei/nmt_iwslt
IWSLT15_COMMIT = "9f70a01312dafc786edffeb2b5f8a4f13cfae00f"           # quockhuongtrann/preprocess_IWSLT15
MUCOW_COMMIT = "8e7570b2bec5b6fcc3727e44da4705672fc026f8"
DISTIL_LINGEVAL_COMMIT = "2ef31c44f916387e8dc8e09b32adf7a7e1385057"
NLTK_DATA_COMMIT = "5db857e6f7df11eabb5e5665836db9ec8df07e28"
UD_COMMITS = {  # treebank prefix -> (repository, commit)
    "en_ewt": ("UniversalDependencies/UD_English-EWT", "15d613d8447b3478787d4c278730a1e48a945efb"),
    "en_pud": ("UniversalDependencies/UD_English-PUD", "f16eba4ae7f3d161870ed320676c5088b8fa476c"),
    "de_pud": ("UniversalDependencies/UD_German-PUD", "ff80846ae60a0a70fc4d6251ef73e6a483a620ee"),
    "de_gsd": ("UniversalDependencies/UD_German-GSD", "297fcf350481058d0737a27f0f8fd03b2eadd67a"),
}
UD_LICENCE_FILES = {"English-EWT": "en_ewt", "English-PUD": "en_pud", "German-PUD": "de_pud",
                    "German-GSD": "de_gsd"}

#: fairseq's prepare-iwslt14.sh download (the WIT3 2014-01 archive it used is offline now).
IWSLT14_TGZ_URL = "https://dl.fbaipublicfiles.com/fairseq/data/iwslt14/de-en.tgz"
STANFORD_IWSLT15 = "https://nlp.stanford.edu/projects/nmt/data/iwslt15.en-vi"


def _multi30k_url(rel: str) -> str:
    return _github("multi30k/dataset", MULTI30K_COMMIT, f"data/task1/raw/{rel}")


def _iwslt14_url(rel: str) -> str:
    folder, name = rel.split("/", 1)
    if folder == "raw":
        return _github("maroxtn/IWSLT-BACKUP", IWSLT_BACKUP_COMMIT, f"iwslt/de-en/{name}")
    return _github("johntzwei/nmt_iwslt", IWSLT14_TOK_COMMIT, f"iwslt14.tokenized.de-en/tmp/{name}")


def _iwslt15_url(rel: str) -> str:
    return _github("quockhuongtrann/preprocess_IWSLT15", IWSLT15_COMMIT, f"data15/{rel}")


def _mucow_url(rel: str) -> str:
    if rel == "LICENSE":
        path = rel
    elif rel == "translation/README.upstream.md":
        path = "WMT2019/translation test suite/README.md"
    elif rel == "scoring/README.upstream.md":
        path = "WMT2019/scoring test suite/README.md"
    elif rel.startswith("translation/"):
        path = "WMT2019/translation test suite/txt/" + rel.split("/", 1)[1]
    else:  # scoring/X.json.gz is upstream's X.json, gzipped by the mirror
        path = "WMT2019/scoring test suite/json/" + rel.split("/", 1)[1].removesuffix(".gz")
    return _github("Helsinki-NLP/MuCoW", MUCOW_COMMIT, path)


def _distil_lingeval_url(rel: str) -> str:
    path = {"LICENSE": "LICENSE", "README.upstream.md": "README.md"}.get(rel)
    return _github("ZurichNLP/distil-lingeval", DISTIL_LINGEVAL_COMMIT,
                   path or "data/" + rel.removesuffix(".gz"))


def _ud_url(rel: str) -> str | None:
    if rel.startswith("LICENSE."):
        repo, commit = UD_COMMITS[UD_LICENCE_FILES[rel[len("LICENSE."):-len(".txt")]]]
        return _github(repo, commit, "LICENSE.txt")
    if rel == "en_ewt-ud-train.conllu.gz":
        return None  # rebuilt by the mirror from per-document sources: no single upstream file
    repo, commit = UD_COMMITS[rel.split("-", 1)[0]]
    return _github(repo, commit, rel.removesuffix(".gz"))


def _ptb_url(rel: str) -> str:
    return _github("nltk/nltk_data", NLTK_DATA_COMMIT, f"packages/corpora/{rel}")


# --- corpora: how each (language, split) is read -------------------------------------

def _multi30k_splits() -> dict[str, dict[str, tuple[Part, ...]]]:
    splits = {}
    for split in ("train", "val", "test_2016_flickr", "test_2017_flickr", "test_2018_flickr",
                  "test_2017_mscoco"):
        splits[split] = {lang: (Part(f"{split}.{lang}.gz"),) for lang in ("en", "de", "fr", "cs")
                         if f"{split}.{lang}.gz" in {row[0] for row in _MULTI30K_SHA256}}
    return splits


#: IWSLT14 de-en test as fairseq's prepare-iwslt14.sh builds it (paper A §4.2: "the
#: concatenated dev sets tst2010, tst2011, tst2012, dev2010, dev2012"); this order is
#: fairseq's, so the result is line-aligned with the mirror's tok/test.{de,en} (6,750 lines).
IWSLT14_TEST_SETS = ("TED.dev2010", "TEDX.dev2012", "TED.tst2010", "TED.tst2011", "TED.tst2012")


#: prepare-iwslt14.sh: clean-corpus-n.perl -ratio 1.5 ... 1 175 on the Moses-tokenised text
IWSLT14_FAIRSEQ_CLEAN = "moses:1.5:1:175"


def _iwslt14_xml(set_name: str, lang: str) -> Part:
    return Part(f"raw/IWSLT16.{set_name}.de-en.{lang}.xml", "xml")


def _iwslt14_splits() -> dict[str, dict[str, tuple[Part, ...]]]:
    def tags(lang: str, select: str) -> tuple[Part, ...]:
        return (Part("de-en.tgz", "tags", member=f"de-en/train.tags.de-en.{lang}", select=select),)

    splits = {
        "train": {lang: tags(lang, "not23") for lang in ("de", "en")},
        "valid": {lang: tags(lang, "every23") for lang in ("de", "en")},
        "test": {lang: tuple(_iwslt14_xml(s, lang) for s in IWSLT14_TEST_SETS) for lang in ("de", "en")},
        # fairseq's split exactly as prepare-iwslt14.sh makes it: length/ratio cleaning, then every
        # 23rd pair (the standard 160,239 / 7,283; cased here, fairseq lowercases)
        "train_fairseq": {lang: tags(lang, "not23") for lang in ("de", "en")},
        "valid_fairseq": {lang: tags(lang, "every23") for lang in ("de", "en")},
        # fairseq's own (Moses-tokenised, lowercased) valid/test, for comparison with prior work
        "valid_tok": {lang: (Part(f"tok/valid.{lang}"),) for lang in ("de", "en")},
        "test_tok": {lang: (Part(f"tok/test.{lang}"),) for lang in ("de", "en")},
    }
    for set_name in ("TED.dev2010", "TED.tst2010", "TED.tst2011", "TED.tst2012", "TED.tst2013",
                     "TED.tst2014", "TEDX.dev2012", "TEDX.tst2013", "TEDX.tst2014"):
        kind, year = set_name.split(".")
        name = year if kind == "TED" else f"tedx_{year}"
        splits[name] = {lang: (_iwslt14_xml(set_name, lang),) for lang in ("de", "en")}
    return splits


def _iwslt15_splits() -> dict[str, dict[str, tuple[Part, ...]]]:
    def xml(year: str, lang: str) -> tuple[Part, ...]:
        return (Part(f"IWSLT15.TED.{year}.en-vi.{lang}.xml", "xml"),)

    # Stanford's train files are Moses-tokenised with XML escapes: unescaped here so that they
    # go through the same tokeniser as the raw dev/test XML (re-tokenising is near-idempotent)
    splits = {"train": {lang: (Part(f"stanford/train.{lang}", unescape=True),) for lang in ("en", "vi")},
              "dev": {lang: xml("tst2012", lang) for lang in ("en", "vi")},    # paper A §4.2
              "test": {lang: xml("tst2013", lang) for lang in ("en", "vi")}}
    for year in ("dev2010", "tst2010", "tst2011", "tst2012", "tst2013"):
        splits[year] = {lang: xml(year, lang) for lang in ("en", "vi")}
    return splits


def _iwslt14_files() -> dict[str, RemoteFile]:
    files = _files(_IWSLT14_DE_EN_SHA256, _iwslt14_url)
    files["de-en.tgz"] = RemoteFile(
        "de-en.tgz", IWSLT14_TGZ_URL, None,
        note="IWSLT14 de-en (WIT3 2014-01) as fetched by fairseq's prepare-iwslt14.sh; no "
             "published sha256. One third-party script reports md5 10936dfdf616504ddbd844e91b94ef4a "
             "(unconfirmed, so not enforced): compare it with the recorded sha256/md5.")
    return files


def _iwslt15_files() -> dict[str, RemoteFile]:
    files = _files(_IWSLT15_EN_VI_SHA256, _iwslt15_url)
    for name in ("train.en", "train.vi", "tst2012.en", "tst2012.vi", "tst2013.en", "tst2013.vi",
                 "vocab.en", "vocab.vi"):
        files[f"stanford/{name}"] = RemoteFile(
            f"stanford/{name}", f"{STANFORD_IWSLT15}/{name}", None,
            note="Stanford NMT's IWSLT15 en-vi release (Luong & Manning 2015): already "
                 "Moses-tokenised with XML escapes (&apos; &quot;); no published checksum.")
    return files


PARK_KO_EN = "https://raw.githubusercontent.com/jungyeul/korean-parallel-corpora/master/korean-english-news-v1"


def _park_ko_en_files() -> dict[str, RemoteFile]:
    return {f"korean-english-park.{split}.tar.gz": RemoteFile(
        f"korean-english-park.{split}.tar.gz", f"{PARK_KO_EN}/korean-english-park.{split}.tar.gz", None,
        note="Park et al. (2016) news corpus; the repository publishes no checksum and is not "
             "tagged, so the download is recorded with --allow-unverified")
        for split in ("train", "dev", "test")}


def _park_ko_en_splits() -> dict[str, dict[str, tuple[Part, ...]]]:
    return {split: {lang: (Part(f"korean-english-park.{split}.tar.gz",
                                member=f"korean-english-park.{split}.{lang}"),) for lang in ("ko", "en")}
            for split in ("train", "dev", "test")}


STATMT = "https://data.statmt.org"
_UNVERIFIED = "statmt publishes no checksum for this file"

#: sacreBLEU's own test-set archives and md5s (sacrebleu.dataset DATASETS wmt13, wmt14/full, wmt17)
SACREBLEU_TESTS = {row.rel: row for row in (
    RemoteFile("sacrebleu/wmt13-test.tgz", "https://statmt.org/wmt13/test.tgz", None,
               md5="48eca5d02f637af44e85186847141f67", note="newstest2013 (dev), sacreBLEU's md5"),
    RemoteFile("sacrebleu/wmt14-test-full.tgz", "https://statmt.org/wmt14/test-full.tgz", None,
               md5="a8cd784e006feb32ac6f3d9ec7eb389a", note="newstest2014 (test), sacreBLEU's md5"),
    RemoteFile("sacrebleu/wmt17-test.tgz", f"{STATMT}/wmt17/translation-task/test.tgz", None,
               md5="86a1724c276004aa25455ae2a04cef26", note="newstest2017, sacreBLEU's md5"),
    RemoteFile("sacrebleu/wmt15-test.tgz", "https://statmt.org/wmt15/test.tgz", None,
               md5="67e3beca15e69fe3d36de149da0a96df", note="newstest2015 (WMT16 dev), sacreBLEU's md5"),
    RemoteFile("sacrebleu/wmt16-test.tgz", f"{STATMT}/wmt16/translation-task/test.tgz", None,
               md5="3d809cd0c2c86adb2c67034d15c4e446", note="newstest2016 (paper D's analysis), sacreBLEU's md5"),
)}

#: WMT news test sets as <seg> SGML inside sacreBLEU's archives: the de-en files, read for
#: either direction (src.de / ref.en; newstest2013 has one "src" file per language)
NEWSTEST_DE_EN = {
    "newstest2013": ("sacrebleu/wmt13-test.tgz", "test/newstest2013-src.{lang}.sgm"),
    "newstest2014": ("sacrebleu/wmt14-test-full.tgz", "test-full/newstest2014-deen-{role}.{lang}.sgm"),
    "newstest2017": ("sacrebleu/wmt17-test.tgz", "test/newstest2017-deen-{role}.{lang}.sgm"),
    "newstest2015": ("sacrebleu/wmt15-test.tgz", "test/newstest2015-deen-{role}.{lang}.sgm"),
    "newstest2016": ("sacrebleu/wmt16-test.tgz", "test/newstest2016-deen-{role}.{lang}.sgm"),
}


def _newstest(*names: str) -> dict[str, tuple[Part, ...]]:
    """One split made of the named test sets, concatenated in this order (a multi-part split)."""
    def part(name: str, lang: str) -> Part:
        archive, member = NEWSTEST_DE_EN[name]
        return Part(archive, "xml", member=member.format(lang=lang, role="src" if lang == "de" else "ref"))

    return {lang: tuple(part(name, lang) for name in names) for lang in ("de", "en")}


def _statmt(rel: str, url: str, note: str = _UNVERIFIED) -> RemoteFile:
    return RemoteFile(rel, url, None, note=note)


def _sockeye_md5(md5: str) -> str:
    return (f"{_UNVERIFIED}; Sockeye autopilot's task list (third party) records md5 {md5} "
            f"(unconfirmed, so not enforced): compare it with the recorded sha256/md5")


COMMONCRAWL = "train/training-parallel-commoncrawl.tgz"


def _wmt19_files() -> dict[str, RemoteFile]:
    rows = [
        *(SACREBLEU_TESTS[rel] for rel in ("sacrebleu/wmt13-test.tgz", "sacrebleu/wmt14-test-full.tgz")),
        _statmt("train/europarl-v9.de-en.tsv.gz",
                "https://www.statmt.org/europarl/v9/training/europarl-v9.de-en.tsv.gz"),
        _statmt(COMMONCRAWL, "https://www.statmt.org/wmt13/training-parallel-commoncrawl.tgz"),
        _statmt("train/news-commentary-v14.de-en.tsv.gz",
                f"{STATMT}/news-commentary/v14/training/news-commentary-v14.de-en.tsv.gz"),
        _statmt("train/wikititles-v1.de-en.tsv.gz", f"{STATMT}/wikititles/v1/wikititles-v1.de-en.tsv.gz"),
        _statmt("train/rapid2019.de-en.zip", "https://s3-eu-west-1.amazonaws.com/tilde-model/rapid2019.de-en.zip"),
        # paper A §4.2 high-resource scenario: + filtered ParaCrawl (bicleaner v3)
        _statmt("train/paracrawl-release3.en-de.bicleaner07.tmx.gz",
                "https://s3.amazonaws.com/web-language-models/paracrawl/release3/en-de.bicleaner07.tmx.gz"),
    ]
    return {row.rel: row for row in rows}


def _wmt19_splits() -> dict[str, dict[str, tuple[Part, ...]]]:
    def tsv(rel: str, lang: str) -> Part:  # de<TAB>en
        return Part(rel, "tsv", column=("de", "en").index(lang))

    def train(lang: str) -> tuple[Part, ...]:
        return (tsv("train/europarl-v9.de-en.tsv.gz", lang),
                Part(COMMONCRAWL, member=f"commoncrawl.de-en.{lang}"),
                tsv("train/news-commentary-v14.de-en.tsv.gz", lang))

    def extra(lang: str) -> tuple[Part, ...]:
        return (tsv("train/wikititles-v1.de-en.tsv.gz", lang),
                Part("train/rapid2019.de-en.zip", member=f"rapid2019.de-en.{lang}"))

    paracrawl = "train/paracrawl-release3.en-de.bicleaner07.tmx.gz"
    return {
        "train": {lang: train(lang) for lang in ("de", "en")},
        "train_all": {lang: train(lang) + extra(lang) for lang in ("de", "en")},
        "train_paracrawl": {lang: train(lang) + (Part(paracrawl, "tmx", lang=lang),) for lang in ("de", "en")},
        "dev": _newstest("newstest2013"),
        "test": _newstest("newstest2014"),
    }


#: WMT17 news task de-en training corpora, as its download page lists them: archive ->
#: (member with {lang}, URL, md5 recorded by Sockeye autopilot)
WMT17_DE_EN_TRAIN = {
    "train/training-parallel-europarl-v7.tgz": (
        "training/europarl-v7.de-en.{lang}", "https://www.statmt.org/wmt13/training-parallel-europarl-v7.tgz",
        "c52404583294a1b609e56d45b2ed06f5"),
    COMMONCRAWL: ("commoncrawl.de-en.{lang}", "https://www.statmt.org/wmt13/training-parallel-commoncrawl.tgz",
                  "7e0acbe86b0d7816300e14650f5b2bd4"),
    "train/training-parallel-nc-v12.tgz": (
        "training/news-commentary-v12.de-en.{lang}", f"{STATMT}/wmt17/translation-task/training-parallel-nc-v12.tgz",
        "fc6b83b809347e64f511d291e4bc8731"),
    "train/rapid2016.tgz": ("rapid2016.de-en.{lang}", f"{STATMT}/wmt17/translation-task/rapid2016.tgz",
                            "17a3a1846433ad26acb95da02f93af93"),
}


#: WMT16 news task de-en training corpora (its download page): Europarl v7, Common Crawl,
#: News Commentary v11 (4.5M pairs); archive -> (member with {lang}, URL)
WMT16_DE_EN_TRAIN = {
    "train/training-parallel-europarl-v7.tgz": (
        "training/europarl-v7.de-en.{lang}", "https://www.statmt.org/wmt13/training-parallel-europarl-v7.tgz"),
    COMMONCRAWL: ("commoncrawl.de-en.{lang}", "https://www.statmt.org/wmt13/training-parallel-commoncrawl.tgz"),
    "train/training-parallel-nc-v11.tgz": (
        "training-parallel-nc-v11/news-commentary-v11.de-en.{lang}",
        f"{STATMT}/wmt16/translation-task/training-parallel-nc-v11.tgz"),
}


def _wmt16_files() -> dict[str, RemoteFile]:
    files = {rel: SACREBLEU_TESTS[rel] for rel in ("sacrebleu/wmt15-test.tgz", "sacrebleu/wmt16-test.tgz")}
    for rel, (_, url) in WMT16_DE_EN_TRAIN.items():
        md5 = WMT17_DE_EN_TRAIN.get(rel, (None, None, None))[2]
        files[rel] = _statmt(rel, url, _sockeye_md5(md5) if md5 else _UNVERIFIED)
    return files


def _wmt16_splits() -> dict[str, dict[str, tuple[Part, ...]]]:
    return {
        "train": {lang: tuple(Part(rel, member=member.format(lang=lang))
                              for rel, (member, _) in WMT16_DE_EN_TRAIN.items()) for lang in ("de", "en")},
        "dev": _newstest("newstest2015"),
        "test": _newstest("newstest2016"),
    }


def _wmt17_files() -> dict[str, RemoteFile]:
    files = {rel: SACREBLEU_TESTS[rel] for rel in ("sacrebleu/wmt13-test.tgz", "sacrebleu/wmt14-test-full.tgz",
                                                   "sacrebleu/wmt17-test.tgz")}
    for rel, (_, url, md5) in WMT17_DE_EN_TRAIN.items():
        files[rel] = _statmt(rel, url, _sockeye_md5(md5))
    return files


def _wmt17_splits() -> dict[str, dict[str, tuple[Part, ...]]]:
    return {
        "train": {lang: tuple(Part(rel, member=member.format(lang=lang))
                              for rel, (member, _, _) in WMT17_DE_EN_TRAIN.items()) for lang in ("de", "en")},
        "dev": _newstest("newstest2013"),
        # Iida et al. (2019), paper B §4.1: newstest2014 and newstest2017 concatenated into one test set
        "test": _newstest("newstest2014", "newstest2017"),
        "newstest2014": _newstest("newstest2014"),
        "newstest2017": _newstest("newstest2017"),
    }


#: paper C (§5, after Bastings et al. 2017): WMT16 News Commentary v11 en-de and en-cs,
#: newstest2015 valid, newstest2016 test; and WMT14 en-de, newstest2013 valid, newstest2014 test.
#: sacreBLEU's WMT15/WMT16 test archives and md5s (sacrebleu.dataset DATASETS wmt15, wmt16)
SACREBLEU_TESTS_C = {row.rel: row for row in (
    RemoteFile("sacrebleu/wmt15-test.tgz", "https://statmt.org/wmt15/test.tgz", None,
               md5="67e3beca15e69fe3d36de149da0a96df", note="newstest2015 (valid), sacreBLEU's md5"),
    RemoteFile("sacrebleu/wmt16-test.tgz", f"{STATMT}/wmt16/translation-task/test.tgz", None,
               md5="3d809cd0c2c86adb2c67034d15c4e446", note="newstest2016 (test), sacreBLEU's md5"),
)}

#: News Commentary v11 as OPUS aligns it (moses zips, ``News-Commentary.{pair}.{lang}``, as
#: the Hugging Face ``news_commentary`` reader reads them). WMT16's own
#: training-parallel-nc-v11.tgz text files are not line-parallel (news-commentary-v11.de-en:
#: 243,330 de vs 243,480 en lines; cs-en 191,865 vs 192,052), so they cannot be read as pairs.
OPUS_NC11 = "https://object.pouta.csc.fi/OPUS-News-Commentary/v11/moses/{pair}.txt.zip"


def _nc11_files(pair: str) -> dict[str, RemoteFile]:
    rows = [*SACREBLEU_TESTS_C.values(),
            RemoteFile(f"train/news-commentary-v11.{pair}.txt.zip", OPUS_NC11.format(pair=pair), None,
                       note="OPUS publishes no checksum for this file")]
    return {row.rel: row for row in rows}


def _newstest_sgm(archive: str, name: str, src: str, tgt: str) -> dict[str, tuple[Part, ...]]:
    """newstestYYYY of the SRC->TGT direction (``{name}-{src}{tgt}-src.{src}.sgm`` / ``-ref.{tgt}``)."""
    folder = "test-full" if "wmt14" in archive else "test"
    return {src: (Part(archive, "xml", member=f"{folder}/{name}-{src}{tgt}-src.{src}.sgm"),),
            tgt: (Part(archive, "xml", member=f"{folder}/{name}-{src}{tgt}-ref.{tgt}.sgm"),)}


def _nc11_splits(other: str) -> dict[str, dict[str, tuple[Part, ...]]]:
    pair = "-".join(sorted((other, "en")))          # OPUS names pairs alphabetically: cs-en, de-en
    zipped = f"train/news-commentary-v11.{pair}.txt.zip"
    return {
        "train": {lang: (Part(zipped, member=f"News-Commentary.{pair}.{lang}"),) for lang in ("en", other)},
        "newstest2015": _newstest_sgm("sacrebleu/wmt15-test.tgz", "newstest2015", "en", other),
        "newstest2016": _newstest_sgm("sacrebleu/wmt16-test.tgz", "newstest2016", "en", other),
    }


#: WMT14 en-de training data as fairseq's prepare-wmt14en2de.sh takes it: archive -> member with {lang}
WMT14_DE_EN_TRAIN = {
    "train/training-parallel-europarl-v7.tgz": (
        "training/europarl-v7.de-en.{lang}", "https://www.statmt.org/wmt13/training-parallel-europarl-v7.tgz"),
    COMMONCRAWL: ("commoncrawl.de-en.{lang}", "https://www.statmt.org/wmt13/training-parallel-commoncrawl.tgz"),
    "train/training-parallel-nc-v9.tgz": (
        "training/news-commentary-v9.de-en.{lang}", "https://www.statmt.org/wmt14/training-parallel-nc-v9.tgz"),
}


def _wmt14_files() -> dict[str, RemoteFile]:
    files = {rel: SACREBLEU_TESTS[rel] for rel in ("sacrebleu/wmt13-test.tgz", "sacrebleu/wmt14-test-full.tgz")}
    for rel, (_, url) in WMT14_DE_EN_TRAIN.items():
        files[rel] = _statmt(rel, url)
    return files


def _wmt14_splits() -> dict[str, dict[str, tuple[Part, ...]]]:
    return {
        "train": {lang: tuple(Part(rel, member=member.format(lang=lang))
                              for rel, (member, _) in WMT14_DE_EN_TRAIN.items()) for lang in ("de", "en")},
        "newstest2013": {lang: (Part("sacrebleu/wmt13-test.tgz", "xml", member=f"test/newstest2013-src.{lang}.sgm"),)
                         for lang in ("de", "en")},
        # the full newstest2014 (3,003 sentences), en->de files: newstest2014-deen-src.en.sgm
        "newstest2014": {"en": (Part("sacrebleu/wmt14-test-full.tgz", "xml",
                                     member="test-full/newstest2014-deen-src.en.sgm"),),
                         "de": (Part("sacrebleu/wmt14-test-full.tgz", "xml",
                                     member="test-full/newstest2014-deen-ref.de.sgm"),)},
    }


HINDENCORP = ("https://lindat.mff.cuni.cz/repository/xmlui/bitstream/handle/11858/00-097C-0000-0023-625F-0/"
              "hindencorp05.plaintext.gz?sequence=3&isAllowed=y")
#: hindencorp05.plaintext: one pair a line, 5 tab-separated fields, as the Hugging Face datasets
#: reader `hind_encorp` parses the same file: source corpus, alignment type, alignment quality,
#: English, Hindi
HINDENCORP_FIELDS = ("source", "alignment_type", "alignment_quality", "en", "hi")
#: paper B §4.1: "we randomly sampled 7K sentence pairs each for validation and test sets, and used
#: the remaining sentences as the training set"; the sample is seeded here (prepare.select_lines)
HINDENCORP_HELDOUT, HINDENCORP_SEED = 7000, 1


def _hindencorp_splits() -> dict[str, dict[str, tuple[Part, ...]]]:
    n, seed = HINDENCORP_HELDOUT, HINDENCORP_SEED
    ranks = {"valid": f"0:{n}", "test": f"{n}:{2 * n}", "train": f"{2 * n}:"}
    return {split: {lang: (Part("hindencorp05.plaintext.gz", "tsv", column=HINDENCORP_FIELDS.index(lang),
                                fields=len(HINDENCORP_FIELDS), select=f"sample:{seed}:{span}"),)
                    for lang in ("hi", "en")} for split, span in ranks.items()}


QI18_TGZ = "http://www.phontron.com/data/qi18naacl-dataset.tar.gz"


def _qi18_splits(src: str, tgt: str) -> dict[str, dict[str, tuple[Part, ...]]]:
    """Qi et al. (2018)'s files datasets/SRC_to_TGT/{SRC,TGT}.{train,dev,test}, Moses-tokenised
    (their README): unescaped and detokenised, so that BLEU is computed on plain text."""
    return {split: {lang: (Part("qi18naacl-dataset.tar.gz", member=f"datasets/{src}_to_{tgt}/{lang}.{split}",
                                unescape=True, detokenize=lang),) for lang in (src, tgt)}
            for split in ("train", "dev", "test")}


DATASETS: dict[str, Dataset] = {d.name: d for d in (
    Dataset("multi30k", "Multi30k task 1 image-caption translations, raw and cased",
            "Flickr30k terms (research use)", f"github.com/multi30k/dataset@{MULTI30K_COMMIT}",
            _files(_MULTI30K_SHA256, _multi30k_url), ("en", "de", "fr", "cs"), _multi30k_splits()),
    Dataset("iwslt14-de-en", "IWSLT 2014 TED de-en (paper A §4.2 low-resource DE-EN)",
            "CC BY-NC-ND 3.0 (TED)", f"fairseq de-en.tgz; github.com/maroxtn/IWSLT-BACKUP@{IWSLT_BACKUP_COMMIT}",
            _iwslt14_files(), ("de", "en"), _iwslt14_splits(), train_splits=("train", "train_fairseq"),
            clean={split: IWSLT14_FAIRSEQ_CLEAN for split in ("train_fairseq", "valid_fairseq")},
            note="valid = every 23rd training pair (fairseq's rule, applied to the tag-stripped "
                 "text, before fairseq's length cleaning, so not line-identical to tok/valid); "
                 "train_fairseq/valid_fairseq clean first, as fairseq does"),
    Dataset("iwslt15-en-vi", "IWSLT 2015 TED en-vi (paper A §4.2: dev tst2012, test tst2013)",
            "CC BY-NC-ND 3.0 (TED)", f"nlp.stanford.edu; github.com/quockhuongtrann/preprocess_IWSLT15@{IWSLT15_COMMIT}",
            _iwslt15_files(), ("en", "vi"), _iwslt15_splits()),
    Dataset("park-ko-en", "Korean-English news, Park et al. (2016) (paper A §4.2 KO-EN: "
            "94k train, 1k dev, 2k test)", "see github.com/jungyeul/korean-parallel-corpora",
            "github.com/jungyeul/korean-parallel-corpora (korean-english-news-v1)",
            _park_ko_en_files(), ("ko", "en"), _park_ko_en_splits(),
            note="not in the offline mirror; Korean is tokenised with Moses' language-independent "
                 "rules, then BPE (independent per side, §4.2)"),
    Dataset("wmt19-de-en", "WMT19 news de-en (paper A §4.1): newstest2013 dev, newstest2014 test",
            "WMT terms (research use)", "statmt.org; sacreBLEU test-set archives", _wmt19_files(),
            ("de", "en"), _wmt19_splits(), train_splits=("train", "train_all", "train_paracrawl"),
            note="paper A trains on '2.9M sentences' of WMT19 without naming the corpora: `train` "
                 "is Europarl v9 + Common Crawl + News Commentary v14 (4.6M pairs before any "
                 "cleaning; a study's `size: 2900000` takes the paper's count), `train_all` adds "
                 "Wiki Titles v1 and Rapid 2019, `train_paracrawl` adds ParaCrawl v3 to `train` "
                 "(Table 3)"),
    Dataset("wmt16-de-en", "WMT16 news de-en (paper D: en-de, newstest2016 for the analysis): newstest2015 "
            "dev, newstest2016 test", "WMT terms (research use)", "statmt.org; sacreBLEU test-set archives",
            _wmt16_files(), ("de", "en"), _wmt16_splits(),
            note="train = Europarl v7 + Common Crawl + News Commentary v11 (the WMT16 news task's de-en "
                 "list, 4.5M pairs before cleaning); newstest2016 (2,999 sentences) read from the de-en "
                 "files for either direction"),
    Dataset("wmt17-de-en", "WMT17 news de-en; as WMT17-CS (paper B §4.1, after Iida et al. 2019): "
            "newstest2013 dev, newstest2014 + newstest2017 test", "WMT terms (research use)",
            "statmt.org; sacreBLEU test-set archives", _wmt17_files(), ("de", "en"), _wmt17_splits(),
            note="train = Europarl v7 + Common Crawl + News Commentary v12 + Rapid 2016 (5.9M pairs, "
                 "paper B Table 1); test = newstest2014 (3,003) then newstest2017 (3,004) in one split"),
    Dataset("hindencorp", "HindEnCorp 0.5 hi-en (paper B §4.1: 7k random valid, 7k random test, "
            "the rest train)", "CC BY-NC-SA 3.0",
            "LINDAT/CLARIN hdl:11858/00-097C-0000-0023-625F-0",
            {"hindencorp05.plaintext.gz": RemoteFile(
                "hindencorp05.plaintext.gz", HINDENCORP, None,
                note="LINDAT shows no sha256 for it; the download is recorded with --allow-unverified")},
            ("hi", "en"), _hindencorp_splits(),
            note=f"one gzipped TSV, fields {', '.join(HINDENCORP_FIELDS)}; valid/test/train are the "
                 f"lines ranked 0-{HINDENCORP_HELDOUT}, {HINDENCORP_HELDOUT}-{2 * HINDENCORP_HELDOUT} "
                 f"and the rest by sha256('{HINDENCORP_SEED}:line index') (prepare.select_lines): "
                 f"deterministic and disjoint. Hindi is tokenised with IndicNLP "
                 f"(corpora.NAME.tokenizers: {{hi: indic}})"),
    Dataset("ted-be-en", "TED talks be-en of Qi et al. (2018) (paper B §4.1: 4.5k training pairs)",
            "CC BY-NC-ND 4.0 (TED)", "github.com/neulab/word-embeddings-for-nmt (qi18naacl-dataset.tar.gz)",
            {"qi18naacl-dataset.tar.gz": RemoteFile(
                "qi18naacl-dataset.tar.gz", QI18_TGZ, None,
                note="no published checksum; if phontron.com is down, the Internet Archive keeps a copy: "
                     "https://web.archive.org/web/20240301220426if_/" + QI18_TGZ)},
            ("be", "en"), _qi18_splits("be", "en"),
            note="Qi et al.'s be_to_en files (train 4,509 / dev 248 / test 664 pairs as they report them; "
                 "paper B Table 1 says 4.5K / 1K / 2.6K): their text is Moses-tokenised, so prepare "
                 "detokenises it; BPE is learnt per side (bpe_joint: false, 5k merges each)"),
    Dataset("nc11-en-de", "WMT16 News Commentary v11 en-de (paper C §5): newstest2015 valid, "
            "newstest2016 test", "WMT terms (research use); OPUS alignment",
            "opus.nlpl.eu News-Commentary v11; sacreBLEU test-set archives", _nc11_files("de-en"),
            ("en", "de"), _nc11_splits("de"),
            note="train = OPUS's sentence-aligned News Commentary v11 de-en (WMT16's own text files "
                 "are not line-parallel); tests are the en->de SGML of newstest2015/2016"),
    Dataset("nc11-en-cs", "WMT16 News Commentary v11 en-cs (paper C §5): newstest2015 valid, "
            "newstest2016 test", "WMT terms (research use); OPUS alignment",
            "opus.nlpl.eu News-Commentary v11; sacreBLEU test-set archives", _nc11_files("cs-en"),
            ("en", "cs"), _nc11_splits("cs"),
            note="train = OPUS's sentence-aligned News Commentary v11 cs-en; tests are the en->cs "
                 "SGML of newstest2015/2016"),
    Dataset("wmt14-en-de", "WMT14 en-de (paper C §5): newstest2013 valid, newstest2014 test",
            "WMT terms (research use)", "statmt.org; sacreBLEU test-set archives", _wmt14_files(),
            ("en", "de"), _wmt14_splits(),
            note="train = Europarl v7 + Common Crawl + News Commentary v9 (4.5M pairs), as fairseq's "
                 "prepare-wmt14en2de.sh; newstest2014 = the full en->de set (3,003)"),
    Dataset("mucow", "MuCoW WMT19 WSD test suites (translation and scoring)", "CC BY 4.0",
            f"github.com/Helsinki-NLP/MuCoW@{MUCOW_COMMIT}", _files(_MUCOW_SHA256, _mucow_url)),
    Dataset("distil-lingeval", "DistilLingEval EN-DE contrastive minimal pairs", "MIT (code); WMT data terms",
            f"github.com/ZurichNLP/distil-lingeval@{DISTIL_LINGEVAL_COMMIT}",
            _files(_DISTIL_LINGEVAL_SHA256, _distil_lingeval_url)),
    Dataset("ud", "Universal Dependencies gold trees (EWT, PUD en/de, GSD)",
            "CC BY-SA 4.0 (EWT, GSD), CC BY-SA 3.0 (PUD)", "github.com/UniversalDependencies",
            _files(_UD_SHA256, _ud_url)),
    Dataset("ptb-sample", "NLTK's Penn Treebank WSJ sample", "LDC sample, non-commercial",
            f"github.com/nltk/nltk_data@{NLTK_DATA_COMMIT}", _files(_PTB_SAMPLE_SHA256, _ptb_url)),
)}


def get(name: str) -> Dataset:
    """The registered dataset ``name``; a :class:`DataError` listing the names otherwise."""
    try:
        return DATASETS[name]
    except KeyError:
        raise DataError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}", key=name) from None
