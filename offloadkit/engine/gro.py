"""GRO for TCP over IPv4/IPv6 as Linux does it (spec §3), reasons made visible.

``gro(trace, params)`` treats the trace's rows, in order, as packets arriving
on one receive queue and returns a :class:`GroResult`: the packets the stack
sees after GRO (in delivery order), a reason code per input row, the input ->
output mapping and the software checksum passes GRO made.

Rules (kernel function in brackets); the merge rules are the small functions
of ``engine.gro_rules`` (shared with the TCP loop's receiver), the flushes
the functions below (``_poll_end``, ``_flush``, ``_hold``):

- NAPI: a poll takes up to ``napi_budget`` packets; it also ends when the next
  packet arrives more than ``poll_gap_ns`` after the previous one (a queue
  that ran empty). Queue empty [napi_complete_done]: every held packet; budget
  used up [__napi_poll -> gro_flush_normal(gro, HZ >= 1000)]: with ``hz`` >=
  1000 only packets first held before the current jiffy (``_poll_end``).
- Flow table: ``buckets`` (8) lists by rx hash, ``max_held`` (8) packets per
  list; a new flow in a full list completes the oldest one [gro_flush_oldest].
- IP layer [inet_gro_receive], checksum [tcp4_gro_receive, udp4_gro_receive,
  ``engine.checksum``]: delivered unmerged, held packet untouched
  (``gro_rules.dev_gro_receive_kind``); a failed checksum's output row carries
  ``drop = DROP_BAD_CSUM``.
- Merge [tcp_gro_receive, inet_gro_flush, skb_gro_receive]: ``gro_rules``.
- Output [gro_complete]: count 1 -> the packet unchanged with gso_size 0;
  otherwise the first header, IP total length updated, FIN/PSH ORed in,
  gso_size = first payload, gso_segs = count, CHECKSUM_PARTIAL (TCP checksum =
  pseudo-header sum, IP checksum recomputed), gso_type TCPV4/TCPV6 (+FIXEDID,
  +ECN/ACCECN when the head has CWR, +UDP_TUNNEL[_CSUM] for VXLAN). ``time_ns``
  of an output packet is the arrival time of the packet whose processing
  delivered it (the last packet of the poll for end-of-poll flushes).

Reason per input row (``GroResult.reasons``, codes.GRO_*): GRO_MERGED for a
packet merged into a held one; otherwise why there is an aggregate boundary
before it in its flow: the merge test that failed (flags, seq gap, ...), or,
when nothing of its flow was held, why the flow's previous packet was delivered
(end of poll, table full, flags, size, ...), GRO_NOT_SAME_FLOW when a packet of
the same 5-tuple but another VLAN/VNI/extension header is held, GRO_FIRST for
the flow's first packet, GRO_PURE_ACK for pure ACKs (never held).

Defaults (kernel versions differ; spec §3.3, §3.4, §3.9):
``cwr_rule="old"``: a CWR segment never merges and flushes, as in the stored
mainline source (S1) and the 6.18 kernel of our lab machines; "accecn" is the
2026 AccECN rule (CWR compared like any flag). ``ipid_rule="current"``: DF
only has to match (fixed IDs merge with DF=0 too); "df-fixed" is the rule
before the 2025 change. ``tunnel_rule="old"``: the <= 4.x ``udp_gro_receive``
gate behind report 002 (a VXLAN packet with no checksum level left is not
aggregated); "new" sums the inner TCP in software when the outer checksum is 0.
``max_size`` above 65536 is BIG TCP, for plain TCP only (encapsulated packets
stay at 65536).
``hz=1000`` (CONFIG_HZ; Fedora/RHEL and newer Ubuntu kernels; Debian's is 250,
like the lab machine that made ``data/captures``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit

from .. import codes
from ..codes import GRO_END_OF_POLL, GRO_FIRST, GRO_IP_RULE, GRO_MERGED, GRO_NOT_SAME_FLOW, GRO_PURE_ACK, GRO_TABLE_FULL
from ..trace import FIELDS, ColumnBuffer, LazyColumns, Trace
from . import checksum, csum_math
from .gro_keys import dense_ids, dense_ids_into, keys_kernel
from .gro_prep import prep_kernel
from .gro_rules import (FLUSH_FLAGS, KIND_GRO, dev_gro_receive_kind, gro_list_prepare, inet_gro_flush,
                        inet_gro_flush_id, inet_gro_id_fixed, skb_gro_receive, tcp_gro_flag_mask,
                        tcp_gro_receive_close, tcp_gro_receive_flush, tcp_gro_receive_mss, tcp_gro_receive_new)

FIN, SYN, RST, PSH, URG, CWR = codes.FIN, codes.SYN, codes.RST, codes.PSH, codes.URG, codes.CWR
GRO_LEGACY_MAX_SIZE = 65536
GSO_TCPV6 = codes.GSO_TCPV6
NO_CLOSE = 255

# columns of the output table O and the slot table S inside the kernel
O_FIRST, O_COUNT, O_PLEN, O_LEN, O_FLOR, O_MSS, O_FIXED, O_CLOSE, O_TIME = range(9)
S_USED, S_ROW, S_AGE, S_SEQEND, S_PLEN, S_LEN, S_CNT, S_MSS, S_FLOR, S_FIXED, S_TKEY, S_JIF = range(12)
R_NPOLL, R_AGE, R_TPREV, R_STARTED = range(4)     # the kernel's scalars between chunks (GroState.run)


@dataclass(frozen=True)
class GroParams:
    """GRO knobs. Times in ns; ``poll_gap_ns=None`` disables the gap rule.

    ``hz`` (CONFIG_HZ) decides what a poll that used its whole budget flushes:
    >= 1000 only packets held since an earlier jiffy, < 1000 everything.
    """

    enabled: bool = True
    napi_budget: int = 64
    poll_gap_ns: int | None = 1_000_000
    max_size: int = GRO_LEGACY_MAX_SIZE       # gro_ipv4_max_size; > 65536 is BIG TCP
    cwr_rule: str = "old"                     # "old" | "accecn"
    ipid_rule: str = "current"                # "current" | "df-fixed"
    tunnel_rule: str = "old"                  # "old" (<= 4.x udp_gro_receive) | "new"
    rx_csum: str = "unnecessary"              # engine.checksum.RX_CSUM_MODES
    rx_hash: str = "flow"                     # "flow": RSS hash of the 5-tuple | "zero": all in bucket 0
    buckets: int = 8
    max_held: int = 8
    verify_ip_csum: bool = True
    hz: int = 1000                            # CONFIG_HZ: budget-exhausted polls flush old packets only if >= 1000

    def __post_init__(self):
        if self.napi_budget < 1:
            raise ValueError(f"NAPI budget {self.napi_budget} must be at least 1 packet (the default is 64)")
        if self.poll_gap_ns is not None and self.poll_gap_ns < 0:
            raise ValueError(f"poll gap {self.poll_gap_ns} ns is negative; use None to turn the gap rule off")
        if not 1 <= self.max_size <= 512 * 1024:
            raise ValueError(f"GRO max size {self.max_size} is out of range: 65536 is the default, "
                             "up to 524288 with BIG TCP")
        if self.cwr_rule not in ("old", "accecn"):
            raise ValueError(f"cwr_rule {self.cwr_rule!r}: use 'old' (CWR flushes) or 'accecn'")
        if self.ipid_rule not in ("current", "df-fixed"):
            raise ValueError(f"ipid_rule {self.ipid_rule!r}: use 'current' or 'df-fixed'")
        if self.tunnel_rule not in ("old", "new"):
            raise ValueError(f"tunnel_rule {self.tunnel_rule!r}: use 'old' or 'new'")
        checksum.check_rx_csum(self.rx_csum)
        if self.rx_hash not in ("flow", "zero"):
            raise ValueError(f"rx_hash {self.rx_hash!r}: use 'flow' or 'zero'")
        if self.buckets < 1 or self.buckets & (self.buckets - 1):
            raise ValueError(f"{self.buckets} GRO buckets: must be a power of two (the kernel has 8)")
        if self.max_held < 1:
            raise ValueError(f"max_held {self.max_held}: at least one held packet per bucket")
        if not 1 <= self.hz <= 100_000:
            raise ValueError(f"HZ {self.hz} is out of range: kernels tick at 100, 250, 300 or 1000 per second")


@dataclass(frozen=True, eq=False)
class GroHints:
    """Facts from raw packet bytes that Trace columns do not hold (all optional, one entry per row).

    no_handler: GRO delivers the packet at once at the IP layer (not TCP, IPv6
    fragment header, unknown extension header, ...); soft_flush: CB.flush set at
    the IP layer (total length != bytes present, reserved fragment bit);
    ip_csum_ok: the real IPv4 header checksum verdict; opt_key: identity of the
    raw TCP option bytes; flow_key: extra same-flow identity (IPv6 flow label and
    extension headers, outer addresses); outer_net/outer_id: an outer IPv4
    header's (TTL, TOS, DF) key and ID, outer_net -1 when there is none.
    """

    no_handler: np.ndarray | None = None
    soft_flush: np.ndarray | None = None
    ip_csum_ok: np.ndarray | None = None
    opt_key: np.ndarray | None = None
    flow_key: np.ndarray | None = None
    outer_net: np.ndarray | None = None
    outer_id: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class GroResult:
    out: Trace                     # what the stack sees, in delivery order
    reasons: np.ndarray            # uint8 per input row (codes.GRO_*)
    out_row: np.ndarray            # int64 per input row: the output row it ended up in
    closed_by: np.ndarray          # uint8 per output row: why that packet was delivered
    passes: checksum.CsumPasses    # PASS_GRO_VALIDATE events (rows index the input)
    rx_state: np.ndarray           # uint8 per input row: ip_summed as the NIC delivered it
    params: GroParams = field(default_factory=GroParams)
    inp: Trace | None = None       # the input trace

    def annotated(self) -> Trace:
        """The input packets with their ``gro_reason`` filled in."""
        return self.inp.replace(gro_reason=self.reasons)

    def reason_counts(self) -> dict[str, int]:
        vals, cnt = np.unique(self.reasons, return_counts=True)
        return {codes.GRO_REASON_NAMES[int(v)]: int(c) for v, c in zip(vals, cnt)}

    @property
    def segments_per_packet(self) -> float:
        """Mean number of arriving packets per delivered packet."""
        return len(self.reasons) / max(len(self.out), 1)


# -- the kernel ----------------------------------------------------------

@njit(cache=True, nogil=True)
def _emit_slot(S, s, O, m, close, t, last_close):
    O[O_FIRST, m] = S[s, S_ROW]
    O[O_COUNT, m] = S[s, S_CNT]
    O[O_PLEN, m] = S[s, S_PLEN]
    O[O_LEN, m] = S[s, S_LEN]
    O[O_FLOR, m] = S[s, S_FLOR]
    O[O_MSS, m] = S[s, S_MSS]
    O[O_FIXED, m] = S[s, S_FIXED]
    O[O_CLOSE, m] = close
    O[O_TIME, m] = t
    last_close[S[s, S_TKEY]] = close
    S[s, S_USED] = 0
    return m + 1


@njit(cache=True, nogil=True)
def _emit_single(i, cnt, plen, base_len, mss, O, m, close, t, last_close, tkey):
    O[O_FIRST, m] = i
    O[O_COUNT, m] = cnt
    O[O_PLEN, m] = plen
    O[O_LEN, m] = base_len
    O[O_FLOR, m] = 0
    O[O_MSS, m] = mss
    O[O_FIXED, m] = 0
    O[O_CLOSE, m] = close
    O[O_TIME, m] = t
    last_close[tkey] = close
    return m + 1


@njit(cache=True, nogil=True)
def _flush(S, O, m, nb, mh, close, t, last_close, bcount, old_only, now_jif):
    """Complete held packets: buckets ascending, oldest first within a bucket [__gro_flush].

    ``old_only`` [__gro_flush_chain with flush_old]: a bucket's walk stops at its
    first (oldest) packet held in the current jiffy ``now_jif``; the rest stay held.
    """
    for b in range(nb):
        while True:
            best = -1
            for k in range(mh):
                s = b * mh + k
                if S[s, S_USED] == 1 and (best < 0 or S[s, S_AGE] < S[best, S_AGE]):
                    best = s
            if best < 0 or (old_only and S[best, S_JIF] == now_jif):
                break
            m = _emit_slot(S, best, O, m, close, t, last_close)
            bcount[b] -= 1
    return m


@njit(cache=True, nogil=True, inline="always")
def _jiffy(t_ns, hz):
    """jiffies at time ``t_ns`` (phase 0 at t = 0), without int64 overflow for epoch times."""
    return (t_ns // 1_000_000_000) * hz + ((t_ns % 1_000_000_000) * hz) // 1_000_000_000


@njit(cache=True, nogil=True)
def _poll_end(S, O, m, nb, mh, t, last_close, bcount, budget_used, queue_empty, flush_old, hz):
    """Flushes at the end of a NAPI poll [__napi_poll, napi_complete_done].

    Budget used up: ``gro_flush_normal(gro, HZ >= 1000)``, i.e. only packets held
    before the current jiffy when ``flush_old``, else everything. Queue empty
    (napi_complete_done, gro_flush_timeout 0): everything. Both (the budget ran out
    on the last queued packet): the old packets, then at the empty repoll the rest.
    """
    if budget_used:
        m = _flush(S, O, m, nb, mh, GRO_END_OF_POLL, t, last_close, bcount, flush_old, _jiffy(t, hz))
    if queue_empty:
        m = _flush(S, O, m, nb, mh, GRO_END_OF_POLL, t, last_close, bcount, False, 0)
    return m


@njit(cache=True, nogil=True, inline="always")
def _ip_id_flush(S, s, fixed_bit, id_new, id_head, df_new, ipid_df):
    """inet_gro_flush's ID rule on one IPv4 header; records the slot's fixed-ID bit. True -> flush."""
    if inet_gro_id_fixed(id_new, id_head, S[s, S_CNT], df_new, ipid_df):
        S[s, S_FIXED] |= fixed_bit
    return inet_gro_flush_id(id_new, id_head, S[s, S_CNT], (S[s, S_FIXED] & fixed_bit) != 0)


@njit(cache=True, nogil=True, inline="always")
def _find_held(S, sf, b, mh, fkey):
    """The slot holding a packet of flow ``fkey`` in bucket ``b``, or -1 [gro_list_prepare]."""
    for k in range(mh):
        c = b * mh + k
        if S[c, S_USED] == 1 and gro_list_prepare(sf[c], fkey):
            return c
    return -1


@njit(cache=True, nogil=True, inline="always")
def _merge(S, s, pl, cnt, fl):
    """Append a segment to the packet held in slot ``s`` [skb_gro_receive]."""
    S[s, S_SEQEND] = (S[s, S_SEQEND] + pl) & 0xFFFFFFFF
    S[s, S_PLEN] += pl
    S[s, S_LEN] += pl
    S[s, S_CNT] += cnt
    S[s, S_FLOR] |= fl & (FIN | PSH)


@njit(cache=True, nogil=True, inline="always")
def _start_reason(S, b, mh, tkey, pl, fl, soft, last_close):
    """The reason of a packet with nothing of its flow held: pure ACK, CB.flush, another flow of the
    same 5-tuple held (GRO_NOT_SAME_FLOW), why the flow's previous packet left, or GRO_FIRST."""
    if pl == 0 and (fl & FLUSH_FLAGS) == 0:
        return GRO_PURE_ACK
    if soft:
        return GRO_IP_RULE
    for k in range(mh):
        c = b * mh + k
        if S[c, S_USED] == 1 and S[c, S_TKEY] == tkey:
            return GRO_NOT_SAME_FLOW
    return last_close[tkey] if last_close[tkey] != NO_CLOSE else GRO_FIRST


