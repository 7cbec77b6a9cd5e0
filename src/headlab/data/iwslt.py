"""Read the two IWSLT/WMT text formats: ``train.tags.*`` and the ``<seg id="N">`` XML/SGML files.

* ``train.tags.x-y.x``: one or more sentences a line, with talk metadata on tag lines. As
  fairseq's prepare-iwslt14.sh does, lines of ``<url>``, ``<talkid>``, ``<keywords>`` (and the
  other pure metadata tags: speaker, reviewer, translator, doc) are dropped, while the text
  of ``<title>`` and ``<description>`` lines is kept without its tags. Both sides of a pair
  carry the same tag lines, so dropping them keeps the sides aligned.
* ``IWSLT*.xml`` / WMT ``*.sgm``: one ``<seg id="N"> text </seg>`` a line inside ``<doc>``s;
  only the segments are text. XML entities (``&amp;`` ...) are unescaped and surrounding
  blanks stripped.

Both readers work on an iterable of decoded lines, so that :mod:`headlab.data.prepare` can
feed them from plain files, .gz files or tar members, and report file:line on errors.
"""
from __future__ import annotations

import re
from typing import Iterable, Iterator, NamedTuple
from xml.sax.saxutils import unescape

from headlab.errors import DataError

_ENTITIES = {"&quot;": '"', "&apos;": "'"}
_SEG = re.compile(r'^\s*<seg\s+id\s*=\s*"?([^">\s]+)"?\s*>(.*)</seg>\s*$')
_DOC = re.compile(r'^\s*<doc\b[^>]*?\bdocid\s*=\s*"([^"]*)"')
#: metadata tag lines dropped from train.tags (fairseq drops url, talkid, keywords; the others
#: are pure metadata in the IWSLT 2014-2017 releases and never sentence text)
METADATA_TAGS = ("url", "talkid", "keywords", "speaker", "reviewer", "translator", "doc", "/doc",
                 "transcription", "/transcription", "mteval", "/mteval", "?xml")
_TAG_LINE = re.compile(r"^\s*<(/?[?\w]+)[\s>]")
_KEPT_TAG = re.compile(r"^\s*<(title|description)>(.*?)</\1>\s*$")


class Segment(NamedTuple):
    docid: str
    segid: str
    text: str


def read_segments(lines: Iterable[str], path: str = "<input>") -> Iterator[Segment]:
    """Yield the ``<seg>`` segments of an IWSLT XML / WMT SGML file, in file order."""
    docid = ""
    for number, line in enumerate(lines, start=1):
        doc = _DOC.match(line)
        if doc:
            docid = doc.group(1)
            continue
        if "<seg" not in line:
            continue
        match = _SEG.match(line)
        if match is None:
            raise DataError("malformed <seg> line (expected <seg id=\"N\"> text </seg> on one line)",
                            path=path, line=number)
        yield Segment(docid, match.group(1), unescape(match.group(2), _ENTITIES).strip())


def read_train_tags(lines: Iterable[str], path: str = "<input>") -> Iterator[str]:
    """Yield the text lines of a ``train.tags.x-y.x`` file (metadata dropped, see module doc)."""
    for number, line in enumerate(lines, start=1):
        kept = _KEPT_TAG.match(line)
        if kept:
            yield kept.group(2).strip()
            continue
        tag = _TAG_LINE.match(line)
        if tag and tag.group(1).lower() in METADATA_TAGS:
            continue
        if tag and tag.group(1).lower() in ("title", "description", "seg"):
            raise DataError(f"unexpected multi-line or malformed <{tag.group(1)}> line", path=path, line=number)
        yield line.strip()
