"""Dashboard of report 002 (vxlan): no tunnel GRO with mlx4 on 4.4, so the VM's vhost thread saturates.

Controls: ``mss`` (the guest's payload per segment), ``mtu`` (the guest MTU:
VXLAN takes 50 of the host's 1500), ``gro`` (the physical NIC's), ``csum_offload``
(the NIC checks receive checksums at all), ``inner_csum`` (it vouches for the
*inner* TCP checksum too: bnx2x, or mlx4 with the VXLAN port offloaded),
``outer_udp_csum`` (the sender fills the outer UDP checksum: OVS ``csum=true``)
and ``sessions``. The model: ``offloadkit.reports.vxlan``'s fitted host and
arrivals, through ``engine.host_paths.vm_receive`` (the same calls as its ``run()``,
plus the NIC without receive checksum offload, which the preset does not list).
"""
from __future__ import annotations

from ..sim import host_paths
from ..engine.segment import check_mss_fits
from ..reports import get, load_facts
from ..reports.presets import settings_for
from ..trace import Trace
from . import views
from .dashboard import Dashboard, apply_overrides, int_slider, toggle
from .report_common import (ReportView, common_controls, mtu_room_note, excerpt, model_rate, profile_rows, report_rate,
                            sizes_text, size_counts, static_html, tag_controls)
from .report_views import rate_comparison, size_counts_chart

REPORT = "vxlan"


def rx_csum(v: dict) -> str:
    """The NIC's receive-checksum mode (``engine.checksum.RX_CSUM_MODES``) for the controls."""
    if not v["csum_offload"]:
        return "none"
    return "unnecessary" if v["inner_csum"] else "unnecessary-outer-only"


class VxlanRun:
    """What ``reports.vxlan.run()`` returns, for any receive-checksum mode."""

    def __init__(self, settings: dict, result, trace: Trace):
        self.settings, self.result, self.trace = settings, result, trace
        self.goodput_bps = result.rate_bps
        self.points = tuple(trace.points)

    def at(self, point: str) -> Trace:
        return self.trace.at(point)


def receive(v: dict) -> VxlanRun:
    m = get(REPORT)
    check_mss_fits(int(v["mss"]), int(v["mtu"]), timestamps=True)
    s = settings_for(m.KNOBS, m.VARIANTS, "broken", dict(gro=bool(v["gro"]), outer_udp_csum=bool(v["outer_udp_csum"]),
                                                          mtu=int(v["mtu"]), mss=int(v["mss"]),
                                                          sessions=int(v["sessions"])))
    host = m.fitted_host(s["fitted"])
    arrivals = m._trace_for(s, host)
    mode = rx_csum(v)
    res = host_paths.vm_receive(arrivals, host, gro=s["gro"], rx_csum=mode, tunnel_rule=s["tunnel_rule"])
    skbs, _ = host_paths.run_gro(arrivals, enabled=s["gro"], rx_csum=mode, tunnel_rule=s["tunnel_rule"])
    tap = host_paths.decap_vxlan(skbs)
    t = Trace.concat([arrivals.with_point("nic"), tap.with_point("tap")])
    return VxlanRun(s, res, Trace(t.columns, m.POINTS, t.meta))


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


def compute(v: dict) -> ReportView:
    room = mtu_room_note(v["mss"], v["mtu"])
    run = receive(v)
    ats = {p: run.at(p) for p in run.points}
    lines, window = excerpt(ats, run.points, n=5, relative_seq=False)
    notes = [room] if room else []
    if not v["csum_offload"]:
        notes.append("RX checksum offload off: every packet arrives CHECKSUM_NONE, and tunnel GRO aggregates only "
                     "if it can validate the checksum itself (a non-zero outer UDP checksum).")
    if not v["csum_offload"] and v["inner_csum"]:
        notes.append("Without receive checksum offload the NIC vouches for nothing: 'inner checksum' has no effect.")
    if not v["gro"]:
        notes.append("GRO off: every 1-MSS inner segment crosses vxlan, OVS, tun and vhost alone, whatever the NIC.")
    rates = [model_rate("your settings", run.goodput_bps / 1e9, "Gb/s")] + reference_rates()
    ref = get(REPORT).run("bnx2x").result
    profile = profile_rows(run.result, "your settings") + profile_rows(ref, "bnx2x (inner checksum)")
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
    "trace": lambda r: views.trace_text(r.lines, max_lines=10),
    "sizes": lambda r: size_counts_chart(r.run.trace, r.run.points, top=6, width=520,
                                         title="packet sizes over the whole train"),
    "throughput": lambda r: rate_comparison(r.rates, "Gb/s", title="receive throughput: model vs the report"),
    "cpu": lambda r: views.cpu_profile(r.extra["profile"], top=10),
}

DESCRIPTION = ("<p style='margin:2px 0 6px 0;max-width:980px'>VXLAN frames from another host arrive at the "
               "physical NIC (<i>nic</i>); GRO, vxlan, OVS and tun take them to the VM's tap (<i>tap</i>), and "
               "the vhost thread copies them into the guest. Recomputed by <code>offloadkit</code> "
               "(<code>reports.vxlan</code>, <code>engine.host_paths.vm_receive</code>)."
               " The tcpdump lines leave out the TCP options.</p>")


def build(**overrides) -> Dashboard:
    """``dashboard("vxlan", mss=1398, mtu=1450, gro=True, csum_offload=True, inner_csum=False,
    outer_udp_csum=False, sessions=1)``."""
    f = load_facts(REPORT)
    mtu = int(f.value("guest_mtu_bytes"))
    controls = common_controls(int(f.value("tap_mss_bytes")), mtu, True, True, mss_range=(64, 8898),
                               mtu_range=(576, 8950), gro_label="GRO (host NIC)",
                               csum_label="RX checksum offload (host NIC)")
    controls["inner_csum"] = toggle("NIC vouches for the inner checksum", False)
    controls["outer_udp_csum"] = toggle("outer UDP checksum (OVS csum=true)", False)
    controls["sessions"] = int_slider("sessions", 1, 1, 64)
    tag_controls(controls)
    apply_overrides(controls, overrides)
    return Dashboard("Report 002: VXLAN receive into a VM", controls, compute, VIEWS, readout=readout,
                     notes=lambda r: " ".join(r.notes) or None, static_html=static_html,
                     description=DESCRIPTION, layout=[["trace"], ["sizes", "cpu"], ["throughput"]])
