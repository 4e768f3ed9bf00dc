"""Dashboard of report 001 (mpls): GSO skbs on an MPLS route are dropped before Linux 4.9.

Controls: ``mss`` (payload per segment), ``mtu`` (the route's ``mtu lock``),
``gro`` (the receiver's), ``csum_offload`` (the sender veth's TX checksum
offload: without it Linux turns TSO off), ``tso``, ``gso``, ``mpls`` (the route
pushes a label), ``mpls_gso`` (the module is loaded: the drop's errno becomes
EINVAL) and ``fixed_kernel`` (Linux 4.9, 48d2ab609b6b: software GSO of labelled
skbs). The model is ``offloadkit.reports.mpls``: its ``scenario()`` with the
dashboard's MSS, checksum and GRO settings, run by ``offloadkit.sim.simulate``.

Live view: runs that reach tens of Gb/s simulate 10 ms (the preset: 20 ms),
the broken ones netperf's full 10 s (they send little, so they are quick).
"""
from __future__ import annotations

import dataclasses
import functools

from ..sim.scenario import Scenario
from ..reports import get, load_facts
from ..reports.presets import settings_for
from ..sim.simulate import simulate
from . import views
from .dashboard import Dashboard, apply_overrides, toggle
from .report_common import (ReportView, common_controls, mtu_room_note, drops_text, excerpt, model_rate, report_rate,
                            sizes_text, static_html, tag_controls)
from .report_views import rate_comparison

REPORT = "mpls"
LIVE_FAST_DURATION_S = 0.01


def knobs(v: dict) -> dict:
    """The preset's knobs for the dashboard's control values."""
    return dict(mpls=bool(v["mpls"]), segmenter="sw-gso" if v["fixed_kernel"] else "drop-gso",
                drop_reason="EINVAL" if v["mpls_gso"] else "EPROTONOSUPPORT",
                tso=bool(v["tso"] and v["csum_offload"]), gso=bool(v["gso"]), mtu=int(v["mtu"]))


def scenario(v: dict) -> Scenario:
    """The preset's scenario, with the dashboard's MSS, TX checksum offload and receiver GRO."""
    m = get(REPORT)
    s = settings_for(m.KNOBS, m.VARIANTS, "broken", knobs(v))
    sc = m.scenario(s)
    if sc.duration_ns > LIVE_FAST_DURATION_S * 1e9 and (m._healthy_like(s) or not s["mpls"]):
        sc = dataclasses.replace(sc, duration_ns=int(LIVE_FAST_DURATION_S * 1e9))
    return dataclasses.replace(sc, tcp=dataclasses.replace(sc.tcp, mss=int(v["mss"])),
                               nic=dataclasses.replace(sc.nic, tx_csum=bool(v["csum_offload"])),
                               receiver=dataclasses.replace(sc.receiver, gro=bool(v["gro"])))


@functools.lru_cache(maxsize=32)
def _simulate(sc: Scenario):
    return simulate(sc)


def reference_rates() -> list[dict]:
    m, f = get(REPORT), load_facts(REPORT)
    mbps = lambda name: m.run(name).goodput_bps / 1e6
    tg = f.targets
    return [model_rate("MPLS, before 4.9", mbps("broken"), "Mb/s"),
            report_rate("MPLS, before 4.9", tg["throughput_broken_Mbps"].reported, "Mb/s"),
            model_rate("MPLS + mpls_gso, before 4.9", mbps("mpls_gso_no_inner"), "Mb/s"),
            report_rate("MPLS + mpls_gso, before 4.9", tg["throughput_mpls_gso_no_inner_Mbps"].reported, "Mb/s"),
            model_rate("no MPLS", mbps("healthy"), "Mb/s"),
            report_rate("no MPLS", f.value("throughput_healthy_veth_Mbps"), "Mb/s"),
            model_rate("MPLS, Linux 4.9 fix", mbps("fixed"), "Mb/s")]


