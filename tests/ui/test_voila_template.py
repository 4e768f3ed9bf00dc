"""The offloadkit Voila template: its tree pages and notebook page link no stylesheet or script
from another host (Voila's base page loads Font Awesome from cdn.jsdelivr.net)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

jinja2 = pytest.importorskip("jinja2")
voila = pytest.importorskip("voila")

OURS = Path(__file__).resolve().parents[2] / "offloadkit" / "ui" / "jupyter" / "voila" / "templates" / "offloadkit"
SHARE = Path(sys.prefix) / "share" / "jupyter"
LAB = SHARE / "voila" / "templates" / "lab"
EXTERNAL = re.compile(r"<(?:link|script)[^>]+(?:href|src)=[\"']?(?:https?:)?//", re.I)


class _Resources:
    def include_js(self, name):
        return f'<script src="/voila/static/{name}"></script>'


def _render(name: str) -> str:
    if not LAB.is_dir():
        pytest.skip(f"Voila's lab template is not installed in {SHARE}")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader([str(OURS), str(LAB), str(LAB.parent.parent.parent)]),
                             extensions=["jinja2.ext.i18n"])
    env.install_null_translations()
    ctx = dict(include_css=lambda n: f'<link rel="stylesheet" href="/voila/{n}">', include_lab_theme=lambda t: "",
               resources=_Resources(), theme="light", base_url="/", frontend="voila", page_title="t",
               breadcrumbs=[("/", "root"), ("/x", "x")], contents={"content": []}, query="", openInNewTab="",
               page_config={"fullStaticUrl": "/voila/static"})
    return env.get_template(name).render(**ctx)


@pytest.mark.parametrize("page", ["tree.html", "tree-lab.html"])
def test_tree_pages_load_nothing_from_a_cdn(page):
    html = _render(page)
    assert "<body" in html and "list-header" in html
    assert not EXTERNAL.search(html), EXTERNAL.search(html).group(0)


def test_voila_own_base_page_does_load_from_a_cdn():
    # the reason for page.html: if Voila drops the link, this fails and page.html can go
    base = (LAB.parent / "base" / "page.html").read_text()
    assert EXTERNAL.search(base)
