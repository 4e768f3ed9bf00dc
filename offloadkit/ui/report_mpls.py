"""Dashboard of report 001 (mpls): GSO skbs on an MPLS route are dropped before Linux 4.9.

Every control is a knob of ``offloadkit.reports.mpls`` with the same name: ``mss``
(payload per segment), ``mtu`` (the route's ``mtu lock``), ``gro`` (the
receiver's), ``tx_csum`` (the sender veth's TX checksum offload: without it Linux
turns TSO off), ``tso``, ``gso``, ``mpls`` (the route pushes label 100),
``drop_reason`` (the ``mpls_gso`` module is loaded: the drop's errno becomes
EINVAL) and ``segmenter`` (Linux 4.9, 48d2ab609b6b: software GSO of labelled skbs).

Live view: the goodput shown is the preset's, over the preset's duration (netperf's
10 s, or 20 ms when GSO skbs get through), but the live view simulates only the start
of that run (``PROBES``: 2 s of the broken run, 1 s with GRO off, whose 1-MSS skbs
pass at hundreds of Mb/s (1 s: its stall ends later since the 6.18 loss-probe rules), 6 ms of a healthy one) and, once the run has settled,
continues it at its measured steady rate (``sim.steady.goodput_over``; within 1 % of
the full run on the presets, ``tests/ui/test_mpls_live_run.py``). A run that has not
settled by then is simulated in full. The views and the readout's counters show the
simulated part (the readout says how long it is).
"""
from __future__ import annotations

import functools
from ..reports import get, load_facts
from ..reports.presets import PresetRun, settings_for
from ..sim import steady
from ..sim.one_packet import TSO_NEEDS_TX_CSUM, max_mss
from ..sim.scenario import tso_requires_tx_csum
from . import views
from .controls import control
from .dashboard import Dashboard
from .report_common import (ReportView, drops_text, excerpt, excerpt_panel, model_rate, mtu_room_note,
                            recorded_sizes_text, report_rate, static_html)
from .report_views import rate_comparison

REPORT = "mpls"
# (seconds simulated, the tail the steady rate is measured over) per kind of run: the broken run settles
# after its RTO stall (~0.4 s) into a 0.5-s cycle of loss probes; with GRO off it flows steadily from the
# end of the stall; a healthy run is steady after its slow-start overshoot (~2 ms)
PROBES = {"broken": (2.0, 0.5), "flowing": (1.0, 0.25), "healthy": (0.006, 0.25)}
LIVE_TRACE_LIMIT = 1000          # packets recorded per point: the broken run's first 1.2 s (the views show less)
SEGMENTERS = [("dropped (before 4.9)", "drop-gso"), ("software GSO (4.9 fix, 48d2ab609b6b)", "sw-gso")]
DROP_REASONS = [("EPROTONOSUPPORT (no mpls_gso module)", "EPROTONOSUPPORT"),
                ("EINVAL (mpls_gso loaded)", "EINVAL")]


def reference_rates() -> list[dict]:
    m, f = get(REPORT), load_facts(REPORT)
    mbps = lambda name: m.run(name, trace_limit=0).goodput_bps / 1e6
    tg = f.targets
    return [model_rate("MPLS, before 4.9", mbps("broken"), "Mb/s"),
            report_rate("MPLS, before 4.9", tg["throughput_broken_Mbps"].reported, "Mb/s"),
            model_rate("MPLS + mpls_gso, before 4.9", mbps("mpls_gso_no_inner"), "Mb/s"),
            report_rate("MPLS + mpls_gso, before 4.9", tg["throughput_mpls_gso_no_inner_Mbps"].reported, "Mb/s"),
            model_rate("no MPLS", mbps("healthy"), "Mb/s"),
            report_rate("no MPLS", f.value("throughput_healthy_veth_Mbps"), "Mb/s"),
            model_rate("MPLS, Linux 4.9 fix", mbps("fixed"), "Mb/s")]


def live_run(v: dict) -> tuple[PresetRun, float, float]:
    """(the run the views show, the goodput of the preset's run at ``v``, that run's seconds).

    The run is the start of the preset's (``PROBES``); the goodput is what it delivered, continued
    at its steady rate to the preset's duration (``sim.steady.goodput_over``), or, when it has not
    settled, the preset's whole run."""
    m = get(REPORT)
    s = settings_for(m.KNOBS, m.VARIANTS, "broken", v)
    full = m.duration_s(s)
    probe_s, tail = PROBES["healthy" if m.gso_skbs_pass(s) else "broken" if s["gro"] else "flowing"]
    if probe_s < full:
        run = m.run("broken", duration_s=probe_s, trace_limit=LIVE_TRACE_LIMIT, **v)
        goodput = steady.goodput_over(run.result, full, tail=tail)
        if goodput is not None:
            return run, goodput, full
    run = m.run("broken", trace_limit=LIVE_TRACE_LIMIT, **v)
    return run, run.goodput_bps, full


