"""A capture's packets through GRO: what ``offloadkit gro`` writes.

Every record is decoded by ``packet.decode``; what the capture tells GRO
(``engine.gro.GroHints``) is read off the decoded layout:

- no GRO handler (delivered at once, unmerged, as the kernel does for protocols
  it has no ``gro_receive`` for): anything that is not TCP over IPv4/IPv6,
  MPLS and PPPoE frames, an IPv6 fragment header, an IPv4 header with options
  on the outer packet of IPIP/VXLAN (``inet_gro_receive``: ``*(u8 *)iph != 0x45``),
  a TCP header that was not captured;
- ``soft_flush`` (``NAPI_GRO_CB(skb)->flush`` from ``inet_gro_receive``): the
  frame's original length disagrees with the IP total length (payload missing
  on the wire, Ethernet padding); IP total length 0 takes the length from the frame;
- ``ip_csum_ok``: the IPv4 header checksums (inner and outer) verify;
- ``flow_key``: what else must be equal for two packets to be one flow (outer
  addresses and UDP source port, outer and inner IPv6 flow label, IPv6 extension
  headers, VLAN tags);
  ``opt_key``: the TCP option bytes, compared byte for byte;
- TCP checksums are verified on the real bytes when the whole segment was
  captured (``csum_bad``); a pseudo-header sum (captured on a host with TX
  offload) counts as right. Header-only records are trusted.

A merged packet is the first packet's headers patched as ``inet_gro_complete``
/ ``tcp4_gro_complete`` do (IP total length, IPv6 payload length, outer IPv4 or IPv6
and UDP lengths, an outer UDP checksum as ``udp_gro_complete`` leaves it (the
pseudo-header sum, or 0), IP header checksums, FIN/PSH ORed in, TCP checksum = the pseudo-header
sum of a CHECKSUM_PARTIAL packet) followed by the merged payload bytes as far
as captured; a packet delivered alone is copied byte for byte.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from .. import codes
from ..engine import checksum
from ..engine.checksum import CsumPasses
from ..engine.gro import (O_FIRST, O_FLOR, O_TIME, GroHints, GroParams, GroState, flow_ids, prepare, run_kernel,
                          validate_passes)
from ..io.batch import Batch
from ..io.records import Record
from ..packet.csum import fold, ip_header_checksum, pseudo_sum, verifies
from ..packet.decode import Layout, decode
from ..packet.link import LINKTYPE_ETHERNET, LINKTYPES, append_fcs
from ..packet.fast import FAST_COLUMNS, decode_eth_ipv4_tcp
from ..trace import FIELDS, ColumnBuffer, Trace
from .gro_fast import MODE_SIDE, build_output, eth_ipv4_hints, group_mode, key_of, plain_prep

HINTS = ("no_handler", "soft_flush", "ip_csum_ok", "opt_key", "flow_key", "outer_net", "outer_id")
NO_GRO_ENCAP = codes.ENC_MPLS | codes.ENC_PPPOE


def _be16(b, o):
    return b[o] << 8 | b[o + 1]


def _length_disagrees(buf: bytes, lay: Layout, ip: int, ver: int) -> bool:
    """inet_gro_receive / ipv6_gro_receive: the frame's length is not the IP packet's."""
    if ver == 4:
        tot = _be16(buf, ip + 2)
        return bool(tot) and lay.orig_len - ip != tot
    plen = _be16(buf, ip + 4)
    return bool(plen) and lay.orig_len - ip - 40 != plen


def _no_handler(row: dict, lay: Layout) -> bool:
    """True when GRO has no handler for this frame (see the module doc)."""
    if lay.tcp < 0 or lay.pay > lay.frame_len or row["ip_len"] - lay.ihl < lay.thl:
        return True
    return bool(row["encap"] & NO_GRO_ENCAP) or lay.frag6


def frame_hints(linktype: int, buf: bytes, orig_len: int, fcs: int = 0):
    """(trace row, hint values, layout or None) of one record for GRO."""
    hint = {"no_handler": True, "soft_flush": False, "ip_csum_ok": True, "opt_key": 0, "flow_key": 0,
            "outer_net": -1, "outer_id": 0}
    got = decode(linktype, buf, orig_len, fcs)
    if isinstance(got, str):
        return {}, hint, None
    row, lay = got
    buf = bytes(buf[:lay.frame_len])
    hlen = LINKTYPES[linktype][1] if linktype != LINKTYPE_ETHERNET else 14
    row["l2_bytes"] = lay.ip - hlen + 14
    row["csum_state"] = codes.CSUM_NONE
    flow = b""
    if lay.tags[0] >= 0:
        flow += buf[lay.tags[0]:lay.tags[1]]
    o = lay.outer
    if o >= 0 and lay.outer_ver == 6 and lay.udp >= 0:     # UDP tunnel over IPv6: ipv6_gro_receive's key
        flow += struct.pack("!I", struct.unpack_from("!I", buf, o)[0] & 0xF00FFFFF) + buf[o + 8:o + 40]
        flow += buf[lay.udp:lay.udp + 2]
    elif o >= 0:
        if lay.outer_ver != 4 or buf[o] != 0x45:
            return row, hint, lay
        hint["ip_csum_ok"] = verifies(buf[o:o + 20])
        flow += buf[o + 12:o + 20]
        if lay.udp >= 0:
            flow += buf[lay.udp:lay.udp + 2]
        else:   # IPIP: the outer header's rules too (ipip_gro_receive -> inet_gro_receive)
            hint["outer_net"] = buf[o + 8] | buf[o + 1] << 8 | ((buf[o + 6] >> 6) & 1) << 16
            hint["outer_id"] = _be16(buf, o + 4)
            hint["soft_flush"] = _length_disagrees(buf, lay, o, 4)
    ip = lay.ip
    if lay.ver == 4:
        if not verifies(buf[ip:ip + lay.ihl]):
            hint["ip_csum_ok"] = False
    else:
        flow += struct.pack("!I", struct.unpack_from("!I", buf, ip)[0] & 0xF00FFFFF)
        if lay.ext6[0] >= 0:
            flow += buf[lay.ext6[0]:lay.ext6[1]]
    hint["soft_flush"] |= _length_disagrees(buf, lay, ip, lay.ver)
    if _no_handler(row, lay):
        return row, hint, lay
    hint["opt_key"] = key_of(buf[lay.tcp + 20:lay.pay])
    hint["flow_key"] = key_of(flow) if flow else 0
    hint["no_handler"] = False
    row["csum_bad"] = bool(row["csum_bad"]) and not hint["soft_flush"]
    return row, hint, lay


HINT_DEFAULTS = {"no_handler": (np.bool_, True), "soft_flush": (np.bool_, False), "ip_csum_ok": (np.bool_, True),
                 "opt_key": (np.uint64, 0), "flow_key": (np.uint64, 0), "outer_net": (np.int64, -1),
                 "outer_id": (np.int64, 0)}


def batch_to_trace(b: Batch, progress=None, fast_path: bool = True, buf: ColumnBuffer | None = None):
    """(Trace, GroHints, fast) for every record of ``b``; records GRO cannot read become pass-through rows.

    Plain Ethernet/IPv4/TCP records are decoded and hinted by numba kernels (``fast``
    True); the others by :func:`frame_hints` (all of them when ``fast_path`` is False: the
    reference the fast path is tested against). progress: a ``commands.progress`` counter.
    ``buf``: the arrays are made in it (valid until its next use)."""
    n = len(b)
    trace, fast = b.decode_plain(fast_path, buf)
    c = trace.columns
    c["frame"][:] = np.arange(n)
    c["time_ns"][:] = b.time_ns
    c["csum_state"][fast] = codes.CSUM_NONE
    h = {}
    for k, (dt, v) in HINT_DEFAULTS.items():
        h[k] = buf.get("hint_" + k, n, dt) if buf is not None else np.empty(n, dt)
        h[k].fill(v)
    eth_ipv4_hints(b.data, b.off, b.cap, b.orig, np.nonzero(fast)[0], c["ip_hlen"], c["tcp_hlen"], c["ip_len"],
                   c["csum_bad"], h["no_handler"], h["soft_flush"], h["ip_csum_ok"], h["opt_key"])
    slow = np.nonzero(~fast)[0]
    if progress is not None:
        progress.update(n - len(slow))
    rows = []
    for i in slow.tolist():
        row, hint, _ = frame_hints(int(b.linktype[i]), b.data[b.off[i]:b.off[i] + b.cap[i]].tobytes(),
                                   int(b.orig[i]), int(b.fcs[i]))
        rows.append(row)
        for k in HINTS:
            h[k][i] = hint[k]
        if progress is not None:
            progress.update(1)
    if rows:
        st = Trace.from_rows(rows) if any(rows) else Trace.empty(len(rows))
        for k, v in st.columns.items():
            if k not in ("frame", "time_ns"):
                c[k][slow] = v
    return trace, GroHints(**h), fast


def merged_record(records: list[Record], layouts: list, rows: list[int], plens, flags: int,
                  time_ns: int) -> Record:
    """A merged packet: the first record's headers patched, the payloads concatenated."""
    first = rows[0]
    rec, lay = records[first], layouts[first]
    buf = bytearray(rec.data[:lay.pay])
    payload = bytearray()
    complete = True
    plen_total = 0
    for r in rows:
        f = layouts[r]
        want = int(plens[r])
        got = records[r].data[f.pay:min(f.pay + want, f.frame_len)]
        plen_total += want
        if complete:
            payload += got
            complete = len(got) == want
    delta = plen_total - int(plens[first])
    ip = lay.ip
    if lay.ver == 4:
        tot = _be16(buf, ip + 2) + delta
        struct.pack_into("!H", buf, ip + 2, tot if tot <= 0xFFFF else 0)
        struct.pack_into("!H", buf, ip + 10, 0)
        struct.pack_into("!H", buf, ip + 10, ip_header_checksum(bytes(buf[ip:ip + lay.ihl])))
        src, dst = bytes(buf[ip + 12:ip + 16]), bytes(buf[ip + 16:ip + 20])
    else:
        pl = _be16(buf, ip + 4) + delta
        struct.pack_into("!H", buf, ip + 4, pl if pl <= 0xFFFF else 0)
        src, dst = bytes(buf[ip + 8:ip + 24]), bytes(buf[ip + 24:ip + 40])
    o = lay.outer
    if o >= 0 and lay.outer_ver == 6:
        pl = _be16(buf, o + 4) + delta
        struct.pack_into("!H", buf, o + 4, pl if pl <= 0xFFFF else 0)
        osrc, odst = bytes(buf[o + 8:o + 24]), bytes(buf[o + 24:o + 40])
    elif o >= 0:
        tot = _be16(buf, o + 2) + delta
        struct.pack_into("!H", buf, o + 2, tot if tot <= 0xFFFF else 0)
        struct.pack_into("!H", buf, o + 10, 0)
        struct.pack_into("!H", buf, o + 10, ip_header_checksum(bytes(buf[o:o + 20])))
        osrc, odst = bytes(buf[o + 12:o + 16]), bytes(buf[o + 16:o + 20])
    if o >= 0 and lay.udp >= 0:       # udp_gro_complete: length; a checksum becomes the pseudo-header sum
        ulen = _be16(buf, lay.udp + 4) + delta
        struct.pack_into("!H", buf, lay.udp + 4, ulen & 0xFFFF)
        if _be16(buf, lay.udp + 6):
            struct.pack_into("!H", buf, lay.udp + 6, fold(pseudo_sum(osrc, odst, ulen, 17)))
    t = lay.tcp
    buf[t + 13] |= flags & (codes.FIN | codes.PSH)
    struct.pack_into("!H", buf, t + 16, fold(pseudo_sum(src, dst, lay.thl + plen_total)))
    data, orig = append_fcs(bytes(buf) + bytes(payload), lay.pay + plen_total, rec.fcs)
    return Record(rec.frame, time_ns, rec.linktype, data, orig, rec.fcs)


