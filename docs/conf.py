"""Sphinx configuration of the offloadkit site (built by ``make docs`` via docs/build.py).

The notebooks are rendered with their stored outputs (myst-nb, no execution);
nothing is loaded from outside the site (no CDN: widget and MathJax scripts are off).
"""
import os
import sys

project = "offloadkit"
author = "the offloadkit developers"
copyright = "offloadkit developers, MIT licence"

extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "offloadkit_docs"]
nb_execution_mode = "off"                      # stored outputs only
nb_ipywidgets_js = {}                          # no require.js / widget manager from a CDN
nb_mime_priority_overrides = [                 # a dashboard's static fallback, not its widget view
    ("html", "application/vnd.jupyter.widget-view+json", None),
    ("html", "application/vnd.jupyter.widget-state+json", None),
]
nb_merge_streams = True
myst_enable_extensions = ["colon_fence"]
myst_update_mathjax = False
html_theme = "alabaster"
html_theme_options = {"font_family": "system-ui, sans-serif", "head_font_family": "system-ui, sans-serif",
                      "code_font_family": "monospace", "page_width": "1100px"}
html_static_path = ["_static"]
html_css_files = ["offloadkit.css"]
templates_path = ["_templates"]
html_show_sourcelink = False
exclude_patterns = ["_build", "build.py", "Thumbs.db", ".DS_Store", "screenshots"]
autodoc_member_order = "bysource"
autodoc_typehints = "none"
napoleon_numpy_docstring = True
napoleon_google_docstring = False
suppress_warnings = ["mystnb.unknown_mime_type"]
binder_url = os.environ.get("OFFLOADKIT_BINDER_URL",
                            "https://mybinder.org/v2/gh/offloadkit/offloadkit/HEAD?urlpath=lab/tree/notebooks/")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # offloadkit_docs
html_context = {"binder_url": binder_url}
