"""The doctor's running state: every check's bookkeeping carried from chunk to chunk.

Packets are grouped by (flow, endpoint): group ``g = 2 * flow + bit``. :meth:`Accumulator.add`
takes a chunk in capture order; per group it carries what the next chunk needs (the
sequence/ACK unwrap, the previous packet, the previous pure ACK, the originals still
unacknowledged for the black-hole check) and tallies the rest (counts, minima and maxima,
sparse value counts, the first packet numbers). Nothing grows with the packets except
the packets over the link MTU (their payload size and header bytes: the segment-size
estimate samples them) and the rare events (shrunken resends, SACK-hole ACK numbers).

Two facts are needed while counting and known for sure only at the end: the link MTU
(from the SYNs, else 1500) and each side's MSS option. The counting uses what the SYNs
read so far say; :attr:`Accumulator.settled` is False when a later SYN changed it after
use, and the caller then counts again with the final values (``mtu=``, ``mss=``).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .. import codes
from .originals import REL_BITS, REL_MASK, Originals
from .tally import Counts, FirstFrames

ETHERNET_MTU = 1500
GRO_GAP_NS = 1_000_000         # back-to-back: closer than this (one NAPI poll, roughly)
BIG = np.iinfo(np.int64).max

# per-group int64 state: name -> initial value
STATE = dict(
    npk=0, first_seq=0, first_ack=0, last_seq=0, last_rel=0, top=0, last_ack=0, last_ackoff=0,
    p_plen=0, p_end=0, p_time=0, p_flags=0, p_viol=0, p_data=0, pa_has=0, pa_ack=0, pa_win=0,
    pk=0, data_pk=0, nbytes=0, rt_pk=0, rt_bytes=0, holes=0, partial=0, notrunc=0, bad=0, sp=0, sp_vlan=0,
    data_vx=0, data_vx_zero=0, data_ts=0, dups=0, dup_first=BIG, sack_rows=0, sack_big=0, viol=0,
    t_first=BIG, s_lo=BIG, s_hi=-BIG, t_hi=-BIG, maxp=0, a_lo=BIG, a_hi=-BIG, ta_hi=-BIG,
    mss=0, syn_seen=0, syn_ts=0, syn_sum=0, syn_hdr=0, sp_max=-1, sp_max_frame=0, sp_max_iplen=0,
    viol_peer=0, viol_hdr=0, hole_hdr=0, t_ev=BIG, peer_used=-1)
MIN_FIELDS = ("dup_first", "t_first", "s_lo", "a_lo", "t_ev")
MAX_FIELDS = ("s_hi", "t_hi", "maxp", "a_hi", "ta_hi", "sack_big")
SUM_FIELDS = ("pk", "data_pk", "nbytes", "rt_pk", "rt_bytes", "holes", "partial", "notrunc", "bad", "sp",
              "sp_vlan", "data_vx", "data_vx_zero", "data_ts", "dups", "sack_rows", "viol")
COUNTS = ("ttl", "data", "orig", "later", "rt", "gap", "seg", "viol", "recut", "merge", "ipl")
FIRSTS = ("cs", "partial", "bad", "sp", "viol", "data", "hole", "rt")
EVENT_FIELDS = ("g", "rel", "end", "plen", "frame", "seq", "L", "hdr", "res_plen", "res_frame", "res_time",
                "res_hdr", "sacked")


def wrap32(x: np.ndarray) -> np.ndarray:
    """Differences of 32-bit sequence numbers as signed int64 in [-2**31, 2**31)."""
    return ((x.astype(np.int64) + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def overhead(encap: np.ndarray, mpls_labels: np.ndarray) -> np.ndarray:
    """Encapsulation bytes inside the link MTU per packet (PPPoE, VXLAN, MPLS labels)."""
    enc = encap.astype(np.int64)
    return (((enc & codes.ENC_PPPOE) != 0) * 8 + ((enc & codes.ENC_VXLAN) != 0) * 50
            + ((enc & codes.ENC_MPLS) != 0) * 4 * np.maximum(mpls_labels.astype(np.int64), 1))


@njit(cache=True)
def unwrap_groups(gid, seq, ack, plen, synfin, npk, first_seq, first_ack, last_seq, last_rel, top, last_ack,
                  last_ackoff, rel, end, prev_max, ack_off):
    """One pass over a chunk's rows sorted by group, capture order inside, carrying each group's
    unwrap from earlier chunks: ``rel`` the sequence offset from the group's first packet, ``end``
    = rel + payload (+ SYN/FIN), ``prev_max`` the highest ``end`` sent earlier in the group (0 at
    its first packet), ``ack_off`` the acknowledgement number's offset from the group's first."""
    for i in range(gid.size):
        g = gid[i]
        s, a = np.int64(seq[i]), np.int64(ack[i])
        if npk[g] == 0:
            first_seq[g], first_ack[g] = s, a
            rel[i], ack_off[i], prev_max[i] = 0, 0, 0
            end[i] = plen[i] + synfin[i]
            top[g] = end[i]
        else:
            rel[i] = last_rel[g] + ((s - last_seq[g] + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
            ack_off[i] = last_ackoff[g] + ((a - last_ack[g] + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
            end[i] = rel[i] + plen[i] + synfin[i]
            prev_max[i] = top[g]
            if end[i] > top[g]:
                top[g] = end[i]
        npk[g] += 1
        last_seq[g], last_rel[g], last_ack[g], last_ackoff[g] = s, rel[i], a, ack_off[i]


def _starts(gs: np.ndarray) -> np.ndarray:
    """Per row of rows sorted by group: the position of its group's first row."""
    if len(gs) == 0:
        return np.zeros(0, np.int64)
    new = np.ones(len(gs), bool)
    new[1:] = gs[1:] != gs[:-1]
    return np.maximum.accumulate(np.where(new, np.arange(len(gs)), 0))