def compute(v: dict) -> ReportView:
    m = get(REPORT)
    room = mtu_room_note(v["mss"], v["mtu"])
    res = _simulate(scenario(v))
    notes = [room] if room else []
    if v["tso"] and not v["csum_offload"]:
        notes.append("TSO needs TX checksum offload: without it Linux turns TSO off and GSO segments in software.")
    if not v["gso"] and v["tso"] and v["csum_offload"]:
        notes.append("GSO off changes nothing while TSO is on: TCP still builds TSO skbs.")
    if v["mpls"] and not v["fixed_kernel"] and v["gso"] and not (v["tso"] and v["csum_offload"]):
        notes.append("TSO off, GSO on: TCP still builds GSO skbs, and software GSO on the labelled route fails "
                     "the same way before 4.9.")
    if v["mpls"] and not (v["tso"] and v["csum_offload"]) and not v["gso"] and (v["mpls_gso"] or v["fixed_kernel"]):
        notes.append("TSO and GSO are off: every skb is one MSS, so neither mpls_gso nor the 4.9 fix changes "
                     "anything.")
    if not v["mpls"] and (v["mpls_gso"] or v["fixed_kernel"]):
        notes.append("Without the MPLS label the route is plain IP: mpls_gso and the 4.9 fix do not matter.")
    ats = {p: res.at(p) for p in m.POINTS}
    lines, window = excerpt(ats, m.POINTS, n=6)
    rates = [model_rate("your settings", res.goodput_bps / 1e6, "Mb/s")] + reference_rates()
    return ReportView(REPORT, dict(v), res, lines, window, rates, notes, extra={"ns0": ats["ns0"]})


def readout(r: ReportView) -> str:
    res = r.run
    return (f"goodput {views.format_rate(res.goodput_bps)} over {res.duration_s:g} s · leaving ns0: "
            f"{sizes_text(res.segment_sizes('ns0-out'))} B · drops: {drops_text(res.drops)} · "
            f"RTOs: {res.rtos} · loss probes: {res.tlp_probes}")


VIEWS = {
    "trace": lambda r: views.trace_text(r.lines, max_lines=6),
    "sizes": lambda r: views.segment_sizes(r.window, list(r.window.points), rules=[(f"MSS {r.settings['mss']}",
                                                                                     r.settings["mss"])],
                                           width=480),
    "throughput": lambda r: rate_comparison(r.rates, "Mb/s (log scale)", log=True,
                                            title="throughput: model vs the report"),
    "stevens": lambda r: views.time_sequence(r.extra["ns0"], None, max_points=1500, width=480, height=240),
}

DESCRIPTION = ("<p style='margin:2px 0 6px 0;max-width:980px'>netperf in namespace ns0 sends over a veth route "
               "that pushes MPLS label 100 (<code>mtu lock 1496</code>); ns1 pops it; netserver receives. "
               "Capture points: <i>ns0</i> (skbs as TCP built them), <i>ns0-out</i> (what leaves the veth), "
               "<i>ns1</i>, <i>netserver</i>. Drops are red. Recomputed by <code>offloadkit.reports.mpls</code>."
               " The tcpdump lines leave out the TCP options.</p>")


def build(**overrides) -> Dashboard:
    """``dashboard("mpls", mss=1444, mtu=1496, gro=True, csum_offload=True, tso=True, gso=True, mpls=True,
    mpls_gso=False, fixed_kernel=False)``."""
    f = load_facts(REPORT)
    mtu = int(f.value("mtu_lock_bytes"))
    controls = common_controls(int(f.value("mpls_route_mss_bytes")), mtu, True, True, mss_range=(88, 9000),
                               gro_label="GRO (receiver)", csum_label="TX checksum offload (sender)")
    controls["tso"] = toggle("TSO", True)
    controls["gso"] = toggle("GSO", True)
    controls["mpls"] = toggle("MPLS label on the route", True)
    controls["mpls_gso"] = toggle("mpls_gso module loaded", False)
    controls["fixed_kernel"] = toggle("Linux 4.9 fix (48d2ab609b6b)", False)
    tag_controls(controls)
    apply_overrides(controls, overrides)
    return Dashboard("Report 001: TCP over an MPLS route", controls, compute, VIEWS, readout=readout,
                     notes=lambda r: " ".join(r.notes) or None, static_html=static_html,
                     description=DESCRIPTION, layout=[["trace"], ["sizes", "stevens"], ["throughput"]])
