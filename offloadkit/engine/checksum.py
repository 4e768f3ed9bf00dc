"""Checksum offload states and software checksum passes (spec §3.8, §3.9, §5).

Receive states are ``skb->ip_summed`` values (codes.CSUM_*) with ``csum_level``.
A NIC's receive checksum capability is one of ``RX_CSUM_MODES``:

- ``"none"``: CHECKSUM_NONE for every packet (e.g. bgmac, report 004);
- ``"unnecessary"``: verifies every checksum it can parse, inner TCP included:
  UNNECESSARY level 0 for plain TCP, level 1 (outer UDP + inner TCP) for VXLAN;
- ``"unnecessary-outer-only"``: verifies plain TCP and, in a VXLAN packet, the
  outer UDP only: UNNECESSARY level 0 (mlx4 before a VXLAN port is offloaded,
  report 002);
- ``"complete"``: CHECKSUM_COMPLETE (skb->csum over the whole packet);
- ``"trace"``: keep the trace's own ``csum_state``/``csum_level`` columns.

A packet whose TCP checksum is wrong (``csum_bad``) never gets UNNECESSARY for
that checksum from a verifying NIC: it arrives as NONE (or COMPLETE, whose sum
then does not add up). With ``"unnecessary-outer-only"`` the NIC never looks
at the inner TCP checksum of a VXLAN packet, so a bad one stays hidden until
software checks it.

Every software checksum pass is a :class:`CsumPasses` event (place, bytes,
input row). The CPU model charges these and nothing else: no other module may
invent checksum costs. Producers:

- GRO validation (``gro_rx_validate``, called by ``engine.gro``);
- ``conntrack_check``: ``nf_conntrack_checksum`` -> ``nf_ip_checksum``;
- ``tx_checksum``: ``skb_checksum_help`` in a driver without TX checksum;
- ``sw_gso_passes``: software GSO without checksum offload (``gso_make_checksum``);
- ``stack_rx_passes``: ``tcp_v4_rcv`` validating packets still in state NONE.

True and deliberately wrong checksum values are computed by
``engine.csum_math``; ``fill_checksums`` applies them to a Trace.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np
from ..packet.jit import njit

from .. import codes
from ..trace import Trace
from . import csum_math

RX_CSUM_MODES = ("none", "unnecessary", "unnecessary-outer-only", "complete", "trace")
VXLAN_UDP_EXTRA = 8 + 8 + 14        # UDP + VXLAN headers + inner Ethernet, before the inner IP


@dataclass(frozen=True, eq=False)
class CsumPasses:
    """Software checksum passes: equal-length arrays, one entry per pass.

    place: codes.PASS_* (uint8); nbytes: bytes summed (int64);
    row: index of the packet in the producing stage's *input* trace (int64).
    """

    place: np.ndarray
    nbytes: np.ndarray
    row: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "place", np.asarray(self.place, dtype=np.uint8))
        object.__setattr__(self, "nbytes", np.asarray(self.nbytes, dtype=np.int64))
        object.__setattr__(self, "row", np.asarray(self.row, dtype=np.int64))
        if not (len(self.place) == len(self.nbytes) == len(self.row)):
            raise ValueError("CsumPasses arrays must have equal lengths")

    @classmethod
    def empty(cls) -> "CsumPasses":
        return cls(np.zeros(0, np.uint8), np.zeros(0, np.int64), np.zeros(0, np.int64))

    @classmethod
    def at(cls, place: int, nbytes, rows) -> "CsumPasses":
        """Passes at one place: ``nbytes[k]`` bytes for input row ``rows[k]``."""
        rows = np.asarray(rows, dtype=np.int64)
        return cls(np.full(len(rows), place, np.uint8), np.asarray(nbytes, np.int64), rows)

    @staticmethod
    def concat(parts: Iterable["CsumPasses"]) -> "CsumPasses":
        parts = list(parts)
        if not parts:
            return CsumPasses.empty()
        return CsumPasses(np.concatenate([p.place for p in parts]),
                          np.concatenate([p.nbytes for p in parts]),
                          np.concatenate([p.row for p in parts]))

    def __len__(self) -> int:
        return len(self.place)

    @property
    def len(self) -> int:
        return len(self.place)

    def total_bytes(self, place: int | None = None) -> int:
        if place is None:
            return int(self.nbytes.sum())
        return int(self.nbytes[self.place == place].sum())

    def by_place(self) -> dict[str, int]:
        """Bytes summed per place name (only places with passes)."""
        out: dict[str, int] = {}
        for p in np.unique(self.place):
            out[codes.PASS_NAMES.get(int(p), str(int(p)))] = self.total_bytes(int(p))
        return out

    def __repr__(self) -> str:
        return f"<CsumPasses {len(self)} passes, {self.total_bytes()} bytes {self.by_place()}>"


def check_rx_csum(mode: str) -> str:
    if mode not in RX_CSUM_MODES:
        raise ValueError(f"unknown receive checksum mode {mode!r}: use one of {', '.join(RX_CSUM_MODES)}")
    return mode


def is_vxlan(trace: Trace) -> np.ndarray:
    return ((trace.encap & codes.ENC_VXLAN) != 0) | (trace.vni >= 0)


def tcp_length(trace: Trace) -> np.ndarray:
    """TCP header + payload bytes of each row (what a TCP checksum pass sums)."""
    return trace.tcp_hlen.astype(np.int64) + trace.payload_len.astype(np.int64)


def rx_states(trace: Trace, mode: str) -> tuple[np.ndarray, np.ndarray]:
    """(csum_state, csum_level) the NIC hands to the stack for each row under ``mode``."""
    check_rx_csum(mode)
    n = len(trace)
    if mode == "trace":
        return trace.csum_state.astype(np.uint8).copy(), trace.csum_level.astype(np.uint8).copy()
    vx = is_vxlan(trace)
    bad = trace.csum_bad
    level = np.zeros(n, np.uint8)
    if mode == "none":
        state = np.full(n, codes.CSUM_NONE, np.uint8)
    elif mode == "complete":
        state = np.full(n, codes.CSUM_COMPLETE, np.uint8)
    elif mode == "unnecessary":
        state = np.where(bad, codes.CSUM_NONE, codes.CSUM_UNNECESSARY).astype(np.uint8)
        level = np.where(vx & ~bad, 1, 0).astype(np.uint8)
    else:  # unnecessary-outer-only
        state = np.where(bad & ~vx, codes.CSUM_NONE, codes.CSUM_UNNECESSARY).astype(np.uint8)
    return state, level


RX_MODE_CODES = {"none": 0, "unnecessary": 1, "unnecessary-outer-only": 2, "complete": 3, "trace": 4}


@njit(cache=True, inline="always")
def rx_state_one(mode, state, level, bad, vxlan):
    """(ip_summed, csum_level) a NIC in ``mode`` (RX_MODE_CODES) reports for one packet."""
    if mode == 4:
        return np.int64(state), np.int64(level)
    if mode == 0:
        return np.int64(0), np.int64(0)
    if mode == 3:
        return np.int64(2), np.int64(0)
    if mode == 1:
        if bad:
            return np.int64(0), np.int64(0)
        return np.int64(1), np.int64(1 if vxlan else 0)
    if bad and not vxlan:
        return np.int64(0), np.int64(0)
    return np.int64(1), np.int64(0)


@njit(cache=True, inline="always")
def _incr(st, lv):
    """__skb_incr_checksum_unnecessary."""
    if st == 0:
        return np.int64(1), np.int64(0)
    if st == 1 and lv < 3:
        return st, lv + 1
    return st, lv


@njit(cache=True, inline="always")
def validate_one(st, lv, bad, vxlan, outer_csum, tcp_len, udp_len, tunnel_old):
    """skb_gro_checksum_validate (+ udp4_gro_receive for VXLAN) for one packet.

    Returns (ok, refused, bytes summed in software, ip_summed after, csum_level after).
    """
    st = np.int64(st)
    lv = np.int64(lv)
    partial = st == 3
    cnt = lv + 1 if st == 1 else np.int64(0)
    valid = st == 2
    summed = np.int64(0)
    if vxlan:
        # udp4_gro_receive: skb_gro_checksum_validate_zero_check, then try_convert
        if not partial:
            if not (outer_csum == 0 or cnt > 0 or valid):
                summed += udp_len                     # software sum of the outer UDP datagram
                valid = True
            if cnt > 0:
                cnt -= 1                              # one UNNECESSARY level consumed
            else:
                st, lv = _incr(st, lv)
            if outer_csum != 0 and cnt == 0 and not valid:
                valid = True                          # skb_gro_checksum_try_convert
        gate = (not partial) and cnt == 0 and not valid
        if gate and (tunnel_old or outer_csum != 0):
            return False, True, summed, st, lv        # udp_gro_receive refuses tunnel GRO
    # tcp4_gro_receive: skb_gro_checksum_validate
    if partial:
        return True, False, summed, st, lv
    if cnt > 0:
        return True, False, summed, st, lv
    if valid and not bad:
        st, lv = _incr(st, lv)
        return True, False, summed, st, lv
    summed += tcp_len                                 # __skb_gro_checksum_complete
    if bad:
        return False, False, summed, st, lv
    st, lv = _incr(st, lv)
    return True, False, summed, st, lv


@njit(cache=True)
def _gro_validate_kernel(state, level, bad, vxlan, outer_csum, tcp_len, udp_len, reach, tunnel_old,
                         ok, refused, pass_bytes, out_state, out_level):
    """``validate_one`` for every row that reaches the L4 GRO handlers (reach[i])."""
    for i in range(len(state)):
        if not reach[i]:
            ok[i] = True
            refused[i] = False
            pass_bytes[i] = 0
            out_state[i] = state[i]
            out_level[i] = level[i]
            continue
        o, r, b, st, lv = validate_one(state[i], level[i], bad[i], vxlan[i], outer_csum[i], tcp_len[i],
                                       udp_len[i], tunnel_old)
        ok[i] = o
        refused[i] = r
        pass_bytes[i] = b
        out_state[i] = st
        out_level[i] = lv


def gro_rx_validate(trace: Trace, state: np.ndarray, level: np.ndarray, reach: np.ndarray,
                    tunnel_rule: str = "old"):
    """GRO's checksum validation for each row that reaches the TCP/UDP GRO handlers.

    Returns (ok, refused, passes, out_state, out_level): ``ok`` False means the
    packet is flushed unmerged (bad checksum or refused tunnel); ``passes`` are
    PASS_GRO_VALIDATE events (rows index ``trace``); out_* is the ip_summed the
    packet carries afterwards if it is delivered alone (NONE validated -> UNNECESSARY).
    tunnel_rule "old" (<= 4.x udp_gro_receive): a tunnel packet with no
    UNNECESSARY level left and no valid CHECKSUM_COMPLETE/converted sum is not
    aggregated at all; "new": only when its outer UDP checksum is non-zero.
    """
    n = len(trace)
    ok = np.ones(n, np.bool_)
    refused = np.zeros(n, np.bool_)
    pb = np.zeros(n, np.int64)
    os_ = np.zeros(n, np.uint8)
    ol = np.zeros(n, np.uint8)
    tl = tcp_length(trace)
    ul = trace.ip_len.astype(np.int64) + VXLAN_UDP_EXTRA
    _gro_validate_kernel(np.asarray(state, np.uint8), np.asarray(level, np.uint8), trace.csum_bad,
                         is_vxlan(trace), np.maximum(trace.outer_udp_csum.astype(np.int64), 0), tl, ul,
                         np.asarray(reach, np.bool_), tunnel_rule == "old", ok, refused, pb, os_, ol)
    rows = np.nonzero(pb > 0)[0]
    passes = CsumPasses.at(codes.PASS_GRO_VALIDATE, pb[rows], rows)
    return ok, refused, passes, os_, ol


def conntrack_check(trace: Trace, enabled: bool = True, prerouting: bool = True):
    """``nf_conntrack_checksum``: ``tcp_error`` -> ``nf_ip_checksum`` at PRE_ROUTING (spec §5).

    Returns (trace with updated csum_state, CsumPasses at PASS_CONNTRACK).
    NONE (and COMPLETE whose sum fails) is summed in software over the L4
    bytes; a good NONE packet becomes COMPLETE (``__skb_checksum_complete``
    saves the full sum), a good COMPLETE one UNNECESSARY. UNNECESSARY and
    PARTIAL (GRO-merged) packets are trusted: no pass. A bad checksum marks the
    packet INVALID for conntrack, which does not drop it (state left as is).
    """
    if not enabled or not prerouting or len(trace) == 0:
        return trace, CsumPasses.empty()
    st = trace.csum_state
    bad = trace.csum_bad
    complete_ok = (st == codes.CSUM_COMPLETE) & ~bad
    summed = (st == codes.CSUM_NONE) | ((st == codes.CSUM_COMPLETE) & bad)
    new = st.copy()
    new[complete_ok] = codes.CSUM_UNNECESSARY
    new[(st == codes.CSUM_NONE) & ~bad] = codes.CSUM_COMPLETE
    rows = np.nonzero(summed)[0]
    passes = CsumPasses.at(codes.PASS_CONNTRACK, tcp_length(trace)[rows], rows)
    return trace.replace(csum_state=new), passes


def tx_checksum(trace: Trace, device_can_csum: bool) -> CsumPasses:
    """``skb_checksum_help`` for each CHECKSUM_PARTIAL, non-GSO row when the device
    (or its driver, like bgmac) cannot checksum: one pass over csum_start..end.
    GSO rows are segmented before this point (see ``sw_gso_passes``)."""
    if device_can_csum or len(trace) == 0:
        return CsumPasses.empty()
    gso = (trace.gso_size > 0) & (trace.payload_len > trace.gso_size)
    rows = np.nonzero((trace.csum_state == codes.CSUM_PARTIAL) & ~gso)[0]
    return CsumPasses.at(codes.PASS_CSUM_HELP, tcp_length(trace)[rows], rows)


def sw_gso_passes(trace: Trace, device_can_csum: bool, gso_size: int | None = None) -> CsumPasses:
    """Software GSO of the super-packets in ``trace`` without checksum offload:
    ``gso_make_checksum`` sums every produced segment (TCP header + its payload).

    One event per segment, ``row`` = the super-packet. ``gso_size`` overrides the
    rows' own gso_size. Rows that are not segmented (payload <= gso_size) get none.
    """
    if device_can_csum or len(trace) == 0:
        return CsumPasses.empty()
    size = trace.gso_size.astype(np.int64) if gso_size is None else np.full(len(trace), int(gso_size))
    plen = trace.payload_len.astype(np.int64)
    seg = (size > 0) & (plen > size)
    rows = np.nonzero(seg)[0]
    nseg = -(-plen[rows] // size[rows])
    rep = np.repeat(rows, nseg)
    k = np.arange(len(rep)) - np.repeat(np.cumsum(nseg) - nseg, nseg)
    sz = size[rep]
    pay = np.minimum(sz, plen[rep] - k * sz)
    nbytes = trace.tcp_hlen.astype(np.int64)[rep] + pay
    return CsumPasses.at(codes.PASS_SW_GSO, nbytes, rep)


def stack_rx_passes(trace: Trace) -> CsumPasses:
    """``tcp_v4_rcv`` (``skb_checksum_init`` + ``__skb_checksum_complete``): rows
    delivered to TCP still in state NONE are summed in software once."""
    rows = np.nonzero(trace.csum_state == codes.CSUM_NONE)[0]
    return CsumPasses.at(codes.PASS_STACK_RX, tcp_length(trace)[rows], rows)


def fill_checksums(trace: Trace) -> Trace:
    """A copy with true IPv4 header checksums and TCP checksums as the state says:
    PARTIAL -> the pseudo-header value; otherwise the full checksum over the
    model's zero payload, deliberately wrong (``corrupt_checksum``) where csum_bad."""
    ip, full = csum_math.trace_checksums(trace, True)
    _, partial = csum_math.trace_checksums(trace, False)
    bad = full ^ np.uint16(1)
    tcp = np.where(trace.csum_state == codes.CSUM_PARTIAL, partial, np.where(trace.csum_bad, bad, full))
    v4 = trace.ip_version == 4
    return trace.replace(ip_csum=np.where(v4, ip, trace.ip_csum), tcp_csum=tcp.astype(np.uint16))


def ip_header_ok(trace: Trace) -> np.ndarray:
    """True where an IPv4 row's ``ip_csum`` matches its header fields (``ip_fast_csum``).

    IPv6 rows and rows whose ``ip_csum`` is 0 (not filled in by a model stage)
    count as correct; rows with IP options cannot be checked from columns and
    count as correct (GRO flushes them for the options anyway).
    """
    c = trace.columns
    ip = np.zeros(len(trace), np.uint16)
    csum_math.ip_checksum_kernel(c["ip_hlen"], c["tos"], c["ip_len"], c["ip_id"], c["df"], c["frag"], c["ttl"],
                                 c["src_ip"], c["dst_ip"], ip)
    return (trace.ip_version != 4) | (trace.ip_csum == 0) | (trace.ip_hlen != 20) | (ip == trace.ip_csum)


def warmup() -> None:
    t = Trace.from_columns(payload_len=[100, 0], ip_len=[140, 40], vni=[-1, 5], outer_udp_csum=[-1, 0],
                           gso_size=[0, 0])
    st, lv = rx_states(t, "none")
    gro_rx_validate(t, st, lv, np.ones(2, np.bool_), "old")
    gro_rx_validate(t, st, lv, np.ones(2, np.bool_), "new")
