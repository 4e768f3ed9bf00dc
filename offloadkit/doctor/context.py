"""What every check needs, computed once with numpy over the trace's columns.

Packets are grouped by (flow, direction): group ``g = 2 * flow + direction``,
direction 0 being the data direction (the side sending more payload). Within a
group, packets keep capture order. Sequence and acknowledgement numbers are
unwrapped into int64 offsets from the group's first sequence number, so a
transfer may exceed 4 GB.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from ..jit import njit

from .. import codes
from ..trace import Trace

INITIAL_TTLS = (32, 64, 128, 255)
SIDES = ("unknown", "sender", "receiver")
UNKNOWN, SENDER, RECEIVER = 0, 1, 2
ETHERNET_MTU = 1500
COLUMNS = ("time_ns", "flow", "direction", "frame", "seq", "ack", "payload_len", "flags", "tcp_hlen",
           "opt_mss", "opt_ts", "ttl", "ip_len", "ip_version", "ip_hlen", "csum_state", "csum_bad",
           "truncated", "sack_n", "sack", "window", "encap", "mpls_labels", "outer_udp_csum")


@dataclass
class Hints:
    """What the user told the doctor: ``side`` sender|receiver, link ``mtu``, ``gro`` on|off."""

    side: str | None = None
    mtu: int | None = None
    gro: str | None = None

    def __post_init__(self):
        if self.side not in (None, "sender", "receiver"):
            raise ValueError(f"side {self.side!r}: say 'sender' or 'receiver' (where the capture was taken)")
        if self.gro not in (None, "on", "off"):
            raise ValueError(f"gro {self.gro!r}: say 'on' or 'off'")
        if self.mtu is not None and not 68 <= int(self.mtu) <= 65535:
            raise ValueError(f"MTU {self.mtu} is out of range: an IPv4 link MTU is 68..65535 bytes (Ethernet: 1500)")


def wrap32(x: np.ndarray) -> np.ndarray:
    """Differences of 32-bit sequence numbers as signed int64 in [-2**31, 2**31)."""
    return ((x.astype(np.int64) + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def group_mode(g: np.ndarray, values: np.ndarray, ngroups: int) -> tuple[np.ndarray, np.ndarray]:
    """(most frequent value, its count) per group; groups without rows get (0, 0). Ties: smaller value.
    ``values`` must be non-negative and below 2**32."""
    mode = np.zeros(ngroups, np.int64)
    count = np.zeros(ngroups, np.int64)
    if len(g) == 0:
        return mode, count
    key = np.sort((g.astype(np.int64) << 32) | values.astype(np.int64))
    start = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]]))
    cnt = np.diff(np.append(start, len(key)))
    uk = key[start]
    ug, uv = uk >> 32, uk & 0xFFFFFFFF
    order = np.lexsort((uv, -cnt, ug))
    first = np.ones(len(order), bool)
    first[1:] = ug[order][1:] != ug[order][:-1]
    pick = order[first]
    mode[ug[pick]] = uv[pick]
    count[ug[pick]] = cnt[pick]
    return mode, count


@njit(cache=True)
def unwrap_groups(gid, seq, ack, plen, syn, fin, base, rel, end, prev_max, ack_rel):
    """One pass over rows sorted by group (``gid``), capture order inside: ``rel`` the unwrapped
    sequence offset from the group's first packet, ``end`` = rel + payload (+ SYN/FIN),
    ``prev_max`` the highest ``end`` sent earlier in the group (``rel`` at its first packet),
    ``ack_rel`` the unwrapped acknowledgement number from ``base[group]`` (the other direction's
    first sequence number, 0 when it sent nothing)."""
    top = np.int64(0)
    for i in range(gid.size):
        s, a = np.int64(seq[i]), np.int64(ack[i])
        if i == 0 or gid[i] != gid[i - 1]:
            rel[i] = 0
            ack_rel[i] = ((a - base[gid[i]] + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
            prev_max[i] = 0
            end[i] = plen[i] + syn[i] + fin[i]
            top = end[i]
            continue
        rel[i] = rel[i - 1] + ((s - np.int64(seq[i - 1]) + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
        ack_rel[i] = ack_rel[i - 1] + ((a - np.int64(ack[i - 1]) + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
        end[i] = rel[i] + plen[i] + syn[i] + fin[i]
        prev_max[i] = top
        if end[i] > top:
            top = end[i]


@dataclass
class Context:
    """Sorted columns (``c``), group bookkeeping and per-flow facts the checks share."""

    c: dict
    hints: Hints
    nflows: int
    gid: np.ndarray                 # group of each sorted row
    gstart: np.ndarray              # per group: first sorted row
    gcount: np.ndarray              # per group: rows
    rel: np.ndarray                 # unwrapped seq offset from the group's first seq
    end: np.ndarray                 # rel + payload (+ SYN/FIN)
    prev_max: np.ndarray            # highest end sent earlier in the group (rel at the group start)
    data: np.ndarray                # payload > 0
    retrans: np.ndarray             # data starting below prev_max (resends some bytes)
    hole: np.ndarray                # data starting above prev_max (bytes missing before it)
    ack_rel: np.ndarray             # ack, unwrapped against the *other* direction's base (valid where ACK set)
    mss_opt: np.ndarray             # [flow, direction] MSS option of that side's SYN (0: no SYN seen)
    syn_seen: np.ndarray            # [flow, direction]
    ts: np.ndarray                  # [flow] timestamps in use
    side: np.ndarray                # [flow] UNKNOWN | SENDER | RECEIVER
    side_clue: np.ndarray | None = None  # [flow] which clue decided the side (see side_reason)
    ttl_mode: np.ndarray | None = None   # [flow, direction] most common TTL
    mtu: int = ETHERNET_MTU
    mtu_why: str = ""
    overhead: np.ndarray | None = None   # per row: encapsulation bytes counted against the MTU
    cache: dict | None = None            # values the checks share (see sizes.segment_size)

    @property
    def n(self) -> int:
        return len(self.gid)

    def group_rows(self, flow: int, direction: int) -> slice:
        g = 2 * flow + direction
        return slice(int(self.gstart[g]), int(self.gstart[g] + self.gcount[g]))

    def peer_mss(self) -> np.ndarray:
        """Per row of the data direction: the MSS option the *other* side advertised (0: unknown)."""
        flow = self.c["flow"]
        return self.mss_opt[flow, 1 - self.c["direction"].astype(np.int64)]

    def over_mtu(self) -> np.ndarray:
        """Rows whose IP packet (plus encapsulation inside the MTU) exceeds the link MTU."""
        if "over" not in self.cache:
            self.cache["over"] = self.c["ip_len"].astype(np.int64) + self.overhead > self.mtu
        return self.cache["over"]


def warmup() -> None:
    """Compile :func:`unwrap_groups` on a two-packet trace."""
    build(Trace.from_columns(seq=[1, 2], ack=[5, 1], flow=0, direction=[0, 1], payload_len=[10, 0]), Hints())


def build(trace: Trace, hints: Hints) -> Context:
    """Sort the trace by (flow, direction, capture order) and derive the shared columns."""
    n = len(trace)
    flow0 = trace.flow.astype(np.int64)
    dir0 = trace.direction.astype(np.int64) & 1
    g0 = flow0 * 2 + dir0
    if n and (g0[1:] < g0[:-1]).any():
        order = np.lexsort((np.arange(n), dir0, flow0))
        c = {k: trace.columns[k][order] for k in COLUMNS}
    else:                                  # already in that order (doctor.reader sorts): no copy
        c = {k: trace.columns[k] for k in COLUMNS}
    flow = c["flow"].astype(np.int64)
    c["flow"] = flow
    c["direction"] = c["direction"].astype(np.int64) & 1
    nflows = int(flow.max()) + 1 if n else 0
    G = 2 * nflows
    gid = flow * 2 + c["direction"]
    gcount = np.bincount(gid, minlength=G).astype(np.int64)
    gstart = np.concatenate([[0], np.cumsum(gcount)[:-1]]).astype(np.int64) if G else np.zeros(0, np.int64)
    flags = c["flags"].astype(np.int64)
    syn, fin = (flags & codes.SYN) != 0, (flags & codes.FIN) != 0
    plen = c["payload_len"].astype(np.int64)
    rel, end, prev_max, ack_rel = (np.empty(n, np.int64) for _ in range(4))
    if n:
        other = np.arange(G) ^ 1
        base = np.where(gcount[other] > 0, c["seq"][np.minimum(gstart[other], n - 1)].astype(np.int64), 0)
        unwrap_groups(gid, c["seq"], c["ack"], plen, syn, fin, base, rel, end, prev_max, ack_rel)
    data = plen > 0
    retrans = data & (rel < prev_max)
    hole = data & (rel > prev_max)

    mss_opt = np.zeros((nflows, 2), np.int64)
    syn_seen = np.zeros((nflows, 2), bool)
    ts_syn = np.zeros((nflows, 2), bool)
    if n:
        s = np.flatnonzero(syn)
        mss_opt[flow[s], c["direction"][s]] = c["opt_mss"][s]
        syn_seen[flow[s], c["direction"][s]] = True
        ts_syn[flow[s], c["direction"][s]] = c["opt_ts"][s]
    ts_data = np.zeros(nflows, bool)
    if n:
        dd = data & (c["direction"] == 0)
        nts = np.bincount(flow[dd], weights=c["opt_ts"][dd].astype(float), minlength=nflows)
        nd = np.bincount(flow[dd], minlength=nflows)
        ts_data = nts * 2 > nd
    both = syn_seen.all(axis=1)
    ts = np.where(both, ts_syn.all(axis=1), ts_data)

    enc = c["encap"].astype(np.int64)
    overhead = (((enc & codes.ENC_PPPOE) != 0) * 8 + ((enc & codes.ENC_VXLAN) != 0) * 50
                + ((enc & codes.ENC_MPLS) != 0) * 4 * np.maximum(c["mpls_labels"].astype(np.int64), 1))
    ctx = Context(c=c, hints=hints, nflows=nflows, gid=gid, gstart=gstart, gcount=gcount, rel=rel, end=end,
                  prev_max=prev_max, data=data, retrans=retrans, hole=hole, ack_rel=ack_rel,
                  mss_opt=mss_opt, syn_seen=syn_seen, ts=ts, side=np.zeros(nflows, np.int64),
                  overhead=overhead, cache={})
    ctx.mtu, ctx.mtu_why = _infer_mtu(ctx)
    _infer_side(ctx)
    return ctx


def _infer_mtu(ctx: Context) -> tuple[int, str]:
    """The link MTU: the hint, else the largest SYN MSS option + headers, else 1500 (or jumbo)."""
    if ctx.hints.mtu:
        return int(ctx.hints.mtu), "given with --mtu"
    c = ctx.c
    syn = (c["flags"] & codes.SYN) != 0
    has = syn & (c["opt_mss"] > 0)
    if has.any():
        hdr = np.where(c["ip_version"][has] == 6, 60, 40)
        sums = c["opt_mss"][has].astype(np.int64) + hdr
        m = int(sums.max())
        if m >= ETHERNET_MTU:
            ip = "IPv6" if hdr[sums.argmax()] == 60 else "IP"
            return m, f"the largest MSS option in the SYNs + {hdr[sums.argmax()]} bytes of {ip}/TCP headers"
        return ETHERNET_MTU, "Ethernet default (the SYNs' MSS options fit in it)"
    d = ctx.data
    if d.any():
        ipl = c["ip_len"][d].astype(np.int64)
        vals, cnt = np.unique(ipl, return_counts=True)
        mode = int(vals[cnt.argmax()])
        if (ETHERNET_MTU < mode <= 9216 and cnt.max() * 2 >= d.sum() and (ipl <= mode).all()
                and not tso_checksums(c, d, ipl == mode)):
            return mode, "jumbo frames: most data packets have this IP length and none is longer (no SYN seen)"
    return ETHERNET_MTU, "Ethernet default (no SYN seen; give --mtu if the link differs)"


def tso_checksums(c, rows: np.ndarray, among: np.ndarray) -> bool:
    """Do the packets ``among`` the ``rows`` carry only the pseudo-header sum (CHECKSUM_PARTIAL)?

    No frame on a wire does: such a packet was captured above TSO/GSO and checksum
    offload, so its size says nothing about the link MTU (a lone 7240-byte TSO
    packet is not a jumbo frame)."""
    return bool((c["csum_state"][rows][among] == codes.CSUM_PARTIAL).any())


def _infer_side(ctx: Context) -> None:
    """Per flow: is the capture at the data sender, at the receiver, or unknown?

    TTL: the side whose packets carry an initial TTL (32/64/128/255) while the other
    side's are lower is the near side. Checksums: the side whose packets carry
    pseudo-header-only (CHECKSUM_PARTIAL) sums while the other's are correct is the
    capturing host (TX checksum offload)."""
    F = ctx.nflows
    hint = ctx.hints.side
    c = ctx.c
    G = 2 * F
    ttl_mode, _ = group_mode(ctx.gid, c["ttl"], G)
    ttl = ttl_mode.reshape(F, 2)
    present = (ctx.gcount > 0).reshape(F, 2).all(axis=1)
    init = np.isin(ttl, INITIAL_TTLS)
    partial = np.bincount(ctx.gid, weights=(c["csum_state"] == codes.CSUM_PARTIAL).astype(float),
                          minlength=G).reshape(F, 2)
    frac = partial / np.maximum(ctx.gcount.reshape(F, 2), 1)
    ctx.ttl_mode = ttl
    conds = [present & init[:, 0] & ~init[:, 1] & (ttl[:, 1] < ttl[:, 0]),
             present & init[:, 1] & ~init[:, 0] & (ttl[:, 0] < ttl[:, 1]),
             present & (frac[:, 0] > 0.5) & (frac[:, 1] == 0),
             present & (frac[:, 1] > 0.5) & (frac[:, 0] == 0)]
    ctx.side_clue = np.select(conds, [1, 2, 3, 4], 0)
    ctx.side[:] = np.select(conds, [SENDER, RECEIVER, SENDER, RECEIVER], UNKNOWN)
    if hint:
        ctx.side[:] = SENDER if hint == "sender" else RECEIVER
        ctx.side_clue[:] = 5


def side_reason(ctx: Context, f: int) -> str:
    """Why flow ``f`` was placed on its side, in words."""
    t0, t1 = (int(x) for x in ctx.ttl_mode[f])
    return {0: "no clue from TTLs or checksums (give --side)",
            1: f"data packets carry TTL {t0}, an initial value (the sender is on this link), ACKs TTL {t1}",
            2: f"ACKs carry TTL {t1}, an initial value (the receiver is on this link), data packets TTL {t0}",
            3: "data packets carry offloaded (pseudo-header) checksums, ACKs correct ones",
            4: "ACKs carry offloaded (pseudo-header) checksums, data packets correct ones",
            5: "given with --side"}[int(ctx.side_clue[f])]
