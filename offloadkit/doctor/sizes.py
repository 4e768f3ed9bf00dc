"""Size checks: super-packets/aggregates, segment sizes vs the negotiated MSS, missing aggregation."""
from __future__ import annotations

import numpy as np


from .context import RECEIVER, SENDER, Context
from .findings import Finding

TS_BYTES = 12
MIN_BULK = 32            # data packets before "never aggregated" means anything
MAX_FLOW_FINDINGS = 5    # per-flow findings of one kind; the first one counts the rest


def eff_mss(ctx: Context) -> np.ndarray:
    """Per flow: payload bytes per full segment of the data direction allowed by the
    receiver's MSS option (minus 12 for timestamps); 0 when the receiver's SYN was not seen."""
    peer = ctx.mss_opt[:, 1]
    return np.where(peer > 0, peer - TS_BYTES * ctx.ts, 0)


def segment_size(ctx: Context) -> np.ndarray:
    """Per flow: the recurring payload size of single segments in the data direction (mode)."""
    return segment_mode(ctx)[0]


def segment_mode(ctx: Context) -> tuple[np.ndarray, np.ndarray]:
    """Per flow: (recurring single-segment payload size, how many packets have it)."""
    mode, count = ctx.counts["seg"].mode(ctx.ngroups)
    return mode[0::2], count[0::2]


def _data0(ctx: Context, name: str) -> np.ndarray:
    """A per-group field of the data direction, per flow."""
    return ctx.s[name][0::2]