@njit(cache=True, nogil=True, inline="always")
def _hold(S, sf, bcount, O, m, b, mh, i, t, age, hz, seq, pl, base_len, cnt, gso, tkey, fkey, last_close):
    """Hold row ``i`` as a new packet of its bucket; a full bucket completes its oldest [gro_flush_oldest]."""
    if bcount[b] >= mh:
        oldest = -1
        for k in range(mh):
            c = b * mh + k
            if S[c, S_USED] == 1 and (oldest < 0 or S[c, S_AGE] < S[oldest, S_AGE]):
                oldest = c
        m = _emit_slot(S, oldest, O, m, GRO_TABLE_FULL, t, last_close)
    else:
        bcount[b] += 1
    s = -1
    for k in range(mh):
        c = b * mh + k
        if S[c, S_USED] == 0:
            s = c
            break
    S[s, S_USED] = 1
    S[s, S_ROW] = i
    S[s, S_AGE] = age
    S[s, S_JIF] = _jiffy(t, hz)
    S[s, S_SEQEND] = (np.int64(seq) + pl) & 0xFFFFFFFF
    S[s, S_PLEN] = pl
    S[s, S_LEN] = base_len
    S[s, S_CNT] = cnt
    S[s, S_MSS] = np.int64(gso) if gso > 0 else pl
    S[s, S_FLOR] = 0
    S[s, S_FIXED] = 0
    S[s, S_TKEY] = tkey
    sf[s] = fkey
    return m