@dataclass
class GroRun:
    """What :func:`gro_batch` / :func:`gro_stream` did: the output records (None from a stream: they
    went to ``write``), a GRO reason per input record and the checksum passes (rows: input record
    index; both None from a stream), counts per reason code, records in and out, bytes summed."""

    batch: Batch | None
    reasons: np.ndarray | None
    passes: CsumPasses | None
    counts: np.ndarray
    packets: int = 0
    written: int = 0
    checksum_bytes: int = 0

    @property
    def merged(self) -> int:
        return int(self.counts[codes.GRO_MERGED])

    @property
    def records(self) -> list[Record]:
        return self.batch.records()

    def reason_counts(self) -> dict[str, int]:
        return {codes.GRO_REASON_NAMES[v]: int(self.counts[v]) for v in np.nonzero(self.counts)[0].tolist()}


def gro_chunks(chunks, params: GroParams | None = None, fast_path: bool = True):
    """GRO over a stream of record chunks (one receive queue): yields, per chunk, (the records
    delivered meanwhile, the chunk's reasons, its checksum passes with stream row numbers).

    ``engine.gro.GroState`` carries the held packets from chunk to chunk; their members'
    records are carried too (the merged record is written from them), so the output is
    byte for byte that of one chunk holding the whole capture."""
    params = params or GroParams()
    state = GroState.new(params)
    buf = ColumnBuffer()
    carry, carry_owner = Batch.of_records([]), np.zeros(0, np.int64)
    base = 0
    it = iter(chunks)
    chunk = next(it, None)
    while chunk is not None:
        nxt = next(it, None)
        b = Batch.concat([carry, chunk]) if len(carry) else chunk
        out, reasons, passes, keep, owner = _gro_step(b, len(carry), carry_owner, state, params, nxt is None,
                                                      fast_path, buf)
        yield out, reasons, CsumPasses(passes.place, passes.nbytes, passes.row + base)
        carry, carry_owner = b.take(keep), owner
        base += len(chunk)
        chunk = nxt


