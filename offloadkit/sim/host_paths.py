"""Host paths as sequences of stages over the engine's per-packet output.

Each path takes the Trace of packets arriving at the host NIC, runs the real
engine functions on it (GRO / LRO from ``engine.gro`` and ``engine.lro``,
checksum passes from ``engine.checksum``, software GSO from ``engine.segment``)
and charges every stage for the packets, bytes and events it saw, with the
costs of a :class:`~offloadkit.engine.cpu.HostProfile`. Nothing is looked up:
turning GRO off changes the packets every later stage sees, turning checksum
offload off adds recorded passes, more sessions shrink LRO aggregates and raise
allocation costs.

Every path's result carries the packets at its capture points (``CpuResult.traces``,
point name -> Trace): what the stages saw, so nothing runs a stage again to draw them.

Paths:
- :func:`local_receive`  driver -> GRO -> IP -> TCP -> socket copy
- :func:`vm_receive`     driver -> GRO (VXLAN checksum gate) -> vxlan -> OVS -> tun -> vhost -> guest
- :func:`router_forward` driver -> GRO -> IP -> conntrack -> NAT -> egress -> software GSO -> driver TX
- :func:`splice_proxy`   driver -> LRO -> TCP -> splice read -> tcp_sendpage -> allocator -> transmit
"""
from __future__ import annotations

import time

import numpy as np

from .. import codes
from ..trace import Trace
from .hosts import load_host
from ..engine import checksum as csum
from ..engine import gro as engine_gro
from ..engine import lro as engine_lro
from ..engine.cpu import (CpuResult, HostProfile, arrival_trace, charge, miss_fraction,
                          pass_bytes, splice_calls, trace_bytes)
from ..engine.segment import segment

PIPE_BYTES = 16 * 4096          # default pipe: 16 buffers of one page (PIPE_DEF_BUFFERS)
TSO_SIZE_GOAL = 65536 - 1 - 320  # tcp_sendpage fills skbs up to the TSO size goal


def _host(host) -> HostProfile:
    return host if isinstance(host, HostProfile) else load_host(host)


def _offered(trace: Trace, offered_bps: float | None) -> float:
    if offered_bps is not None:
        return float(offered_bps)
    rate = trace.meta.get("rate_bps")
    if rate is None:
        return float("inf")
    payload, wire = trace_bytes(trace)
    return float(rate) * payload / max(wire, 1)      # the arrival's wire rate as payload rate


def _check(trace: Trace):
    if len(trace) == 0:
        raise ValueError("the arriving trace is empty: build one with arrival_trace(rate_bps, mss, ...)")


# ------------------------------------------------------------------ engine calls
def run_gro(trace: Trace, *, enabled: bool = True, rx_csum: str = "trace", tunnel_rule: str = "old",
            napi_budget: int = 64):
    """The real GRO engine: (delivered Trace, CsumPasses of GRO validation).

    With GRO off and no GSO packets in the input, GRO would hand every packet up
    unchanged with the NIC's checksum state (``netif_elide_gro``); that case is
    taken directly (same rows, states from ``checksum.rx_states``, no passes),
    which spares a copy of every column on large traces.
    """
    if not enabled and not bool((trace.gso_size > 0).any()):
        state, level = csum.rx_states(trace, rx_csum)
        return (trace.replace(csum_state=state, csum_level=level,
                              gro_reason=np.full(len(trace), codes.GRO_OFF, np.uint8)),
                csum.CsumPasses.empty())
    params = engine_gro.GroParams(enabled=enabled, rx_csum=rx_csum, tunnel_rule=tunnel_rule,
                                  napi_budget=napi_budget)
    res = engine_gro.gro(trace, params)
    return res.out, res.passes


def run_lro(trace: Trace, *, descriptors: int = 8, max_pkts: int = 64, napi_budget: int = 64) -> Trace:
    """The real LRO engine (inet_lro as myri10ge uses it: 8 descriptors, 64 packets): delivered Trace."""
    return engine_lro.lro(trace, engine_lro.LroParams(descriptors=descriptors, max_pkts=max_pkts,
                                                      napi_budget=napi_budget)).out


