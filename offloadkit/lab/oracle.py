"""Compare the kit's segmentation and GRO with the real kernel's captures.

Three capture points of the lab's router topology are used:

- ``router-in``: what the sender's TSO stack hands the router (super-packets);
- ``router-out``: the router's egress with ``tso off gso on``: software-GSO segments;
- ``rcv``: the receiver after its GRO.

**Segmentation.** The router forwards every ingress packet whole (or drops it
whole, e.g. over a smaller MTU) and its egress GSO cuts it into segments. So
every data packet at ``router-out`` must be one of the kit's segments of the
``router-in`` capture, with the same seq, payload length, flags, IP ID and IP
total length. Packets are matched by (4-tuple, seq, IP ID, TSval): a retransmission
reuses the seq but gets a fresh IP ID, so the key is unique, and a kit that
splits at the wrong place or numbers IDs wrongly leaves egress packets
unexplained. The converse is weaker on purpose: a whole super-packet may be
missing at egress (dropped by the router, e.g. before PMTU discovery settled),
but if any segment of one is there, all must be (so both captures must be
complete: the lab records tcpdump's counters and the tests check them). TTL
and the IP checksum are not compared (the router decrements TTL); the kit's
IP checksums must verify. Segments of one super-packet are told apart in the
kit's output by sharing its timestamp.

**Which MSS.** A pcap carries no skb metadata, so the ingress super-packets'
gso_size is not visible. The kernel's GSO cuts every segment but the last of a
super-packet at exactly gso_size, so the largest payload at ``router-out`` is
gso_size (:func:`gso_size_from_egress`); the lab cross-checks it against the
value TCP should pick for its settings (``LabSettings.expected_payload``).

**GRO.** The kernel also flushes at NAPI poll ends that no capture shows (on
a veth a poll ends when its ring runs empty, after a forwarded burst; the
receiver may also take two bursts in one poll). Poll ends are not monotone
in their effect (an aggregate that starts earlier hits the 64 KB limit
earlier), so "the kernel just flushes more often" is not enough. Instead the
poll ends are read off the kernel's own aggregates (:func:`kernel_poll_ends`:
an aggregate that ended without PSH although the next segment still fitted)
and handed to the kit as time gaps (:func:`arrivals`, ``--poll-gap 1ms``),
over the packets that reach the receiver. Then every aggregate boundary (start
or end seq) of the kit must be one of the kernel's and vice versa (sets of
seqs, so retransmissions are fine), no kit aggregate may contain a PSH segment
but at its end, and aggregates that coincide must have the same IP total
length, IP ID, flags, TTL and window. PSH and size-limit flushes are never
handed to the kit: it must find those itself. Aggregates over or next to bytes that
egress carried twice (a retransmission) are left out of both directions and
counted (``GroReport.retransmitted``): poll ends are keyed by seq, and a seq
sent twice cannot say which copy a poll started at.

**GRO, issue 3's literal check** (kit boundaries a subset of the kernel's, no
merge across a PSH), run with what is known of the capturing kernel rather than
with the kernel's poll ends: ``--hz`` :data:`LAB_HZ` (its budget-exhausted polls
flush everything) and ``--poll-gap`` :func:`burst_poll_gap_ns` (the receiver's
veth ring runs empty between the router's forwarded bursts). Known miss: after a
budget-exhausted poll, ``net_rx_action`` puts the NAPI behind the NAPIs
scheduled meanwhile (``list_splice_tail(&repoll, ...)`` after ``sd->poll_list``);
on the lab's one-CPU chain those carry the receiver's ACK to the sender, whose
next burst is then queued before the repoll, so the leftover packets and the
next burst share one poll, which no capture gap shows.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from ..codes import PSH
from .packets import ip_to_key, read_headers

LAB_HZ = 250          # CONFIG_HZ of the kernel that made data/captures (README: Linux 6.18.44, HZ 250)
_SEG_FIELDS = ("payload_len", "flags", "ip_len")
_GRO_FIELDS = ("ip_len", "ip_id", "flags", "ttl", "window")


def _tuples(t) -> np.ndarray:
    return np.stack([t.src_ip.astype(np.int64), t.sport.astype(np.int64),
                     t.dst_ip.astype(np.int64), t.dport.astype(np.int64)], axis=1)


def _data(t):
    return t[(t.direction == 0) & ((t.payload_len > 0) | ((t.flags & 0x03) != 0))]


# ``gro``'s poll gap and options that end a NAPI poll exactly at the 1 s shifts :func:`arrivals` writes, and
# nowhere else: a gap in the router's egress capture is not a poll end (under load the
# receiver's softirq runs late and takes packets sent milliseconds apart in one poll).
KERNEL_POLL_GAP_NS = 500_000_000
KERNEL_POLLS_GRO_ARGS = ("--napi-budget", "1000000", "--poll-gap", f"{KERNEL_POLL_GAP_NS // 10**6}ms")


def arrivals(pcap, out, receiver_ip: str, poll_starts: dict | None = None) -> str:
    """Copy the records of an Ethernet pcap addressed to ``receiver_ip`` to ``out``, byte
    for byte (headers and original lengths kept): what the receiver's NAPI gets. A
    router-egress capture also holds the ACKs coming back.

    ``poll_starts`` ({4-tuple: {seq, ...}}, see :func:`kernel_poll_ends`): before each
    data packet starting at one of these seqs, every later timestamp moves one second on,
    so ``offloadkit gro`` with :data:`KERNEL_POLLS_GRO_ARGS` ends a NAPI poll exactly there.
    """
    import struct as _st
    v6 = ":" in receiver_ip
    dst = ip_to_key(receiver_ip) if v6 else ip_to_key(receiver_ip).to_bytes(4, "big")
    # (ethertype, where the destination address sits, where TCP starts): IPv4 (ihl read) or IPv6
    eth, at = (b"\x86\xdd", 38) if v6 else (b"\x08\x00", 30)
    data = open(pcap, "rb").read()
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        endian = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        endian = ">"
    else:
        raise ValueError(f"{pcap}: not a pcap file")
    parts, off, shift = [data[:24]], 24, 0
    while off + 16 <= len(data):
        sec, _, caplen = _st.unpack(endian + "III", data[off:off + 12])
        rec = data[off:off + 16 + caplen]
        buf = rec[16:]
        off += 16 + caplen
        if not (len(buf) >= at + len(dst) and buf[12:14] == eth and buf[at:at + len(dst)] == dst):
            continue
        if poll_starts and buf[20 if v6 else 23] == 6:
            t = 54 if v6 else 14 + (buf[14] & 0x0F) * 4
            if len(buf) >= t + 8:
                sport, dport, seq = _st.unpack("!HHI", buf[t:t + 8])
                key = ((0, sport, 0, dport) if v6 else      # the lab reader's 4-tuple (IPv6: src_ip 0)
                       (int.from_bytes(buf[26:30], "big"), sport, int.from_bytes(buf[30:34], "big"), dport))
                if seq in poll_starts.get(key, ()):
                    shift += 1
        if shift:
            rec = _st.pack(endian + "I", sec + shift) + rec[4:]
        parts.append(rec)
    with open(out, "wb") as g:
        g.write(b"".join(parts))
    return str(out)


def burst_poll_gap_ns(pcap) -> int:
    """A ``--poll-gap`` for the lab's captures: two ticks of the pcap's timestamp clock.

    The router's GSO sends a burst's segments back to back (well under 1 us apart
    on veth), so inside a burst consecutive timestamps differ by 0 or 1 tick; one
    more tick allows for rounding jitter. A longer gap means the router stopped
    sending and the softirq loop moved on, so the receiver's NAPI drained its ring.
    Valid only while a tick is longer than the back-to-back spacing (microsecond
    pcaps), which holds for every committed capture.
    """
    magic = open(pcap, "rb").read(4)
    if magic in (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4"):
        return 2 * 1000
    if magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d"):
        raise ValueError(f"{pcap}: nanosecond timestamps resolve a burst's back-to-back segments, "
                         "so a tick-based poll gap would end a poll at every packet")
    raise ValueError(f"{pcap}: not a pcap file")


def kernel_poll_ends(rcv_pcap, egress_pcap, sender_ip: str | None = None, max_ip_len: int = 65535) -> dict:
    """Where the kernel's receiver must have ended a NAPI poll: {4-tuple: {seq, ...}}.

    An aggregate in the ``rcv`` capture that ends without PSH, although the next
    segment of its flow (from the egress capture) would still have fitted under the
    size limit, was flushed for a reason the wire does not show: a poll end (on veth,
    the ring ran empty). The next aggregate's start seq is returned. Other flush
    reasons (ack, options, flags differing) are rare in a bulk transfer; at such
    points the kit is told to end a poll too, which only hides those rules there.
    """
    ker = _data(read_headers(rcv_pcap, "rcv", sender_ip)[0])
    eg = _data(read_headers(egress_pcap, "router-out", sender_ip)[0])
    ker, eg = ker[ker.payload_len > 0], eg[eg.payload_len > 0]
    nxt = {}
    for i, tup in enumerate(map(tuple, _tuples(eg).tolist())):
        nxt.setdefault((tup, int(eg.seq[i])), int(eg.payload_len[i]))
    out: dict = defaultdict(set)
    for i, tup in enumerate(map(tuple, _tuples(ker).tolist())):
        if ker.flags[i] & PSH:
            continue
        end = (int(ker.seq[i]) + int(ker.payload_len[i])) & 0xFFFFFFFF
        more = nxt.get((tup, end))
        if more is not None and int(ker.ip_len[i]) + more <= max_ip_len:
            out[tup].add(end)
    return dict(out)


def gso_size_from_egress(egress) -> int:
    """gso_size of the router's GSO: the largest data payload seen at its egress."""
    d = egress[(egress.direction == 0) & (egress.payload_len > 0)]
    if not len(d):
        raise ValueError("the egress capture has no data packets: cannot tell the MSS")
    return int(d.payload_len.max())


