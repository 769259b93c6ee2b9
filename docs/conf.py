"""Sphinx configuration of balancebench's documentation site (``make docs``).

The pages are Markdown (MyST). The reference pages are generated from the code on every
build (``_ext/reference.py``), so they cannot drift from it."""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path[:0] = [str(DOCS / "_ext"), str(DOCS.parent / "src")]

project = "balancebench"
author = "balancebench"
extensions = ["myst_parser", "sphinx.ext.autodoc", "reference"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "data", "figures/*.csv", "figures/crossover-target"]
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence"]
# Straight quotes everywhere: a JSON example copied from a page must parse (Sphinx would
# turn '{"zipf_s": 1.2}' into curly quotes outside code spans).
smartquotes = False
html_theme = "furo"
html_title = "balancebench"
html_show_sourcelink = False
autodoc_member_order = "bysource"
autodoc_typehints = "description"
