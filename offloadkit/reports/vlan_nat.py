"""Report 004 (vlan-nat): NAT forwarding on a BCM53xx router got 30-40 % slower with VLAN GRO.

Mechanism (``engine.host_paths.router_forward`` on ``data/hosts/bcm4708-router.json``):
bgmac has no RX checksum, so with GRO on (VLAN GRO since 4.2) ``tcp4_gro_receive``
checksums every payload (pass 1), the merged skb is segmented again in software
on the way out (bgmac has no TSO) and bgmac's driver checksums every segment
with ``skb_checksum_help`` (pass 2). GRO off: at most one pass, conntrack's
(``nf_conntrack_checksum=1``); with 0, none, and the router runs at GbE line rate.

Variants: ``broken`` (GRO on, the 4.2+ default), ``workaround`` (the reporter's
fastest cell: GRO off, ``nf_conntrack_checksum=0``), ``fixed`` (OpenWrt's
"net: disable GRO by default", conntrack checksum left at its default), the four
cells of the seed's table, and ``hw_csum`` (a NIC with RX/TX checksum offload).

Calibration (``calibrate()``): two physical parameters are solved in code, the
software checksum cost per byte (from the GRO-off, checksum-on cell, 666 Mb/s)
and the per-segment cost of software GSO (from the GRO-on, checksum-off cell,
575 Mb/s). The per-packet forwarding costs come from the host file, whose
derivation budgets them from the 940 Mb/s cell (line rate): that row is marked
fitted too. Predicted: the GRO-on checksum-on cell and both csum_partial shares.
"""
from __future__ import annotations

import functools

from ..engine import cpu
from ..sim import host_paths, hosts
from ..sim.scenario import rx_csum_mode, tso_requires_tx_csum
from ..trace import Trace
from .facts import load_facts
from .presets import Fit, Knob, PresetRun, Variant, labelled, settings_for, settings_mss, solve_linear
from .table import Reproduction

REPORT = "vlan-nat"
HOST = "bcm4708-router"
POINTS = ("lan", "forward", "wan")   # arriving frames; skbs netfilter sees (after GRO); frames sent
POINT_HELP = {"lan": "frames arriving from the LAN (VLAN-tagged, CHECKSUM_NONE)",
              "forward": "skbs after GRO, as conntrack/NAT see them",
              "wan": "frames leaving on the WAN side (after software GSO)"}

KNOBS = {
    "gro": Knob(True, "GRO on the LAN interface"),
    "conntrack_checksum": Knob(True, "net.netfilter.nf_conntrack_checksum"),
    "rx_csum": Knob(False, "RX checksum offload of the LAN MAC (bgmac has none: CHECKSUM_NONE)"),
    "tx_csum": Knob(False, "TX checksum offload of the WAN MAC (bgmac has none: skb_checksum_help)"),
    "tso": Knob(False, "egress TSO (bgmac has none: software GSO; Linux turns it off without tx_csum)"),
    "mtu": Knob(1500, "interface MTU, bytes", lo=576, hi=9000),
    "mss": Knob(None, "TCP payload per segment (default: MTU - 52)", lo=64, hi=8948),
    "sessions": Knob(1, "concurrent TCP flows through the router", lo=1, hi=256),
    "packets": Knob(6000, "frames in the arriving train", lo=200, hi=200_000),
    "fitted": Knob(True, "use the fitted checksum and GSO costs (False: the host file's values)"),
}

VARIANTS = {v.name: v for v in (
    Variant("broken", "broken", "GRO on (VLAN GRO since 4.2), nf_conntrack_checksum=1",
            {"gro": True, "conntrack_checksum": True}),
    Variant("workaround", "workaround", "the reporter's fastest cell: GRO off, nf_conntrack_checksum=0",
            {"gro": False, "conntrack_checksum": False}),
    Variant("fixed", "fixed", "OpenWrt 'net: disable GRO by default' (bcm53xx), conntrack checksum default",
            {"gro": False, "conntrack_checksum": True}),
    Variant("gro_off_ct0", "extra", "seed table: GRO off, nf_conntrack_checksum=0",
            {"gro": False, "conntrack_checksum": False}),
    Variant("gro_off_ct1", "extra", "seed table: GRO off, nf_conntrack_checksum=1",
            {"gro": False, "conntrack_checksum": True}),
    Variant("gro_on_ct0", "extra", "seed table: GRO on, nf_conntrack_checksum=0",
            {"gro": True, "conntrack_checksum": False}),
    Variant("gro_on_ct1", "extra", "seed table: GRO on, nf_conntrack_checksum=1",
            {"gro": True, "conntrack_checksum": True}),
    Variant("hw_csum", "extra", "what-if: a MAC with RX and TX checksum offload, GRO on",
            {"gro": True, "conntrack_checksum": True, "rx_csum": True, "tx_csum": True}),
)}

CELLS = {"gro_off_ct0": "throughput_gro_off_ct0_Mbps", "gro_off_ct1": "throughput_gro_off_ct1_Mbps",
         "gro_on_ct0": "throughput_gro_on_ct0_Mbps", "gro_on_ct1": "throughput_gro_on_ct1_Mbps"}