MAX_EXAMPLES = 8


def _example(rep, text: str) -> None:
    """Keep ``text`` as one of the report's first MAX_EXAMPLES examples."""
    if len(rep.examples) < MAX_EXAMPLES:
        rep.examples.append(text)


def _with_examples(summary: str, examples: list) -> str:
    return summary + ("" if not examples else "\n  " + "\n  ".join(examples[:MAX_EXAMPLES]))


def _field_diff(fields, kit, i: int, ker, j: int) -> str:
    """"f kit X kernel Y, ..." for the fields where kit row i and kernel row j differ ("" if none)."""
    pairs = ((f, int(getattr(kit, f)[i]), int(getattr(ker, f)[j])) for f in fields)
    return ", ".join(f"{f} kit {a} kernel {b}" for f, a, b in pairs if a != b)


@dataclass
class SegmentationReport:
    egress_packets: int = 0
    matched: int = 0
    unexplained: int = 0          # egress packets the kit did not produce
    field_mismatches: int = 0     # matched, but a compared field differs
    partial_groups: int = 0       # super-packets only partly present at egress
    bad_ip_checksums: int = 0     # in the kit's output
    examples: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (self.matched > 0 and self.unexplained == 0 and self.field_mismatches == 0
                and self.partial_groups == 0 and self.bad_ip_checksums == 0)

    def summary(self) -> str:
        s = (f"{self.matched}/{self.egress_packets} egress data packets reproduced; "
             f"{self.unexplained} unexplained, {self.field_mismatches} with differing fields, "
             f"{self.partial_groups} partly forwarded super-packets, "
             f"{self.bad_ip_checksums} bad IP checksums in the kit's output")
        return _with_examples(s, self.examples)


