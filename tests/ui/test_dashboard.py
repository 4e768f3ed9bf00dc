"""The generic Dashboard contract, on a toy model (no engine needed)."""
from __future__ import annotations

import importlib

import altair as alt
import ipywidgets as W
import pytest

from offloadkit import ui
from offloadkit.ui.live_chart import LiveChart
from offloadkit.ui.controls import CONTROLS
from offloadkit.ui.offline import is_offline_bundle

from dashboard_helpers import spec_rows, spec_texts

D = importlib.import_module("offloadkit.ui.dashboard")  # ui.dashboard is the function, not the module


def toy_compute(v):
    """Payload split into MSS-sized pieces; an MSS over the MTU is the library's ValueError."""
    if v["mss"] > v["mtu"] - 40:
        raise ValueError(f"MSS {v['mss']} does not fit in MTU {v['mtu']}: IPv4 (20) + TCP (20) leave {v['mtu'] - 40}")
    if v["mss"] == 1234:
        raise KeyError("boom")
    n, sizes, left = v["payload"], [], v["payload"]
    while left > 0:
        sizes.append(min(left, v["mss"]))
        left -= sizes[-1]
    return {"sizes": sizes, "gro": v["gro"], "n": n}


def toy(**overrides):
    controls = {"mss": D.int_slider("MSS", 1448, 500, 9000), "mtu": D.int_slider("MTU", 1500, 576, 9000),
                "gro": D.toggle("GRO", True), "tx_csum": D.toggle("csum", True),
                "payload": D.int_slider("payload", 2880, 1, 65000),
                "enc": D.choice("encap", ["none", "VLAN"], "none")}
    D.apply_overrides(controls, overrides)
    views = {
        "sizes": lambda r: alt.Chart(alt.Data(values=[{"i": i, "size": s} for i, s in enumerate(r["sizes"])]))
        .mark_bar().encode(x="i:O", y="size:Q"),
        "text": lambda r: alt.Chart(alt.Data(values=[{"t": f"gro={r['gro']} segs={len(r['sizes'])}"}]))
        .mark_text().encode(text="t:N"),
    }
    return D.Dashboard("toy", controls, toy_compute, views,
                       readout=lambda r: f"{len(r['sizes'])} segments", notes=lambda r: None)


def sizes_in(dash):
    return [r["size"] for r in spec_rows(dash.charts["sizes"].spec)]


def test_structure_and_initial_state():
    d = toy()
    assert set(d.controls) >= {"mss", "mtu", "gro", "tx_csum"}
    assert all(isinstance(c, LiveChart) for c in d.charts.values())
    assert d.error is None and d.result["sizes"] == [1448, 1432]
    assert sizes_in(d) == [1448, 1432]
    assert ">2 segments<" in d.readout.value
    for c in d.charts.values():
        assert c.embed_options["renderer"] == "svg"


def test_assignment_updates_result_and_every_chart_synchronously():
    d = toy()
    charts_before = {k: id(c) for k, c in d.charts.items()}
    d.controls["mss"].value = 1000
    assert d.result["sizes"] == [1000, 1000, 880]
    assert sizes_in(d) == [1000, 1000, 880]
    assert ">3 segments<" in d.readout.value
    d.controls["gro"].value = False
    assert "gro=False segs=3" in spec_texts(d.charts["text"].spec)
    d.controls["enc"].value = "VLAN"
    assert d.values["enc"] == "VLAN"
    assert {k: id(c) for k, c in d.charts.items()} == charts_before, "charts must be persistent"


def test_invalid_value_shows_message_keeps_last_good_result():
    d = toy()
    d.controls["mss"].value = 1000
    good = d.result
    d.controls["mtu"].value = 900
    assert d.error == "MSS 1000 does not fit in MTU 900: IPv4 (20) + TCP (20) leave 860"
    assert "MSS 1000 does not fit in MTU 900" in d.message.value and "offloadkit-error" in d.message.value
    assert "Traceback" not in d.message.value
    assert d.result is good and sizes_in(d) == [1000, 1000, 880]
    d.controls["mtu"].value = 1500
    assert d.error is None and d.message.value == ""
    assert d.result["sizes"] == [1000, 1000, 880]


def test_unexpected_exception_is_shown_not_raised():
    d = toy()
    d.controls["mss"].value = 1234
    assert d.error.startswith("internal error (KeyError)")
    assert isinstance(d.last_exception, KeyError)


def test_invalid_initial_override_gives_no_result_but_a_dashboard():
    d = toy(mss=1600, mtu=1500)
    assert d.result is None and "does not fit" in d.error
    assert all(isinstance(c, LiveChart) and c.spec for c in d.charts.values())


def test_set_recomputes_once():
    d = toy()
    before = d.recomputes
    d.set(mss=700, payload=1400)
    assert d.recomputes == before + 1 and d.result["sizes"] == [700, 700]
    with pytest.raises(ValueError, match="no control"):
        d.set(bogus=1)


