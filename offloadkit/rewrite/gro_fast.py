"""The numba half of ``rewrite.gro``: GRO's hints and the merged records of plain Ethernet/IPv4/TCP frames.

``rewrite.gro`` decodes the records of an Ethernet capture (no FCS, no VLAN
tag, no tunnel) with the fast decoder (``io.capture.decode_eth_ipv4_tcp``);
:func:`eth_ipv4_hints` reads GRO's hints off their bytes exactly as
``rewrite.gro.frame_hints`` does for the rest, and :func:`build_output` writes
the output records (copies, merges patched as ``inet_gro_complete`` /
``tcp4_gro_complete``, and records Python built) into one byte buffer.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..codes import FIN, PSH
from ..packet.csum import csum_bytes, fold_nb
from ..engine.gro_prep import prep_row
from ..engine.gro_keys import flow_hash, tuple_hash_v4
from ..packet.decode import MAX_ORIG_LEN

MODE_COPY, MODE_MERGE, MODE_SIDE = 0, 1, 2


@njit(cache=True)
def bytes_key(data, start, end):
    """A 64-bit identity of ``data[start:end]`` (GRO compares option bytes and flow bytes by it)."""
    h = np.uint64(0xCBF29CE484222325) ^ np.uint64(end - start)
    for i in range(start, end):
        h = (h ^ np.uint64(data[i])) * np.uint64(0x100000001B3)
    h ^= h >> np.uint64(31)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    return h ^ (h >> np.uint64(29))


def key_of(b: bytes) -> int:
    """:func:`bytes_key` of a bytes object."""
    return int(bytes_key(np.frombuffer(bytes(b), np.uint8), 0, len(b)))


@njit(cache=True, inline="always")
def eth_ipv4_hint(data, b, cap, orig, ihl, thl, tot, csum_bad):
    """GRO's hints of one fast-decoded record at ``data[b:]`` (IPv4 header at byte 14), as
    ``frame_hints`` gives them: (no handler, soft flush, IP checksum ok, option key, csum_bad)."""
    ipok = fold_nb(csum_bytes(data, b + 14, b + 14 + ihl)) == 0xFFFF
    o = min(max(orig, cap), MAX_ORIG_LEN)
    sf = tot != 0 and o - 14 != tot
    pay = 14 + ihl + thl
    if pay > cap or tot - ihl < thl:
        return True, sf, ipok, np.uint64(0), csum_bad
    return False, sf, ipok, bytes_key(data, b + 14 + ihl + 20, b + pay), csum_bad and not sf


@njit(cache=True)
def eth_ipv4_hints(data, off, cap, orig, rows, ip_hlen, tcp_hlen, ip_len, csum_bad,
                   no_handler, soft, ipok, optk):
    """GRO's hints of the fast-decoded ``rows`` (:func:`eth_ipv4_hint` of each)."""
    for j in range(len(rows)):
        i = rows[j]
        noh, soft[i], ipok[i], k, bad = eth_ipv4_hint(data, off[i], cap[i], orig[i], np.int64(ip_hlen[i]),
                                                      np.int64(tcp_hlen[i]), np.int64(ip_len[i]), csum_bad[i])
        no_handler[i] = noh
        if not noh:
            optk[i] = k
            csum_bad[i] = bad


@njit(cache=True, nogil=True)
def plain_prep(data, off, cap, orig, src, dst, sport, dport, ip_hlen, tcp_hlen, ip_len, frag, tos, ttl, df,
               payload_len, csum_bad, rx_mode, enabled, tunnel_old, nbuckets, hash_zero,
               th, fkey, optk, bucket, kind, soft, netk, gso, pcnt, base_len, encap, pass_bytes):
    """``engine.gro.prepare`` of records that are all fast-decoded (Ethernet, IPv4, no tag or tunnel), in
    one pass from the decoder's columns: the hints (:func:`eth_ipv4_hint`), keys and ``prep_row`` of each,
    with the values ``rewrite.gro.batch_to_trace`` + ``prepare`` give such a row."""
    for i in range(len(off)):
        ihl = np.int64(ip_hlen[i])
        thl = np.int64(tcp_hlen[i])
        tot = np.int64(ip_len[i])
        noh, sf, ipok, k, bad = eth_ipv4_hint(data, off[i], cap[i], orig[i], ihl, thl, tot, csum_bad[i])
        t = tuple_hash_v4(src[i], dst[i], sport[i], dport[i])
        th[i] = t
        fkey[i] = flow_hash(t, False, 0, -1, -1, False, np.uint64(0))
        optk[i] = k
        (bucket[i], kind[i], soft[i], netk[i], gso[i], pcnt[i], base_len[i], encap[i], _, _, _, _, _,
         pass_bytes[i]) = prep_row(True, False, 0, t, 0, 0, 14, tot, ihl, frag[i], tos[i], ttl[i], df[i], thl,
                                   np.int64(payload_len[i]), 0, 0, bad, ipok, noh, sf, -1, rx_mode, enabled,
                                   tunnel_old, nbuckets, hash_zero)