def compare_segmentation(kit_pcap, egress_pcap, sender_ip: str | None = None,
                         extra_fields: tuple[str, ...] = ()) -> SegmentationReport:
    """The kit's ``segment`` output (of the router-ingress capture) vs the router's egress."""
    kit, kit_ip_ok = read_headers(kit_pcap, "kit", sender_ip)
    eg, _ = read_headers(egress_pcap, "router-out", sender_ip)
    return compare_segment_traces(kit, kit_ip_ok, eg, extra_fields)


def compare_segment_traces(kit, kit_ip_ok, eg, extra_fields: tuple[str, ...] = ()) -> SegmentationReport:
    """:func:`compare_segmentation` on Traces: the kit's segments (``kit_ip_ok``: their IP header
    checksums verify; True for IPv6) vs the router's egress. Rows are matched by (4-tuple, seq,
    IP ID, TSval): IPv6 has no IP ID, and a retransmission there differs only in its TSval."""
    rep = SegmentationReport(bad_ip_checksums=int((~kit_ip_ok).sum()))
    if rep.bad_ip_checksums:
        i = int(np.flatnonzero(~kit_ip_ok)[0])
        rep.examples.append(f"kit frame {int(kit.frame[i])}: IP header checksum 0x{int(kit.ip_csum[i]):04x} "
                            f"does not verify")
    kd, ed = _data(kit), _data(eg)
    fields = _SEG_FIELDS + tuple(extra_fields)
    ktup, etup = _tuples(kd), _tuples(ed)
    index = {}
    for i in range(len(kd)):
        index[(*ktup[i].tolist(), int(kd.seq[i]), int(kd.ip_id[i]), int(kd.tsval[i]))] = i
    # kit groups: consecutive packets of one 4-tuple sharing the source packet's timestamp
    group = np.zeros(len(kd), dtype=np.int64)
    for i in range(1, len(kd)):
        same = (kd.time_ns[i] == kd.time_ns[i - 1]) and (ktup[i] == ktup[i - 1]).all()
        group[i] = group[i - 1] + (0 if same else 1)
    seen = np.zeros(len(kd), dtype=bool)
    rep.egress_packets = len(ed)
    for j in range(len(ed)):
        key = (*etup[j].tolist(), int(ed.seq[j]), int(ed.ip_id[j]), int(ed.tsval[j]))
        i = index.get(key)
        if i is None:
            rep.unexplained += 1
            if len(rep.examples) < MAX_EXAMPLES:
                cand = [k for k in index if k[:5] == key[:5]]
                hint = (f"; kit has IP ID {cand[0][5]} at that seq" if cand else "; kit has no segment at that seq")
                rep.examples.append(f"egress frame {int(ed.frame[j])} seq {key[4]} len {int(ed.payload_len[j])} "
                                    f"id {key[5]} not produced by the kit{hint}")
            continue
        seen[i] = True
        rep.matched += 1
        diff = _field_diff(fields, kd, i, ed, j)
        if diff:
            rep.field_mismatches += 1
            _example(rep, f"seq {key[4]} id {key[5]}: {diff}")
    if len(kd):
        any_seen = np.zeros(group[-1] + 1, dtype=bool)
        all_seen = np.ones(group[-1] + 1, dtype=bool)
        np.logical_or.at(any_seen, group, seen)
        np.logical_and.at(all_seen, group, seen)
        partial = any_seen & ~all_seen
        rep.partial_groups = int(partial.sum())
        for g in np.flatnonzero(partial)[:3]:
            miss = np.flatnonzero((group == g) & ~seen)
            rep.examples.append(f"kit segments seq {[int(kd.seq[k]) for k in miss[:4]]} of one super-packet "
                                f"are missing at egress while its other segments are there")
    return rep


