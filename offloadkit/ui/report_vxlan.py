"""Dashboard of report 002 (vxlan): no tunnel GRO with mlx4 on 4.4, so the VM's vhost thread saturates.

Every control is a knob of ``offloadkit.reports.vxlan`` with the same name: ``mss``
(the guest's payload per segment), ``mtu`` (the guest MTU: VXLAN takes 50 of the
host's 1500), ``gro`` (the physical NIC's), ``rx_csum`` (the checksum state the
host NIC gives VXLAN packets: none, the outer UDP only as mlx4 without an
offloaded VXLAN port, or the inner TCP too as bnx2x), ``outer_udp_csum`` (the
sender fills the outer UDP checksum: OVS ``csum=true``) and ``sessions``.
"""
from __future__ import annotations

import functools
from ..reports import get, load_facts
from ..sim.one_packet import max_mss
from . import views
from .controls import control
from .dashboard import Dashboard
from .report_common import (ReportView, excerpt, excerpt_panel, model_rate, mtu_room_note, profile_rows,
                            report_rate, size_counts, sizes_text, static_html)
from .report_views import rate_comparison, size_counts_chart

REPORT = "vxlan"
RX_CSUM = [("outer UDP only (mlx4)", "unnecessary-outer-only"), ("inner TCP too (bnx2x)", "unnecessary"),
           ("none (CHECKSUM_NONE)", "none")]


def reference_rates() -> list[dict]:
    m, f = get(REPORT), load_facts(REPORT)
    gbps = lambda name: m.run(name).goodput_bps / 1e9
    return [model_rate("mlx4 (outer checksum only)", gbps("broken"), "Gb/s"),
            report_rate("mlx4 (outer checksum only)", f.value("rx_throughput_mlx4_Gbps"), "Gb/s"),
            model_rate("bnx2x (inner checksum too)", gbps("bnx2x"), "Gb/s"),
            report_rate("bnx2x (inner checksum too)", f.value("rx_throughput_bnx2x_Gbps"), "Gb/s"),
            report_rate("82599", f.value("rx_throughput_82599_Gbps"), "Gb/s"),
            report_rate("mlx4 on patched 3.14", f.value("rx_throughput_mlx4_3_14_Gbps"), "Gb/s"),
            model_rate("OVS csum=true (outer UDP checksum)", gbps("workaround"), "Gb/s")]


def reference_profile() -> list[dict]:
    """The CPU profile of the NIC that vouches for the inner checksum, beside the student's."""
    return profile_rows(get(REPORT).run("bnx2x").result, "bnx2x (inner checksum)")


def compute(v: dict, refs: list[dict], ref_profile: list[dict]) -> ReportView:
    """One recompute; ``refs``: the report's rows of the rate chart (constant, computed once per dashboard)."""
    room = mtu_room_note(v["mss"], v["mtu"])
    run = get(REPORT).run("broken", **v)
    ats = {p: run.at(p) for p in run.points}
    lines, window = excerpt(ats, run.points, n=5, relative_seq=False)
    notes = [room] if room else []
    if v["rx_csum"] == "none":
        notes.append("RX checksum offload off: every packet arrives CHECKSUM_NONE, and tunnel GRO aggregates only "
                     "if it can validate the checksum itself (a non-zero outer UDP checksum).")
    if not v["gro"]:
        notes.append("GRO off: every 1-MSS inner segment crosses vxlan, OVS, tun and vhost alone, whatever the NIC.")
    rates = [model_rate("your settings", run.goodput_bps / 1e9, "Gb/s")] + refs
    profile = profile_rows(run.result, "your settings") + ref_profile
    return ReportView(REPORT, dict(v), run, lines, window, rates, notes,
                      extra={"ats": ats, "profile": profile})


def readout(r: ReportView) -> str:
    res = r.run.result
    tap = size_counts(r.extra["ats"]["tap"])
    util = res.utilisation()
    return (f"goodput {views.format_rate(r.goodput_bps)} ({res.bottleneck}-limited) · packets on the tap: "
            f"{sizes_text(tap, top=3)} B · {res.info['segments_per_skb']:.1f} wire segments per skb · "
            f"vhost busy {100 * util['vhost']:.0f} %")


VIEWS = {
    "sizes": lambda r: size_counts_chart(r.extra["ats"], r.run.points, top=6, width=520,
                                         title="packet sizes over the whole train"),
    "throughput": lambda r: rate_comparison(r.rates, "Gb/s", title="receive throughput: model vs the report"),
    "cpu": lambda r: views.cpu_profile(r.extra["profile"], top=10),
}
TEXTS = {"trace": lambda r: excerpt_panel(r, max_lines=10)}

DESCRIPTION = ("<p style='margin:2px 0 6px 0;max-width:980px'>VXLAN frames from another host arrive at the "
               "physical NIC (<i>nic</i>); GRO, vxlan, OVS and tun take them to the VM's tap (<i>tap</i>), and "
               "the vhost thread copies them into the guest. Recomputed by <code>offloadkit</code> "
               "(<code>reports.vxlan</code>, <code>sim.host_paths.vm_receive</code>)."
               " The tcpdump lines leave out the TCP options.</p>")


def build(**overrides) -> Dashboard:
    """``dashboard("vxlan", mss=1398, mtu=1450, gro=True, rx_csum="unnecessary-outer-only",
    outer_udp_csum=False, sessions=1)``: each a knob of ``reports.vxlan``."""
    f = load_facts(REPORT)
    mtu = int(f.value("guest_mtu_bytes"))
    controls = {
        "mss": control("mss", int(f.value("tap_mss_bytes")), 88, max_mss(mtu), where="guest"),
        "mtu": control("mtu", mtu, 576, 8950, where="guest"),
        "gro": control("gro", True, where="host NIC"),
        "rx_csum": control("rx_csum", "unnecessary-outer-only", options=RX_CSUM, where="host NIC"),
        "outer_udp_csum": control("outer_udp_csum", False),
        "sessions": control("sessions", 1, 1, 64),
    }
    return Dashboard("Report 002: VXLAN receive into a VM", controls,
                     functools.partial(compute, refs=reference_rates(), ref_profile=reference_profile()),
                     VIEWS, texts=TEXTS, readout=readout,
                     notes=lambda r: " ".join(r.notes) or None, static_html=static_html, overrides=overrides,
                     mss_max=lambda v: max_mss(v["mtu"]),
                     description=DESCRIPTION, layout=[["trace"], ["sizes", "cpu"], ["throughput"]])
