"""Per-flow transfer statistics: retransmissions, duplicate ACKs, SACK holes, goodput."""
from __future__ import annotations

import numpy as np

from .context import SIDES, Context, side_reason
from .findings import Finding

MAX_FLOW_FINDINGS = 5            # flow-stats findings (largest flows first); JSON keeps all in "flows"
HIGH_RETRANS_FRACTION = 0.05     # of the bytes sent
HIGH_RETRANS_MIN_PACKETS = 10


def flow_table(ctx: Context) -> list[dict]:
    """One dict per flow with data: bytes, packets, retransmissions, dup ACKs, SACK holes, goodput."""
    F = ctx.nflows
    if F == 0:
        return []
    pk, data_pk, nbytes = ctx.per_flow("pk"), ctx.per_flow("data_pk"), ctx.per_flow("nbytes")
    rt_pk, rt_bytes, holes_seen = ctx.per_flow("rt_pk"), ctx.per_flow("rt_bytes"), ctx.per_flow("holes")
    dup, dup_first = ctx.per_flow("dups")[:, 1], ctx.per_flow("dup_first")[:, 1]
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
            "dup_acks": int(dup[f]), "first_dup_ack_frame": int(dup_first[f]) if dup[f] > 0 else None,
            "sack_holes": int(sack_holes[f]), "largest_sack_hole": int(sack_max[f]),
            "goodput_bps": float(gp[f]), "goodput_from": gp_how[f], "duration_s": float(dur[f]) / 1e9,
            "mss_options": [int(ctx.mss_opt[f, 0]), int(ctx.mss_opt[f, 1])], "timestamps": bool(ctx.ts[f]),
        })
    rows.sort(key=lambda r: -r["bytes"])
    return rows


def _sack_holes(ctx: Context) -> tuple[np.ndarray, np.ndarray]:
    """Distinct holes reported by SACK (ACK number to the lowest SACK block), and the largest, per flow."""
    F = ctx.nflows
    g = ctx.sack_acks >> 40
    holes = np.bincount(g[g % 2 == 1] // 2, minlength=F)[:F]
    return holes, ctx.per_flow("sack_big")[:, 1].copy()


def _goodput(ctx: Context):
    """Bytes acknowledged per second (from the ACKs), or bytes sent per second when no ACK was captured."""
    F = ctx.nflows
    gp = np.zeros(F)
    dur = np.zeros(F, np.int64)
    how = ["none"] * F
    big = np.iinfo(np.int64).max
    t_first = ctx.per_flow("t_first")[:, 0]
    base = ctx.ack_base.reshape(F, 2)[:, 1]
    a_lo, a_hi = ctx.per_flow("a_lo")[:, 1], ctx.per_flow("a_hi")[:, 1]
    seen = a_hi > -big
    a_lo = np.where(seen, a_lo + base, big)
    a_hi = np.where(seen, a_hi + base, -big)
    ta_hi = ctx.per_flow("ta_hi")[:, 1]
    # data bytes covered: from the first data byte (not the SYN)
    s_lo, s_hi, t_hi = ctx.per_flow("s_lo")[:, 0], ctx.per_flow("s_hi")[:, 0], ctx.per_flow("t_hi")[:, 0]
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
            frames = ctx.firsts["rt"].of([2 * r["flow"], 2 * r["flow"] + 1])
            msg = (f"Flow {r['flow']} retransmits {100 * r['retransmission_rate']:.1f} % of its bytes "
                   f"({r['retransmitted_packets']} packets, first #{frames[0]}): "
                   f"heavy loss on the path costs throughput. Congestion (a full queue at a slow link) "
                   f"does this too; the other findings name an offload cause if there is one.")
            out.append(Finding("retransmissions", "info", msg,
                               {"flow": r["flow"], "retransmitted_packets": r["retransmitted_packets"],
                                "retransmitted_bytes": r["retransmitted_bytes"], "bytes": r["bytes"],
                                "frames": frames}))
    return out