def _gro_step(b: Batch, start: int, carry_owner, state, params: GroParams, final: bool, fast_path: bool,
              buf: ColumnBuffer):
    """One chunk ``b`` (rows before ``start``: carried members) through GRO: (output Batch, reasons of
    the new rows, their passes (rows from 0 at ``start``), rows still held, their owners renumbered).
    The per-row arrays are made in ``buf``; what leaves the step is copied out of it."""
    got = plain_prepare(b, params, state, buf) if fast_path else None
    if got is None:
        trace, hints, fast = batch_to_trace(b, None, fast_path, buf)
        prep = prepare(trace, params, hints, state, buf)
        c = trace.columns
    else:
        prep, c, fast = got
    owner = np.empty(len(b), np.int64)
    owner[:start] = carry_owner
    reasons, owner, O = run_kernel(prep, params, state, start, final, owner, buf)
    p = prep["_passes"]
    new = p.row >= start
    passes = CsumPasses(p.place[new], p.nbytes[new], p.row[new] - start)
    del prep
    n, m = len(b), O.shape[1]
    first = O[O_FIRST].copy()
    pos = np.full(n, -1, np.int64)
    pos[first] = np.arange(m)
    out_row = pos[owner]
    held = out_row < 0                                  # members of packets still held
    n_held = int(held.sum())
    members = np.argsort(out_row, kind="stable")[n_held:]
    starts = np.zeros(m + 1, np.int64)
    np.cumsum(np.bincount(out_row[~held] if n_held else out_row, minlength=m), out=starts[1:])
    mode = group_mode(members, starts, fast)
    flags = c["flags"][first].astype(np.int64) | O[O_FLOR]
    times = O[O_TIME].copy()                            # O lives in buf: the output keeps its own
    side = _side_records(b, mode, members, starts, c["payload_len"], flags, times)
    args = (b.data, b.off, b.cap, b.orig, c["l2_bytes"], c["ip_hlen"], c["tcp_hlen"], c["payload_len"], members,
            starts, mode, flags, *side)
    o_off, o_cap, o_orig = (np.empty(m, np.int64) for _ in range(3))
    data = np.empty(int(b.cap.sum()) + len(side[0]), np.uint8)      # no output is longer than its inputs
    size = build_output(*args, data, o_off, o_cap, o_orig, True)
    out = Batch(data[:size], o_off, o_cap, o_orig, times, b.linktype[first], b.fcs[first], b.frame[first])
    keep = np.nonzero(held)[0]
    new_row = np.full(n, -1, np.int64)
    new_row[keep] = np.arange(len(keep))
    state.renumber(new_row)
    return out, reasons[start:], passes, keep, new_row[owner[keep]]