@njit(cache=True, nogil=True)
def gro_kernel(t_ns, fkey, tkey, bucket, kind, soft, seq, plen, flags, window, ack, optk, hlen,
               netk, is_v4, ipid, df, onet, oid, pcnt, gso, base_len, encap,
               budget, gap_ns, max_size, cwr_old, ipid_df, nb, mh, flush_old, hz,
               reason, owner, O, S, sf, bcount, last_close, run, start, final):
    """Run GRO over one receive queue. Fills reason/owner per row and O per output; returns #outputs.

    kind (gro_rules.KIND_*): TCP for GRO, delivered at the IP layer, checksum
    failed / tunnel refused, GRO off. owner[i]: input row heading the aggregate
    row i joined. onet/oid: outer IPv4 header keys, empty when no packet has one.

    The state between chunks of one stream (see :class:`GroState`): the slot table S
    (held packets, their rows), sf, bcount, last_close (per tkey) and ``run`` (R_*: poll
    count, age, previous arrival time, started). Rows before ``start`` are only read
    (the members of packets held from an earlier chunk); ``final`` flushes at the end.
    """
    n = len(t_ns)
    has_outer = len(onet) > 0
    m = 0
    npoll, age, t_prev, started = run[R_NPOLL], run[R_AGE], run[R_TPREV], run[R_STARTED] != 0
    fl_mask = tcp_gro_flag_mask(cwr_old)           # a constant of the run, out of the loop
    for i in range(start, n):
        if started:
            used = npoll >= budget
            empty = gap_ns >= 0 and t_ns[i] - t_prev > gap_ns
            if used or empty:                                        # GRO_END_OF_POLL
                m = _poll_end(S, O, m, nb, mh, t_prev, last_close, bcount, used, empty, flush_old, hz)
                npoll = 0
        started = True
        npoll += 1
        owner[i] = i
        t = t_ns[i]
        t_prev = t
        fl = np.int64(flags[i])
        pl = np.int64(plen[i])
        if kind[i] != KIND_GRO:
            r = dev_gro_receive_kind(kind[i])
            reason[i] = r
            m = _emit_single(i, pcnt[i], plen[i], base_len[i], gso[i], O, m, r, t, last_close, tkey[i])
            continue
        b = bucket[i]
        s = _find_held(S, sf, b, mh, fkey[i])
        if s >= 0:
            p = S[s, S_ROW]
            mss = S[s, S_MSS]
            # why row i cannot merge into the held packet (head row p), or GRO_MERGED [tcp_gro_receive]
            r = tcp_gro_receive_flush(fl_mask, fl, np.int64(flags[p]), window[i], window[p], pl, np.int64(seq[i]),
                                      S[s, S_SEQEND], ack[i], ack[p], hlen[i], hlen[p], optk[i], optk[p])
            if r != GRO_PURE_ACK:
                # the network rules are evaluated in any case (they update the fixed-ID bits)
                id_flush = is_v4[i] and _ip_id_flush(S, s, 2, ipid[i], ipid[p], df[i], ipid_df)
                outer_flush = has_outer and onet[i] >= 0 and (onet[i] != onet[p]
                                                               or _ip_id_flush(S, s, 1, oid[i], oid[p], True, ipid_df))
                net = inet_gro_flush(netk[i], netk[p], id_flush, outer_flush)
                if r == GRO_MERGED:
                    r = net
            if r == GRO_MERGED:
                r = tcp_gro_receive_mss(pl, mss, np.int64(gso[i]))
            if r == GRO_MERGED:
                r = skb_gro_receive(S[s, S_LEN], pl, 65536 if encap[i] and max_size > 65536 else max_size)
            if r == GRO_MERGED and soft[i]:
                r = GRO_IP_RULE                                      # CB.flush from the IP layer
            if r == GRO_MERGED:
                reason[i] = GRO_MERGED
                owner[i] = p
                _merge(S, s, pl, pcnt[i], fl)
                close = tcp_gro_receive_close(fl, pl, mss, pcnt[i], gso[i])
                if close != GRO_MERGED:
                    m = _emit_slot(S, s, O, m, close, t, last_close)
                    bcount[b] -= 1
                continue
            reason[i] = r
            m = _emit_slot(S, s, O, m, r, t, last_close)
            bcount[b] -= 1
        else:
            reason[i] = _start_reason(S, b, mh, tkey[i], pl, fl, soft[i], last_close)
        # not merged: delivered at once or held as a new packet
        close = tcp_gro_receive_new(fl, pl, pcnt[i], gso[i], soft[i])
        if close != GRO_MERGED:
            m = _emit_single(i, pcnt[i], plen[i], base_len[i], gso[i], O, m, close, t, last_close, tkey[i])
            continue
        m = _hold(S, sf, bcount, O, m, b, mh, i, t, age, hz, seq[i], pl, base_len[i], pcnt[i], gso[i], tkey[i],
                  fkey[i], last_close)
        age += 1
    if final and started:
        m = _poll_end(S, O, m, nb, mh, t_prev, last_close, bcount, npoll >= budget, True, flush_old, hz)
    run[R_NPOLL], run[R_AGE], run[R_TPREV], run[R_STARTED] = npoll, age, t_prev, started
    return m


