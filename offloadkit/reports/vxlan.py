"""Report 002 (vxlan): VM receive over OVS VXLAN is slower with ConnectX-3 Pro (mlx4) on 4.4.

Mechanism (``engine.host_paths.vm_receive`` on ``data/hosts/x86-2016-vm-host.json``):
the 4.x tunnel-GRO gate (``udp_gro_receive``) aggregates VXLAN packets only when
the NIC vouches for the *inner* checksum (``CHECKSUM_UNNECESSARY`` with
``csum_level`` 1, bnx2x-like). mlx4 without an offloaded VXLAN port vouches for the
outer UDP only (level 0), and the outer UDP checksum is 0 (Linux < 4.6), so
nothing is aggregated: every 1398-byte inner segment crosses vxlan, OVS, tun
and vhost alone, and the vhost thread saturates.

Variants: ``broken`` (mlx4-like, outer checksum 0), ``workaround`` (OVS
``options:csum=true``: a non-zero outer UDP checksum), ``fixed`` (the NIC reports
the inner checksum level: mlx4 with the VXLAN port offloaded), ``bnx2x`` (the
reporter's comparison NIC, same checksum metadata as ``fixed``), ``gro_off``.

Calibration: one physical parameter, the vhost thread's cost per skb, is solved in
code from the mlx4 cell (6.65 Gb/s); the bnx2x-like rate, the tap packet sizes and
the vhost CPU comparison are predicted.
"""
from __future__ import annotations

import functools

import numpy as np

from ..engine import cpu
from ..sim import host_paths, hosts
from ..trace import Trace
from .facts import load_facts
from .presets import Fit, Knob, PresetRun, Variant, labelled, settings_for, settings_mss, solve_linear
from .table import Reproduction

REPORT = "vxlan"
HOST = "x86-2016-vm-host"
POINTS = ("nic", "tap")
POINT_HELP = {"nic": "VXLAN frames arriving at the host NIC (outer headers counted, inner TCP printed)",
              "tap": "inner packets as tcpdump on the VM's tap sees them (after GRO and decapsulation)"}
NIC_RX_CSUM = {"mlx4": "unnecessary-outer-only", "bnx2x": "unnecessary", "mlx4-vxlan-port": "unnecessary"}

_F = load_facts(REPORT)
KNOBS = {
    "nic": Knob("mlx4", "receive NIC: its checksum metadata for VXLAN packets", choices=tuple(NIC_RX_CSUM)),
    "gro": Knob(True, "GRO on the physical NIC"),
    "rx_csum": Knob(None, "RX checksum offload, the state the NIC gives VXLAN packets: None = the NIC's own "
                    "(nic), 'unnecessary' = inner checksum vouched for (level 1), 'unnecessary-outer-only' = "
                    "outer UDP only (level 0), 'none' = CHECKSUM_NONE",
                    choices=(None, "unnecessary", "unnecessary-outer-only", "none")),
    "outer_udp_csum": Knob(False, "the sender fills the outer UDP checksum (OVS options:csum=true; Linux >= 4.6)"),
    "tunnel_rule": Knob("old", "udp_gro_receive's checksum gate: 4.x ('old') or later kernels ('new')",
                        choices=("old", "new")),
    "mtu": Knob(int(_F.value("guest_mtu_bytes")), "guest MTU, bytes (VXLAN takes 50 of the 1500)", lo=576, hi=8950),
    "mss": Knob(None, "TCP payload per segment (default: guest MTU - 52)", lo=64, hi=8898),
    "sessions": Knob(1, "concurrent TCP flows into the VM", lo=1, hi=256),
    "packets": Knob(4000, "frames in the arriving train", lo=200, hi=200_000),
    "fitted": Knob(True, "use the fitted vhost cost (False: the host file's values)"),
}

VARIANTS = {v.name: v for v in (
    Variant("broken", "broken", "mlx4 (ConnectX-3 Pro) on 4.4: outer-only checksum, outer UDP checksum 0",
            {"nic": "mlx4"}),
    Variant("workaround", "workaround", "OVS options:csum=true: the outer UDP checksum lets GRO validate the inner",
            {"nic": "mlx4", "outer_udp_csum": True}),
    Variant("fixed", "fixed", "the NIC reports the inner checksum level (mlx4 with the VXLAN port offloaded)",
            {"nic": "mlx4-vxlan-port"}),
    Variant("bnx2x", "extra", "Broadcom bnx2x: inner checksum vouched for, tunnel GRO aggregates",
            {"nic": "bnx2x"}),
    Variant("gro_off", "extra", "GRO off on the physical NIC (any NIC)", {"nic": "bnx2x", "gro": False}),
)}