@dataclass
class GroReport:
    kit_aggregates: int = 0
    kernel_aggregates: int = 0
    kit_only_boundaries: int = 0      # boundaries the kit has and the kernel does not
    kernel_only_boundaries: int = 0   # boundaries the kernel has and the kit does not
    psh_crossings: int = 0            # kit aggregates with a PSH segment inside
    kernel_psh_crossings: int = 0     # the same for the kernel (sanity of the capture)
    coinciding: int = 0
    field_mismatches: int = 0
    retransmitted: int = 0            # aggregates (kit + kernel) over bytes egress carried twice: not compared
    kit_sizes: dict = field(default_factory=dict)
    kernel_sizes: dict = field(default_factory=dict)
    examples: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (self.kit_aggregates > 0 and self.kit_only_boundaries == 0 and self.psh_crossings == 0
                and self.field_mismatches == 0)

    @property
    def exact(self) -> bool:
        """The kit's aggregates are the kernel's, boundary for boundary."""
        return self.ok and self.kernel_only_boundaries == 0

    def summary(self) -> str:
        s = (f"kit {self.kit_aggregates} aggregates, kernel {self.kernel_aggregates}; "
             f"{self.kit_only_boundaries} kit-only and {self.kernel_only_boundaries} kernel-only boundaries, "
             f"{self.psh_crossings} merges across PSH, "
             f"{self.coinciding} identical aggregates of which {self.field_mismatches} differ in headers; "
             f"{self.retransmitted} over retransmitted bytes not compared")
        return _with_examples(s, self.examples)


def _sizes(d) -> dict:
    v, c = np.unique(d.payload_len, return_counts=True)
    order = np.argsort(-c)[:8]
    return {int(v[k]): int(c[k]) for k in order}


def _sent_twice(spans: list) -> list:
    """The byte ranges ``[s, e)`` of one flow that two egress segments both carried, merged."""
    out, reach = [], None
    for s, e, _ in sorted(spans):
        if reach is not None and s < reach:
            lo, hi = s, min(e, reach)
            if out and lo <= out[-1][1]:
                out[-1][1] = max(out[-1][1], hi)
            else:
                out.append([lo, hi])
        reach = e if reach is None else max(reach, e)
    return out


def _touches(ranges: list, s: int, e: int) -> bool:
    """``[s, e)`` overlaps or adjoins one of ``ranges``."""
    return any(lo <= e and s <= hi for lo, hi in ranges)