def plain_prepare(b: Batch, params: GroParams, state: GroState, buf: ColumnBuffer):
    """(``engine.gro.prepare``'s arrays, the decoded columns, all-True fast mask) of a chunk whose
    records are all plain Ethernet/IPv4/TCP (``Batch.decode_plain``), in two numba passes (decode,
    ``gro_fast.plain_prep``) and no Trace; None when one is not (then ``batch_to_trace`` decodes it)."""
    n = len(b)
    if not n or (b.linktype != LINKTYPE_ETHERNET).any() or b.fcs.any():
        return None
    c = {k: buf.get("plain_" + k, n, FIELDS[k][0], FIELDS[k][2]) for k in FAST_COLUMNS}
    c["csum_bad"].fill(False)
    status = buf.get("plain_status", n, np.uint8)
    decode_eth_ipv4_tcp(b.data, b.off, b.cap, b.orig, status, *[c[k] for k in FAST_COLUMNS])
    if status.any() or c["encap"].any():
        return None
    p = {k: buf.get("plainprep_" + k, n, dt) for k, dt in (
        ("th", np.uint64), ("fkey", np.uint64), ("optk", np.uint64), ("bucket", np.int32), ("kind", np.int8),
        ("soft", np.bool_), ("netk", np.int32), ("gso", np.int32), ("pcnt", np.int32), ("base_len", np.int32),
        ("encap", np.bool_), ("pass_bytes", np.int64))}
    plain_prep(b.data, b.off, b.cap, b.orig, c["src_ip"], c["dst_ip"], c["sport"], c["dport"], c["ip_hlen"],
               c["tcp_hlen"], c["ip_len"], c["frag"], c["tos"], c["ttl"], c["df"], c["payload_len"], c["csum_bad"],
               checksum.RX_MODE_CODES[params.rx_csum], bool(params.enabled), params.tunnel_rule == "old",
               int(params.buckets), params.rx_hash == "zero", *p.values())
    p["tkey"], p["n_tkeys"] = flow_ids(p.pop("th"), state)
    none = np.zeros(0, np.int64)
    p.update(t_ns=b.time_ns, seq=c["seq"], plen=c["payload_len"], flags=c["flags"], window=c["window"], ack=c["ack"],
             hlen=c["tcp_hlen"], is_v4=np.ones(n, np.bool_), ipid=c["ip_id"], df=c["df"], onet=none, oid=none,
             _passes=validate_passes(p.pop("pass_bytes")))
    return p, c, np.ones(n, np.bool_)


