"""Sphinx configuration for paddle_llrd (``make docs``, warning-free)."""
import os
import re
import sys

from docutils import nodes

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)

project = "paddle_llrd"
author = "paddle_llrd developers"
copyright = "2026, paddle_llrd developers"
release = "0.1.0"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "sphinx_copybutton",
    # Serves MathJax from _static/mathjax instead of a CDN: formulas render
    # offline and in docs opened later without a network.
    "sphinx-mathjax-offline",
]
autodoc_member_order = "bysource"
autodoc_typehints = "description"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
exclude_patterns = ["_build"]
html_theme = "furo"
html_static_path = ["_static"]
html_css_files = ["tables.css"]
nitpicky = False


def _generate_figures(app):
    """Schedule plots and tables are drawn by the package's own code at build
    time (docs/_figures.py), never by hand."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _figures

    out_dir = os.path.join(app.srcdir, "_generated")
    os.makedirs(out_dir, exist_ok=True)
    _figures.write_doc_figures(out_dir)
    # The tables python -m paddle_llrd schedules prints, included by schedules.rst.
    _figures.write_doc_tables(out_dir)


# Where a long identifier in a table cell may wrap: after "_", ".", "(" or ","
# when a name follows, and before the capital that starts the next word of a
# CamelCase name. Without these the cell wrapped it at any letter.
_IDENTIFIER_BREAK = re.compile(r"(?<=[_.(,])(?=[A-Za-z_])|(?<=[a-z0-9])(?=[A-Z][a-z])")
# Shorter code (AdamWDL, min_lr) fits any cell whole.
_SHORTEST_BROKEN = 16


def _identifier_breaks(app, doctree, docname):
    """<wbr> at the natural break points of code in table cells (not in the
    first column, which the CSS keeps whole); copying the text is unaffected."""
    if app.builder.format != "html":
        return
    for row in doctree.findall(nodes.row):
        for entry in list(row.children)[1:]:
            for literal in list(entry.findall(nodes.literal)):
                for text in list(literal.findall(nodes.Text)):
                    if len(text) < _SHORTEST_BROKEN:
                        continue
                    pieces = _IDENTIFIER_BREAK.split(str(text))
                    if len(pieces) < 2:
                        continue
                    replacement = [nodes.Text(pieces[0])]
                    for piece in pieces[1:]:
                        replacement += [nodes.raw("", "<wbr>", format="html"), nodes.Text(piece)]
                    text.parent.replace(text, replacement)


def setup(app):
    app.connect("builder-inited", _generate_figures)
    app.connect("doctree-resolved", _identifier_breaks)
