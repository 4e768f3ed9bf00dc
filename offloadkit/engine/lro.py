"""LRO: the driver's looser aggregator (``net/ipv4/inet_lro.c``, as myri10ge used it; spec §4, report 003).

A fixed array of ``descriptors`` (myri10ge: 8), one flow each; a packet of a
flow without a descriptor, when all are busy, goes up unaggregated. Rules of
``__lro_proc_skb`` / ``lro_tcp_ip_check``:

- eligible: IPv4 without options or fragmentation, no CE mark, TCP with ACK
  and no CWR/ECE/URG/RST/SYN/FIN, payload > 0, options none or
  NOP,NOP,timestamp (``tcp_hlen`` 20 or 32 with ``opt_ts`` and nothing else);
- a packet for an active descriptor must continue its sequence and be
  eligible (timestamps must not go backwards, TSecr non-zero), else the
  aggregate is flushed and the packet goes up alone;
- ack, window and timestamps are *not* compared: the aggregate takes the last
  packet's values (this is why LRO output cannot be re-segmented exactly);
- the aggregate is flushed after ``max_pkts`` packets (myri10ge: 64) or when
  its IP length exceeds ``0xFFFF - mtu``; every descriptor is flushed at the
  end of a NAPI poll (``lro_flush_all``, in array order).

Output aggregates: first packet's header with IP total length and checksum
updated, ack/window/TSval/TSecr of the last packet, CHECKSUM_UNNECESSARY,
``gso_size`` = largest payload, ``gso_segs`` = count and ``gso_type`` = 0: the
kernel's own LRO marker (``skb_warn_if_lro``: gso_size set, gso_type 0). A
router must not forward them: :func:`refuse_forwarding` marks them
``DROP_LRO_FORWARD``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from ..packet.jit import njit

from .. import codes
from ..trace import Trace
from . import csum_math
from .gro import GroParams, gro
from .gro_keys import dense_ids, keys_kernel

BAD_FLAGS = codes.CWR | codes.ECE | codes.URG | codes.RST | codes.SYN | codes.FIN


@dataclass(frozen=True)
class LroParams:
    descriptors: int = 8              # MYRI10GE_MAX_LRO_DESCRIPTORS
    max_pkts: int = 64                # MYRI10GE_LRO_MAX_PKTS
    mtu: int = 1500
    napi_budget: int = 64
    poll_gap_ns: int | None = 1_000_000

    def __post_init__(self):
        if self.descriptors < 1:
            raise ValueError(f"{self.descriptors} LRO descriptors: at least 1 (myri10ge has 8)")
        if self.max_pkts < 1:
            raise ValueError(f"LRO max_pkts {self.max_pkts}: at least 1 packet per aggregate (myri10ge: 64)")
        if not 68 <= self.mtu <= 65535:
            raise ValueError(f"MTU {self.mtu} is out of range 68..65535")
        if self.napi_budget < 1:
            raise ValueError(f"NAPI budget {self.napi_budget} must be at least 1")


@dataclass(frozen=True, eq=False)
class LroResult:
    out: Trace
    reasons: np.ndarray        # uint8 per input row, codes.GRO_* (TABLE_FULL: no free descriptor)
    out_row: np.ndarray        # int64 per input row
    closed_by: np.ndarray      # uint8 per output row

    @property
    def segments_per_packet(self) -> float:
        return len(self.reasons) / max(len(self.out), 1)


@njit(cache=True)
def lro_kernel(t_ns, tkey, n_tkeys, elig, seq, plen, tsval, has_ts, base_len, ndesc, max_pkts, max_len,
               budget, gap_ns, reason, owner, O):
    """inet_lro over one receive queue. elig[i]: 0 eligible, else the GRO_* reason it is not.

    O columns: first, count, payload, ip_len, last row, max payload, close, time. Returns #outputs.
    """
    n = len(t_ns)
    D = np.zeros((ndesc, 8), np.int64)     # active, first, count, seq_end, payload, len, last, maxpay
    dkey = np.full(ndesc, -1, np.int64)
    last_close = np.full(max(n_tkeys, 1), 255, np.int64)
    m = 0
    npoll = 0
    for i in range(n):
        if i > 0 and (npoll >= budget or (gap_ns >= 0 and t_ns[i] - t_ns[i - 1] > gap_ns)):
            for d in range(ndesc):
                if D[d, 0] == 1:
                    m = _lro_emit(D, d, O, m, 8, t_ns[i - 1], last_close, dkey)
            npoll = 0
        npoll += 1
        owner[i] = i
        d = -1
        free = -1
        for k in range(ndesc):
            if D[k, 0] == 1 and dkey[k] == tkey[i]:
                d = k
                break
            if D[k, 0] == 0 and free < 0:
                free = k
        r = 0
        if d >= 0:
            if seq[i] != D[d, 3]:
                r = 2
            elif elig[i] != 0:
                r = elig[i]
            elif has_ts[i] and tsval[i] < tsval[D[d, 6]]:
                r = 10
            if r == 0:
                reason[i] = 0
                owner[i] = D[d, 1]
                D[d, 2] += 1
                D[d, 3] = (D[d, 3] + plen[i]) & 0xFFFFFFFF
                D[d, 4] += plen[i]
                D[d, 5] += plen[i]
                D[d, 6] = i
                if plen[i] > D[d, 7]:
                    D[d, 7] = plen[i]
                if D[d, 2] >= max_pkts or D[d, 5] > max_len:
                    m = _lro_emit(D, d, O, m, 4, t_ns[i], last_close, dkey)
                continue
            reason[i] = r
            m = _lro_emit(D, d, O, m, r, t_ns[i], last_close, dkey)
        elif elig[i] != 0:
            reason[i] = elig[i]
        elif free < 0:
            reason[i] = 7                                   # no free descriptor
        else:
            reason[i] = 12 if last_close[tkey[i]] == 255 else last_close[tkey[i]]
            D[free, 0] = 1
            D[free, 1] = i
            D[free, 2] = 1
            D[free, 3] = (seq[i] + plen[i]) & 0xFFFFFFFF
            D[free, 4] = plen[i]
            D[free, 5] = base_len[i]
            D[free, 6] = i
            D[free, 7] = plen[i]
            dkey[free] = tkey[i]
            continue
        O[m, 0] = i
        O[m, 1] = 1
        O[m, 2] = plen[i]
        O[m, 3] = base_len[i]
        O[m, 4] = i
        O[m, 5] = plen[i]
        O[m, 6] = reason[i]
        O[m, 7] = t_ns[i]
        last_close[tkey[i]] = reason[i]
        m += 1
    for d in range(ndesc):
        if D[d, 0] == 1:
            m = _lro_emit(D, d, O, m, 8, t_ns[n - 1], last_close, dkey)
    return m


@njit(cache=True)
def _lro_emit(D, d, O, m, close, t, last_close, dkey):
    O[m, 0] = D[d, 1]
    O[m, 1] = D[d, 2]
    O[m, 2] = D[d, 4]
    O[m, 3] = D[d, 5]
    O[m, 4] = D[d, 6]
    O[m, 5] = D[d, 7]
    O[m, 6] = close
    O[m, 7] = t
    last_close[dkey[d]] = close
    D[d, 0] = 0
    return m + 1


def eligibility(trace: Trace) -> np.ndarray:
    """0 where ``lro_tcp_ip_check`` accepts a row, else the GRO_* reason code it fails with."""
    c = trace.columns
    fl = c["flags"].astype(np.int64)
    r = np.zeros(len(trace), np.uint8)
    ts_only = ((c["tcp_hlen"] == 20) & ~c["opt_ts"]) | ((c["tcp_hlen"] == 32) & c["opt_ts"] & (c["tsecr"] != 0)
                                                        & (c["sack_n"] == 0))
    r[~ts_only] = codes.GRO_OPTIONS_DIFFER
    r[c["payload_len"] == 0] = codes.GRO_PURE_ACK
    r[((fl & BAD_FLAGS) != 0) | ((fl & codes.ACK) == 0)] = codes.GRO_FLAGS
    ip_bad = ((c["ip_version"] != 4) | (c["ip_hlen"] != 20) | ((c["frag"] & 0x3FFF) != 0)
              | ((c["tos"] & 3) == 3) | c["csum_bad"])
    r[ip_bad] = codes.GRO_IP_RULE
    return r


def lro(trace: Trace, params: LroParams | None = None, descriptors: int | None = None,
        max_pkts: int | None = None) -> LroResult:
    """Aggregate ``trace`` (arrival order, one receive queue) as inet_lro would."""
    p = params or LroParams()
    if descriptors is not None or max_pkts is not None:
        p = LroParams(descriptors if descriptors is not None else p.descriptors,
                      max_pkts if max_pkts is not None else p.max_pkts, p.mtu, p.napi_budget, p.poll_gap_ns)
    n = len(trace)
    c = trace.columns
    th = np.empty(n, np.uint64)
    fk = np.empty(n, np.uint64)
    ok = np.empty(n, np.uint64)
    e = np.zeros(0, np.uint64)
    with np.errstate(over="ignore"):
        keys_kernel(c["ip_version"], c["src_ip"], c["dst_ip"], c["src_ip6"], c["dst_ip6"], c["flow_label"],
                    c["sport"], c["dport"], c["vlan_tci"], c["vni"], c["encap"], np.zeros(n, np.int32), e, e,
                    c["tcp_hlen"], c["opt_mss"],
                     c["opt_sackok"], c["opt_ts"], c["tsval"], c["tsecr"], c["opt_wscale"], c["sack_n"], c["sack"],
                     th, fk, ok)
    tkey, nk = dense_ids(fk)
    reason = np.zeros(n, np.uint8)
    owner = np.zeros(n, np.int64)
    O = np.zeros((max(n, 1), 8), np.int64)
    base_len = c["ip_len"].astype(np.int64)
    gap = -1 if p.poll_gap_ns is None else int(p.poll_gap_ns)
    m = lro_kernel(c["time_ns"].astype(np.int64), tkey, nk, eligibility(trace).astype(np.int64),
                   c["seq"].astype(np.int64), c["payload_len"].astype(np.int64), c["tsval"].astype(np.int64),
                   c["opt_ts"], base_len, p.descriptors, p.max_pkts, 0xFFFF - p.mtu, p.napi_budget, gap,
                   reason, owner, O) if n else 0
    O = O[:m]
    first, count, last = O[:, 0], O[:, 1], O[:, 4]
    multi = count > 1
    out = trace[first]
    mc = {"payload_len": O[:, 2], "ip_len": O[:, 3], "time_ns": O[:, 7], "gro_reason": reason[first],
          "gso_size": np.where(multi, O[:, 5], 0), "gso_segs": np.where(multi, count, 0),
          "gso_type": np.where(multi, 0, c["gso_type"][first])}
    for name in ("ack", "window", "tsval", "tsecr"):
        mc[name] = np.where(multi, c[name][last], c[name][first])
    mc["csum_state"] = np.where(multi, codes.CSUM_UNNECESSARY, out.csum_state)
    out = out.replace(**mc)
    if multi.any():
        ipc, tcpc = csum_math.trace_checksums(out, True)
        out = out.replace(ip_csum=np.where(multi, ipc, out.ip_csum), tcp_csum=np.where(multi, tcpc, out.tcp_csum))
    pos = np.full(max(n, 1), -1, np.int64)
    pos[first] = np.arange(m)
    return LroResult(out=out, reasons=reason, out_row=pos[owner] if n else np.zeros(0, np.int64),
                     closed_by=O[:, 6].astype(np.uint8))


def is_lro(trace: Trace) -> np.ndarray:
    """The kernel's LRO test (``skb_warn_if_lro``): gso_size set but no gso_type."""
    return (trace.gso_size > 0) & (trace.gso_type == 0)


