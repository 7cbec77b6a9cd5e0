"""Pages generated from the code at build time, so that they cannot drift from it.

On ``builder-inited`` this writes, under ``docs/_generated/`` (included by the pages):

* ``heads.md``: every registered head kind and mixer (:mod:`headlab.heads`), and
  ``heads_plug_in.md``: how kinds plug in (that package's docstring);
* ``config/<key>.md``: one table per top-level key of ``config/schema.yaml`` and per study;
* ``compat.md``: an ``autofunction`` per patch of :func:`headlab.engine.compat.apply`, in the
  order ``apply`` makes them.

:func:`cli_parser` gives sphinx-argparse one ``headlab`` parser whose subcommands are the
parsers the subcommands really build (see :mod:`cli_parsers`).
"""
from __future__ import annotations

from pathlib import Path

from cli_parsers import cli_parser  # noqa: F401  (sphinx-argparse imports it from here)
from gen_compat import compat_page
from gen_config import config_pages
from gen_heads import heads_page, plug_in_page

ROOT = Path(__file__).resolve().parents[2]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # unchanged files keep their mtime: Sphinx then rebuilds only what changed
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def generate(app) -> None:
    out = Path(app.srcdir) / "_generated"
    _write(out / "heads.md", heads_page())
    _write(out / "heads_plug_in.md", plug_in_page())
    _write(out / "compat.md", compat_page(ROOT / "src/headlab/engine/compat.py"))
    for name, text in config_pages(ROOT / "config/schema.yaml").items():
        _write(out / "config" / f"{name}.md", text)


def setup(app):
    app.connect("builder-inited", generate)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
