"""What every check needs, tallied once over the packets (``doctor.accumulate``) and finished here.

Packets are grouped by (flow, direction): group ``g = 2 * flow + direction``, direction 0
being the data direction (the side sending more payload). Sequence and acknowledgement
numbers are unwrapped into int64 offsets from the group's first sequence number, so a
transfer may exceed 4 GB. :func:`build` tallies a whole Trace; ``doctor.reader`` tallies a
capture chunk by chunk, then :func:`finish` turns the tallies into a :class:`Context`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..io.flows import FlowNumbering
from ..trace import Trace
from .accumulate import ETHERNET_MTU, Accumulator, wrap32

INITIAL_TTLS = (32, 64, 128, 255)
SIDES = ("unknown", "sender", "receiver")
UNKNOWN, SENDER, RECEIVER = 0, 1, 2
COLUMNS = ("time_ns", "flow", "direction", "frame", "seq", "ack", "payload_len", "flags", "tcp_hlen",
           "opt_mss", "opt_ts", "ttl", "ip_len", "ip_version", "ip_hlen", "csum_state", "csum_bad",
           "truncated", "sack_n", "sack", "window", "encap", "mpls_labels", "outer_udp_csum")
CHUNK_COLUMNS = tuple(k for k in COLUMNS if k not in ("flow", "direction"))
__all__ = ["COLUMNS", "Context", "Hints", "build", "finish", "wrap32"]


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


@dataclass
class Context:
    """The tallies, per group in (flow, direction) order, and the per-flow facts the checks share."""

    hints: Hints
    packets: int
    nflows: int
    s: dict                         # per group: the Accumulator's state fields (counts, minima, maxima, ...)
    counts: dict                    # sparse (group, value) counts (accumulate.COUNTS)
    firsts: dict                    # first packet numbers per group (accumulate.FIRSTS)
    candidates: tuple               # packets over the MTU, by group then capture order: (group, payload, headers)
    events: dict                    # shrunken first resends, by group then sequence
    sack_acks: np.ndarray           # distinct (group << 40 | ACK offset) of SACK-hole ACKs
    ack_base: np.ndarray            # per group: ack_rel = ACK offset + ack_base (the peer's sequence space)
    mss_opt: np.ndarray             # [flow, direction] MSS option of that side's SYN (0: no SYN seen)
    syn_seen: np.ndarray            # [flow, direction]
    ts: np.ndarray                  # [flow] timestamps in use
    side: np.ndarray                # [flow] UNKNOWN | SENDER | RECEIVER
    side_clue: np.ndarray | None = None  # [flow] which clue decided the side (see side_reason)
    ttl_mode: np.ndarray | None = None   # [flow, direction] most common TTL
    mtu: int = ETHERNET_MTU
    mtu_why: str = ""

    @property
    def ngroups(self) -> int:
        return 2 * self.nflows

    def per_flow(self, name: str) -> np.ndarray:
        """A per-group field as [flow, direction]."""
        return self.s[name].reshape(self.nflows, 2)


def warmup() -> None:
    """Compile the accumulator's and the flow numbering's kernels on a two-packet trace."""
    t = Trace.from_columns(seq=[1, 2], ack=[5, 1], flow=0, direction=[0, 1], payload_len=[10, 0])
    FlowNumbering().add(t)
    build(t, Hints())


def build(trace: Trace, hints: Hints) -> Context:
    """Tally a Trace whose ``flow``/``direction`` columns are set (rows in capture order)."""
    cols = {k: trace.columns[k] for k in CHUNK_COLUMNS}

    def tally(mtu=None, mss=None):
        acc = Accumulator(mtu=mtu, mss=mss)
        acc.add(cols, trace.flow, trace.direction)
        return acc, None
    return finish(tally, hints)


def finish(tally, hints: Hints, first=None) -> Context:
    """The Context of ``tally(mtu=None|int, mss=None|array)`` -> (an Accumulator fed every packet,
    per flow the endpoint bit of its data direction, or None when the bits are directions);
    ``first``: that call's result for ``mtu=hints.mtu`` if already made. Counts a second time,
    with the final MTU and MSS options, when the first count used others."""
    acc, data_side = first or tally(mtu=hints.mtu)
    mss = acc.s["mss"][:acc.ngroups].copy()
    ctx = _context(acc, data_side, hints)
    if not acc.settled or (hints.mtu is None and acc.packets and ctx.mtu not in acc.mtu_used):
        again = _context(*tally(mtu=ctx.mtu, mss=mss), hints)
        again.mtu, again.mtu_why = ctx.mtu, ctx.mtu_why
        ctx = again
    return ctx


def _context(acc: Accumulator, data_side: np.ndarray | None, hints: Hints) -> Context:
    G = acc.ngroups
    F = G // 2
    g = np.arange(G)
    ds = np.zeros(F, np.int64) if data_side is None else np.asarray(data_side, np.int64)[:F]
    new = 2 * (g // 2) + ((g & 1) ^ ds[g // 2]) if G else g
    s = {}
    for k, v in acc.s.items():
        out = np.empty(G, np.int64)
        out[new] = v[:G]
        s[k] = out
    for t in acc.counts.values():
        t.remap(new)
    for f in acc.firsts.values():
        f.remap(new)
    if acc.candidates:
        cg, cp, ch = (np.concatenate(x) for x in zip(*acc.candidates))
        cg = new[cg]
        order = np.argsort(cg, kind="stable")
        cand = (cg[order].astype(np.int64), cp[order].astype(np.int64), ch[order].astype(np.int64))
    else:
        cand = (np.zeros(0, np.int64),) * 3
    if acc.events:
        ev = {k: np.concatenate([e[k] for e in acc.events]) for k in acc.events[0]}
        ev["g"] = new[ev["g"]]
        order = np.lexsort((ev["rel"], ev["g"]))
        ev = {k: v[order] for k, v in ev.items()}
    else:
        ev = {}
    if acc.sack_acks:
        keys = np.concatenate(acc.sack_acks)
        keys = np.unique((new[keys >> 40] << 40) | (keys & ((1 << 40) - 1)))
    else:
        keys = np.zeros(0, np.int64)
    other = g ^ 1
    base = np.where(s["npk"][other] > 0, s["first_seq"][other], 0) if G else g
    ack_base = wrap32(s["first_ack"] - base) if G else g
    mss_opt = s["mss"].reshape(F, 2)
    syn_seen = s["syn_seen"].reshape(F, 2).astype(bool)
    ts_syn = s["syn_ts"].reshape(F, 2).astype(bool)
    d0 = np.arange(F) * 2
    ts_data = s["data_ts"][d0] * 2 > s["data_pk"][d0]
    ts = np.where(syn_seen.all(axis=1), ts_syn.all(axis=1), ts_data)
    ctx = Context(hints=hints, packets=acc.packets, nflows=F, s=s, counts=acc.counts, firsts=acc.firsts,
                  candidates=cand, events=ev, sack_acks=keys, ack_base=ack_base, mss_opt=mss_opt,
                  syn_seen=syn_seen, ts=ts, side=np.zeros(F, np.int64))
    ctx.mtu, ctx.mtu_why = _infer_mtu(ctx, acc)
    _infer_side(ctx)
    return ctx


def _infer_mtu(ctx: Context, acc: Accumulator) -> tuple[int, str]:
    """The link MTU: the hint, else the largest SYN MSS option + headers, else 1500 (or jumbo)."""
    if ctx.hints.mtu:
        return int(ctx.hints.mtu), "given with --mtu"
    sums = ctx.s["syn_sum"]
    if (sums > 0).any():
        m = int(sums.max())
        if m >= ETHERNET_MTU:
            hdr = int(ctx.s["syn_hdr"][np.argmax(sums)])
            ip = "IPv6" if hdr == 60 else "IP"
            return m, f"the largest MSS option in the SYNs + {hdr} bytes of {ip}/TCP headers"
        return ETHERNET_MTU, "Ethernet default (the SYNs' MSS options fit in it)"
    ndata = int(ctx.s["data_pk"].sum())
    if ndata:
        vals, cnt = acc.ip_len.of(0)
        mode = int(vals[cnt.argmax()])
        pv, pc = acc.ip_len_partial.of(0)
        if (ETHERNET_MTU < mode <= 9216 and cnt.max() * 2 >= ndata and int(vals.max()) <= mode
                and not (pc[pv == mode] > 0).any()):
            return mode, "jumbo frames: most data packets have this IP length and none is longer (no SYN seen)"
    return ETHERNET_MTU, "Ethernet default (no SYN seen; give --mtu if the link differs)"


def _infer_side(ctx: Context) -> None:
    """Per flow: is the capture at the data sender, at the receiver, or unknown?

    TTL: the side whose packets carry an initial TTL (32/64/128/255) while the other
    side's are lower is the near side. Checksums: the side whose packets carry
    pseudo-header-only (CHECKSUM_PARTIAL) sums while the other's are correct is the
    capturing host (TX checksum offload)."""
    F = ctx.nflows
    hint = ctx.hints.side
    ttl_mode, _ = ctx.counts["ttl"].mode(2 * F)
    ttl = ttl_mode.reshape(F, 2)
    pk = ctx.per_flow("pk")
    present = (pk > 0).all(axis=1)
    init = np.isin(ttl, INITIAL_TTLS)
    frac = ctx.per_flow("partial") / np.maximum(pk, 1)
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