@functools.lru_cache(maxsize=32)
def _arrivals(link_bps: float, mss: int, sessions: int, packets: int, outer_csum: bool) -> Trace:
    return cpu.arrival_trace(link_bps, mss, sessions, packets=packets, vxlan=True,
                             outer_udp_csum=0xBEEF if outer_csum else 0)


def rx_csum_mode(s: dict) -> str:
    """The receive checksum mode (``engine.checksum.RX_CSUM_MODES``) of a settings dict."""
    return NIC_RX_CSUM[s["nic"]] if s["rx_csum"] is None else s["rx_csum"]


def _receive(trace: Trace, host, s: dict):
    return host_paths.vm_receive(trace, host, gro=s["gro"], rx_csum=rx_csum_mode(s), tunnel_rule=s["tunnel_rule"])


def arrivals(s: dict, host) -> Trace:
    """The VXLAN frames arriving at the host NIC for a settings dict."""
    return _arrivals(host.link_bps, settings_mss(s), s["sessions"], s["packets"], s["outer_udp_csum"])


@functools.lru_cache(maxsize=1)
def calibrate() -> dict[str, Fit]:
    """Solve the vhost thread's per-skb cost from the mlx4 cell (see module doc)."""
    host = hosts.load_host(HOST)
    s = settings_for(KNOBS, VARIANTS, "broken", {})
    trace = arrivals(s, host)
    target = _F.value("rx_throughput_mlx4_Gbps") * 1e9
    cores = host.contexts["vhost"]
    k = solve_linear(lambda p: _receive(trace, host.scale_stage("vhost", p, per="packet"), s).ns_per_byte("vhost"),
                     cores * 8e9 / target)
    prior = sum(c.value for c in host.stages["vhost"].costs if c.per == "packet")
    return {"vhost_ns_per_skb": Fit("vhost_ns_per_skb", k * prior, "ns/skb", "rx_throughput_mlx4_Gbps",
                                    "linear solve: vhost ns per payload byte = 8e9 / 6.65 Gb/s with 1398-byte skbs",
                                    prior=prior)}


def fitted_host(fitted: bool = True):
    host = hosts.load_host(HOST)
    if not fitted:
        return host
    f = calibrate()["vhost_ns_per_skb"]
    return host.scale_stage("vhost", f.value / f.prior, per="packet")


def run(variant: str = "broken", **overrides) -> PresetRun:
    """Receive one arriving train into the VM; ``result`` is a ``CpuResult``."""
    s = settings_for(KNOBS, VARIANTS, variant, overrides)
    host = fitted_host(s["fitted"])
    trace = arrivals(s, host)
    res = _receive(trace, host, s)
    tap = res.traces["tap"]

    def build() -> Trace:
        t = Trace.concat([res.traces["nic"].with_point("nic"), tap.with_point("tap")])
        return Trace(t.columns, t.points, {"report": REPORT, "variant": variant})

    def point(p: str) -> Trace:
        return labelled(res.traces[p], POINTS, p, {"report": REPORT, "variant": variant})

    util = res.utilisation()
    return PresetRun(REPORT, variant, s, res, POINTS, build, res.rate_bps, point_fn=point,
                     info={"bottleneck": res.bottleneck, "utilisation": util, "vhost_cpu": util["vhost"],
                           "tap_payload_max": int(tap.payload_len.max()),
                           "tap_payload_min": int(tap.payload_len.min()),
                           "tap_payload_mean": float(np.mean(tap.payload_len))})


def reproduce() -> Reproduction:
    tg = _F.targets
    rep = Reproduction(REPORT)
    broken, fixed = run("broken"), run("bnx2x")
    rep.add_target(tg["tap_packet_no_aggregation_bytes"], broken.info["tap_payload_max"], "predicted")
    rep.add_target(tg["tap_packet_aggregated_max_bytes"], fixed.info["tap_payload_max"], "predicted")
    rep.add_target(tg["rx_throughput_mlx4_Gbps"], broken.goodput_bps / 1e9, "fitted")
    rep.add_target(tg["rx_throughput_bnx2x_Gbps"], fixed.goodput_bps / 1e9, "predicted")
    rep.add_target(tg["vhost_cpu_higher_mlx4"], bool(broken.info["vhost_cpu"] > fixed.info["vhost_cpu"]),
                   "predicted")
    return rep