def compute(v: dict, refs: list[dict]) -> ReportView:
    """One recompute; ``refs``: the report's rows of the rate chart (constant, computed once per dashboard)."""
    m = get(REPORT)
    run, goodput, full_s = live_run(v)
    res = run.result
    room = mtu_room_note(v["mss"], v["mtu"])
    notes = [room] if room else []
    tso = tso_requires_tx_csum(v["tso"], v["tx_csum"])
    fixed = v["segmenter"] != "drop-gso"
    if v["tso"] and not v["tx_csum"]:
        notes.append(TSO_NEEDS_TX_CSUM)
    if not v["gso"] and tso:
        notes.append("GSO off changes nothing while TSO is on: TCP still builds TSO skbs.")
    if v["mpls"] and not fixed and v["gso"] and not tso:
        notes.append("TSO off, GSO on: TCP still builds GSO skbs, and software GSO on the labelled route fails "
                     "the same way before 4.9.")
    if v["mpls"] and not tso and not v["gso"] and (v["drop_reason"] == "EINVAL" or fixed):
        notes.append("TSO and GSO are off: every skb is one MSS, so neither mpls_gso nor the 4.9 fix changes "
                     "anything.")
    if not v["mpls"] and (v["drop_reason"] == "EINVAL" or fixed):
        notes.append("Without the MPLS label the route is plain IP: mpls_gso and the 4.9 fix do not matter.")
    if v["mpls"] and not fixed and not v["gro"] and goodput > 1e8:
        notes.append("GRO off at the receiver: every segment is ACKed on its own, so each ACK opens room for "
                     "one 1-MSS skb, which the labelled route passes; with GRO an ACK covers two segments and "
                     "the 2-MSS skb that follows is a GSO skb, dropped. That is the jump from a few Mb/s.")
    ats = {p: res.at(p) for p in m.POINTS}
    lines, window = excerpt(ats, m.POINTS, n=6)
    rates = [model_rate("your settings", goodput / 1e6, "Mb/s")] + refs
    return ReportView(REPORT, dict(v), res, lines, window, rates, notes, goodput=goodput,
                      extra={"ns0": ats["ns0"], "full_s": full_s})


def seconds_text(s: float) -> str:
    """2.0 -> '2 s', 0.006 -> '6 ms'."""
    return f"{s:g} s" if s >= 1 else f"{1e3 * s:g} ms"


def readout(r: ReportView) -> str:
    res, full_s = r.run, r.extra["full_s"]
    simulated = seconds_text(res.duration_s)
    how = "" if res.duration_s >= full_s else f" (the first {simulated} simulated, then its steady rate)"
    return (f"goodput {views.format_rate(r.goodput_bps)} over {seconds_text(full_s)}{how} · leaving ns0 "
            f"({recorded_sizes_text(res, 'ns0-out')}) · in the {simulated} simulated: drops {drops_text(res.drops)}, "
            f"RTOs {res.rtos}, loss probes {res.tlp_probes}")


VIEWS = {
    "sizes": lambda r: views.segment_sizes(r.window, list(r.window.points), rules=[(f"MSS {r.settings['mss']}",
                                                                                     r.settings["mss"])],
                                           width=480),
    "throughput": lambda r: rate_comparison(r.rates, "Mb/s (log scale)", log=True,
                                            title="throughput: model vs the report"),
    "stevens": lambda r: views.time_sequence(r.extra["ns0"], None, max_points=600, width=480, height=240),
}
TEXTS = {"trace": lambda r: excerpt_panel(r, max_lines=6)}

DESCRIPTION = ("<p style='margin:2px 0 6px 0;max-width:980px'>netperf in namespace ns0 sends over a veth route "
               "that pushes MPLS label 100 (<code>mtu lock 1496</code>); ns1 pops it; netserver receives. "
               "Capture points: <i>ns0</i> (skbs as TCP built them), <i>ns0-out</i> (what leaves the veth), "
               "<i>ns1</i>, <i>netserver</i>. Drops are red. Recomputed by <code>offloadkit.reports.mpls</code>."
               " The tcpdump lines leave out the TCP options.</p>")


def build(**overrides) -> Dashboard:
    """``dashboard("mpls", mss=1444, mtu=1496, gro=True, tx_csum=True, tso=True, gso=True, mpls=True,
    drop_reason="EPROTONOSUPPORT", segmenter="drop-gso")``: each a knob of ``reports.mpls``."""
    f = load_facts(REPORT)
    mtu = int(f.value("mtu_lock_bytes"))
    controls = {
        "mss": control("mss", int(f.value("mpls_route_mss_bytes")), 88, max_mss(mtu)),
        "mtu": control("mtu", mtu, 576, 9000, where="route, mtu lock"),
        "gro": control("gro", True, where="receiver"),
        "tx_csum": control("tx_csum", True, where="sender veth"),
        "tso": control("tso", True),
        "gso": control("gso", True),
        "mpls": control("mpls", True),
        "drop_reason": control("drop_reason", "EPROTONOSUPPORT", options=DROP_REASONS),
        "segmenter": control("segmenter", "drop-gso", options=SEGMENTERS),
    }
    return Dashboard("Report 001: TCP over an MPLS route", controls,
                     functools.partial(compute, refs=reference_rates()),
                     VIEWS, texts=TEXTS, readout=readout,
                     notes=lambda r: " ".join(r.notes) or None, static_html=static_html, overrides=overrides,
                     mss_max=lambda v: max_mss(v["mtu"]),
                     description=DESCRIPTION, layout=[["trace"], ["sizes", "stevens"], ["throughput"]])
