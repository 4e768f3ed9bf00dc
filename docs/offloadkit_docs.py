"""Sphinx glue for the offloadkit site: hide NBVAL_* markers, a Binder button per notebook page."""
from __future__ import annotations

from docutils import nodes

MARKER = "# NBVAL_"


def strip_markers(text: str) -> str:
    """A code cell's source without its ``# NBVAL_...`` comment lines (nbval's, not the student's)."""
    return "\n".join(line for line in text.split("\n") if not line.lstrip().startswith(MARKER))


def _hide_nbval(app, doctree) -> None:
    for block in list(doctree.findall(nodes.literal_block)):
        text = block.astext()
        if MARKER in text:
            block.children = [nodes.Text(strip_markers(text))]
            block.rawsource = block.astext()


def _binder(app, pagename, templatename, context, doctree) -> None:
    src = app.env.doc2path(pagename, False) if pagename in app.env.found_docs else ""
    context["notebook_file"] = str(src).split("/")[-1] if str(src).endswith(".ipynb") else ""


def setup(app):
    app.connect("doctree-read", _hide_nbval)
    app.connect("html-page-context", _binder)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