def compare_gro(kit_pcap, rcv_pcap, egress_pcap, sender_ip: str | None = None) -> GroReport:
    """The kit's ``gro`` output (of the router-egress capture) vs the receiver's capture."""
    kit = _data(read_headers(kit_pcap, "kit", sender_ip)[0])
    ker = _data(read_headers(rcv_pcap, "rcv", sender_ip)[0])
    eg = _data(read_headers(egress_pcap, "router-out", sender_ip)[0])
    kit, ker, eg = (t[t.payload_len > 0] for t in (kit, ker, eg))
    rep = GroReport(kit_aggregates=len(kit), kernel_aggregates=len(ker),
                    kit_sizes=_sizes(kit), kernel_sizes=_sizes(ker))

    # sequence numbers relative to each flow's first egress data byte (no 2^32 wrap inside a run)
    base = {}
    for i, tup in enumerate(map(tuple, _tuples(eg).tolist())):
        base.setdefault(tup, int(eg.seq[i]))

    def spans(t):
        tup = _tuples(t)
        out = defaultdict(list)
        for i in range(len(t)):
            key = tuple(tup[i].tolist())
            s = (int(t.seq[i]) - base.get(key, 0)) & 0xFFFFFFFF
            out[key].append((s, s + int(t.payload_len[i]), i))
        return out

    ks, rs, es = spans(kit), spans(ker), spans(eg)
    twice = {tup: _sent_twice(sp) for tup, sp in es.items()}

    def checked(table, tup):
        """One flow's aggregates that are compared: not over, nor next to, bytes egress carried twice."""
        return [x for x in table.get(tup, []) if not _touches(twice.get(tup, ()), x[0], x[1])]
    rep.retransmitted = sum(len(sp) - len(checked(t, tup)) for t in (ks, rs) for tup, sp in t.items())

    def psh_ends_of(tup):
        """Ends of the egress segments with PSH set in one flow, sorted."""
        return np.array(sorted({e for s, e, i in es.get(tup, []) if eg.flags[i] & PSH}), dtype=np.int64)

    for tup, kl in ks.items():
        rl = rs.get(tup, [])
        r_starts = {s for s, _, _ in rl}
        r_ends = {e for _, e, _ in rl}
        r_span = {(s, e): i for s, e, i in rl}
        lo = min((s for s, _, _ in rl), default=None)
        hi = max((e for _, e, _ in rl), default=None)
        psh_ends = psh_ends_of(tup)
        for s, e, i in checked(ks, tup):
            if lo is not None and lo <= s and e <= hi:  # inside what the receiver captured
                for b, have, what in ((s, r_starts, "start"), (e, r_ends, "end")):
                    if b not in have:
                        rep.kit_only_boundaries += 1
                        _example(rep, f"kit aggregate seq {s}:{e} ({e - s} bytes): the kernel has "
                                      f"no aggregate {what}ing at {b}")
            k = np.searchsorted(psh_ends, s, side="right")
            if k < len(psh_ends) and psh_ends[k] < e:
                rep.psh_crossings += 1
                _example(rep, f"kit aggregate seq {s}:{e} merges past a PSH segment ending at {int(psh_ends[k])}")
            j = r_span.get((s, e))
            if j is not None:
                rep.coinciding += 1
                diff = _field_diff(_GRO_FIELDS, kit, i, ker, j)
                if diff:
                    rep.field_mismatches += 1
                    _example(rep, f"aggregate seq {s}:{e}: {diff}")
    for tup, rl in rs.items():
        kl = ks.get(tup, [])
        k_starts, k_ends = {s for s, _, _ in kl}, {e for _, e, _ in kl}
        lo = min((s for s, _, _ in kl), default=None)
        hi = max((e for _, e, _ in kl), default=None)
        for s, e, _ in checked(rs, tup):
            if lo is not None and lo <= s and e <= hi:
                for b, have, what in ((s, k_starts, "start"), (e, k_ends, "end")):
                    if b not in have:
                        rep.kernel_only_boundaries += 1
                        _example(rep, f"kernel aggregate seq {s}:{e} ({e - s} bytes): the kit has "
                                      f"no aggregate {what}ing at {b}")
        psh_ends = psh_ends_of(tup)
        for s, e, _ in rl:
            k = np.searchsorted(psh_ends, s, side="right")
            if k < len(psh_ends) and psh_ends[k] < e:
                rep.kernel_psh_crossings += 1
    return rep
