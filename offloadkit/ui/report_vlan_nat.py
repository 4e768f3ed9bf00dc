"""Dashboard of report 004 (vlan-nat): VLAN GRO makes a BCM53xx NAT router checksum every byte twice.

Every control is a knob of ``offloadkit.reports.vlan_nat`` with the same name:
``mss``, ``mtu``, ``gro`` (on the LAN interface), ``rx_csum`` (the LAN MAC's RX
checksum offload; bgmac has none), ``tx_csum`` (the WAN MAC's TX checksum offload;
bgmac has none), ``conntrack_checksum`` (``net.netfilter.nf_conntrack_checksum``),
``tso`` (egress TSO; bgmac has none; Linux turns it off without TX checksum
offload) and ``sessions``.
"""
from __future__ import annotations

import functools
from ..reports import get, load_facts
from ..sim.one_packet import TSO_NEEDS_TX_CSUM, max_mss
from ..sim.scenario import tso_requires_tx_csum
from . import views
from .controls import control
from .dashboard import Dashboard
from .report_common import (ReportView, excerpt, excerpt_panel, model_rate, mtu_room_note, profile_rows,
                            report_rate, size_counts, sizes_text, static_html)
from .report_views import rate_comparison, size_counts_chart

REPORT = "vlan-nat"
CELL_NAMES = {"gro_off_ct0": "GRO off, ct-csum 0", "gro_off_ct1": "GRO off, ct-csum 1",
              "gro_on_ct0": "GRO on, ct-csum 0", "gro_on_ct1": "GRO on, ct-csum 1"}


def reference_rates() -> list[dict]:
    m, f = get(REPORT), load_facts(REPORT)
    rows = []
    for cell, fact in m.CELLS.items():
        rows.append(model_rate(CELL_NAMES[cell], m.run(cell).goodput_bps / 1e6, "Mb/s"))
        rows.append(report_rate(CELL_NAMES[cell], f.value(fact), "Mb/s"))
    return rows


def measured_profile(gro: bool) -> tuple[str, dict]:
    """The report's perf shares (fractions of all cycles) for the cell nearest the GRO setting."""
    f = load_facts(REPORT)
    if gro:
        return "GRO on", {"csum_partial": float(f.value("csum_partial_share_gro_on_pct")) / 100}
    return "GRO off, ct-csum 1", {s: float(x.value) / 100 for s, x in f.group("perf.gro_off_ct1.").items()}


def compute(v: dict, refs: list[dict]) -> ReportView:
    """One recompute; ``refs``: the report's rows of the rate chart (constant, computed once per dashboard)."""
    room = mtu_room_note(v["mss"], v["mtu"])
    m = get(REPORT)
    run = m.run("broken", **v)
    ats = {p: run.at(p) for p in m.POINTS}
    lines, window = excerpt(ats, m.POINTS, n=6, relative_seq=False)
    notes = [room] if room else []
    tso = tso_requires_tx_csum(v["tso"], v["tx_csum"])
    if v["tso"] and not v["tx_csum"]:
        notes.append(TSO_NEEDS_TX_CSUM)
    if v["gro"] and not v["rx_csum"] and tso:
        notes.append("GRO still validates every payload's checksum in software (CHECKSUM_NONE from the NIC); "
                     "with egress TSO the NIC segments and checksums on the way out.")
    elif v["gro"] and not v["rx_csum"] and not v["tx_csum"]:
        notes.append("GRO validates every payload's checksum in software (bgmac gives CHECKSUM_NONE), and the "
                     "driver checksums every software-GSO segment again on the way out.")
    ct = sum(int(st.csum_bytes) for st in run.result.stages if st.name == "conntrack")
    if v["conntrack_checksum"] and ct == 0:
        notes.append("nf_conntrack_checksum=1, yet conntrack checksummed nothing: every packet was already "
                     "validated (by GRO, or by the NIC), so the setting makes no difference here.")
    rates = [model_rate("your settings", run.goodput_bps / 1e6, "Mb/s")] + refs
    which, measured = measured_profile(bool(v["gro"]))
    profile = profile_rows(run.result, "model (your settings)", top=10) + [
        {"symbol": s, "share": x, "case": f"report: perf, {which}"} for s, x in measured.items()]
    passes = {}
    for st in run.result.stages:
        if st.csum_bytes:
            passes[st.name] = passes.get(st.name, 0) + int(st.csum_bytes)
    return ReportView(REPORT, dict(v), run, lines, window, rates, notes,
                      extra={"ats": ats, "profile": profile, "csum_bytes": passes})


def readout(r: ReportView) -> str:
    info = r.run.info
    res = r.run.result
    payload = max(res.payload_bytes, 1)
    csum = sum(r.extra["csum_bytes"].values()) / payload
    return (f"forwarding {views.format_rate(r.goodput_bps)} ({info['bottleneck']}-limited) · "
            f"csum_partial {100 * info['csum_partial_share']:.1f} % of cycles · software checksum: "
            f"{csum:.2f} passes per byte · skbs after GRO: "
            f"{sizes_text(size_counts(r.extra['ats']['forward']), top=2)} B")


VIEWS = {
    "sizes": lambda r: size_counts_chart(r.extra["ats"], r.run.points, top=5, width=560,
                                         title="packet sizes over the whole train"),
    "throughput": lambda r: rate_comparison(r.rates, "Mb/s", title="NAT throughput: model vs the report's table"),
    "cpu": lambda r: views.cpu_profile(r.extra["profile"], top=12),
}
TEXTS = {"trace": lambda r: excerpt_panel(r, max_lines=6)}

DESCRIPTION = ("<p style='margin:2px 0 6px 0;max-width:980px'>A BCM4708 router (bgmac: no checksum offload, "
               "no TSO) NATs TCP between two VLANs. Capture points: <i>lan</i> (arriving frames), "
               "<i>forward</i> (skbs after GRO, as conntrack sees them), <i>wan</i> (frames sent). "
               "Recomputed by <code>offloadkit.reports.vlan_nat</code>."
               " The tcpdump lines leave out the TCP options.</p>")


def build(**overrides) -> Dashboard:
    """``dashboard("vlan-nat", mss=1448, mtu=1500, gro=True, rx_csum=False, tx_csum=False,
    conntrack_checksum=True, tso=False, sessions=1)``: each a knob of ``reports.vlan_nat``."""
    m = get(REPORT)
    mtu = int(m.KNOBS["mtu"].default)
    controls = {
        "mss": control("mss", max_mss(mtu), 88, max_mss(mtu)),
        "mtu": control("mtu", mtu, 576, 9000),
        "gro": control("gro", True, where="LAN"),
        "rx_csum": control("rx_csum", False, where="LAN MAC"),
        "tx_csum": control("tx_csum", False, where="WAN MAC"),
        "conntrack_checksum": control("conntrack_checksum", True),
        "tso": control("tso", False, where="egress"),
        "sessions": control("sessions", 1, 1, 64),
    }
    return Dashboard("Report 004: VLAN GRO and NAT on a router", controls,
                     functools.partial(compute, refs=reference_rates()),
                     VIEWS, texts=TEXTS,
                     readout=readout, notes=lambda r: " ".join(r.notes) or None, static_html=static_html,
                     overrides=overrides, mss_max=lambda v: max_mss(v["mtu"]),
                     description=DESCRIPTION, layout=[["trace"], ["sizes", "cpu"], ["throughput"]])
