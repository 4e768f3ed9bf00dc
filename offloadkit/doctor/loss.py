"""Loss checks: MTU black holes (seen directly or from below/above the lossy hop)."""
from __future__ import annotations

import numpy as np

from .context import Context
from .findings import Finding

MIN_EVENTS = 3           # repeated: at least this many shrunken resends / same-size holes
SACK_LIMIT = 2000        # events whose SACK evidence is weighed


def black_hole(ctx: Context) -> list[Finding]:
    """Segments sent at size S and resent at the same sequence number smaller, again and again,
    while segments of size S keep being sent and keep being lost."""
    if ctx.packets == 0:
        return []
    out = []
    ev = ctx.events
    if ev:
        n_ev = np.bincount(ev["g"], minlength=ctx.ngroups)
        for g in np.flatnonzero(n_ev >= MIN_EVENTS):
            lo, hi = np.searchsorted(ev["g"], [g, g + 1])
            f = out_finding(ctx, int(g), {k: v[lo:hi] for k, v in ev.items()})
            if f:
                out.append(f)
    out += _upstream_holes(ctx)
    return out


def out_finding(ctx: Context, g: int, e: dict) -> Finding | None:
    """The black-hole finding of group ``g`` from its shrunken first resends ``e`` (by sequence)."""
    passes = int(np.bincount(e["res_plen"]).argmax())
    sizes, counts = ctx.counts["orig"].of(g)
    n_large = int(counts[sizes > passes].sum())
    if n_large == 0:
        return None
    n_lost = int((e["plen"] > passes).sum())
    later_sizes, later_counts = ctx.counts["later"].of(g)
    n_later = int(later_counts[later_sizes > passes].sum())
    if n_lost / n_large < 0.5 or n_later == 0:
        return None          # not persistent: PMTU discovery (or one-off loss) fixed it
    sizes, counts = np.unique(e["plen"], return_counts=True)
    big = int(sizes[counts.argmax()])
    flow = g // 2
    n = len(e["plen"])
    ip_big = big + int(e["hdr"][0])
    ip_pass = passes + int(e["res_hdr"][0])
    fo, fr = int(e["frame"][0]), int(e["res_frame"][0])
    ev = {"flow": int(flow), "events": n, "lost_size": big, "resent_size": passes,
          "lost_ip_len": ip_big, "resent_ip_len": ip_pass, "large_sent": n_large, "large_resent": n_lost,
          "large_sent_after_first_resend": n_later,
          "examples": [{"frame": int(a), "seq": int(s), "size": int(p), "resent_frame": int(b), "resent_size": int(q)}
                       for a, s, p, b, q in zip(e["frame"][:6], e["seq"][:6], e["plen"][:6], e["res_frame"][:6],
                                                e["res_plen"][:6])]}
    if (e["L"] > ctx.mtu).mean() > 0.5:
        # did the receiver SACK a later part of each lost super-packet (only its head lost)?
        sacked = e["sacked"][:SACK_LIMIT] if ctx.s["sack_rows"][g ^ 1] else None
        ev["sacked_later_part"] = None if sacked is None else int(sacked.sum())
        whole = sacked is not None and sacked.mean() < 0.2
        head = sacked is not None and sacked.mean() > 0.5
        msg = (f"Flow {flow}: {n_lost} of {n_large} super-packets were lost below this capture point "
               f"and resent one segment at a time ({passes} bytes) - e.g. packet #{fo} "
               f"({big} bytes) resent as #{fr} - again and again. ")
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
               f"the same sequence number as {passes} bytes (IP length {ip_pass}), {n} times - e.g. packet "
               f"#{fo} resent as #{fr}. {n_lost} of {n_large} "
               f"segments larger than {passes} bytes needed a resend and they keep coming "
               f"({n_later} sent after the first resend): a hop with a path MTU below {ip_big} drops them "
               f"without a working ICMP 'fragmentation needed', so the sender never learns.")
    return Finding("black-hole", "error", msg, ev)


def _upstream_holes(ctx: Context) -> list[Finding]:
    """The same-size piece missing again and again at this point, filled later by resends:
    lost before the capture (a black hole upstream), the size never seen here."""
    out = []
    st = ctx.s
    if st["holes"].sum() < MIN_EVENTS:
        return out
    G = ctx.ngroups
    n_holes = st["holes"]
    size, k = ctx.counts["gap"].mode(G)
    seen_same = ctx.counts["data"].at(size)
    n_data = st["data_pk"]
    rt = ctx.counts["rt"]
    fill_size, n_filled = rt.mode(G, rt.value() < size[rt.group()])
    cand = (k >= MIN_EVENTS) & (k * 2 >= n_holes) & (seen_same * 10 <= n_data) & (n_filled > 0)
    for g in np.flatnonzero(cand)[:5]:
        sz, fs = int(size[g]), int(fill_size[g])
        ip_size = sz + int(st["hole_hdr"][g])
        flow = int(g // 2)
        fr = ctx.firsts["hole"].of([g])
        msg = (f"Flow {flow}: {int(k[g])} times a {sz}-byte piece is missing at this capture point (e.g. before "
               f"packet #{fr[0]}) and arrives later in {fs}-byte resends; no {sz}-byte segment "
               f"ever gets here. Segments of {sz} bytes (IP length {ip_size}) are lost upstream every time: an "
               f"MTU black hole before this point (a hop whose MTU is below {ip_size}).")
        ev = {"flow": flow, "holes": int(k[g]), "hole_size": sz, "hole_ip_len": ip_size, "filled_by_size": fs,
              "frames": fr}
        out.append(Finding("black-hole", "error", msg, ev))
    return out