def refuse_forwarding(trace: Trace) -> Trace:
    """A forwarding hop: LRO packets are dropped with DROP_LRO_FORWARD (the kernel warns
    "received packets cannot be forwarded while LRO is enabled")."""
    bad = is_lro(trace) & (trace.drop == codes.DROP_NONE)
    return trace.replace(drop=np.where(bad, codes.DROP_LRO_FORWARD, trace.drop))


def round_robin_trace(n_flows: int, n_packets: int, mss: int = 1448, burst: int = 1,
                      gap_ns: int = 1200) -> Trace:
    """``n_packets`` full-MSS segments of ``n_flows`` TCP flows (timestamps on, a 1 ms TSval
    clock) arriving round-robin, ``burst`` back-to-back segments per flow per turn, ``gap_ns`` apart."""
    if n_flows < 1 or n_packets < 1 or burst < 1:
        raise ValueError("round_robin_trace needs at least one flow, one packet and bursts of >= 1")
    i = np.arange(n_packets)
    turn, k = np.divmod(i, burst)
    flow = turn % n_flows
    nth = (turn // n_flows) * burst + k
    return Trace.from_columns(
        time_ns=i * gap_ns, flow=flow, sport=(10000 + flow), dport=5001, src_ip=0xC6120001, dst_ip=0xC6120002,
        seq=(1 + nth * mss) & 0xFFFFFFFF, payload_len=mss, flags=codes.ACK, tcp_hlen=32, opt_ts=True,
        tsval=1 + (i * gap_ns) // 1_000_000,
        tsecr=1, ip_id=nth & 0xFFFF, ip_len=52 + mss, window=1024, ack=1, csum_state=codes.CSUM_UNNECESSARY)


def mean_aggregate(n_flows: int, descriptors: int = 8, max_pkts: int = 64, napi_budget: int = 64,
                   burst: int = 1, n_packets: int | None = None, engine: str = "lro") -> float:
    """Mean arriving segments per delivered packet for ``n_flows`` round-robin flows
    (report 003: aggregation collapses toward 1 once flows outnumber descriptors).
    ``engine="gro"`` runs GRO (8 buckets x 8 held) on the same arrivals for comparison."""
    n = n_packets or max(4 * napi_budget, 8 * n_flows * burst)
    t = round_robin_trace(n_flows, n, burst=burst)
    if engine == "gro":
        return gro(t, GroParams(napi_budget=napi_budget, poll_gap_ns=None)).segments_per_packet
    if engine != "lro":
        raise ValueError(f"engine {engine!r}: use 'lro' or 'gro'")
    return lro(t, LroParams(descriptors, max_pkts, napi_budget=napi_budget, poll_gap_ns=None)).segments_per_packet


def warmup() -> None:
    lro(round_robin_trace(3, 20))
