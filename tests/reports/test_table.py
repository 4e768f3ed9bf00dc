"""The Reproduction table: tolerance semantics, JSON keys, rendering."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offloadkit.reports import Reproduction, Tolerance, load_facts
from offloadkit.reports.table import JSON_KEYS, within

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False).filter(lambda x: abs(x) > 1e-3)
fraction = st.floats(min_value=0.0, max_value=0.9)


# ---------------------------------------------------------------- tolerance semantics

def test_relative_and_absolute_bounds_are_inclusive():
    assert within(100, 115, Tolerance.rel(0.15)) and within(100, 85, Tolerance.rel(0.15))
    assert not within(100, 115.01, Tolerance.rel(0.15)) and not within(100, 84.99, Tolerance.rel(0.15))
    assert within(25.46, 22.46, Tolerance.abs(3)) and not within(25.46, 22.45, Tolerance.abs(3))
    assert within(-10, -11, Tolerance.rel(0.1)) and not within(-10, -11.1, Tolerance.rel(0.1))


def test_exact_allows_only_float_noise():
    assert within(0.3, 0.1 + 0.2, Tolerance.exact())
    assert within(1448, np.int32(1448), Tolerance.exact())
    assert not within(1448, 1447, Tolerance.exact()) and not within(1448, 1448.01, Tolerance.exact())


def test_ranges_widen_outward_and_may_be_open():
    tol = Tolerance.rel(0.15)
    assert within((70, 80), 59.5, tol) and within((70, 80), 92, tol) and within((70, 80), 75, tol)
    assert not within((70, 80), 59.4, tol) and not within((70, 80), 92.1, tol)
    assert within((1, 10), 1, Tolerance.exact()) and not within((1, 10), 10.5, Tolerance.exact())
    assert within((1, None), 1e9, Tolerance.exact()) and not within((1, None), 0.9, Tolerance.exact())
    assert within((None, 5), -1e9, Tolerance.exact()) and not within((None, 5), 5.1, Tolerance.exact())
    assert within((800, 1000), 600, Tolerance.abs(200)) and not within((800, 1000), 1201, Tolerance.abs(200))


def test_text_and_yes_no_compare_by_equality():
    assert within("EINVAL", "EINVAL", Tolerance.exact()) and not within("EINVAL", "EPROTONOSUPPORT", Tolerance.exact())
    assert within(True, np.bool_(True), Tolerance.exact()) and not within(True, False, Tolerance.exact())
    assert not within(1448, "1448", Tolerance.exact())


def test_missing_model_values_are_never_ok():
    for tol in (Tolerance.exact(), Tolerance.rel(10), Tolerance.abs(1e9)):
        assert not within(1, None, tol) and not within(1, float("nan"), tol) and not within((0, 2), math.nan, tol)


@settings(max_examples=200, deadline=None)
@given(finite, fraction, st.floats(min_value=-0.999, max_value=0.999))
def test_relative_tolerance_property(reported, r, u):
    tol = Tolerance.rel(r)
    assert within(reported, reported * (1 + u * r), tol)
    outside = reported * (1 + math.copysign(r * 1.001 + 1e-4, u))
    assert not within(reported, outside, tol)


@settings(max_examples=200, deadline=None)
@given(finite, finite, st.floats(min_value=0, max_value=100))
def test_range_contains_its_inside_property(a, b, x):
    lo, hi = min(a, b), max(a, b)
    inside = lo + (hi - lo) * min(x, 100) / 100
    assert within((lo, hi), inside, Tolerance.exact())
    assert not within((lo, hi), hi + abs(hi) * 1e-3 + 1e-3, Tolerance.exact())


def test_tolerance_validation_and_json():
    for bad in ({"abs": -1}, {"rel": "10%"}, {"pct": 5}, {"abs": 1, "rel": 1}, "loose"):
        with pytest.raises(ValueError):
            Tolerance.from_json(bad)
    assert Tolerance.from_json("exact").is_exact and Tolerance.from_json({"abs": 0}).is_exact
    for tol in (Tolerance.rel(0.15), Tolerance.abs(3), Tolerance.exact()):
        assert Tolerance.from_json(tol.to_json()) == tol
    assert Tolerance.rel(0.15).text() == "±15%" and Tolerance.exact().text() == "exact"
    assert Tolerance.abs(3).text("%") == "±3 pts" and Tolerance.abs(200).text("sessions") == "±200 sessions"


# ---------------------------------------------------------------- the table

def _table() -> Reproduction:
    rep = Reproduction("demo")
    rep.add("link_rate_Mbps", "Mb/s", 9.6, 9.61, Tolerance.rel(0.05), "fitted", "seed:131")
    rep.add("throughput_kBps", "KB/s", (70, 80), np.float64(95.0), Tolerance.rel(0.15), "predicted", "seed:95")
    rep.add("payload_bytes", "bytes", 1448, np.int64(1448), Tolerance.exact(), "predicted", "seed:65")
    rep.add("drop_reason", "errno", "EINVAL", "EINVAL", Tolerance.exact(), "predicted")
    rep.add("cpu_higher", "bool", True, np.bool_(True), Tolerance.exact(), "predicted")
    return rep


def test_rows_validate_their_inputs():
    rep = _table()
    with pytest.raises(ValueError, match="already"):
        rep.add("payload_bytes", "bytes", 1, 1, Tolerance.exact(), "predicted")
    with pytest.raises(ValueError, match="role"):
        rep.add("x", "bytes", 1, 1, Tolerance.exact(), "guessed")
    with pytest.raises(ValueError, match="Tolerance.exact"):
        rep.add("y", "errno", "EINVAL", "EINVAL", Tolerance.rel(0.1), "predicted")
    with pytest.raises(ValueError, match="Tolerance"):
        rep.add("z", "bytes", 1, 1, {"abs": 0}, "predicted")


def test_all_ok_residuals_and_roles():
    rep = _table()
    assert [r.ok for r in rep.rows] == [True, False, True, True, True] and not rep.all_ok
    assert len(rep.fitted) == 1 and len(rep.predicted) == 4
    tput = rep.rows[1]
    assert tput.residual == pytest.approx(15.0) and tput.rel_residual == pytest.approx(15 / 80)
    assert rep.rows[0].rel_residual == pytest.approx(0.01 / 9.6)
    assert rep.rows[3].residual is None
    rep.rows.pop(1)
    assert rep.all_ok
    assert not Reproduction("empty").all_ok, "an empty table reproduces nothing"


def test_json_has_exactly_the_issue_keys():
    rep = _table()
    records = json.loads(rep.to_json())
    assert records == rep.to_records() and len(records) == 5
    for rec in records:
        assert tuple(rec) == JSON_KEYS
        assert rec["report"] == "demo" and rec["role"] in ("fitted", "predicted") and isinstance(rec["ok"], bool)
    assert records[1]["reported"] == [70, 80] and records[1]["model"] == 95.0 and records[1]["ok"] is False
    assert records[1]["tolerance"] == {"rel": 0.15} and records[2]["tolerance"] == {"abs": 0}
    assert records[4]["model"] is True and type(records[2]["model"]) is int
    nan = Reproduction("n")
    nan.add("q", "x", 1.0, float("nan"), Tolerance.rel(0.1), "predicted")
    assert json.loads(nan.to_json()) == [{"report": "n", "quantity": "q", "unit": "x", "reported": 1.0,
                                          "model": None, "tolerance": {"rel": 0.1}, "ok": False, "role": "predicted"}]


def test_text_rendering():
    text = _table().render()
    lines = text.splitlines()
    assert lines[0] == "demo: 4/5 within tolerance (1 fitted, 4 predicted)"
    assert lines[1].split()[:8] == ["quantity", "unit", "reported", "model", "tolerance", "residual", "ok", "role"]
    row = next(line for line in lines if line.strip().startswith("throughput_kBps"))
    assert "70-80" in row and "FAIL" in row and "±15%" in row and "+18.8%" in row and "seed:95" in row
    assert "EINVAL" in text and "yes" in text and str(_table()) == text
    assert "source" not in _table().render(source=False)


def test_to_pandas():
    df = _table().to_pandas()
    assert list(df.columns[:9]) == ["report", "quantity", "unit", "reported", "model", "tolerance",
                                     "residual", "rel_residual", "ok"]
    assert df["ok"].tolist() == [True, False, True, True, True] and df.loc[1, "residual"] == pytest.approx(15)


def test_rows_from_data_targets():
    facts = load_facts("vlan-nat")
    rep = Reproduction("vlan-nat")
    t = facts.targets["throughput_gro_off_ct1_Mbps"]
    row = rep.add_target(t, t.reported * 1.04, "predicted")
    assert row.ok and row.reported == facts.value("throughput_gro_off_ct1_Mbps") and row.source.endswith(":35")
    row = rep.add_target(facts.targets["throughput_gro_on_ct0_Mbps"], 575 * 0.94, "fitted")
    assert not row.ok and not rep.all_ok
    rng = load_facts("rtl8139").targets["throughput_tso_on_kBps"]
    r2 = Reproduction("rtl8139").add_target(rng, 91.0, "predicted")
    assert r2.ok and r2.reported == (70, 80)


def test_render_with_digits_rounds_for_a_checked_notebook_cell():
    from offloadkit.reports.table import round_text
    rep = Reproduction("toy")
    rep.add("rate_Mbps", "Mb/s", 30000, 30047.73, Tolerance.rel(0.25), "fitted")
    rep.add("broken_Mbps", "Mb/s", (1, 10), 0.658464, Tolerance.exact(), "predicted")
    rep.add("errno", "errno", "EINVAL", "EINVAL", Tolerance.exact(), "predicted")
    text = rep.render(source=False, digits=3)
    assert text.splitlines()[0] == "toy: 2/3 within tolerance (1 fitted, 2 predicted)"
    assert "30000 " in text and "30047" not in text and "0.658 " in text and "1-10" in text
    assert "FAIL" in text.splitlines()[3] and "e+" not in text
    assert "30047.7" in rep.render()          # without digits: the full precision
    assert [round_text(x) for x in (30047.73, 72.714, 0.658464, 6.65)] == ["30000", "72.7", "0.658", "6.65"]
