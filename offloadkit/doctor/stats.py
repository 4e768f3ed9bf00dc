"""Per-flow transfer statistics: retransmissions, duplicate ACKs, SACK holes, goodput."""
from __future__ import annotations

import numpy as np

from .. import codes
from ..trace import MAX_SACK_BLOCKS
from .context import SIDES, Context, side_reason, wrap32
from .findings import Finding, frames

MAX_FLOW_FINDINGS = 5            # flow-stats findings (largest flows first); JSON keeps all in "flows"
HIGH_RETRANS_FRACTION = 0.05     # of the bytes sent
HIGH_RETRANS_MIN_PACKETS = 10


def flow_table(ctx: Context) -> list[dict]:
    """One dict per flow with data: bytes, packets, retransmissions, dup ACKs, SACK holes, goodput."""
    c = ctx.c
    F = ctx.nflows
    if F == 0:
        return []
    G = 2 * F
    plen = c["payload_len"].astype(np.float64)
    gid = ctx.gid
    pk = np.bincount(gid, minlength=G).reshape(F, 2)
    data_pk = np.bincount(gid, weights=ctx.data, minlength=G).reshape(F, 2)
    nbytes = np.bincount(gid, weights=plen, minlength=G).reshape(F, 2)
    rt_pk = np.bincount(gid, weights=ctx.retrans, minlength=G).reshape(F, 2)
    rt_bytes = np.bincount(gid, weights=np.where(ctx.retrans, plen, 0), minlength=G).reshape(F, 2)
    holes_seen = np.bincount(gid, weights=ctx.hole, minlength=G).reshape(F, 2)
    dup, dup_first = _dup_acks(ctx)
    sack_holes, sack_max = _sack_holes(ctx)
    gp, gp_how, dur = _goodput(ctx)
    rows = []
    for f in np.flatnonzero(data_pk.sum(axis=1) > 0):
        rows.append({
            "flow": int(f), "side": SIDES[int(ctx.side[f])], "side_reason": side_reason(ctx, int(f)),
            "packets": int(pk[f].sum()), "data_packets": int(data_pk[f, 0]), "bytes": int(nbytes[f, 0]),
            "reverse_bytes": int(nbytes[f, 1]),
            "retransmitted_packets": int(rt_pk[f, 0]), "retransmitted_bytes": int(rt_bytes[f, 0]),
            "retransmission_rate": float(rt_bytes[f, 0] / nbytes[f, 0]) if nbytes[f, 0] else 0.0,
            "holes_at_capture": int(holes_seen[f, 0]),
            "dup_acks": int(dup[f]), "first_dup_ack_frame": int(dup_first[f]) if dup_first[f] >= 0 else None,
            "sack_holes": int(sack_holes[f]), "largest_sack_hole": int(sack_max[f]),
            "goodput_bps": float(gp[f]), "goodput_from": gp_how[f], "duration_s": float(dur[f]) / 1e9,
            "mss_options": [int(ctx.mss_opt[f, 0]), int(ctx.mss_opt[f, 1])], "timestamps": bool(ctx.ts[f]),
        })
    rows.sort(key=lambda r: -r["bytes"])
    return rows


def _pure_acks(ctx: Context) -> np.ndarray:
    c = ctx.c
    fl = c["flags"].astype(np.int64)
    return ((c["direction"] == 1) & (c["payload_len"] == 0) & ((fl & codes.ACK) != 0)
            & ((fl & (codes.SYN | codes.FIN | codes.RST)) == 0))


def _dup_acks(ctx: Context) -> tuple[np.ndarray, np.ndarray]:
    """Pure ACKs repeating the previous pure ACK's number (and window) while data is outstanding."""
    c = ctx.c
    F = ctx.nflows
    a = np.flatnonzero(_pure_acks(ctx))
    dup = np.zeros(F, np.int64)
    first = np.full(F, -1, np.int64)
    if len(a) < 2:
        return dup, first
    same = ((ctx.gid[a[1:]] == ctx.gid[a[:-1]]) & (ctx.ack_rel[a[1:]] == ctx.ack_rel[a[:-1]])
            & ((c["window"][a[1:]] == c["window"][a[:-1]]) | (c["sack_n"][a[1:]] > 0)))
    d = a[1:][same]
    flows = c["flow"][d]
    dup = np.bincount(flows, minlength=F)
    fr = np.full(F, np.iinfo(np.int64).max)
    np.minimum.at(fr, flows, c["frame"][d])
    first = np.where(dup > 0, fr, -1)
    return dup, first


def _sack_holes(ctx: Context) -> tuple[np.ndarray, np.ndarray]:
    """Distinct holes reported by SACK (ACK number to the lowest SACK block), and the largest, per flow."""
    c = ctx.c
    F = ctx.nflows
    s = np.flatnonzero((c["direction"] == 1) & (c["sack_n"] > 0))
    holes = np.zeros(F, np.int64)
    biggest = np.zeros(F, np.int64)
    if len(s) == 0:
        return holes, biggest
    left = c["sack"][s][:, 0::2].astype(np.int64)
    valid = np.arange(MAX_SACK_BLOCKS)[None, :] < c["sack_n"][s][:, None]
    dist = wrap32(left - c["ack"][s].astype(np.int64)[:, None])
    dist = np.where(valid & (dist > 0), dist, np.iinfo(np.int64).max)
    gap = dist.min(axis=1)
    ok = gap < np.iinfo(np.int64).max
    s, gap = s[ok], gap[ok]
    if len(s) == 0:
        return holes, biggest
    keys = np.unique(np.stack([c["flow"][s], ctx.ack_rel[s]]), axis=1)
    holes = np.bincount(keys[0], minlength=F)
    np.maximum.at(biggest, c["flow"][s], gap)
    return holes, biggest