def gro_batch(b: Batch, params: GroParams | None = None, progress=None, fast_path: bool = True) -> GroRun:
    """The records the stack sees after GRO, in delivery order, timestamped when delivered.

    Runs ``engine.gro``'s kernel on the decoded records (its output Trace is not built:
    the records are written from the kernel's output table)."""
    (out, reasons, passes), = gro_chunks([b], params, fast_path)
    if progress is not None:
        progress.update(len(b))
    return GroRun(out, reasons, passes, np.bincount(reasons, minlength=256), len(b), len(out), passes.total_bytes())


def gro_stream(chunks, write, params: GroParams | None = None, progress=None, fast_path: bool = True) -> GroRun:
    """:func:`gro_batch` chunk by chunk: each chunk's output goes to ``write`` as it is made;
    returns the totals (no records, no per-record reasons: memory follows the chunk)."""
    total = GroRun(None, None, None, np.zeros(256, np.int64))
    for out, reasons, passes in gro_chunks(chunks, params, fast_path):
        write(out)
        total.counts += np.bincount(reasons, minlength=256)
        total.checksum_bytes += passes.total_bytes()
        total.packets += len(reasons)
        total.written += len(out)
        if progress is not None:
            progress.update(len(reasons))
    return total


def _side_records(b: Batch, mode, members, starts, plens, flags, times):
    """(bytes, offset, captured, original length) per output of the merges Python builds (MODE_SIDE)."""
    m = len(mode)
    s_off, s_cap, s_orig = (np.zeros(m, np.int64) for _ in range(3))
    parts = []
    pos = 0
    for k in np.nonzero(mode == MODE_SIDE)[0].tolist():
        rows = members[starts[k]:starts[k + 1]].tolist()
        recs = {r: b.record(r) for r in rows}
        lays = {r: decode(recs[r].linktype, recs[r].data, recs[r].orig_len, recs[r].fcs)[1] for r in rows}
        rec = merged_record(recs, lays, rows, plens, int(flags[k]), int(times[k]))
        parts.append(rec.data)
        s_off[k], s_cap[k], s_orig[k] = pos, len(rec.data), rec.orig_len
        pos += len(rec.data)
    side = np.frombuffer(b"".join(parts), np.uint8) if parts else np.zeros(0, np.uint8)
    return side, s_off, s_cap, s_orig


def gro_records(records: list[Record], params: GroParams | None = None) -> GroRun:
    """:func:`gro_batch` of a list of records."""
    return gro_batch(Batch.of_records(records), params)
