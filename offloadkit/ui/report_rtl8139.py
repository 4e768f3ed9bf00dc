"""Dashboard of report 000 (rtl8139): QEMU's RTL8139C+ TSO cuts 1448-byte chunks behind PPPoE.

Every control is a knob of ``offloadkit.reports.rtl8139`` with the same name:
``mss`` (the guest's TCP payload per segment; the preset sets the peer's clamp to
match), ``path_mtu`` (the PPPoE hop's; the guest NIC's MTU stays 1500, so the MSS
slider ends at 1448), ``gro`` (the laptop's), ``tx_csum`` (the guest's TX checksum
offload: without it Linux turns TSO off), ``tso``, ``gso`` and ``nic`` (QEMU
before 7.2, or 7.2's "rtl8139: honor large send MSS value").
"""
from __future__ import annotations

import functools
import numpy as np

from ..reports import get, load_facts
from ..sim.one_packet import TSO_NEEDS_TX_CSUM, max_mss
from ..sim.scenario import tso_requires_tx_csum
from . import views
from .controls import control
from .dashboard import Dashboard
from .report_common import (ReportView, drops_text, excerpt, excerpt_panel, model_rate, recorded_sizes_text,
                            report_rate, static_html)
from .report_views import rate_comparison

REPORT = "rtl8139"
KB = 1000.0
STEVENS_WINDOW_MS = 800     # the time-sequence graph shows the first 0.8 s of data (the pattern repeats)
LIVE_TRACE_LIMIT = 600      # packets recorded per point: the first 0.8 s is at most 400 at ppp
NIC_CHOICES = [("QEMU before 7.2 (cuts at MTU)", "rtl8139-legacy"), ("QEMU 7.2 fix (honours the MSS)", "hw-tso")]


def reference_rates() -> list[dict]:
    """The report's two measurements beside the model's runs of the same setups, and the fix."""
    m, f = get(REPORT), load_facts(REPORT)
    kbps = lambda name: m.run(name, trace_limit=0).goodput_bps / 8 / KB
    return [model_rate("TSO/GSO on, QEMU < 7.2", kbps("broken"), "KB/s"),
            report_rate("TSO/GSO on, QEMU < 7.2", f.targets["throughput_tso_on_kBps"].reported, "KB/s"),
            model_rate("TSO and GSO off", kbps("workaround"), "KB/s"),
            report_rate("TSO and GSO off", f.value("throughput_tso_off_kBps"), "KB/s"),
            model_rate("QEMU 7.2 fix, TSO on", kbps("fixed"), "KB/s")]


def compute(v: dict, refs: list[dict]) -> ReportView:
    """One recompute; ``refs``: the report's rows of the rate chart (constant, computed once per dashboard)."""
    m = get(REPORT)
    run = m.run("broken", trace_limit=LIVE_TRACE_LIMIT, **v)
    notes = []
    tso = tso_requires_tx_csum(v["tso"], v["tx_csum"])
    if v["tso"] and not v["tx_csum"]:
        notes.append(TSO_NEEDS_TX_CSUM)
    if not v["gso"] and tso:
        notes.append("GSO off changes nothing while TSO is on: the (emulated) NIC does the segmenting.")
    if v["nic"] != "rtl8139-legacy" and not tso:
        notes.append("The emulated NIC only matters when it segments (TSO on).")
    res = run.result
    if v["gro"] and res.received_packets and res.gro_packets >= res.received_packets:
        notes.append(f"GRO is on at the laptop but merged nothing ({res.received_packets} packets arrived, "
                     f"{res.gro_packets} went up the stack): at this link rate each NAPI poll finds one packet.")
    ats = {p: run.result.at(p) for p in m.POINTS}      # the simulation's rows: no handshake (not shown)
    g = ats["guest"]
    supers = np.nonzero((g.direction == 0) & (g.gso_segs > 1))[0]
    start = int(g.seq[supers[0]]) if len(supers) else None
    extra = {}
    for p in ("guest", "laptop"):
        rtx = m.first_retransmission(ats[p])
        if rtx is not None:
            extra[p] = rtx
    lines, window = excerpt(ats, m.POINTS, n=6, start_seq=start, extra_rows=extra,
                            rewrite=functools.partial(m.established, run))
    rates = [model_rate("your settings", run.goodput_bps / 8 / KB, "KB/s")] + refs
    return ReportView(REPORT, dict(v), run, lines, window, rates, notes,
                      extra={"hop_payload": max_mss(v["path_mtu"]), "ppp": first_ms(ats["ppp"], STEVENS_WINDOW_MS)})


