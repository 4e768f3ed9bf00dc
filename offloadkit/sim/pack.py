"""Scenario -> the TCP loop's parameter arrays, from one field table per array.

``P_FROM`` maps every slot name of ``engine.tcp.layout.P_FIELDS`` to a
function of (scenario, derived values); ``HP_FROM`` does the same per hop for
``HP_FIELDS``. Adding a loop parameter is one name in the layout and one line
here; a slot without a line (or a line without a slot) fails at import.
``pack(sc)`` returns ``(P, HP, HL, NP, FP)`` for ``engine.tcp.make_world``; ``FP_FROM`` fills
the per-flow table from ``Scenario.flow(i)``.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ..engine import tcp as K
from ..engine.segment import NIC_MODELS, NicModel, nic_chunk_size
from .addresses import gro_buckets
from .scenario import IP_HLEN, Hop, Scenario

MAX_EVENTS = 2_000_000_000
MAX_WORLD_BYTES = 2 << 30         # what one run may allocate (a Binder pod has 1-2 GB)
EVENTS_PER_SEGMENT = 4            # events per wire segment over one hop (bench_tcp: 3-4), +1 per extra hop
NO_END_NS = 3600 * 10**9          # a finite transfer runs until done (at most one simulated hour)


def _gro_mode(rx) -> int:
    return K.GRO_MODE_LRO if rx.lro else (K.GRO_MODE_GRO if rx.gro else K.GRO_MODE_OFF)


def queue_slots(h: Hop) -> int:
    """Packets a hop's queue can hold: its packet limit, or its byte limit over the smallest frame."""
    return h.queue_packets or (h.queue_bytes // 54 + 2)


def nic_params(sc: Scenario) -> np.ndarray:
    """The NIC model's parameter vector (``engine.segment.NicModel.params``)."""
    nic = sc.nic
    return np.asarray(NicModel(nic.model, drop_reason=nic.drop_code, legacy_mtu_bytes=nic.legacy_mtu_bytes)
                      .params(), np.int64)


def segments_per_mss(sc: Scenario, mss: int) -> int:
    """Wire segments the NIC cuts one MSS into (1 but for models that read a garbled MSS)."""
    if not sc.nic.tso:
        return 1
    chunk = int(nic_chunk_size(NIC_MODELS[sc.nic.model][0], nic_params(sc), mss, 20, sc.tcp.tcp_hlen))
    return 1 if chunk <= 0 or chunk >= mss else -(-mss // chunk)


def derived(sc: Scenario) -> SimpleNamespace:
    """Values several slots need: MSS, TCP header length, end time, sampling interval, pool sizes."""
    tcp = sc.tcp
    mss = sc.mss_bytes
    # the event loop writes every IP length as 20 + thl + payload: the IP header bytes beyond IPv4's
    # 20 (IPv6: 20 more) travel in this slot, so lengths, MTU checks and wire times count them
    thl = tcp.tcp_hlen + sc.ip_hlen - IP_HLEN
    min_hop_ip_mtu = min(h.mtu - h.encap_overhead_bytes for h in sc.path)
    mss_min = max(8, min(mss, min_hop_ip_mtu - 20 - thl)) if any(h.icmp for h in sc.path) else mss
    qtot = sum(queue_slots(h) for h in sc.path)
    qcap = max(queue_slots(h) for h in sc.path) + 2
    if sc.sample_ns is not None:
        sample = sc.sample_ns
    elif sc.duration_ns is not None:
        sample = max(sc.duration_ns // 1000, 1000)
    else:
        starts = max(sc.flow(i).start_ns + 2 * sc.flow(i).extra_rtt_ns for i in range(sc.flows))
        est = 8 * sum(sc.flow_bytes) * 10**9 // max(sc.bottleneck_bps, 1) + 4 * sc.base_rtt_ns + starts
        sample = max(est // 1000, 10_000)
    return SimpleNamespace(mss=mss, thl=thl, sample=sample,
                           end=sc.duration_ns if sc.duration_ns is not None else NO_END_NS,
                           z=K.sizes(sc.flows, mss_min, tcp.rwnd_bytes, qtot, qcap, sc.receiver.napi_budget,
                                     segments_per_mss(sc, mss)))


P_FROM = {
    "flows": lambda sc, d: sc.flows,
    "total": lambda sc, d: -1 if None in sc.flow_bytes else max(sc.flow_bytes),   # -1: some flow is unlimited
    "end_ns": lambda sc, d: d.end,
    "mss": lambda sc, d: d.mss,
    "thl": lambda sc, d: d.thl,
    "ts": lambda sc, d: sc.tcp.timestamps,
    "sack": lambda sc, d: sc.tcp.sack,
    "cc": lambda sc, d: K.CC_CUBIC if sc.tcp.cc == "cubic" else K.CC_NEWRENO,
    "iw": lambda sc, d: sc.tcp.initial_cwnd,
    "min_rto": lambda sc, d: sc.tcp.min_rto_ns,
    "max_rto": lambda sc, d: sc.tcp.max_rto_ns,
    "tlp": lambda sc, d: sc.tcp.tlp,
    "delack": lambda sc, d: sc.tcp.delayed_ack,
    "delack_ns": lambda sc, d: sc.tcp.delack_ns,
    "quick": lambda sc, d: sc.tcp.quickacks,
    "rwnd": lambda sc, d: sc.tcp.rwnd_bytes,
    "tso": lambda sc, d: sc.nic.tso,
    "gso": lambda sc, d: sc.nic.gso,
    "nic": lambda sc, d: NIC_MODELS[sc.nic.model][0],
    "nic_rate": lambda sc, d: sc.nic.rate_bps,
    "gso_max_size": lambda sc, d: sc.nic.gso_max_size,
    "gso_max_segs": lambda sc, d: sc.nic.gso_max_segs,
    "gro": lambda sc, d: _gro_mode(sc.receiver),
    "budget": lambda sc, d: sc.receiver.napi_budget,
    "napi_delay": lambda sc, d: sc.receiver.napi_delay_ns,
    "gro_max": lambda sc, d: sc.receiver.gro_max_size,
    "rec_limit": lambda sc, d: sc.trace_limit,
    "sample_ns": lambda sc, d: d.sample,
    "ucap": lambda sc, d: d.z["ucap"],
    "ocap": lambda sc, d: d.z["ocap"],
    "rev_delay": lambda sc, d: sum(h.delay_ns for h in sc.path),
    "psh_gso": lambda sc, d: sc.tcp.psh_on_gso,
    "nhops": lambda sc, d: len(sc.path),
    "npoints": lambda sc, d: len(sc.path) + 3,
    "pkcap": lambda sc, d: d.z["pkcap"],
    "akcap": lambda sc, d: d.z["akcap"],
    "hcap": lambda sc, d: d.z["hcap"],
    "rxcap": lambda sc, d: d.z["rxcap"],
    "qcap": lambda sc, d: d.z["qcap"],
    "base_rtt": lambda sc, d: sc.base_rtt_ns,
    "max_events": lambda sc, d: MAX_EVENTS,
    "seed": lambda sc, d: sc.seed,
    "rtx_tso": lambda sc, d: sc.tcp.tso_retransmits,
    "reo_timer": lambda sc, d: sc.tcp.rack_reo_timer,
    "prr_una": lambda sc, d: sc.tcp.prr_ss_una,
    "rack_time": lambda sc, d: sc.tcp.rack_time_based,
    "fack": lambda sc, d: sc.tcp.fack,
    "ofo_quick": lambda sc, d: sc.tcp.ofo_quickack,
    "mtu_probing": lambda sc, d: sc.tcp.mtu_probing,
    "base_mss": lambda sc, d: sc.tcp.base_mss,
    "tso_defer": lambda sc, d: sc.tcp.tso_defer,
    "loss_timers": lambda sc, d: sc.tcp.loss_timers,
    "rto_timer": lambda sc, d: sc.tcp.rto_timer,
    "ipv4": lambda sc, d: sc.ip_version == 4,
    "rec_rx": lambda sc, d: 0,      # pack(sc, rx_rows=True) records them
}

FP_FROM = {
    "total": lambda sc, f: f.bytes if f.bytes is not None else -1,
    "start_ns": lambda sc, f: f.start_ns,
    "extra_rtt": lambda sc, f: f.extra_rtt_ns,
    "cc": lambda sc, f: K.CC_CUBIC if f.cc == "cubic" else K.CC_NEWRENO,
    "bucket": lambda sc, f: 0,      # the GRO hash bucket: pack() writes all flows' at once (gro_buckets)
}

HP_FROM = {
    "rate": lambda h: h.rate_bps,
    "delay": lambda h: h.delay_ns,
    "mtu": lambda h: h.mtu,
    "over": lambda h: h.frame_overhead_bytes,
    "qpkts": lambda h: h.queue_packets or 0,
    "qbytes": lambda h: h.queue_bytes or 0,
    "icmp": lambda h: h.icmp,
    "encap": lambda h: h.encap_bits,
    "labels": lambda h: h.mpls_labels,
    "whole": lambda h: h.tbf_burst_bytes,
}

for _table, _fields in ((P_FROM, K.P_FIELDS), (FP_FROM, K.FP_FIELDS), (HP_FROM, K.HP_FIELDS)):
    if tuple(_table) != _fields:
        raise ImportError(f"sim.pack is out of step with engine.tcp.layout: {set(_table) ^ set(_fields)}")


def estimated_segments(sc: Scenario) -> int:
    """Wire segments the run sends at most: the bytes to send, or what the flows can send in the
    duration (or the one-hour limit) at the bottleneck rate or the receive windows' rate
    (flows x rwnd per RTT), whichever is lower, over the smallest segment the NIC cuts."""
    seg = max(sc.mss_bytes // segments_per_mss(sc, sc.mss_bytes), 1)
    rate = min(sc.bottleneck_bps, sc.flows * sc.tcp.rwnd_bytes * 8 * 10**9 // max(sc.base_rtt_ns, 1))
    duration = sc.duration_ns if sc.duration_ns is not None else NO_END_NS
    nbytes = rate * duration // 8 // 10**9
    if None not in sc.flow_bytes:
        nbytes = min(nbytes, sum(sc.flow_bytes))
    return nbytes // seg + 1


def check_feasible(sc: Scenario, P: np.ndarray) -> None:
    """Refuse up front a run that would exhaust the loop's event limit or allocate too much memory."""
    segs = estimated_segments(sc)
    events = segs * (EVENTS_PER_SEGMENT + len(sc.path) - 1)
    if events > MAX_EVENTS:
        raise ValueError(f"this run would send about {segs:.2e} segments ({events:.1e} events, about "
                         f"{events / 5e6 / 60:.0f} CPU minutes); the simulator stops at {MAX_EVENTS:.0e} "
                         f"events: lower the bytes per flow or the duration (e.g. a few seconds of simulated "
                         f"time show the steady state)")
    need = K.world_bytes(P)
    if need > MAX_WORLD_BYTES:
        raise ValueError(f"this run needs {need / 2**30:.1f} GiB of simulator state (packet pools for "
                         f"{sc.flows} flow(s) of a {sc.tcp.rwnd_bytes}-byte window cut into "
                         f"{segments_per_mss(sc, sc.mss_bytes)} segment(s) per MSS, {sc.trace_limit} trace rows "
                         f"per point); lower flows, rwnd_bytes or trace_limit")


def pack(sc: Scenario, rx_rows: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(P, HP, HL, NP, FP)``: loop parameters, hop table, hop loss rates, NIC model parameters,
    per-flow parameters. ``rx_rows``: also record what each NAPI poll took (the hidden "rx" point).

    Raises ValueError for a run that cannot fit (``check_feasible``).
    """
    d = derived(sc)
    P = np.array([int(P_FROM[name](sc, d)) for name in K.P_FIELDS], np.int64)
    P[K.P_REC_RX] = rx_rows
    check_feasible(sc, P)
    HP = np.array([[int(HP_FROM[name](h)) for name in K.HP_FIELDS] for h in sc.path], np.int64)
    HL = np.array([h.loss for h in sc.path], np.float64)
    flows = [sc.flow(i) for i in range(sc.flows)]
    FP = np.array([[int(FP_FROM[name](sc, f)) for name in K.FP_FIELDS] for f in flows], np.int64)
    FP[:, K.FP_BUCKET] = gro_buckets(sc.flows, sc.ip_version)
    return P, HP.reshape(len(sc.path), len(K.HP_FIELDS)), HL, nic_params(sc), FP