def _last_rows(gs: np.ndarray) -> np.ndarray:
    """Positions of each group's last row (rows sorted by group)."""
    last = np.ones(len(gs), bool)
    last[:-1] = gs[1:] != gs[:-1]
    return np.flatnonzero(last)


class Accumulator:
    """Every check's running state; :meth:`add` chunks in capture order, then read the tallies.

    mtu: the link MTU to count with (a second pass, or ``--mtu``); None: the SYNs read so far
    say (at least 1500). mss: per group, the MSS option to count with (a second pass)."""

    def __init__(self, mtu: int | None = None, mss: np.ndarray | None = None):
        self.fixed_mtu, self.fixed_mss = mtu, mss
        self.ngroups = 0
        self.packets = 0
        self.s = {k: np.zeros(0, np.int64) for k in STATE}
        self.counts = {k: Counts() for k in COUNTS}
        self.firsts = {k: FirstFrames() for k in FIRSTS}
        self.ip_len = Counts()            # data packets by IP length (group 0), for the jumbo-MTU guess
        self.ip_len_partial = Counts()    # ... of them with CHECKSUM_PARTIAL
        self.candidates: list[tuple] = []          # packets over the MTU: (group, payload, header bytes)
        self.events: list[dict] = []               # shrunken first resends
        self.sack_acks: list[np.ndarray] = []      # (group << 40 | ack offset) of SACK-hole ACKs
        self.store = Originals()
        self.mtu_used: set[int] = set()

    # -- growth -------------------------------------------------------------------------------
    def _grow(self, ngroups: int) -> None:
        if ngroups <= len(self.s["npk"]):
            self.ngroups = max(self.ngroups, ngroups)
            return
        cap = max(ngroups, 2 * len(self.s["npk"]), 16)
        for k, init in STATE.items():
            old = self.s[k]
            self.s[k] = np.concatenate([old, np.full(cap - len(old), init, np.int64)])
        for f in self.firsts.values():
            f.grow(cap)
        self.ngroups = ngroups

    def mtu_now(self) -> int:
        if self.fixed_mtu:
            return int(self.fixed_mtu)
        return max(ETHERNET_MTU, int(self.s["syn_sum"][:self.ngroups].max(initial=0)))

    @property
    def settled(self) -> bool:
        """Were the MTU and MSS options used while counting the final ones?"""
        if self.fixed_mtu is None and len(self.mtu_used) > 1:
            return False
        s, G = self.s, self.ngroups
        used = s["peer_used"][:G]                  # per group: the peer's MSS option its data was counted with
        final = s["mss"][np.arange(G) ^ 1]
        return not ((used >= 0) & (used != final)).any()

    # -- one chunk ------------------------------------------------------------------------------
    def add(self, cols: dict, flow: np.ndarray, bit: np.ndarray) -> None:
        """A chunk in capture order: its columns (doctor.context.COLUMNS, flow and direction
        aside), each packet's flow and endpoint bit."""
        n = len(flow)
        if n == 0:
            return
        g0 = flow.astype(np.int64) * 2 + (bit.astype(np.int64) & 1)
        self._grow(int(g0.max()) + 2 - int(g0.max()) % 2)
        o = np.argsort(g0, kind="stable")
        c = {k: v[o] for k, v in cols.items() if k != "sack"}     # SACK blocks: gathered for SACK rows only
        gs = g0[o]
        self.packets += n
        s = self.s
        flags = c["flags"].astype(np.int64)
        plen = c["payload_len"].astype(np.int64)
        syn = (flags & codes.SYN) != 0
        self._syns(gs, c, syn)
        mtu = self.mtu_now()
        self.mtu_used.add(mtu)
        # the unwrap, carried across chunks
        rel, end, pm, ackoff = (np.empty(n, np.int64) for _ in range(4))
        synfin = syn.astype(np.int64) + ((flags & codes.FIN) != 0)
        unwrap_groups(gs, c["seq"], c["ack"], plen, synfin, s["npk"], s["first_seq"], s["first_ack"], s["last_seq"],
                      s["last_rel"], s["top"], s["last_ack"], s["last_ackoff"], rel, end, pm, ackoff)
        data = plen > 0
        retrans = data & (rel < pm)
        hole = data & (rel > pm)
        orig = data & ~retrans
        time = c["time_ns"].astype(np.int64)
        frame = c["frame"].astype(np.int64)
        hdr = c["ip_hlen"].astype(np.int64) + c["tcp_hlen"].astype(np.int64)
        L = c["ip_len"].astype(np.int64) + overhead(c["encap"], c["mpls_labels"])
        over = L > mtu
        partial = c["csum_state"] == codes.CSUM_PARTIAL
        bad = c["csum_bad"].astype(bool) & ~partial & ~over
        sp = data & over
        peer = (self.fixed_mss[gs ^ 1] if self.fixed_mss is not None else s["mss"][gs ^ 1])
        opt = c["tcp_hlen"].astype(np.int64) - 20
        viol = data & (peer > 0) & ~over & (plen + opt > peer)
        # the peer's MSS option as used for this chunk's data
        dg = np.unique(gs[data])
        if len(dg):
            used = s["peer_used"]
            now = peer[np.searchsorted(gs, dg)] if len(dg) else dg
            changed = (used[dg] >= 0) & (used[dg] != now)
            used[dg[changed]] = -2            # used with two values: never settled
            fresh = used[dg] == -1
            used[dg[fresh]] = now[fresh]
        G = len(s["npk"])

        def count(mask, weights=None):
            return np.bincount(gs[mask], None if weights is None else weights[mask], minlength=G).astype(np.int64)

        for k, m, w in (("pk", slice(None), None), ("data_pk", data, None), ("nbytes", slice(None), plen),
                        ("rt_pk", retrans, None), ("rt_bytes", retrans, plen), ("holes", hole, None),
                        ("partial", partial, None), ("notrunc", ~c["truncated"].astype(bool), None),
                        ("bad", bad, None), ("sp", sp, None),
                        ("sp_vlan", sp & ((c["encap"] & codes.ENC_VLAN) != 0), None),
                        ("data_vx", data & ((c["encap"] & codes.ENC_VXLAN) != 0), None),
                        ("data_vx_zero", data & ((c["encap"] & codes.ENC_VXLAN) != 0) & (c["outer_udp_csum"] == 0),
                         None),
                        ("data_ts", data & c["opt_ts"].astype(bool), None), ("viol", viol, None)):
            s[k] += count(m, w)
        acks = (flags & codes.ACK) != 0
        for k, m, v in (("t_first", data, time), ("s_lo", data, rel), ("a_lo", acks, ackoff)):
            np.minimum.at(s[k], gs[m], v[m])
        for k, m, v in (("s_hi", data, end), ("t_hi", data, time), ("maxp", data, plen), ("a_hi", acks, ackoff),
                        ("ta_hi", acks, time)):
            np.maximum.at(s[k], gs[m], v[m])
        self._first_rows(gs, sp, plen, frame, c["ip_len"], hdr, viol, peer, hole)
        # sparse value counts
        ct = self.counts
        ct["ttl"].add(gs, c["ttl"])
        ct["data"].add(gs[data], plen[data])
        ct["orig"].add(gs[orig], plen[orig])
        ct["rt"].add(gs[retrans], plen[retrans])
        ct["gap"].add(gs[hole], np.minimum(rel[hole] - pm[hole], 0xFFFFFFFF))
        ct["seg"].add(gs[data & ~over], plen[data & ~over])
        ct["viol"].add(gs[viol], plen[viol])
        ct["ipl"].add(gs[data], c["ip_len"][data])
        self.ip_len.add(np.zeros(int(data.sum()), np.int64), c["ip_len"][data])
        self.ip_len_partial.add(np.zeros(int((data & partial).sum()), np.int64), c["ip_len"][data & partial])
        self._pairs(gs, plen, end, rel, time, flags, viol, data)
        fr = self.firsts
        for k, m in (("cs", partial | bad), ("partial", partial), ("bad", bad), ("sp", sp), ("viol", viol),
                     ("data", data), ("hole", hole), ("rt", retrans)):
            idx = np.flatnonzero(m)
            fr[k].add(gs[idx], frame[idx], _starts(gs[idx]))
        if sp.any():
            self.candidates.append((gs[sp].astype(np.int32), plen[sp].astype(np.int32), hdr[sp].astype(np.uint16)))
        self._dup_acks(gs, c, flags, plen, ackoff, frame)
        self._originals(gs, rel, end, plen, frame, c["seq"], L, hdr, orig)
        self._sack(gs, c, ackoff, time, cols["sack"], o)
        self._resends(gs, rel, plen, frame, time, hdr, orig, retrans)

    def _syns(self, gs, c, syn) -> None:
        """The chunk's SYNs: each side's MSS option and timestamps (the last SYN), the largest
        MSS option + headers (its first SYN) for the MTU."""
        if not syn.any():
            return
        s = self.s
        i = np.flatnonzero(syn)
        s["mss"][gs[i]] = c["opt_mss"][i]
        s["syn_seen"][gs[i]] = 1
        s["syn_ts"][gs[i]] = c["opt_ts"][i]
        has = i[c["opt_mss"][i] > 0]
        sums = c["opt_mss"][has].astype(np.int64) + np.where(c["ip_version"][has] == 6, 60, 40)
        for j, total in zip(has.tolist(), sums.tolist()):       # SYNs are few
            g = int(gs[j])
            if total > s["syn_sum"][g]:
                s["syn_sum"][g] = total
                s["syn_hdr"][g] = 60 if c["ip_version"][j] == 6 else 40

    def _first_rows(self, gs, sp, plen, frame, ip_len, hdr, viol, peer, hole) -> None:
        """Per group: the largest packet over the MTU (its first), the first oversized segment's
        MSS option and headers, the first hole's headers."""
        s = self.s
        idx = np.flatnonzero(sp)
        if len(idx):
            order = np.lexsort((np.arange(len(idx)), -plen[idx], gs[idx]))
            first = idx[order][np.r_[True, gs[idx][order][1:] != gs[idx][order][:-1]]]
            g = gs[first]
            better = plen[first] > s["sp_max"][g]
            g, first = g[better], first[better]
            s["sp_max"][g], s["sp_max_frame"][g], s["sp_max_iplen"][g] = plen[first], frame[first], ip_len[first]
        for m, fields in ((viol, (("viol_peer", peer), ("viol_hdr", hdr))), (hole, (("hole_hdr", hdr),))):
            idx = np.flatnonzero(m)
            if len(idx):
                first = idx[np.r_[True, gs[idx][1:] != gs[idx][:-1]]]
                g = gs[first]
                new = (s["viol" if m is viol else "holes"][g] == np.bincount(gs[idx], minlength=len(s["npk"]))[g])
                for k, v in fields:
                    s[k][g[new]] = v[first[new]]

    def _pairs(self, gs, plen, end, rel, time, flags, viol, data) -> None:
        """Each packet with the one before it in its group (carried across chunks): oversized
        segments followed by their continuation (the re-cut check), back-to-back in-order data."""
        s = self.s
        n = len(gs)
        first = np.ones(n, bool)
        first[1:] = gs[1:] != gs[:-1]
        g = gs
        fg = g[first]
        has = np.ones(n, bool)
        has[first] = s["npk"][fg] - np.bincount(g, minlength=len(s["npk"]))[fg] > 0

        def pick(arr, st):
            """Each row's previous row's value in its group (the carried one at a group's first row)."""
            out = np.empty(n, np.int64)
            out[1:] = arr[:-1]
            out[first] = s[st][fg]
            return out
        p_plen, p_end, p_time = pick(plen, "p_plen"), pick(end, "p_end"), pick(time, "p_time")
        p_flags, p_viol, p_data = pick(flags, "p_flags"), pick(viol, "p_viol"), pick(data, "p_data")
        pair = has & data & (rel == p_end)
        rc = pair & (p_viol != 0)
        self.counts["recut"].add(g[rc], (np.minimum(p_plen[rc], 0xFFFF) << 16) | np.minimum(plen[rc], 0xFFFF))
        ok = (pair & (p_data != 0) & ((p_flags & codes.PSH) == 0) & (time - p_time < GRO_GAP_NS))
        self.counts["merge"].add(g[ok], p_plen[ok])
        last = _last_rows(gs)
        lg = gs[last]
        for k, v in (("p_plen", plen), ("p_end", end), ("p_time", time), ("p_flags", flags),
                     ("p_viol", viol.astype(np.int64)), ("p_data", data.astype(np.int64))):
            s[k][lg] = v[last]

    def _dup_acks(self, gs, c, flags, plen, ackoff, frame) -> None:
        """Pure ACKs repeating the previous pure ACK of their group (number, and window or SACK)."""
        s = self.s
        pure = ((plen == 0) & ((flags & codes.ACK) != 0) & ((flags & (codes.SYN | codes.FIN | codes.RST)) == 0))
        a = np.flatnonzero(pure)
        if len(a) == 0:
            return
        g = gs[a]
        win = c["window"][a].astype(np.int64)
        ao = ackoff[a]
        first = np.ones(len(a), bool)
        first[1:] = g[1:] != g[:-1]
        p_has = np.where(first, s["pa_has"][g], 1)
        p_ack = np.where(first, s["pa_ack"][g], np.roll(ao, 1))
        p_win = np.where(first, s["pa_win"][g], np.roll(win, 1))
        dup = (p_has != 0) & (ao == p_ack) & ((win == p_win) | (c["sack_n"][a] > 0))
        s["dups"] += np.bincount(g[dup], minlength=len(s["npk"]))
        np.minimum.at(s["dup_first"], g[dup], frame[a][dup])
        last = _last_rows(g)
        s["pa_has"][g[last]], s["pa_ack"][g[last]], s["pa_win"][g[last]] = 1, ao[last], win[last]

    def _sack(self, gs, c, ackoff, time, sack, o) -> None:
        """SACK rows: the hole from the ACK number to the lowest block (distinct ACKs, the largest),
        and each block's left edge marked on the unacknowledged original it starts inside."""
        s = self.s
        r = np.flatnonzero(c["sack_n"] > 0)
        if len(r) == 0:
            return
        g = gs[r]
        s["sack_rows"] += np.bincount(g, minlength=len(s["npk"]))
        nblk = sack.shape[1] // 2
        left = sack[o[r]][:, 0::2].astype(np.int64)
        valid = np.arange(nblk)[None, :] < c["sack_n"][r][:, None]
        dist = wrap32(left - c["ack"][r].astype(np.int64)[:, None])
        gap = np.where(valid & (dist > 0), dist, BIG).min(axis=1)
        ok = gap < BIG
        if ok.any():
            np.maximum.at(s["sack_big"], g[ok], gap[ok])
            self.sack_acks.append(np.unique((g[ok] << REL_BITS) | (ackoff[r][ok] & REL_MASK)))
        # left edges in the data group's sequence space: ack_rel + (left - ack)
        d = g ^ 1
        known = s["npk"][d] > 0
        base = wrap32(s["first_ack"][g] - s["first_seq"][d])
        lefts = (base + ackoff[r])[:, None] + dist
        keep = valid & known[:, None] & (lefts >= 0) & (lefts <= REL_MASK)
        if keep.any() and self.store.blocks:
            key = (np.broadcast_to(d[:, None], lefts.shape)[keep] << REL_BITS) | lefts[keep]
            self.store.sacked(key, np.broadcast_to(time[r][:, None], lefts.shape)[keep])

    def _originals(self, gs, rel, end, plen, frame, seq, L, hdr, orig) -> None:
        """The chunk's original transmissions into the store (sorted by group, then start)."""
        o = np.flatnonzero(orig & (rel <= REL_MASK))
        self.store.add({"key": (gs[o] << REL_BITS) | rel[o], "end": end[o], "plen": plen[o].astype(np.int32), "frame": frame[o],
                        "seq": seq[o].astype(np.uint32), "L": L[o].astype(np.int32),
                        "hdr": hdr[o].astype(np.uint16)})

    def _resends(self, gs, rel, plen, frame, time, hdr, orig, retrans) -> None:
        """Each original's first resend, found in the store (an event when smaller); originals
        acknowledged or resent leave it."""
        s = self.s
        r = np.flatnonzero(retrans & (rel >= 0) & (rel <= REL_MASK))
        if len(r) and self.store.blocks:
            key = (gs[r] << REL_BITS) | rel[r]
            firsts = np.unique(key, return_index=True)[1]       # the first resend per start, this chunk
            r, key = r[firsts], key[firsts]
            hit, o = self.store.first_resends(key)
            r = r[hit]
            shrink = plen[r] < o["plen"]
            r = r[shrink]
            if len(r):
                o = {k: v[shrink] for k, v in o.items()}
                self.events.append({"g": gs[r], "rel": rel[r], "end": o["end"], "plen": o["plen"], "frame": o["frame"],
                                    "seq": o["seq"], "L": o["L"], "hdr": o["hdr"], "res_plen": plen[r],
                                    "res_frame": frame[r], "res_time": time[r], "res_hdr": hdr[r],
                                    "sacked": o["sackmin"] < time[r]})
                np.minimum.at(s["t_ev"], gs[r], time[r])
        later = orig & (time > s["t_ev"][gs])
        self.counts["later"].add(gs[later], plen[later])
        if self.store.blocks:        # the peer's highest ACK in each group's sequence space
            g = np.arange(len(s["npk"]))
            h = g ^ 1
            acked = np.where((s["npk"][h] > 0) & (s["a_hi"][h] > -BIG),
                             wrap32(s["first_ack"][h] - s["first_seq"][g]) + s["a_hi"][h], -BIG)
            self.store.prune(acked, s["top"])