def first_ms(t, ms: float):
    """The packets of the first ``ms`` milliseconds after the first data packet."""
    data = np.nonzero((t.direction == 0) & (t.payload_len > 0))[0]
    if len(data) == 0:
        return t
    t0 = int(t.time_ns[data[0]])
    return t[(t.time_ns >= t0) & (t.time_ns <= t0 + int(ms * 1e6))]


def readout(r: ReportView) -> str:
    res = r.run.result
    return (f"goodput {r.goodput_bps / 8 / KB:.0f} KB/s · macvtap: {recorded_sizes_text(res, 'macvtap')}"
            f" · drops: {drops_text(res.drops)} · retransmitted segments: {res.retransmits} · RTOs: {res.rtos}"
            f" · laptop stack: {res.gro_packets} packets for {res.received_packets} arrivals")


def size_rules(r: ReportView) -> list[tuple[str, int]]:
    mss, hop = int(r.settings["mss"]), r.extra["hop_payload"]
    if mss == hop:
        return [(f"MSS {mss} = PPPoE limit", mss)]
    return [(f"MSS {mss}", mss), (f"PPPoE carries ≤ {hop}", hop)]


VIEWS = {
    "sizes": lambda r: views.segment_sizes(r.window, list(r.window.points), rules=size_rules(r), width=480),
    "throughput": lambda r: rate_comparison(r.rates, "KB/s", title="throughput: model vs the report"),
    "stevens": lambda r: views.time_sequence(r.extra["ppp"], None, max_points=600, width=480, height=240),
}
TEXTS = {"trace": lambda r: excerpt_panel(r, max_lines=7)}

DESCRIPTION = ("<p style='margin:2px 0 6px 0;max-width:980px'>A QEMU guest downloads 2 MB to a laptop behind a "
               "PPPoE link (MTU 1492). Capture points: <i>guest</i> (before the emulated NIC), <i>macvtap</i> "
               "(after it), <i>ppp</i> (after the PPPoE hop), <i>laptop</i>. Drops are red, retransmissions "
               "purple. Everything is recomputed by <code>offloadkit.reports.rtl8139</code>."
               " The tcpdump lines leave out the TCP options.</p>")


def build(**overrides) -> Dashboard:
    """``dashboard("rtl8139", mss=1440, path_mtu=1492, gro=True, tx_csum=True, tso=True, gso=True,
    nic="rtl8139-legacy")``: each a knob of ``reports.rtl8139``."""
    m, f = get(REPORT), load_facts(REPORT)
    nic_mtu = int(m.KNOBS["mtu"].default)                       # the guest NIC's: 1500
    controls = {
        "mss": control("mss", int(f.value("guest_mss_bytes")), 88, max_mss(nic_mtu), where="guest"),
        "path_mtu": control("path_mtu", int(f.value("pppoe_mtu_bytes")), 576, nic_mtu),
        "gro": control("gro", True, where="laptop"),
        "tx_csum": control("tx_csum", True, where="guest"),
        "tso": control("tso", True, where="guest"),
        "gso": control("gso", True, where="guest"),
        "nic": control("nic", "rtl8139-legacy", options=NIC_CHOICES, label="emulated NIC"),
    }
    return Dashboard("Report 000: rtl8139 TSO behind PPPoE", controls,
                     functools.partial(compute, refs=reference_rates()),
                     VIEWS, texts=TEXTS, readout=readout,
                     notes=lambda r: " ".join(r.notes) or None, static_html=static_html, overrides=overrides,
                     description=DESCRIPTION, layout=[["trace"], ["sizes", "stevens"], ["throughput"]])
