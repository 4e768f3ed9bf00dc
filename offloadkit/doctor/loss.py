"""Loss checks: MTU black holes (seen directly or from below/above the lossy hop)."""
from __future__ import annotations

import numpy as np

from .context import Context, group_mode, wrap32
from .findings import Finding, frames

MIN_EVENTS = 3           # repeated: at least this many shrunken resends / same-size holes


def black_hole(ctx: Context) -> list[Finding]:
    """Segments sent at size S and resent at the same sequence number smaller, again and again,
    while segments of size S keep being sent and keep being lost."""
    c = ctx.c
    if ctx.n == 0:
        return []
    plen = c["payload_len"].astype(np.int64)
    di = np.flatnonzero(ctx.data)
    # group data rows by (group, start seq), capture order inside: first = original transmission
    o = di[np.lexsort((di, ctx.rel[di], ctx.gid[di]))]
    same = np.zeros(len(o), bool)
    same[1:] = (ctx.gid[o[1:]] == ctx.gid[o[:-1]]) & (ctx.rel[o[1:]] == ctx.rel[o[:-1]])
    first_pos = np.maximum.accumulate(np.where(~same, np.arange(len(o)), 0))
    orig = o[first_pos]
    # first resend of each original: the element right after the run start
    is_first_resend = same & ~np.concatenate([[False], same[:-1]])
    res, org = o[is_first_resend], orig[is_first_resend]
    shrink = (plen[res] < plen[org]) & ~ctx.retrans[org]
    out = []
    ev_g = ctx.gid[res[shrink]]
    n_ev = np.bincount(ev_g, minlength=2 * ctx.nflows)
    res, org = res[shrink], org[shrink]
    order = np.argsort(ev_g, kind="stable")
    res, org, ev_g = res[order], org[order], ev_g[order]
    for g in np.flatnonzero(n_ev >= MIN_EVENTS):
        lo, hi = np.searchsorted(ev_g, [g, g + 1])
        f = out_finding(ctx, int(g), org[lo:hi], res[lo:hi], plen)
        if f:
            out.append(f)
    out += _upstream_holes(ctx, plen)
    return out


def out_finding(ctx: Context, g: int, org: np.ndarray, res: np.ndarray, plen: np.ndarray) -> Finding | None:
    c = ctx.c
    passes = int(np.bincount(plen[res]).argmax())
    rows = np.arange(int(ctx.gstart[g]), int(ctx.gstart[g] + ctx.gcount[g]))
    originals = rows[ctx.data[rows] & ~ctx.retrans[rows]]
    large = originals[plen[originals] > passes]
    if len(large) == 0:
        return None
    lost = np.isin(large, org)
    t_first = c["time_ns"][res].min()
    later = large[c["time_ns"][large] > t_first]
    if lost.mean() < 0.5 or len(later) == 0:
        return None          # not persistent: PMTU discovery (or one-off loss) fixed it
    over = ctx.over_mtu()
    sizes, counts = np.unique(plen[org], return_counts=True)
    big = int(sizes[counts.argmax()])
    flow = g // 2
    ip_big = big + int(c["ip_hlen"][org[0]]) + int(c["tcp_hlen"][org[0]])
    ip_pass = passes + int(c["ip_hlen"][res[0]]) + int(c["tcp_hlen"][res[0]])
    ev = {"flow": int(flow), "events": len(org), "lost_size": big, "resent_size": passes,
          "lost_ip_len": ip_big, "resent_ip_len": ip_pass, "large_sent": len(large), "large_resent": int(lost.sum()),
          "large_sent_after_first_resend": len(later),
          "examples": [{"frame": int(c["frame"][a]), "seq": int(c["seq"][a]), "size": int(plen[a]),
                        "resent_frame": int(c["frame"][b]), "resent_size": int(plen[b])}
                       for a, b in zip(org[:6], res[:6])]}
    if over[org].mean() > 0.5:
        # did the receiver SACK a later part of each lost super-packet (only its head lost)?
        sacked = _sacked_inside(ctx, g, ctx.rel[org], ctx.end[org], c["time_ns"][res])
        ev["sacked_later_part"] = None if sacked is None else int(sacked.sum())
        whole = sacked is not None and sacked.mean() < 0.2
        head = sacked is not None and sacked.mean() > 0.5
        msg = (f"Flow {flow}: {int(lost.sum())} of {len(large)} super-packets were lost below this capture point "
               f"and resent one segment at a time ({passes} bytes) - e.g. packet #{int(c['frame'][org[0]])} "
               f"({big} bytes) resent as #{int(c['frame'][res[0]])} - again and again. ")
        if sacked is None:
            msg += ("The capture has no SACK blocks to tell whether whole super-packets or only their first "
                    "segments are lost: a device below that cuts them wrongly for a smaller path MTU (report 000) "
                    "or a path that cannot segment them at all (report 001) looks like this.")
        elif whole:
            msg += ("The whole super-packet is lost every time while single-segment packets get through: a path "
                    "below cannot segment (GSO) these packets and drops them silently - e.g. MPLS without GSO "
                    "support (report 001) - or a hop drops everything at this size.")
        elif head:
            msg += ("Only the first segment of each is lost, the rest arrives (the receiver SACKs it): a device below cuts the super-packets "
                    "into pieces of which the first does not fit a smaller path MTU (a black hole: no ICMP reaches "
                    "the sender) - e.g. QEMU's RTL8139C+ cutting 1448 where 1440 was negotiated (report 000); "
                    "1-MSS resends are not cut and get through.")
        else:
            msg += "Some whole super-packets are lost, some only in part."
    else:
        msg = (f"Flow {flow}: MTU black hole. Segments of {big} bytes (IP length {ip_big}) are lost and resent at "
               f"the same sequence number as {passes} bytes (IP length {ip_pass}), {len(org)} times - e.g. packet "
               f"#{int(c['frame'][org[0]])} resent as #{int(c['frame'][res[0]])}. {int(lost.sum())} of {len(large)} "
               f"segments larger than {passes} bytes needed a resend and they keep coming "
               f"({len(later)} sent after the first resend): a hop with a path MTU below {ip_big} drops them "
               f"without a working ICMP 'fragmentation needed', so the sender never learns.")
    return Finding("black-hole", "error", msg, ev)