def test_overrides_are_checked():
    with pytest.raises(ValueError, match="no control 'bogus'"):
        toy(bogus=3)
    with pytest.raises(ValueError, match="outside"):
        toy(mss=100000)
    with pytest.raises(ValueError, match="enc"):
        toy(enc="GRE")


def test_displayable_as_one_widget():
    d = toy()
    bundle = d._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert data["application/vnd.jupyter.widget-view+json"]["model_id"] == d.widget.model_id
    assert isinstance(d.widget, W.VBox)
    kids = set()
    stack = [d.widget]
    while stack:
        w = stack.pop()
        kids.add(id(w))
        stack.extend(getattr(w, "children", ()))
    assert all(id(c) in kids for c in d.charts.values())
    assert all(id(c) in kids for c in d.controls.values())
    assert id(d.readout) in kids and id(d.message) in kids


def test_offline_always():
    d = toy()
    assert all(is_offline_bundle(c._esm) for c in d.charts.values())
    assert not is_offline_bundle('import vegaEmbed from "https://esm.sh/vega-embed@7";')


def test_registry():
    assert "intro" in ui.available()
    with pytest.raises(ValueError, match="no dashboard .nope.; available: intro"):
        ui.dashboard("nope")
    ui.register("toy-test", "test_dashboard")
    try:
        assert ui.dashboard("toy-test", mss=1000).result["sizes"] == [1000, 1000, 880]
    finally:
        ui._REGISTRY.pop("toy-test")


build = toy  # lets the registry test import this module as a dashboard module


def test_mimebundle_fallbacks_are_short_and_static():
    d = toy()
    data = d._repr_mimebundle_()
    assert data["text/plain"] == repr(d) == "<Dashboard 'toy': 6 controls, 2 charts, ok>"
    assert "2 segments" in data["text/html"] and "live dashboard" in data["text/html"]
    d.controls["mtu"].value = 600
    assert "does not fit" in d._repr_mimebundle_()["text/html"]


def test_deferred_rfc3987_syntax_behaves_like_the_real_module():
    import subprocess
    import sys
    code = ("import sys, offloadkit.ui, jsonschema\n"
            "stub = type(sys.modules.get('rfc3987_syntax')).__name__\n"
            "fc = jsonschema.FormatChecker()\n"
            "print(stub, fc.conforms('http://example.com/\\u00e4', 'iri'), fc.conforms('not an iri', 'iri'),"
            " type(sys.modules['rfc3987_syntax']).__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    pytest.importorskip("rfc3987_syntax")
    assert out == ["_Deferred", "True", "False", "module"]


@pytest.mark.parametrize("report_id", ui.available())
def test_contract_for_every_registered_dashboard(report_id):
    """Every dashboard: required controls, JupyterCharts, each control moves result and charts
    synchronously, an invalid combination gives `error` (no exception) and keeps the last result."""
    d = ui.dashboard(report_id)
    assert {"mss", "gro"} <= set(d.controls) or {"mss", "aggregation"} <= set(d.controls)
    assert all(name in CONTROLS for name in d.controls), "labels and meanings come from ui.controls"
    assert d.error is None and d.result is not None
    assert set(d.charts) == set(d.views) and all(isinstance(c, LiveChart) for c in d.charts.values())
    for name, ctl in d.controls.items():
        default, moved = ctl.value, False
        for v in D.control_values(ctl):
            if v == ctl.value:
                continue
            before = d.result
            ctl.value = v
            if d.error is None:
                assert d.result is not before, f"{name}={v} did not recompute"
                for view, build in d.views.items():
                    assert d.charts[view].spec == D.live_chart(build(d.result)).to_dict(), (name, v, view)
                for text, build in d.texts.items():
                    assert d.text_panels[text].value == build(d.result), (name, v, text)
                moved = True
                break
        assert moved, f"no value of {name} was accepted"
        ctl.value = default
        assert d.error is None
    assert d.busy.value == ""                  # the busy indicator is cleared after every recompute


def test_busy_indicator_is_shown_while_the_model_runs():
    seen = []
    d = toy()
    d.busy.observe(lambda ch: seen.append(ch["new"]), names="value")
    d.controls["mss"].value = 1000
    assert seen and "recomputing" in seen[0] and seen[-1] == ""


def test_readme_lists_every_control_with_its_label_and_dashboards():
    """The README's control table is the code's: same names, labels, and dashboards showing them."""
    from pathlib import Path
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip(" `"): [c.strip() for c in line.split("|")[1:-1]]
            for line in readme.splitlines() if line.startswith("| `")}
    shown: dict[str, set] = {}
    for rid in ui.available():
        for name in ui.dashboard(rid).controls:
            shown.setdefault(name, set()).add(rid)
    assert set(rows) == set(shown)
    for name, (_, label, meaning, _, dashboards) in rows.items():
        assert (label, meaning) == CONTROLS[name], name
        assert set(d.strip() for d in dashboards.split(",")) == shown[name], name