def _segments_in(trace: Trace) -> np.ndarray:
    """Wire segments each delivered skb stands for (gso_segs, at least 1)."""
    return np.maximum(trace.gso_segs, 1)


# ------------------------------------------------------------------ paths
def _driver_rx(h: HostProfile, trace: Trace) -> tuple[int, int, list]:
    """(packets, payload bytes, [the driver_rx stage]) of a path's arriving frames."""
    n = len(trace)
    payload = int(trace.payload_len.sum(dtype=np.int64))
    return n, payload, [charge(h, "driver_rx", packets_in=n, packets_out=n, bytes_in=payload)]


def _gro_stage(h: HostProfile, n: int, m: int, payload: int, gro: bool, gpass):
    """The gro stage: n frames in, m skbs out, GRO's checksum validation bytes."""
    return charge(h, "gro", packets_in=n, packets_out=m, bytes_in=payload, counts={"gro_packet": n if gro else 0},
                  csum_bytes=pass_bytes(gpass, [codes.PASS_GRO_VALIDATE]))


def router_forward(trace: Trace, host="bcm4708-router", *, gro: bool = True,
                   nf_conntrack_checksum: bool = True, rx_csum: str = "none", tso: bool = False,
                   tx_csum_feature: bool = True, tx_csum_hw: bool = False, napi_budget: int = 64,
                   offered_bps: float | None = None) -> CpuResult:
    """Forward with NAT (report 004).

    ``rx_csum``: the NIC's receive checksum (``checksum.RX_CSUM_MODES``; bgmac: none).
    ``tso``: egress TSO; without it GRO super-packets are segmented in software.
    ``tx_csum_feature``: the egress advertises NETIF_F_IP_CSUM, so software GSO
    leaves segments CHECKSUM_PARTIAL; without it GSO sums each segment itself.
    ``tx_csum_hw``: the hardware really checksums; bgmac does not, its driver calls
    ``skb_checksum_help`` for every PARTIAL segment.
    """
    _check(trace)
    h = _host(host)
    t0 = time.perf_counter()
    n, payload, stages = _driver_rx(h, trace)
    e0 = time.perf_counter()
    skbs, gpass = run_gro(trace, enabled=gro, rx_csum=rx_csum, napi_budget=napi_budget)
    engine_s = time.perf_counter() - e0
    m = len(skbs)
    stages.append(_gro_stage(h, n, m, payload, gro, gpass))
    sb = int(skbs.payload_len.sum(dtype=np.int64))
    stages.append(charge(h, "ip", packets_in=m, packets_out=m, bytes_in=sb))
    e0 = time.perf_counter()
    skbs, ctpass = csum.conntrack_check(skbs, enabled=nf_conntrack_checksum)
    engine_s += time.perf_counter() - e0
    stages.append(charge(h, "conntrack", packets_in=m, packets_out=m, bytes_in=sb,
                         csum_bytes=pass_bytes(ctpass, [codes.PASS_CONNTRACK])))
    stages.append(charge(h, "nat", packets_in=m, packets_out=m, bytes_in=sb))
    stages.append(charge(h, "egress", packets_in=m, packets_out=m, bytes_in=sb))
    e0 = time.perf_counter()
    is_gso = (skbs.gso_size > 0) & (skbs.payload_len > skbs.gso_size)
    n_gso = int(is_gso.sum())
    if n_gso and not tso:
        gso_pass = csum.sw_gso_passes(skbs, device_can_csum=tx_csum_feature)
        segs = sw_segment(skbs, tx_csum=tx_csum_feature)
    else:
        gso_pass, segs = None, skbs
    engine_s += time.perf_counter() - e0
    k = len(segs)
    seg_new = int(_segments_in(skbs)[is_gso].sum()) if (n_gso and not tso) else 0
    stages.append(charge(h, "sw_gso", packets_in=m, packets_out=k, bytes_in=sb,
                         counts={"gso_skb": n_gso if not tso else 0, "segment": seg_new},
                         csum_bytes=pass_bytes(gso_pass, [codes.PASS_SW_GSO])))
    e0 = time.perf_counter()
    help_pass = csum.tx_checksum(segs, device_can_csum=tx_csum_hw)
    engine_s += time.perf_counter() - e0
    stages.append(charge(h, "driver_tx", packets_in=k, packets_out=k,
                         bytes_in=int(segs.payload_len.sum(dtype=np.int64)),
                         counts={"csum_help": len(help_pass)},
                         csum_bytes=pass_bytes(help_pass, [codes.PASS_CSUM_HELP])))
    wan = segs.replace(csum_state=np.full(len(segs), codes.CSUM_NONE))   # leaves with its checksum complete
    return _result("router_forward", h, trace, stages, offered_bps, t0, engine_s,
                   dict(gro=gro, nf_conntrack_checksum=nf_conntrack_checksum, tso=tso,
                        tx_csum_hw=tx_csum_hw, wire_packets=n, skbs=m,
                        segments_per_skb=n / max(m, 1)),
                   {"lan": trace, "forward": skbs, "wan": wan})