# -- Python driver ---------------------------------------------------------

def _hint(hints: GroHints | None, name: str, n: int, dtype):
    """A hint array, or an empty one when absent (the kernels then use the Trace columns)."""
    v = getattr(hints, name, None) if hints is not None else None
    if v is None:
        return np.zeros(0, dtype=dtype)
    v = np.asarray(v)
    if len(v) != n:
        raise ValueError(f"GRO hint {name!r} has {len(v)} entries for {n} packets")
    return v.astype(dtype, copy=False)


def prepare(trace: Trace, params: GroParams, hints: GroHints | None = None, state: "GroState | None" = None,
            buf: ColumnBuffer | None = None) -> dict:
    """Per-row arrays for :func:`gro_kernel` (and the checksum verdicts), in one numba pass.

    ``state``: the flow ids continue those of the stream's earlier chunks; ``buf``: the arrays
    are made in it (a stream's chunks reuse them)."""
    n = len(trace)
    c = trace.columns
    new = (lambda k, dt: buf.get("prep_" + k, n, dt)) if buf is not None else (lambda k, dt: np.empty(n, dt))
    out = {k: new(k, dt) for k, dt in (
        ("th", np.uint64), ("bucket", np.int32), ("kind", np.int8),
        ("soft", np.bool_), ("netk", np.int32), ("gso", np.int32), ("pcnt", np.int32), ("base_len", np.int32),
        ("encap", np.bool_), ("_state", np.uint8), ("_level", np.uint8), ("_st_after", np.uint8),
        ("_lv_after", np.uint8), ("_refused", np.bool_), ("_pass_bytes", np.int64))}
    onet = _hint(hints, "outer_net", n, np.int64)
    out["fkey"], out["optk"] = new("fkey", np.uint64), new("optk", np.uint64)
    with np.errstate(over="ignore"):        # hashes wrap on purpose (matters under NUMBA_DISABLE_JIT)
        keys_kernel(c["ip_version"], c["src_ip"], c["dst_ip"], c["src_ip6"], c["dst_ip6"], c["flow_label"],
                    c["sport"], c["dport"], c["vlan_tci"], c["vni"], c["encap"], c["outer_udp_csum"],
                    _hint(hints, "flow_key", n, np.uint64),
                     _hint(hints, "opt_key", n, np.uint64), c["tcp_hlen"], c["opt_mss"], c["opt_sackok"],
                     c["opt_ts"], c["tsval"], c["tsecr"], c["opt_wscale"], c["sack_n"], c["sack"],
                     out["th"], out["fkey"], out["optk"])
    prep_kernel(c["ip_version"], c["src_ip"], c["dst_ip"], c["vni"], c["encap"], c["outer_udp_csum"], c["tcp_hlen"],
                 c["ip_hlen"], c["frag"], c["tos"], c["ttl"], c["df"], c["ip_len"], c["ip_id"], c["ip_csum"],
                 c["l2_bytes"], c["gso_size"], c["gso_segs"], c["payload_len"], c["csum_state"], c["csum_level"],
                 c["csum_bad"], _hint(hints, "no_handler", n, np.bool_), _hint(hints, "soft_flush", n, np.bool_),
                 _hint(hints, "ip_csum_ok", n, np.bool_), onet,
                 checksum.RX_MODE_CODES[params.rx_csum], bool(params.verify_ip_csum), bool(params.enabled),
                 params.tunnel_rule == "old", int(params.buckets), params.rx_hash == "zero",
                 out["th"], out["bucket"], out["kind"], out["soft"], out["netk"], out["gso"], out["pcnt"],
                 out["base_len"], out["encap"], out["_state"], out["_level"], out["_st_after"], out["_lv_after"],
                 out["_refused"], out["_pass_bytes"])
    tkey, n_tkeys = flow_ids(out.pop("th"), state)
    out.update(
        t_ns=c["time_ns"], tkey=tkey, n_tkeys=n_tkeys, seq=c["seq"], plen=c["payload_len"], flags=c["flags"],
        window=c["window"], ack=c["ack"], hlen=c["tcp_hlen"], is_v4=c["ip_version"] == 4, ipid=c["ip_id"],
        df=c["df"], onet=onet,
        oid=_hint(hints, "outer_id", n, np.int64) if hints is not None and hints.outer_id is not None
        else np.zeros(len(onet), np.int64),
        _passes=validate_passes(out.pop("_pass_bytes")))
    return out