def super_packets(ctx: Context) -> list[Finding]:
    s = ctx.s
    n_sp = int(s["sp"].sum())
    if n_sp == 0:
        return []
    cg, plen, hdr = ctx.candidates
    side = ctx.side[cg // 2]
    seg = segment_size(ctx)
    eff = eff_mss(ctx)
    g = np.where(eff > 0, eff, seg)[cg // 2]
    g = np.where(g > 0, g, np.maximum(ctx.mtu - hdr, 0))   # no SYN, no single segment: what the MTU allows
    g = _best_divisor(plen, g)
    multiple = (g > 0) & (plen % np.maximum(g, 1) == 0)
    wire_segments = int(np.where(g > 0, -(-plen // np.maximum(g, 1)), 1).sum())
    bg = int(np.argmax(s["sp_max"]))          # the group holding the largest (its first)
    big_plen, big_frame, big_ip = int(s["sp_max"][bg]), int(s["sp_max_frame"][bg]), int(s["sp_max_iplen"][bg])
    ndata = int(s["data_pk"].sum())
    gsz = int(np.bincount(g[g > 0]).argmax()) if (g > 0).any() else 0
    ev = {"packets": n_sp, "data_packets": ndata, "mtu": ctx.mtu, "mtu_from": ctx.mtu_why,
          "largest_payload": big_plen, "largest_ip_len": big_ip,
          "largest_frame": big_frame, "frames": ctx.firsts["sp"].of(range(ctx.ngroups)),
          "segment_size": gsz, "exact_multiples": int(multiple.sum()),
          "wire_segments_estimate": wire_segments,
          "sender_side": int((side == SENDER).sum()), "receiver_side": int((side == RECEIVER).sum())}
    head = (f"{n_sp} of {ndata} data packets are larger than the link MTU of {ctx.mtu} bytes "
            f"(up to {big_plen} bytes of payload, IP length {big_ip}, "
            f"packet #{big_frame})")
    per = f" of about {gsz} bytes" if gsz else ""
    if (side == SENDER).all():
        why = (f": the capture was taken above segmentation. The sending host's TSO/GSO hands these "
               f"super-packets to the NIC (or to software GSO), which cuts them into segments{per}; the wire "
               f"carried about {wire_segments} segments for them.")
        kind = "super-packets"
    elif (side == RECEIVER).all():
        why = (f": the capture was taken after GRO/LRO. The receiving host merged wire segments{per} into "
               f"these aggregates ({int(multiple.sum())} of {n_sp} are exact multiples of {gsz}); the wire "
               f"carried about {wire_segments} segments." if gsz else
               ": the capture was taken after GRO/LRO, which merged wire segments into these aggregates.")
        kind = "aggregates"
    else:
        why = (f": either the capture was taken above segmentation (the sender's TSO/GSO super-packets) or "
               f"after GRO/LRO at the receiver (aggregates); {int(multiple.sum())} of {n_sp} are exact "
               f"multiples of {gsz} bytes. The wire carried segments{per}, about {wire_segments} of them."
               if gsz else ": the capture was taken above TSO/GSO or after GRO/LRO.")
        kind = "super-packets"
    msg = head + why + " The sizes in this capture are not what the wire carried."
    vlan = int(s["sp_vlan"].sum())
    if vlan / n_sp > 0.5 and not (side == SENDER).all():
        ev["vlan_tagged"] = vlan
        msg += (f" {vlan} of them carry an 802.1Q tag: GRO merges through a non-accelerated VLAN "
                f"(Linux >= 4.2). If this host forwards the flow (a router, NAT), each aggregate is cut again on "
                f"the way out (GSO), and without checksum offload GRO adds a software checksum pass on receive "
                f"and another on transmit - report 004's NAT router lost 30-40 % of its throughput this way.")
    out = [Finding(kind, "info", msg, ev)]
    if kind != "super-packets" or not (side == SENDER).all():
        out += _aggregation_ratio(ctx, gsz)
    return out


def _aggregation_ratio(ctx: Context, seg: int) -> list[Finding]:
    """Info: how much GRO/LRO merged, and whether many interleaved flows kept it from merging (report 003)."""
    pk = int(_data0(ctx, "data_pk").sum())
    if seg <= 0 or pk < MIN_BULK:
        return []
    t = ctx.counts["data"]
    d0 = t.group() % 2 == 0
    v = t.value()
    segs = int(t.total(ctx.ngroups, d0, -(-v // seg)).sum())
    ratio = segs / pk
    flows = int((_data0(ctx, "data_pk") > 0).sum())
    single = int(t.total(ctx.ngroups, d0 & (v <= seg)).sum())
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
    out = []
    if ctx.s["viol"].any():
        F = ctx.nflows
        has_over = ctx.per_flow("sp").sum(axis=1) > 0
        nd = ctx.per_flow("data_pk").sum(axis=1)
        by_flow = ctx.counts["viol"].merged(np.arange(ctx.ngroups) // 2)
        _, mode_n = by_flow.mode(F)
        for f in np.flatnonzero((mode_n >= 3) & (mode_n * 10 >= nd) & ~has_over):
            out.append(_mismatch_finding(ctx, int(f), by_flow))
    out += _smaller_segments(ctx)
    return out


def _mismatch_finding(ctx: Context, f: int, by_flow) -> Finding:
    s = ctx.s
    first = 2 * f if s["viol"][2 * f] > 0 else 2 * f + 1      # the group of the flow's first oversized segment
    n_viol = int(s["viol"][2 * f] + s["viol"][2 * f + 1])
    mss = int(s["viol_peer"][first])
    ts = bool(ctx.ts[f])
    allowed = mss - (TS_BYTES if ts else 0)
    sizes, counts = by_flow.of(f)
    common = int(sizes[counts.argmax()])
    # the segment right after each oversized one: do the two add up to whole MSS multiples?
    pairs = ctx.counts["recut"].merged(np.arange(ctx.ngroups) // 2)
    pv, pn = pairs.of(f)
    first_size, partner_size = pv >> 16, pv & 0xFFFF
    sums = first_size + partner_size
    recut = (allowed > 0) & (sums % max(allowed, 1) == 0)
    n_recut = int(pn[recut].sum())
    partner = int(np.bincount(partner_size[recut], pn[recut]).argmax()) if n_recut else 0
    hdr = int(s["viol_hdr"][first])
    fr = ctx.firsts["viol"].of([2 * f, 2 * f + 1])
    side = "the receiver's" if ctx.syn_seen[f, 1] else "the peer's"
    msg = (f"{n_viol} segments carry more payload than the negotiated MSS allows: {side} SYN advertised "
           f"MSS {mss}" + (f"; with {TS_BYTES} bytes of TCP timestamps a segment may carry {allowed} bytes"
                           if ts else f", so a segment may carry {allowed} bytes")
           + f", but flow {f} sends {common}-byte segments (e.g. packet #{fr[0]}).")
    if n_recut >= max(1, n_viol // 2):
        k = int(np.bincount(sums[recut] // allowed, pn[recut]).argmax())
        msg += (f" Sizes alternate {common}/{partner} ({common} + {partner} = {common + partner} = {k} x {allowed}):"
                f" a device re-cut {k}-MSS super-packets at {common} bytes instead of at the MSS.")
    if common + hdr == 1500:
        msg += (f" {common} = 1500 - {hdr} is what a NIC that takes the segment size from a 1500-byte MTU "
                f"instead of the descriptor's MSS produces: QEMU's RTL8139C+ emulation before QEMU 7.2 "
                f"(report 000). Segments over a smaller path MTU are then lost.")
    ev = {"flow": f, "packets": n_viol, "mss_option": mss, "timestamps": ts, "allowed_payload": allowed,
          "sizes": {int(v): int(n) for v, n in zip(sizes, counts)}, "frames": fr,
          "recut_pairs": n_recut, "partner_size": partner}
    return Finding("mss-mismatch", "error", msg, ev)


def _smaller_segments(ctx: Context) -> list[Finding]:
    """Info: the sender's full segments are consistently smaller than the MSS allows."""
    eff = eff_mss(ctx)
    seg, cnt = segment_mode(ctx)
    t = ctx.counts["seg"]
    g = t.group()
    bigger = (g % 2 == 0) & (t.value() > seg[g // 2])
    n_bigger = t.total(ctx.ngroups, bigger)[0::2]
    out = []
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
    eff = eff_mss(ctx)
    seg = segment_size(ctx)
    out = []
    nd = _data0(ctx, "data_pk")
    any_big = _data0(ctx, "sp") > 0
    # consecutive in-order full segments of one flow, close in time, first one without PSH
    target = np.zeros(ctx.ngroups, np.int64)
    target[0::2] = seg
    mergeable = ctx.counts["merge"].at(target)[0::2]
    maxp = _data0(ctx, "maxp")
    limit = np.maximum(seg, eff)
    cand = ((nd >= MIN_BULK) & ~any_big & (ctx.side != SENDER) & (maxp <= limit) & (mergeable >= 16)
            & (mergeable * 2 >= nd))
    flows = np.flatnonzero(cand)
    flows = flows[np.argsort(-nd[flows], kind="stable")]
    ipl_mode, _ = ctx.counts["ipl"].mode(ctx.ngroups)
    for f in flows[:MAX_FLOW_FINDINGS]:
        ipl = int(ipl_mode[2 * f])
        top = int(maxp[f])
        n_vx, zero = int(ctx.s["data_vx"][2 * f]), int(ctx.s["data_vx_zero"][2 * f])
        msg = (f"Flow {f}: all {int(nd[f])} data packets are single segments (at most {top} bytes "
               f"of payload, IP length {ipl}), although {int(mergeable[f])} of them arrived back-to-back and "
               f"in order. No aggregation seen: if GRO is on where this capture was taken, it is not merging "
               f"this flow, and every segment costs the stack a full per-packet trip.")
        ev = {"flow": int(f), "data_packets": int(nd[f]), "max_payload": top, "ip_len": ipl,
              "mergeable_pairs": int(mergeable[f]), "frames": ctx.firsts["data"].of([2 * f]),
              "gro_hint": ctx.hints.gro}
        if n_vx:
            ev.update(vxlan_packets=n_vx, outer_udp_csum_zero=zero)
            msg += (f" The packets are VXLAN-encapsulated ({zero} of {n_vx} with outer UDP checksum 0):"
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
