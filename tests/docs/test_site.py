"""`make docs`: the site builds offline from the stored notebooks, with warnings as errors."""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("sphinx")
pytest.importorskip("myst_nb")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))
EXTERNAL = re.compile(r"""<(?:script|link|img|iframe|source)\b[^>]*\b(?:src|href)\s*=\s*["']?(?:https?:)?//""", re.IGNORECASE)


def _build_module():
    spec = importlib.util.spec_from_file_location("offloadkit_docs_build", ROOT / "docs" / "build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return _build_module().build(tmp_path_factory.mktemp("docs"))


def test_every_notebook_has_a_page_with_inline_svg_charts_and_a_binder_button(site):
    assert len(NOTEBOOKS) >= 7
    for name in NOTEBOOKS:
        page = (site / "notebooks" / f"{name}.html").read_text(encoding="utf-8")
        assert "<svg" in page, f"{name}: no inline SVG chart (re-execute the notebook to store its fallback)"
        assert f"urlpath=lab/tree/notebooks/{name}.ipynb" in page, name
        assert "NBVAL_" not in page, name


def test_api_page_names_simulate_and_scenario(site):
    page = (site / "api.html").read_text(encoding="utf-8")
    assert 'id="offloadkit.sim.simulate.simulate"' in page
    assert 'id="offloadkit.sim.scenario.Scenario"' in page


def test_cli_reference_lists_every_verb(site):
    from offloadkit.cli import VERBS
    page = (site / "cli.html").read_text(encoding="utf-8")
    for verb in VERBS:
        assert f"offloadkit {verb}" in page


def test_instructor_guide_carries_the_computed_answer_key(site):
    from offloadkit import exercises as X
    page = (site / "instructor.html").read_text(encoding="utf-8")
    for eid in X.ids():
        assert eid in page
    assert f"{X.answer('00-wire-frames'):,}" in page


def test_no_request_leaves_the_site(site):
    for page in site.rglob("*.html"):
        hits = EXTERNAL.findall(page.read_text(encoding="utf-8"))
        assert not hits, (page.relative_to(site), hits[:3])
    for js in site.rglob("*.js"):
        assert not re.search(r"""(?:import|from)\s*\(?\s*["']https?://""", js.read_text(encoding="utf-8",
                                                                                          errors="replace")), js


def test_markers_are_hidden_but_code_kept():
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        from offloadkit_docs import strip_markers
    finally:
        sys.path.pop(0)
    assert strip_markers("# NBVAL_CHECK_OUTPUT\nprint(1)\n  # NBVAL_SKIP\nx = 2") == "print(1)\nx = 2"