def flow_ids(th: np.ndarray, state: "GroState | None") -> tuple[np.ndarray, int]:
    """(dense flow id per row, ids given so far) of tuple hashes ``th``, continuing ``state``'s table."""
    if state is None:
        return dense_ids(th)
    tkey, state.ids, state.id_rows, state.n_tkeys = dense_ids_into(th, state.ids, state.id_rows, state.n_tkeys)
    return tkey, state.n_tkeys


def validate_passes(pass_bytes: np.ndarray) -> checksum.CsumPasses:
    """The PASS_GRO_VALIDATE checksum passes of the rows that summed bytes in software."""
    rows = np.nonzero(pass_bytes)[0]
    return checksum.CsumPasses.at(codes.PASS_GRO_VALIDATE, pass_bytes[rows], rows)


KERNEL_ARGS = ("t_ns", "fkey", "tkey", "bucket", "kind", "soft", "seq", "plen", "flags", "window",
               "ack", "optk", "hlen", "netk", "is_v4", "ipid", "df", "onet", "oid", "pcnt", "gso", "base_len",
               "encap")


@dataclass(eq=False)
class GroState:
    """What GRO carries from one chunk of a stream to the next: the held packets (slot table S,
    their flow keys sf, per-bucket counts), why each flow's last packet left (last_close, by flow
    id), the flow-id table, and the poll count, age, previous arrival time (``run``, R_*).

    S[:, S_ROW] index the rows of the chunk being run; the caller renumbers them (``renumber``)
    when it carries the held packets' rows into the next chunk."""

    S: np.ndarray
    sf: np.ndarray
    bcount: np.ndarray
    last_close: np.ndarray
    run: np.ndarray
    ids: np.ndarray
    id_rows: np.ndarray
    n_tkeys: int = 0

    @classmethod
    def new(cls, params: GroParams) -> "GroState":
        k = params.buckets * params.max_held
        return cls(np.zeros((k, 12), np.int64), np.zeros(k, np.uint64), np.zeros(params.buckets, np.int64),
                   np.full(1024, NO_CLOSE, np.int64), np.zeros(4, np.int64), np.zeros(1024, np.uint64),
                   np.full(1024, -1, np.int64))

    def held_rows(self) -> np.ndarray:
        """Rows (of the chunk just run) that head a held packet."""
        return self.S[self.S[:, S_USED] == 1, S_ROW]

    def renumber(self, new_row: np.ndarray) -> None:
        """Held packets' head rows -> ``new_row[row]`` (their places in the next chunk)."""
        used = self.S[:, S_USED] == 1
        self.S[used, S_ROW] = new_row[self.S[used, S_ROW]]


