"""The report presets' shared API: variants, knobs, points, runs, fits, the reproduction tables."""
from __future__ import annotations

import math

import pytest

from offloadkit import reports
from offloadkit.reports import presets
from offloadkit.reports.facts import REPORT_IDS, load_facts
from offloadkit.reports.table import JSON_KEYS


@pytest.fixture(scope="module")
def tables():
    return {rid: reports.get(rid).reproduce() for rid in REPORT_IDS}


@pytest.mark.parametrize("rid", REPORT_IDS)
def test_module_api(rid):
    mod = reports.get(rid)
    assert mod is presets.get(rid) and mod.REPORT == rid
    roles = {v.role for v in mod.VARIANTS.values()}
    assert {"broken", "workaround", "fixed"} <= roles
    assert {"broken", "workaround", "fixed"} <= set(mod.VARIANTS)
    assert len(mod.POINTS) >= 2 and len(set(mod.POINTS)) == len(mod.POINTS)
    for v in mod.VARIANTS.values():
        assert set(v.settings) <= set(mod.KNOBS), (rid, v.name)
    assert presets.points(rid) == tuple(mod.POINTS)
    assert set(presets.variants(rid)) == set(mod.VARIANTS)


@pytest.mark.parametrize("rid", REPORT_IDS)
def test_run_gives_packets_at_every_point(rid):
    r = presets.run_variant(rid, "broken")
    assert r.goodput_bps > 0 and r.report == rid and r.variant == "broken"
    for p in r.points:
        assert len(r.at(p)) > 0, p
    with pytest.raises(ValueError, match="capture point"):
        r.at("nowhere")


@pytest.mark.parametrize("rid", REPORT_IDS)
def test_unknown_variant_and_knob_are_actionable(rid):
    mod = reports.get(rid)
    with pytest.raises(ValueError, match="broken"):
        mod.run("no-such-variant")
    with pytest.raises(ValueError, match="knobs are"):
        mod.run("broken", no_such_knob=1)


def test_knob_values_are_checked():
    from offloadkit.reports import vlan_nat, vxlan
    with pytest.raises(ValueError, match="on/off"):
        vlan_nat.run("broken", gro="yes")
    with pytest.raises(ValueError, match="one of"):
        vxlan.run("broken", nic="e1000")
    with pytest.raises(ValueError, match="does not fit in MTU"):
        vlan_nat.run("broken", mss=1460)


def test_unknown_report():
    with pytest.raises(ValueError, match="rtl8139"):
        reports.get("e1000")


@pytest.mark.parametrize("rid", REPORT_IDS)
def test_every_target_is_a_row_with_a_predicted_one(rid, tables):
    t = tables[rid]
    quantities = [r.quantity for r in t.rows]
    assert set(load_facts(rid).targets) <= set(quantities)
    assert t.predicted, rid
    fits = reports.get(rid).calibrate()
    assert 1 <= len(fits) < len(t.rows)            # fewer fitted parameters than reproduced quantities
    for f in fits.values():                        # each fit names a row of the table
        assert f.target in quantities and math.isfinite(f.value)


def test_at_least_twenty_rows(tables):
    rows = [r for t in tables.values() for r in t.rows]
    assert len(rows) >= 20
    for t in tables.values():
        for rec in t.to_records():
            assert tuple(rec) == JSON_KEYS


@pytest.mark.parametrize("rid", REPORT_IDS)
def test_fitted_rows_sit_on_their_fit(rid, tables):
    """A row a parameter was solved from is reproduced (nearly) exactly: the fit is real."""
    rows = {r.quantity: r for r in tables[rid].rows}
    for f in reports.get(rid).calibrate().values():
        row = rows[f.target]
        assert row.role == "fitted"
        assert abs(row.rel_residual) < 0.01, (rid, f.name, row.rel_residual)
        assert f.prior is None or f.value != f.prior


def test_solvers():
    assert presets.solve_linear(lambda p: 3 * p + 1, 10) == pytest.approx(3)
    with pytest.raises(ValueError, match="not linear"):
        presets.solve_linear(lambda p: p * p + 1, 10)
    with pytest.raises(ValueError, match="does not depend"):
        presets.solve_linear(lambda p: 4.0, 10)
    assert presets.bisect(lambda p: p ** 3, 27, 0, 10) == pytest.approx(3, rel=1e-3)
    with pytest.raises(ValueError, match="same side"):
        presets.bisect(lambda p: p, 50, 0, 10)


def test_reproduce_all_order():
    out = presets.reproduce_all(["vxlan", "vlan-nat"])
    assert [t.report for t in out] == ["vxlan", "vlan-nat"]