def sw_segment(skbs: Trace, tx_csum: bool) -> Trace:
    """Software GSO of every super-packet (``skb_gso_segment`` on a device without TSO)."""
    return segment(skbs, nic="sw-gso", tx_csum=tx_csum)


def local_receive(trace: Trace, host="x86-2016-veth", *, gro: bool = True, rx_csum: str = "trace",
                  napi_budget: int = 64, offered_bps: float | None = None) -> CpuResult:
    """Local delivery: driver -> GRO -> IP -> TCP (validates NONE skbs) -> socket copy."""
    _check(trace)
    h = _host(host)
    t0 = time.perf_counter()
    n, payload, stages = _driver_rx(h, trace)
    e0 = time.perf_counter()
    skbs, gpass = run_gro(trace, enabled=gro, rx_csum=rx_csum, napi_budget=napi_budget)
    rxpass = csum.stack_rx_passes(skbs)
    engine_s = time.perf_counter() - e0
    m = len(skbs)
    sb = int(skbs.payload_len.sum(dtype=np.int64))
    stages.append(_gro_stage(h, n, m, payload, gro, gpass))
    stages.append(charge(h, "ip", packets_in=m, packets_out=m, bytes_in=sb))
    stages.append(charge(h, "tcp", packets_in=m, packets_out=m, bytes_in=sb,
                         csum_bytes=pass_bytes(rxpass, [codes.PASS_STACK_RX])))
    stages.append(charge(h, "socket_copy", packets_in=m, packets_out=m, bytes_in=sb))
    return _result("local_receive", h, trace, stages, offered_bps, t0, engine_s,
                   dict(gro=gro, wire_packets=n, skbs=m, segments_per_skb=n / max(m, 1)),
                   {"nic": trace, "stack": skbs})


def decap_vxlan(skbs: Trace) -> Trace:
    """The inner packets vxlan_rcv hands on: outer headers gone, and the outer UDP
    check consumes one UNNECESSARY level (``__skb_decr_checksum_unnecessary``):
    level 0 becomes NONE, so the guest must validate the inner TCP itself."""
    vx = csum.is_vxlan(skbs)
    st = skbs.csum_state.copy()
    lv = skbs.csum_level.copy()
    un = vx & (st == codes.CSUM_UNNECESSARY)
    st[un & (lv == 0)] = codes.CSUM_NONE
    lv[un & (lv > 0)] -= 1
    l2 = np.where(vx, skbs.l2_bytes - codes.ENC_BYTES[codes.ENC_VXLAN], skbs.l2_bytes)
    return skbs.replace(csum_state=st, csum_level=lv, l2_bytes=l2,
                        encap=skbs.encap & ~np.uint8(codes.ENC_VXLAN),
                        vni=np.where(vx, -1, skbs.vni), outer_udp_csum=np.where(vx, -1, skbs.outer_udp_csum))


