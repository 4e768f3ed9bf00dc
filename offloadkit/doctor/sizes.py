"""Size checks: super-packets/aggregates, segment sizes vs the negotiated MSS, missing aggregation."""
from __future__ import annotations

import numpy as np

from .. import codes
from .context import RECEIVER, SENDER, Context, group_mode
from .findings import Finding, frames

TS_BYTES = 12
MIN_BULK = 32            # data packets before "never aggregated" means anything
GRO_GAP_NS = 1_000_000   # back-to-back: closer than this (one NAPI poll, roughly)
MAX_FLOW_FINDINGS = 5    # per-flow findings of one kind; the first one counts the rest


def eff_mss(ctx: Context) -> np.ndarray:
    """Per flow: payload bytes per full segment of the data direction allowed by the
    receiver's MSS option (minus 12 for timestamps); 0 when the receiver's SYN was not seen."""
    peer = ctx.mss_opt[:, 1]
    return np.where(peer > 0, peer - TS_BYTES * ctx.ts, 0)


def current_mss(ctx: Context, rows: np.ndarray) -> np.ndarray:
    """Payload bytes per segment the link MTU allows each packet's headers, as ``tcp_current_mss``
    derives mss_now from the path MTU (IP and TCP headers, options included)."""
    c = ctx.c
    return np.maximum(ctx.mtu - c["ip_hlen"][rows].astype(np.int64) - c["tcp_hlen"][rows].astype(np.int64), 0)


def segment_size(ctx: Context) -> np.ndarray:
    """Per flow: the recurring payload size of single segments in the data direction (mode)."""
    return segment_mode(ctx)[0]


def segment_mode(ctx: Context) -> tuple[np.ndarray, np.ndarray]:
    """Per flow: (recurring single-segment payload size, how many packets have it)."""
    if "seg" not in ctx.cache:
        c = ctx.c
        rows = ctx.data & (c["direction"] == 0) & ~ctx.over_mtu()
        ctx.cache["seg"] = group_mode(c["flow"][rows], c["payload_len"][rows], ctx.nflows)
    return ctx.cache["seg"]


