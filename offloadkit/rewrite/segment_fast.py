"""The numba half of ``rewrite.segment``: the output records, segments of plain Ethernet/IPv4/TCP written here.

:func:`build_segments` walks the input records in order and writes into one
byte buffer: a record that is not a super-packet byte for byte; a dropped one
not at all; the segments of a fast-decoded super-packet (Ethernet, no FCS, no
VLAN, IPv4, no tunnel) patched as ``rewrite.segment._segment_record`` patches
them (IP total length, ID and header checksum; TCP seq, flags and checksum,
over the captured payload bytes); those of any other super-packet copied from
the bytes Python built (``side``).
"""
from __future__ import annotations

import numpy as np
from ..packet.jit import njit

from ..codes import CSUM_PARTIAL
from ..packet.csum import csum_bytes, fold_nb


@njit(cache=True)
def _put16(out, p, v):
    out[p] = (v >> 8) & 0xFF
    out[p + 1] = v & 0xFF


@njit(cache=True)
def _segment(data, b, cap, ihl, thl, seq0, pay, ip_len, ip_id, seq, flags, partial, out, p, write):
    """One segment of the super-packet at ``data[b:b + cap]`` into ``out[p:]``: (captured, original length)."""
    t = 14 + ihl
    offset = (seq - seq0) & 0xFFFFFFFF
    have = max(cap - t - thl - offset, 0)
    known = min(pay, have)
    c = t + thl + known
    if not write:
        return c, 14 + ip_len
    out[p:p + t + thl] = data[b:b + t + thl]
    h = p + 14
    _put16(out, h + 2, ip_len if ip_len <= 0xFFFF else 0)
    _put16(out, h + 4, ip_id)
    _put16(out, h + 10, 0)
    _put16(out, h + 10, (~fold_nb(csum_bytes(out, h, h + ihl))) & 0xFFFF)
    q = p + t
    for k in range(4):
        out[q + 4 + k] = (seq >> (8 * (3 - k))) & 0xFF
    out[q + 12] = (out[q + 12] & 0xFE) | ((flags >> 8) & 1)
    out[q + 13] = flags & 0xFF
    _put16(out, q + 16, 0)
    out[q + thl:q + thl + known] = data[b + t + thl + offset:b + t + thl + offset + known]
    ln = thl + pay
    pseudo = csum_bytes(out, h + 12, h + 20) + 6 + (ln >> 16) + (ln & 0xFFFF)
    if partial:
        check = fold_nb(pseudo)
    else:
        check = (~fold_nb(pseudo + csum_bytes(out, q, q + thl) + csum_bytes(out, q + thl, q + thl + known))) & 0xFFFF
    _put16(out, q + 16, check)
    return c, 14 + ip_len


@njit(cache=True)
def build_segments(data, off, cap, orig, fast, first, count, dropped, ip_hlen, tcp_hlen, seq0,
                   s_pay, s_len, s_id, s_seq, s_flags, s_csum, side, side_off, side_cap, side_orig,
                   out, o_off, o_cap, o_orig, o_src, write):
    """The output records (when ``write``; else their sizes): returns (records, bytes).

    Input i: count[i] segments from row first[i] of the segment columns ``s_*`` (0: copied),
    dropped[i] left out; fast[i]: written here, else from ``side`` (indexed by segment row)."""
    p = np.int64(0)
    m = 0
    for i in range(len(off)):
        if dropped[i]:
            continue
        if count[i] == 0:
            c, o = cap[i], orig[i]
            if write:
                out[p:p + c] = data[off[i]:off[i] + c]
                o_off[m], o_cap[m], o_orig[m], o_src[m] = p, c, o, i
            p += c
            m += 1
            continue
        for j in range(first[i], first[i] + count[i]):
            if fast[i]:
                c, o = _segment(data, off[i], cap[i], np.int64(ip_hlen[i]), np.int64(tcp_hlen[i]), np.int64(seq0[i]),
                                np.int64(s_pay[j]), np.int64(s_len[j]), np.int64(s_id[j]), np.int64(s_seq[j]),
                                np.int64(s_flags[j]), s_csum[j] == CSUM_PARTIAL, out, p, write)
            else:
                c, o = side_cap[j], side_orig[j]
                if write:
                    out[p:p + c] = side[side_off[j]:side_off[j] + c]
            if write:
                o_off[m], o_cap[m], o_orig[m], o_src[m] = p, c, o, i
            p += c
            m += 1
    return m, p