def _sacked_inside(ctx: Context, g: int, start: np.ndarray, end: np.ndarray, before_ns: np.ndarray,
                   limit: int = 2000) -> np.ndarray | None:
    """Per range [start, end) of group ``g``'s sequence space (at most ``limit`` ranges): did the
    reverse direction SACK a block starting inside it (after its first byte) before ``before_ns``
    (the range's first resend)? None when the reverse direction has no SACK at all."""
    c = ctx.c
    sl = ctx.group_rows(int(g // 2), 1 - int(g % 2))
    rows = np.arange(sl.start, sl.stop)
    rows = rows[c["sack_n"][rows] > 0]
    if len(rows) == 0:
        return None
    valid = np.arange(4)[None, :] < c["sack_n"][rows][:, None]
    left = ctx.ack_rel[rows][:, None] + wrap32(c["sack"][rows][:, 0::2].astype(np.int64)
                                              - c["ack"][rows].astype(np.int64)[:, None])
    t = np.broadcast_to(c["time_ns"][rows][:, None], left.shape)
    order = np.argsort(left[valid], kind="stable")
    lefts, times = left[valid][order], t[valid][order]
    start, end, before_ns = start[:limit], end[:limit], before_ns[:limit]
    lo = np.searchsorted(lefts, start + 1, side="left")
    hi = np.searchsorted(lefts, end, side="left")
    out = np.zeros(len(start), bool)
    for i in np.flatnonzero(hi > lo):
        out[i] = times[lo[i]:hi[i]].min() < before_ns[i]
    return out


def _upstream_holes(ctx: Context, plen: np.ndarray) -> list[Finding]:
    """The same-size piece missing again and again at this point, filled later by resends:
    lost before the capture (a black hole upstream), the size never seen here."""
    c = ctx.c
    out = []
    h = np.flatnonzero(ctx.hole)
    if len(h) < MIN_EVENTS:
        return out
    G = 2 * ctx.nflows
    gap = np.minimum(ctx.rel[h] - ctx.prev_max[h], 0xFFFFFFFF)
    n_holes = np.bincount(ctx.gid[h], minlength=G)
    size, k = group_mode(ctx.gid[h], gap, G)
    same = ctx.data & (plen == size[ctx.gid])
    seen_same = np.bincount(ctx.gid[same], minlength=G)
    n_data = np.bincount(ctx.gid[ctx.data], minlength=G)
    filled = ctx.retrans & (plen < size[ctx.gid])
    fill_size, n_filled = group_mode(ctx.gid[filled], plen[filled], G)
    cand = (k >= MIN_EVENTS) & (k * 2 >= n_holes) & (seen_same * 10 <= n_data) & (n_filled > 0)
    for g in np.flatnonzero(cand)[:5]:
        hs = h[ctx.gid[h] == g]
        sz, fs = int(size[g]), int(fill_size[g])
        ip_size = sz + int(c["ip_hlen"][hs[0]]) + int(c["tcp_hlen"][hs[0]])
        flow = int(g // 2)
        msg = (f"Flow {flow}: {int(k[g])} times a {sz}-byte piece is missing at this capture point (e.g. before "
               f"packet #{int(c['frame'][hs[0]])}) and arrives later in {fs}-byte resends; no {sz}-byte segment "
               f"ever gets here. Segments of {sz} bytes (IP length {ip_size}) are lost upstream every time: an "
               f"MTU black hole before this point (a hop whose MTU is below {ip_size}).")
        ev = {"flow": flow, "holes": int(k[g]), "hole_size": sz, "hole_ip_len": ip_size, "filled_by_size": fs,
              "frames": frames(c["frame"][hs])}
        out.append(Finding("black-hole", "error", msg, ev))
    return out
