"""Read the two bitext formats of the WMT19 training data: tab-separated pairs and TMX.

* ``*.tsv(.gz)`` (Europarl v9, News Commentary v14, Wiki Titles v1): one pair a line,
  ``de<TAB>en``; HindEnCorp 0.5 has 5 fields a line (3 of metadata, then en, hi), so the
  expected field count is a parameter. A line with fewer fields has empty trailing sides; a
  line with more fields cannot be split unambiguously, so all of its sides are read as empty. Either
  way the line keeps its place, so the two sides stay aligned, and ``prepare`` drops the
  pair from training data as it drops every pair with an empty side (and reports how many).
* ``*.tmx(.gz)`` (ParaCrawl v3, bicleaner 0.7 filtered): ``<tu>`` units holding one
  ``<tuv xml:lang="..."><seg>`` per language. The file is parsed incrementally (a ParaCrawl
  TMX is several GB); a unit without the asked language gives an empty line.
"""
from __future__ import annotations

import gzip
import os
from typing import Iterable, Iterator
from xml.etree import ElementTree

from headlab.errors import DataError

_XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
FIELDS = 2  #: a bitext TSV line: source TAB target


def tsv_column(lines: Iterable[str], column: int, fields: int = FIELDS) -> Iterator[str]:
    """Field ``column`` (0-based) of each line of a TSV with ``fields`` fields a line (see module doc)."""
    for line in lines:
        values = line.split("\t")
        if len(values) > fields:
            yield ""
        else:
            yield values[column].strip() if column < len(values) else ""


def _lang(element) -> str:
    code = element.get(_XML_LANG) or element.get("lang") or ""
    return code.split("-")[0].split("_")[0].lower()


def read_tmx(path: str | os.PathLike, lang: str) -> Iterator[str]:
    """The ``lang`` segment of every ``<tu>`` of a TMX file (.gz ok), in file order."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as handle:
        body = None
        try:
            for event, element in ElementTree.iterparse(handle, events=("start", "end")):
                if event == "start":
                    body = element if element.tag == "body" else body
                    continue
                if element.tag != "tu":
                    continue
                text = ""
                for tuv in element.iter("tuv"):
                    if _lang(tuv) == lang:
                        seg = tuv.find("seg")
                        text = " ".join("".join(seg.itertext()).split()) if seg is not None else ""
                        break
                yield text
                # drop finished units: memory stays flat on a multi-GB file
                if body is not None:
                    del body[:]
                else:
                    element.clear()
        except ElementTree.ParseError as err:
            raise DataError(f"malformed TMX: {err}", path=str(path), line=err.position[0]) from None
        except (OSError, EOFError) as err:
            raise DataError(f"unreadable TMX: {err}", path=str(path)) from None