def vm_receive(trace: Trace, host="x86-2016-vm-host", *, gro: bool = True, rx_csum: str = "unnecessary",
               tunnel_rule: str = "old", napi_budget: int = 64, offered_bps: float | None = None) -> CpuResult:
    """VM receive over VXLAN/OVS (report 002).

    ``rx_csum="unnecessary"``: the NIC vouches for the inner TCP checksum (csum_level 1,
    bnx2x-like) so tunnel GRO aggregates; ``"unnecessary-outer-only"`` (mlx4 without an
    offloaded VXLAN port): level 0, GRO's tunnel gate refuses (``tunnel_rule="old"``,
    4.x), every 1398-byte inner segment crosses vxlan, OVS, tun and vhost alone.
    """
    _check(trace)
    if not bool(csum.is_vxlan(trace).any()):
        raise ValueError("vm_receive expects VXLAN packets: build the trace with arrival_trace(..., vxlan=True)")
    h = _host(host)
    t0 = time.perf_counter()
    n, payload, stages = _driver_rx(h, trace)
    e0 = time.perf_counter()
    skbs, gpass = run_gro(trace, enabled=gro, rx_csum=rx_csum, tunnel_rule=tunnel_rule,
                          napi_budget=napi_budget)
    inner = decap_vxlan(skbs)
    guest_pass = csum.stack_rx_passes(inner)
    engine_s = time.perf_counter() - e0
    m = len(skbs)
    sb = int(skbs.payload_len.sum(dtype=np.int64))
    stages.append(_gro_stage(h, n, m, payload, gro, gpass))
    for name in ("vxlan", "ovs", "tun", "vhost"):
        stages.append(charge(h, name, packets_in=m, packets_out=m, bytes_in=sb))
    stages.append(charge(h, "guest", packets_in=m, packets_out=m, bytes_in=sb,
                         csum_bytes=pass_bytes(guest_pass, [codes.PASS_STACK_RX])))
    return _result("vm_receive", h, trace, stages, offered_bps, t0, engine_s,
                   dict(gro=gro, rx_csum=rx_csum, wire_packets=n, skbs=m,
                        segments_per_skb=n / max(m, 1), mean_tap_payload=sb / max(m, 1)),
                   {"nic": trace, "tap": inner})


def splice_proxy(trace: Trace, host="x86-2009-myri10ge", *, sessions: int | None = None,
                 aggregation: str = "lro", lro_descriptors: int = 8, lro_max_pkts: int = 64,
                 napi_budget: int = 64, pipe_bytes: int = PIPE_BYTES, size_goal: int = TSO_SIZE_GOAL,
                 allocs_per_rx_skb: int = 1, allocs_per_tx_skb: int = 3,
                 offered_bps: float | None = None) -> CpuResult:
    """A splice() proxy (haproxy, report 003): LRO receive, splice to a pipe, tcp_sendpage out.

    ``sessions``: concurrent sessions (default: flows in the trace); their memory
    working set, ``sessions * memory.session_footprint_bytes``, against
    ``memory.cache_bytes`` gives the share of missed lines per allocation
    (``cpu.miss_fraction``). Allocations: ``allocs_per_rx_skb`` per received skb
    (linear_to_page), ``allocs_per_tx_skb`` per sent skb (head, data, clone).
    ``aggregation``: "lro" (driver LRO, ``lro_descriptors``/``lro_max_pkts``),
    "gro" or "off".
    """
    _check(trace)
    h = _host(host)
    if sessions is None:
        sessions = int(trace.meta.get("flows", len(np.unique(trace.flow))))
    if sessions < 1:
        raise ValueError(f"sessions must be >= 1, got {sessions}")
    if pipe_bytes < 4096 or size_goal < 1:
        raise ValueError("pipe_bytes must be at least one page (4096) and size_goal positive")
    t0 = time.perf_counter()
    n, payload, stages = _driver_rx(h, trace)
    e0 = time.perf_counter()
    if aggregation == "lro":
        skbs = run_lro(trace, descriptors=lro_descriptors, max_pkts=lro_max_pkts, napi_budget=napi_budget)
    elif aggregation in ("gro", "off"):
        skbs, _ = run_gro(trace, enabled=aggregation == "gro", rx_csum="unnecessary", napi_budget=napi_budget)
    else:
        raise ValueError(f"aggregation must be 'lro', 'gro' or 'off', got {aggregation!r}")
    engine_s = time.perf_counter() - e0
    m = len(skbs)
    sb = int(skbs.payload_len.sum(dtype=np.int64))
    stages.append(charge(h, "lro", packets_in=n, packets_out=m, bytes_in=payload,
                         counts={"aggregate": m if aggregation != "off" else 0}))
    stages.append(charge(h, "tcp_rx", packets_in=m, packets_out=m, bytes_in=sb))
    calls, tx_skbs = splice_calls(np.ascontiguousarray(skbs.flow), np.ascontiguousarray(skbs.payload_len),
                                  int(pipe_bytes), int(size_goal))
    pieces = int(_segments_in(skbs).sum()) + m        # one page fragment per frame + the linear part
    stages.append(charge(h, "splice_read", packets_in=m, packets_out=m, bytes_in=sb,
                         counts={"call": calls, "piece": pieces}))
    stages.append(charge(h, "tcp_sendpage", packets_in=m, packets_out=tx_skbs, bytes_in=sb,
                         counts={"piece": pieces}))
    allocs = allocs_per_rx_skb * m + allocs_per_tx_skb * tx_skbs
    f = miss_fraction(sessions, h.memory["cache_bytes"], h.memory["session_footprint_bytes"])
    lines = allocs * f * h.memory["alloc_miss_lines"]
    stages.append(charge(h, "alloc", packets_in=tx_skbs, packets_out=tx_skbs, bytes_in=sb,
                         counts={"alloc": allocs, "miss_line": lines}))
    stages.append(charge(h, "transmit", packets_in=tx_skbs, packets_out=tx_skbs, bytes_in=sb,
                         counts={"tx_skb": tx_skbs, "piece": pieces}))
    return _result("splice_proxy", h, trace, stages, offered_bps, t0, engine_s,
                   dict(sessions=sessions, aggregation=aggregation, wire_packets=n, skbs=m,
                        segments_per_skb=n / max(m, 1), calls=int(calls), tx_skbs=int(tx_skbs),
                        allocs=int(allocs), miss_fraction=f),
                   {"nic": trace, "lro": skbs})