def run_kernel(prep: dict, params: GroParams, state: GroState | None = None, start: int = 0, final: bool = True,
               owner: np.ndarray | None = None, buf: ColumnBuffer | None = None):
    """(reasons, owner, O[:, :m]) from prepared arrays: O has one row per output field (O_*).

    A stream's chunks share one ``state`` (made by ``prepare(..., state)``); rows before
    ``start`` are the held packets' members carried over, ``owner`` giving theirs. ``buf``:
    O is made in it (valid until its next use)."""
    n = len(prep["t_ns"])
    state = state or GroState.new(params)
    if len(state.last_close) < prep["n_tkeys"]:
        grown = np.full(max(prep["n_tkeys"], 2 * len(state.last_close)), NO_CLOSE, np.int64)
        grown[:len(state.last_close)] = state.last_close
        state.last_close = grown
    reason = np.zeros(n, np.uint8)
    owner = np.zeros(n, np.int64) if owner is None else owner
    O = buf.get("O", 9 * max(n, 1), np.int64).reshape(9, max(n, 1)) if buf is not None \
        else np.empty((9, max(n, 1)), np.int64)
    gap = -1 if params.poll_gap_ns is None else int(params.poll_gap_ns)
    m = gro_kernel(*[prep[k] for k in KERNEL_ARGS], int(params.napi_budget), gap, int(params.max_size),
                   params.cwr_rule == "old", params.ipid_rule == "df-fixed", int(params.buckets),
                   int(params.max_held), int(params.hz) >= 1000, int(params.hz), reason, owner, O,
                   state.S, state.sf, state.bcount, state.last_close, state.run, int(start), bool(final))
    return reason, owner, O[:, :m]


