"""Sphinx configuration for paddle_llrd (``make docs``, warning-free)."""
import os
import sys

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
    """Schedule plots are drawn by the package's own plot code at build time,
    never by hand."""
    from paddle_llrd.schedules import table as schedule_table

    out_dir = os.path.join(app.srcdir, "_generated")
    os.makedirs(out_dir, exist_ok=True)
    writer = getattr(schedule_table, "write_doc_figures", None)
    if writer is not None:
        writer(out_dir)
    else:
        schedule_table.plot_schedules(os.path.join(out_dir, "schedules.png"))


def setup(app):
    app.connect("builder-inited", _generate_figures)