@njit(cache=True)
def _merge(data, off, cap, l2, ip_hlen, tcp_hlen, plen, members, s, e, flags, out, p, write):
    """One merged record at ``out[p:]`` (written when ``write``): (captured bytes, original length)."""
    first = members[s]
    b = off[first]
    ip = np.int64(l2[first])
    ihl = np.int64(ip_hlen[first])
    t = ip + ihl
    thl = np.int64(tcp_hlen[first])
    pay = t + thl
    if write:
        out[p:p + pay] = data[b:b + pay]
    q = p + pay
    total = np.int64(0)
    complete = True
    for j in range(s, e):
        r = members[j]
        pr = np.int64(l2[r]) + np.int64(ip_hlen[r]) + np.int64(tcp_hlen[r])
        want = np.int64(plen[r])
        have = max(min(pr + want, cap[r]) - pr, 0)
        total += want
        if complete:
            if write:
                out[q:q + have] = data[off[r] + pr:off[r] + pr + have]
            q += have
            complete = have == want
    if write:
        delta = total - np.int64(plen[first])
        h = p + ip
        tot = ((np.int64(out[h + 2]) << 8) | np.int64(out[h + 3])) + delta
        if tot > 0xFFFF:
            tot = 0
        out[h + 2] = tot >> 8
        out[h + 3] = tot & 0xFF
        out[h + 10] = 0
        out[h + 11] = 0
        c = (~fold_nb(csum_bytes(out, h, h + ihl))) & 0xFFFF
        out[h + 10] = c >> 8
        out[h + 11] = c & 0xFF
        out[p + t + 13] |= flags & (FIN | PSH)
        ln = thl + total
        ps = fold_nb(csum_bytes(out, h + 12, h + 20) + 6 + (ln >> 16) + (ln & 0xFFFF))
        out[p + t + 16] = ps >> 8
        out[p + t + 17] = ps & 0xFF
    return q - p, pay + total


@njit(cache=True)
def build_output(data, off, cap, orig, l2, ip_hlen, tcp_hlen, plen, members, starts, mode, flags,
                 side, side_off, side_cap, side_orig, out, o_off, o_cap, o_orig, write):
    """Every output record into ``out`` (when ``write``; else only sizes): returns the bytes needed.

    members[starts[k]:starts[k + 1]]: the input rows of output k in arrival order; mode[k]:
    MODE_COPY (its one record), MODE_MERGE (merged here), MODE_SIDE (``side`` bytes Python built)."""
    p = np.int64(0)
    for k in range(len(mode)):
        s, e = starts[k], starts[k + 1]
        if mode[k] == MODE_MERGE:
            c, o = _merge(data, off, cap, l2, ip_hlen, tcp_hlen, plen, members, s, e, np.int64(flags[k]), out, p,
                          write)
        elif mode[k] == MODE_SIDE:
            c, o = side_cap[k], side_orig[k]
            if write:
                out[p:p + c] = side[side_off[k]:side_off[k] + c]
        else:
            i = members[s]
            c, o = cap[i], orig[i]
            if write:
                out[p:p + c] = data[off[i]:off[i] + c]
        o_off[k] = p
        o_cap[k] = c
        o_orig[k] = o
        p += c
    return p


@njit(cache=True)
def group_mode(members, starts, fast):
    """MODE_COPY for one-record outputs, MODE_MERGE when every merged record is fast-decoded, else MODE_SIDE."""
    m = len(starts) - 1
    mode = np.empty(m, np.uint8)
    for k in range(m):
        s, e = starts[k], starts[k + 1]
        if e - s == 1:
            mode[k] = MODE_COPY
            continue
        mode[k] = MODE_MERGE
        for j in range(s, e):
            if not fast[members[j]]:
                mode[k] = MODE_SIDE
                break
    return mode