@njit(cache=True, nogil=True)
def _out_rows(first, owner):
    """Output row of every input row: the row its aggregate's head was delivered in."""
    out_row = np.empty(len(owner), np.int64)
    for k in range(len(first)):
        out_row[first[k]] = k
    for i in range(len(owner)):
        out_row[i] = out_row[owner[i]]
    return out_row


# columns of an output packet that gro() computes; every other column is the first packet's
_COMPUTED = ("payload_len", "ip_len", "flags", "gso_size", "gso_segs", "gso_type", "csum_state", "csum_level",
             "csum_bad", "drop", "gro_reason", "time_ns", "ip_csum", "tcp_csum")


def gro(trace: Trace, params: GroParams | None = None, hints: GroHints | None = None) -> GroResult:
    """Aggregate ``trace`` (arrival order, one receive queue) as Linux GRO would."""
    params = params or GroParams()
    prep = prepare(trace, params, hints)
    reasons, owner, O = run_kernel(prep, params)
    first = O[O_FIRST]                                  # contiguous: a strided index is copied by every gather
    count = O[O_COUNT]
    c = trace.columns
    # one gather per column when first read (np.take: fast for the 2-D address/SACK columns too)
    g = LazyColumns({}, {k: (np.take, v, first, 0) for k, v in c.items() if k not in _COMPUTED or k in (
        "payload_len", "ip_len", "flags", "gso_type", "csum_bad", "drop", "ip_csum", "tcp_csum")})
    multi = count > 1
    plen_out = O[O_PLEN]
    v4 = g["ip_version"] == 4
    head_flags = g["flags"].astype(np.int64)
    gso_type = np.where(v4, codes.GSO_TCPV4, GSO_TCPV6)
    gso_type |= np.where((O[O_FIXED] & 2) != 0, codes.GSO_TCP_FIXEDID, 0)
    ecn_bit = codes.GSO_TCP_ECN if params.cwr_rule == "old" else codes.GSO_TCP_ACCECN
    gso_type |= np.where((head_flags & CWR) != 0, ecn_bit, 0)
    vx = ((g["encap"] & codes.ENC_VXLAN) != 0) | (g["vni"] >= 0)
    gso_type |= np.where(vx, np.where(g["outer_udp_csum"] > 0, codes.GSO_UDP_TUNNEL_CSUM, codes.GSO_UDP_TUNNEL), 0)
    kind_f = prep["kind"][first]
    if params.enabled:
        st, lv = prep["_st_after"][first], prep["_lv_after"][first]
    else:
        st, lv = prep["_state"][first], prep["_level"][first]
    bad_single = (kind_f == 2) & ~prep["_refused"][first]
    mc = {
        "payload_len": plen_out,
        "ip_len": g["ip_len"].astype(np.int64) + plen_out - g["payload_len"],
        "flags": head_flags | O[O_FLOR],
        "gso_size": np.where(multi, O[O_MSS], 0),
        "gso_segs": np.where(multi, count, 0),
        "gso_type": np.where(multi, gso_type | g["gso_type"], g["gso_type"]),
        "csum_state": np.where(multi, codes.CSUM_PARTIAL, st),
        "csum_level": np.where(multi, 0, lv),
        "csum_bad": multi.__invert__() & g["csum_bad"],
        "drop": np.where(bad_single, codes.DROP_BAD_CSUM, g["drop"]),
        "gro_reason": reasons[first],
        "time_ns": O[O_TIME],
    }
    if not params.enabled:                                   # GRO off: the NIC's state, GSO packets too
        mc["csum_state"], mc["csum_level"] = st, lv
    for k, v in mc.items():
        dt = np.dtype(FIELDS[k][0])
        g[k] = v if v.dtype == dt else v.astype(dt)
    ip_col, tcp_col = g["ip_csum"], g["tcp_csum"]          # fresh gathers: patched in place
    idx = np.nonzero(multi & v4)[0]
    if len(idx):
        ipc = np.zeros(len(idx), np.uint16)
        csum_math.ip_checksum_kernel(g["ip_hlen"][idx], g["tos"][idx], g["ip_len"][idx], g["ip_id"][idx],
                                     g["df"][idx], g["frag"][idx], g["ttl"][idx], g["src_ip"][idx],
                                     g["dst_ip"][idx], ipc)
        pseudo = np.zeros(len(idx), np.uint16)
        csum_math.tcp_pseudo_kernel(g["src_ip"][idx], g["dst_ip"][idx], g["tcp_hlen"][idx],
                                    g["payload_len"][idx], pseudo)
        ip_col[idx] = ipc
        tcp_col[idx] = pseudo
    out = Trace(g, trace.points, dict(trace.meta))
    out_row = _out_rows(first, owner)
    return GroResult(out=out, reasons=reasons, out_row=out_row, closed_by=O[O_CLOSE].astype(np.uint8),
                     passes=prep["_passes"], rx_state=prep["_state"], params=params, inp=trace)


def warmup() -> None:
    """Compile the kernels on a tiny trace."""
    t = Trace.from_columns(seq=[1000, 1100, 1200], payload_len=[100, 100, 50], ip_len=[140, 140, 90],
                           flags=[codes.ACK] * 3, time_ns=[0, 1, 2], ip_id=[1, 2, 3])
    gro(t)
    gro(t, GroParams(rx_csum="none", rx_hash="zero", poll_gap_ns=None, cwr_rule="accecn"))