def _goodput(ctx: Context):
    """Bytes acknowledged per second (from the ACKs), or bytes sent per second when no ACK was captured."""
    c = ctx.c
    F = ctx.nflows
    gp = np.zeros(F)
    dur = np.zeros(F, np.int64)
    how = ["none"] * F
    t = c["time_ns"].astype(np.int64)
    d0 = ctx.data & (c["direction"] == 0)
    acks = (c["direction"] == 1) & ((c["flags"] & codes.ACK) != 0)
    big = np.iinfo(np.int64).max
    t_first = np.full(F, big)
    np.minimum.at(t_first, c["flow"][d0], t[d0])
    a_lo = np.full(F, big)
    a_hi = np.full(F, -big)
    ta_hi = np.full(F, -big)
    np.minimum.at(a_lo, c["flow"][acks], ctx.ack_rel[acks])
    np.maximum.at(a_hi, c["flow"][acks], ctx.ack_rel[acks])
    np.maximum.at(ta_hi, c["flow"][acks], t[acks])
    # data bytes covered: from the first data byte (not the SYN)
    s_lo = np.full(F, big)
    s_hi = np.full(F, -big)
    t_hi = np.full(F, -big)
    np.minimum.at(s_lo, c["flow"][d0], ctx.rel[d0])
    np.maximum.at(s_hi, c["flow"][d0], ctx.end[d0])
    np.maximum.at(t_hi, c["flow"][d0], t[d0])
    for f in np.flatnonzero(t_first < big):
        if a_hi[f] > -big and a_hi[f] > s_lo[f]:
            acked = a_hi[f] - max(s_lo[f], a_lo[f])
            span = ta_hi[f] - t_first[f]
            if acked > 0 and span > 0:
                gp[f], dur[f], how[f] = acked * 8e9 / span, span, "acked bytes / time"
                continue
        span = t_hi[f] - t_first[f]
        if span > 0:
            gp[f], dur[f], how[f] = (s_hi[f] - s_lo[f]) * 8e9 / span, span, "bytes sent / time (no ACKs captured)"
    return gp, how, dur


def _rate(bps: float) -> str:
    for unit, k in (("Gb/s", 1e9), ("Mb/s", 1e6), ("kb/s", 1e3)):
        if bps >= k:
            return f"{bps / k:.3g} {unit}"
    return f"{bps:.3g} b/s"


def stats_findings(ctx: Context, table: list[dict]) -> list[Finding]:
    out = []
    for r in table[:MAX_FLOW_FINDINGS]:
        msg = (f"Flow {r['flow']} ({r['side']} side: {r['side_reason']}): {r['data_packets']} data packets, "
               f"{r['bytes']} bytes; {r['retransmitted_packets']} retransmitted "
               f"({100 * r['retransmission_rate']:.1f} % of the bytes), {r['dup_acks']} duplicate ACKs, "
               f"{r['sack_holes']} SACK holes; goodput about {_rate(r['goodput_bps'])} ({r['goodput_from']}).")
        out.append(Finding("flow-stats", "info", msg, r))
    if len(table) > MAX_FLOW_FINDINGS:
        rest = table[MAX_FLOW_FINDINGS:]
        rt = sum(r["retransmitted_packets"] for r in table)
        msg = (f"{len(table)} flows carry data; the {MAX_FLOW_FINDINGS} largest are shown above, the other "
               f"{len(rest)} carry {sum(r['bytes'] for r in rest)} bytes. {rt} retransmitted packets in all "
               f"flows; the JSON output (--json) lists every flow.")
        out.append(Finding("flows", "info", msg, {"flows": len(table), "retransmitted_packets": rt}))
    for r in table:
        if (r["retransmission_rate"] >= HIGH_RETRANS_FRACTION
                and r["retransmitted_packets"] >= HIGH_RETRANS_MIN_PACKETS):
            rows = np.flatnonzero(ctx.retrans & (ctx.c["flow"] == r["flow"]))
            msg = (f"Flow {r['flow']} retransmits {100 * r['retransmission_rate']:.1f} % of its bytes "
                   f"({r['retransmitted_packets']} packets, first #{int(ctx.c['frame'][rows[0]])}): "
                   f"heavy loss on the path costs throughput. Congestion (a full queue at a slow link) "
                   f"does this too; the other findings name an offload cause if there is one.")
            out.append(Finding("retransmissions", "info", msg,
                               {"flow": r["flow"], "retransmitted_packets": r["retransmitted_packets"],
                                "retransmitted_bytes": r["retransmitted_bytes"], "bytes": r["bytes"],
                                "frames": frames(ctx.c["frame"][rows])}))
    return out