def super_packets(ctx: Context) -> list[Finding]:
    c = ctx.c
    sp = ctx.data & ctx.over_mtu()
    if not sp.any():
        return []
    idx = np.flatnonzero(sp)
    side = ctx.side[c["flow"][idx]]
    seg = segment_size(ctx)
    eff = eff_mss(ctx)
    g = np.where(eff > 0, eff, seg)[c["flow"][idx]]
    g = np.where(g > 0, g, current_mss(ctx, idx))       # no SYN, no single segment: what the MTU allows
    plen = c["payload_len"][idx].astype(np.int64)
    g = _best_divisor(plen, g)
    multiple = (g > 0) & (plen % np.maximum(g, 1) == 0)
    wire_segments = int(np.where(g > 0, -(-plen // np.maximum(g, 1)), 1).sum())
    big = idx[np.argmax(plen)]
    ndata = int(ctx.data.sum())
    gsz = int(np.bincount(g[g > 0]).argmax()) if (g > 0).any() else 0
    ev = {"packets": len(idx), "data_packets": ndata, "mtu": ctx.mtu, "mtu_from": ctx.mtu_why,
          "largest_payload": int(plen.max()), "largest_ip_len": int(c["ip_len"][big]),
          "largest_frame": int(c["frame"][big]), "frames": frames(c["frame"][idx]),
          "segment_size": gsz, "exact_multiples": int(multiple.sum()),
          "wire_segments_estimate": wire_segments,
          "sender_side": int((side == SENDER).sum()), "receiver_side": int((side == RECEIVER).sum())}
    head = (f"{len(idx)} of {ndata} data packets are larger than the link MTU of {ctx.mtu} bytes "
            f"(up to {int(plen.max())} bytes of payload, IP length {int(c['ip_len'][big])}, "
            f"packet #{int(c['frame'][big])})")
    per = f" of about {gsz} bytes" if gsz else ""
    if (side == SENDER).all():
        why = (f": the capture was taken above segmentation. The sending host's TSO/GSO hands these "
               f"super-packets to the NIC (or to software GSO), which cuts them into segments{per}; the wire "
               f"carried about {wire_segments} segments for them.")
        kind = "super-packets"
    elif (side == RECEIVER).all():
        why = (f": the capture was taken after GRO/LRO. The receiving host merged wire segments{per} into "
               f"these aggregates ({int(multiple.sum())} of {len(idx)} are exact multiples of {gsz}); the wire "
               f"carried about {wire_segments} segments." if gsz else
               ": the capture was taken after GRO/LRO, which merged wire segments into these aggregates.")
        kind = "aggregates"
    else:
        why = (f": either the capture was taken above segmentation (the sender's TSO/GSO super-packets) or "
               f"after GRO/LRO at the receiver (aggregates); {int(multiple.sum())} of {len(idx)} are exact "
               f"multiples of {gsz} bytes. The wire carried segments{per}, about {wire_segments} of them."
               if gsz else ": the capture was taken above TSO/GSO or after GRO/LRO.")
        kind = "super-packets"
    msg = head + why + " The sizes in this capture are not what the wire carried."
    vlan = (c["encap"][idx] & codes.ENC_VLAN) != 0
    if vlan.mean() > 0.5 and not (side == SENDER).all():
        ev["vlan_tagged"] = int(vlan.sum())
        msg += (f" {int(vlan.sum())} of them carry an 802.1Q tag: GRO merges through a non-accelerated VLAN "
                f"(Linux >= 4.2). If this host forwards the flow (a router, NAT), each aggregate is cut again on "
                f"the way out (GSO), and without checksum offload GRO adds a software checksum pass on receive "
                f"and another on transmit - report 004's NAT router lost 30-40 % of its throughput this way.")
    out = [Finding(kind, "info", msg, ev)]
    if kind != "super-packets" or not (side == SENDER).all():
        out += _aggregation_ratio(ctx, gsz)
    return out


def _aggregation_ratio(ctx: Context, seg: int) -> list[Finding]:
    """Info: how much GRO/LRO merged, and whether many interleaved flows kept it from merging (report 003)."""
    c = ctx.c
    d0 = ctx.data & (c["direction"] == 0)
    if seg <= 0 or d0.sum() < MIN_BULK:
        return []
    plen = c["payload_len"][d0].astype(np.int64)
    segs = int((-(-plen // seg)).sum())
    pk = int(d0.sum())
    ratio = segs / pk
    flows = int(len(np.unique(c["flow"][d0])))
    single = int((plen <= seg).sum())
    msg = (f"GRO/LRO delivered {pk} packets for about {segs} segments of {seg} bytes: {ratio:.2f} segments per "
           f"packet ({single} packets were not merged at all; at best a 64 KB aggregate holds about "
           f"{65536 // seg} segments).")
    if flows >= 64 and ratio < 4:
        msg += (f" {flows} flows interleave on the receive side: a small aggregation table (8 held packets per "
                f"GRO bucket; myri10ge's LRO had 8 descriptors) keeps flushing packets before a second segment of "
                f"the same flow arrives, so per-packet costs grow with the number of flows (report 003).")
    return [Finding("aggregation-ratio", "info", msg,
                    {"packets": pk, "segments": segs, "segment_size": seg, "segments_per_packet": ratio,
                     "unmerged": single, "flows": flows})]


def _best_divisor(plen: np.ndarray, g: np.ndarray) -> np.ndarray:
    """The per-packet segment size ``g``, or - when one size up to 200 bytes below the most
    common ``g`` divides more of the payloads exactly (e.g. 1440 after PMTU discovery where the
    MSS option says 1448) - that size."""
    if not (g > 0).any():
        return g
    top = int(np.bincount(g[g > 0]).argmax())
    if top < 8:
        return g
    sample = plen[:: max(1, len(plen) // 5000)]
    cands = np.arange(max(top - 200, 8), top + 1)
    hits = (sample[None, :] % cands[:, None] == 0).sum(axis=1)
    best = int(cands[::-1][np.argmax(hits[::-1])])
    if best != top and hits[cands == best][0] > hits[cands == top][0]:
        return np.where(g == top, best, g)
    return g


def mss_mismatch(ctx: Context) -> list[Finding]:
    """Single segments carrying more payload than the receiver's MSS option allows (report 000).

    Only flows whose capture shows wire segments count (no packet over the MTU: a TSO or
    GRO capture may hold small super-packets/aggregates), and only a recurring size
    (>= 3 packets and >= 10 % of the flow's data packets) is reported."""
    c = ctx.c
    peer = ctx.peer_mss()
    plen = c["payload_len"].astype(np.int64)
    opt = c["tcp_hlen"].astype(np.int64) - 20
    over = ctx.over_mtu()
    check = ctx.data & (peer > 0) & ~over
    viol = check & (plen + opt > peer)
    out = []
    if viol.any():
        F = ctx.nflows
        has_over = np.bincount(c["flow"][ctx.data & over], minlength=F) > 0
        nd = np.bincount(c["flow"][ctx.data], minlength=F)
        _, mode_n = group_mode(c["flow"][viol], plen[viol], F)
        for f in np.flatnonzero((mode_n >= 3) & (mode_n * 10 >= nd) & ~has_over):
            out.append(_mismatch_finding(ctx, int(f), viol & (c["flow"] == f), peer, plen))
    out += _smaller_segments(ctx)
    return out


def _mismatch_finding(ctx: Context, f: int, viol: np.ndarray, peer: np.ndarray, plen: np.ndarray) -> Finding:
    c = ctx.c
    vf = idx = np.flatnonzero(viol)
    mss = int(peer[vf[0]])
    ts = bool(ctx.ts[f])
    allowed = mss - (TS_BYTES if ts else 0)
    sizes, counts = np.unique(plen[vf], return_counts=True)
    common = int(sizes[counts.argmax()])
    # the segment right after each oversized one: do the two add up to whole MSS multiples?
    nxt = np.minimum(vf + 1, ctx.n - 1)
    pair = (ctx.gid[nxt] == ctx.gid[vf]) & ctx.data[nxt] & (ctx.rel[nxt] == ctx.end[vf]) & (nxt != vf)
    sums = plen[vf] + plen[nxt]
    recut = pair & (allowed > 0) & (sums % max(allowed, 1) == 0)
    partner = int(np.bincount(plen[nxt][recut]).argmax()) if recut.any() else 0
    hdr = int(c["ip_hlen"][vf[0]]) + int(c["tcp_hlen"][vf[0]])
    side = "the receiver's" if ctx.syn_seen[f, 1] else "the peer's"
    msg = (f"{len(idx)} segments carry more payload than the negotiated MSS allows: {side} SYN advertised "
           f"MSS {mss}" + (f"; with {TS_BYTES} bytes of TCP timestamps a segment may carry {allowed} bytes"
                           if ts else f", so a segment may carry {allowed} bytes")
           + f", but flow {f} sends {common}-byte segments (e.g. packet #{int(c['frame'][vf[0]])}).")
    if recut.sum() >= max(1, len(vf) // 2):
        k = int(np.bincount((sums[recut] // allowed)).argmax())
        msg += (f" Sizes alternate {common}/{partner} ({common} + {partner} = {common + partner} = {k} x {allowed}):"
                f" a device re-cut {k}-MSS super-packets at {common} bytes instead of at the MSS.")
    if common + hdr == 1500:
        msg += (f" {common} = 1500 - {hdr} is what a NIC that takes the segment size from a 1500-byte MTU "
                f"instead of the descriptor's MSS produces: QEMU's RTL8139C+ emulation before QEMU 7.2 "
                f"(report 000). Segments over a smaller path MTU are then lost.")
    ev = {"flow": f, "packets": len(idx), "mss_option": mss, "timestamps": ts, "allowed_payload": allowed,
          "sizes": {int(s): int(n) for s, n in zip(sizes, counts)}, "frames": frames(c["frame"][vf]),
          "recut_pairs": int(recut.sum()), "partner_size": partner}
    return Finding("mss-mismatch", "error", msg, ev)


def _smaller_segments(ctx: Context) -> list[Finding]:
    """Info: the sender's full segments are consistently smaller than the MSS allows."""
    c = ctx.c
    eff = eff_mss(ctx)
    seg, cnt = segment_mode(ctx)
    rows = ctx.data & (c["direction"] == 0) & ~ctx.over_mtu()
    out = []
    bigger = rows & (c["payload_len"] > seg[c["flow"]])
    n_bigger = np.bincount(c["flow"][bigger], minlength=ctx.nflows)
    for f in np.flatnonzero((eff > 0) & (seg > 0) & (seg < eff - 8) & (cnt >= 10) & (n_bigger == 0)):
        msg = (f"Flow {f} sends {int(seg[f])}-byte segments ({int(cnt[f])} of them) although the receiver's MSS "
               f"option ({int(ctx.mss_opt[f, 1])}) allows {int(eff[f])}: the sender limits its segment size "
               f"(TCP_MAXSEG, e.g. iperf3 -M, whose SYN may still advertise more), an MSS clamp, or a smaller "
               f"path MTU it learned. Not a problem by itself.")
        out.append(Finding("segment-size", "info", msg,
                           {"flow": int(f), "segment_size": int(seg[f]), "allowed_payload": int(eff[f]),
                            "segments": int(cnt[f])}))
    return out


def no_aggregation(ctx: Context) -> list[Finding]:
    """Report 002's signature: a bulk transfer seen one segment per packet where GRO could merge."""
    if ctx.hints.gro == "off":
        return []
    c = ctx.c
    over = ctx.over_mtu()
    eff = eff_mss(ctx)
    seg = segment_size(ctx)
    out = []
    d0 = ctx.data & (c["direction"] == 0)
    nd = np.bincount(c["flow"][d0], minlength=ctx.nflows)
    any_big = np.bincount(c["flow"][d0 & over], minlength=ctx.nflows) > 0
    # consecutive in-order full segments of one flow, close in time, first one without PSH
    i = np.flatnonzero(d0[:-1] & d0[1:] & (ctx.gid[:-1] == ctx.gid[1:]))
    full = c["payload_len"][i] == seg[c["flow"][i]]
    ok = (full & (ctx.rel[i + 1] == ctx.end[i]) & ((c["flags"][i] & codes.PSH) == 0)
          & (c["time_ns"][i + 1] - c["time_ns"][i] < GRO_GAP_NS))
    mergeable = np.bincount(c["flow"][i[ok]], minlength=ctx.nflows)
    maxp = np.zeros(ctx.nflows, np.int64)
    np.maximum.at(maxp, c["flow"][d0], c["payload_len"][d0])
    limit = np.maximum(seg, eff)
    cand = ((nd >= MIN_BULK) & ~any_big & (ctx.side != SENDER) & (maxp <= limit) & (mergeable >= 16)
            & (mergeable * 2 >= nd))
    flows = np.flatnonzero(cand)
    flows = flows[np.argsort(-nd[flows], kind="stable")]
    for f in flows[:MAX_FLOW_FINDINGS]:
        sl = ctx.group_rows(int(f), 0)
        rows = np.arange(sl.start, sl.stop)[d0[sl]]
        plen = c["payload_len"][rows]
        ipl = int(np.bincount(c["ip_len"][rows]).argmax())
        frs = c["frame"][rows]
        vx = rows[(c["encap"][rows] & codes.ENC_VXLAN) != 0]
        msg = (f"Flow {f}: all {int(nd[f])} data packets are single segments (at most {int(plen.max())} bytes "
               f"of payload, IP length {ipl}), although {int(mergeable[f])} of them arrived back-to-back and "
               f"in order. No aggregation seen: if GRO is on where this capture was taken, it is not merging "
               f"this flow, and every segment costs the stack a full per-packet trip.")
        ev = {"flow": int(f), "data_packets": int(nd[f]), "max_payload": int(plen.max()), "ip_len": ipl,
              "mergeable_pairs": int(mergeable[f]), "frames": frames(frs), "gro_hint": ctx.hints.gro}
        if len(vx):
            zero = int((c["outer_udp_csum"][vx] == 0).sum())
            ev.update(vxlan_packets=len(vx), outer_udp_csum_zero=zero)
            msg += (f" The packets are VXLAN-encapsulated ({zero} of {len(vx)} with outer UDP checksum 0):"
                    f" tunnel GRO merges the inner flow only when the NIC vouches for the inner checksum "
                    f"(or the outer UDP checksum lets the stack validate it) - report 002's mlx4 case.")
        elif ipl == 1450:
            msg += (" IP length 1450 = 1500 - 50 is a VXLAN overlay's MTU: if these packets were decapsulated "
                    "from a tunnel, tunnel GRO needs the inner checksum vouched for by the NIC (report 002).")
        msg += " (Expected if GRO is off, or if the capture is on the wire before the receiving host.)"
        if f == flows[0] and len(flows) > MAX_FLOW_FINDINGS:
            msg += f" {len(flows) - MAX_FLOW_FINDINGS} more flows look the same (not listed)."
            ev["more_flows"] = len(flows) - MAX_FLOW_FINDINGS
        out.append(Finding("no-aggregation", "warning" if ctx.hints.gro == "on" else "info", msg, ev))
    return out
