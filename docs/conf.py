"""Sphinx configuration: MyST pages, autodoc, sphinx-argparse, and the pages generated from
the code at build time (``_ext/headlab_docs.py``). Offline: no intersphinx, no remote assets."""
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path[:0] = [str(DOCS / "_ext"), str(DOCS.parent / "src")]

project = "headlab"
author = "headlab contributors"
extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinxarg.ext", "headlab_docs"]
source_suffix = {".md": "markdown"}
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
# the generated files are included into pages, never pages of their own
exclude_patterns = ["_build", "_generated", "tutorial/*.py", ".gitignore"]
html_theme = "alabaster"
html_theme_options = {"page_width": "1180px", "sidebar_width": "240px"}
html_static_path = []
autodoc_member_order = "bysource"
autodoc_typehints = "description"