@functools.lru_cache(maxsize=32)
def _arrivals(link_bps: float, mss: int, sessions: int, packets: int) -> Trace:
    return cpu.arrival_trace(link_bps, mss, sessions, packets=packets, vlan=True)


def _forward(trace: Trace, host, s: dict):
    tso = tso_requires_tx_csum(s["tso"], s["tx_csum"])
    return host_paths.router_forward(
        trace, host, gro=s["gro"], nf_conntrack_checksum=s["conntrack_checksum"],
        rx_csum=rx_csum_mode(s["rx_csum"]), tso=tso, tx_csum_hw=s["tx_csum"])


@functools.lru_cache(maxsize=1)
def calibrate() -> dict[str, Fit]:
    """Solve the checksum cost per byte and the software-GSO cost per segment (see module doc)."""
    rf = load_facts(REPORT)
    host = hosts.load_host(HOST)
    base = settings_for(KNOBS, VARIANTS, "broken", {})
    trace = _arrivals(host.link_bps, settings_mss(base), base["sessions"], base["packets"])

    def softirq_ns_per_byte(h, cell):
        s = settings_for(KNOBS, VARIANTS, cell, {})
        return _forward(trace, h, s).ns_per_byte("softirq")

    cores = host.contexts["softirq"]
    # 1) csum_ns_per_byte from GRO off + nf_conntrack_checksum=1 (one pass per packet)
    t666 = rf.value(CELLS["gro_off_ct1"]) * 1e6
    c = solve_linear(lambda p: softirq_ns_per_byte(host.with_(csum_ns_per_byte=p), "gro_off_ct1"),
                     cores * 8e9 / t666)
    h1 = host.with_(csum_ns_per_byte=c)
    # 2) per-segment software GSO cost (skb_segment + allocator) from GRO on + checksum 0
    t575 = rf.value(CELLS["gro_on_ct0"]) * 1e6
    k = solve_linear(lambda p: softirq_ns_per_byte(h1.scale_stage("sw_gso", p, per="segment"), "gro_on_ct0"),
                     cores * 8e9 / t575)
    seg_prior = sum(x.value for x in host.stages["sw_gso"].costs if x.per == "segment")
    return {
        "csum_ns_per_byte": Fit("csum_ns_per_byte", c, "ns/byte", "throughput_gro_off_ct1_Mbps",
                                "linear solve: softirq ns per payload byte = 8e9 / 666 Mb/s",
                                prior=host.csum_ns_per_byte),
        "sw_gso_ns_per_segment": Fit("sw_gso_ns_per_segment", k * seg_prior, "ns/segment",
                                     "throughput_gro_on_ct0_Mbps",
                                     "linear solve: scale of skb_segment + allocator per segment",
                                     prior=seg_prior),
    }


def fitted_host(fitted: bool = True):
    host = hosts.load_host(HOST)
    if not fitted:
        return host
    fits = calibrate()
    seg_prior = fits["sw_gso_ns_per_segment"].prior
    return host.with_(csum_ns_per_byte=fits["csum_ns_per_byte"].value).scale_stage(
        "sw_gso", fits["sw_gso_ns_per_segment"].value / seg_prior, per="segment")


def run(variant: str = "broken", **overrides) -> PresetRun:
    """Forward one arriving train through the router; ``result`` is a ``CpuResult``."""
    s = settings_for(KNOBS, VARIANTS, variant, overrides)
    host = fitted_host(s["fitted"])
    trace = _arrivals(host.link_bps, settings_mss(s), s["sessions"], s["packets"])
    res = _forward(trace, host, s)

    def build() -> Trace:
        t = Trace.concat([res.traces[p].with_point(p) for p in POINTS])
        return Trace(t.columns, t.points, {"report": REPORT, "variant": variant})

    def point(p: str) -> Trace:
        return labelled(res.traces[p], POINTS, p, {"report": REPORT, "variant": variant})

    return PresetRun(REPORT, variant, s, res, POINTS, build, res.rate_bps, point_fn=point,
                     info={"bottleneck": res.bottleneck, "utilisation": res.utilisation(),
                           "csum_partial_share": res.share("csum_partial")})


def reproduce() -> Reproduction:
    rf = load_facts(REPORT)
    tg = rf.targets
    rep = Reproduction(REPORT)
    runs = {cell: run(cell) for cell in CELLS}
    roles = {"gro_off_ct0": "fitted", "gro_off_ct1": "fitted", "gro_on_ct0": "fitted", "gro_on_ct1": "predicted"}
    for cell, q in CELLS.items():
        rep.add_target(tg[q], runs[cell].goodput_bps / 1e6, roles[cell])
    rep.add_target(tg["csum_partial_share_gro_off_pct"], 100 * runs["gro_off_ct1"].info["csum_partial_share"],
                   "predicted")
    rep.add_target(tg["csum_partial_share_gro_on_pct"], 100 * runs["gro_on_ct1"].info["csum_partial_share"],
                   "predicted")
    return rep