def _result(path, h, trace, stages, offered_bps, t0, engine_s, info, traces) -> CpuResult:
    payload, wire = trace_bytes(trace)
    info = dict(info, engine_s=engine_s, charge_s=time.perf_counter() - t0 - engine_s)
    return CpuResult(path, h, tuple(stages), payload, wire, _offered(trace, offered_bps), info, traces)


# ------------------------------------------------------------------ sweeps
def splice_sweep(sessions, host="x86-2009-myri10ge", *, rate_bps: float = 10e9, mss: int = 1448,
                 packets: int = 20000, interleave: int = 1, **kw):
    """splice_proxy over a list of session counts (arrival trains autosized per session count).

    Returns a DataFrame: sessions, segments per LRO skb, miss fraction, CPU at the
    achieved rate, goodput and wire rate, bottleneck.
    """
    import pandas as pd
    rows = []
    for s in sessions:
        t = arrival_trace(rate_bps, mss, int(s), packets=packets, interleave=interleave)
        r = splice_proxy(t, host, sessions=int(s), **kw)
        rows.append(dict(sessions=int(s), segments_per_skb=r.info["segments_per_skb"],
                         miss_fraction=r.info["miss_fraction"], cpu=r.utilisation()["cpu"],
                         rate_bps=r.rate_bps, wire_rate_bps=r.wire_rate_bps, bottleneck=r.bottleneck))
    return pd.DataFrame(rows)


def splice_cliff(host="x86-2009-myri10ge", *, lo: int = 1, hi: int = 100000, rate_bps: float = 10e9,
                 mss: int = 1448, packets: int = 4000, **kw) -> int:
    """The fewest sessions at which the proxy becomes CPU-bound (CPU-limited rate < link).

    Bisection over the session count; returns ``hi + 1`` if never CPU-bound up to ``hi``.
    """
    def cpu_bound(s: int) -> bool:
        t = arrival_trace(rate_bps, mss, s, packets=packets)
        r = splice_proxy(t, host, sessions=s, **kw)
        return r.cpu_limited_bps < r.link_goodput_bps * (1 - 1e-9)

    if not cpu_bound(hi):
        return hi + 1
    if cpu_bound(lo):
        return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if cpu_bound(mid):
            hi = mid
        else:
            lo = mid
    return hi
