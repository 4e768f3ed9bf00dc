"""GRO's per-row preparation (numba): bucket, IP-layer verdicts, checksum state and validation.

``prep_row`` is the rule for one row; ``prep_kernel`` runs it over Trace columns
(``engine.gro.prepare``), ``rewrite.gro_fast.plain_prep`` over a capture's decoded records.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from . import checksum


@njit(cache=True, nogil=True, inline="always")
def prep_row(v4, vx, outer, th, gso_size, gso_segs, l2, ip_len, ip_hlen, frag, tos, ttl, df, hlen, plen,
             csum_state, csum_level, csum_bad, ipok, noh, soft_hint, onet, rx_mode, enabled, tunnel_old, nbuckets,
             hash_zero):
    """One row's GRO bucket, IP-layer verdicts, checksum state and validation: (bucket, kind, soft, netk,
    gso, pcnt, base_len, encap, state, level, state after, level after, refused, pass bytes).

    ``ipok``: the IPv4 header checksum verdict; ``noh``/``soft_hint``: the capture's hints;
    ``outer``: the outer UDP checksum (0: none); ``onet``: the outer IPv4 key (-1: none)."""
    bucket = 0 if hash_zero else np.int64((th >> np.uint64(20)) & np.uint64(nbuckets - 1))
    early = noh or (v4 and (ip_hlen != 20 or (frag & 0x3FFF) != 0 or not ipok))
    sf = soft_hint or (v4 and (frag & 0x8000) != 0)
    st, lv = checksum.rx_state_one(rx_mode, csum_state, csum_level, csum_bad, vx)
    st1, lv1, refused, nbytes = st, lv, False, np.int64(0)
    k = 0
    if not enabled:
        k = 3
    elif early:
        k = 1
    elif not sf:
        good, refused, nbytes, st1, lv1 = checksum.validate_one(st, lv, csum_bad, vx, outer, np.int64(hlen) + plen,
                                                                np.int64(ip_len) + 30, tunnel_old)
        if not good:
            k = 2
    netk = np.int32(ttl) | (np.int32(tos) << 8) | ((np.int32(1) if (v4 and df) else 0) << 16)
    g = np.int32(gso_size) if (gso_size > 0 and gso_segs > 1) else np.int32(0)
    pcnt = gso_segs if g > 0 else 1
    base_len = ip_len + max(np.int32(l2) - 14, 0)
    return bucket, k, sf, netk, g, pcnt, base_len, vx or onet >= 0, st, lv, st1, lv1, refused, nbytes


@njit(cache=True, nogil=True)
def prep_kernel(ver, src, dst, vni, encap_col, outer_csum, hlen, ip_hlen, frag, tos, ttl, df, ip_len, ip_id,
                 ip_csum, l2, gso_size, gso_segs, plen, csum_state, csum_level, csum_bad,
                 h_noh, h_soft, h_ipok, h_onet, rx_mode, verify_ip, enabled, tunnel_old, nbuckets, hash_zero,
                 th, bucket, kind, soft, netk, gso_in, pcnt, base_len, encap, st0, lv0, st1, lv1, refused, pass_bytes):
    """One pass over the rows: :func:`prep_row` of each (the IPv4 header checksum verdict from the
    hint, else from the header fields)."""
    n = len(ver)
    has_noh, has_soft, has_ipok, has_onet = len(h_noh) > 0, len(h_soft) > 0, len(h_ipok) > 0, len(h_onet) > 0
    for i in range(n):
        v4 = ver[i] == 4
        if has_ipok:
            ipok = h_ipok[i]
        elif verify_ip and v4 and ip_csum[i] != 0 and ip_hlen[i] == 20:
            ipok = ip_header_sum(tos[i], ip_len[i], ip_id[i], df[i], frag[i], ttl[i], src[i], dst[i],
                                  ip_csum[i]) == 0xFFFF
        else:
            ipok = True
        (bucket[i], kind[i], soft[i], netk[i], gso_in[i], pcnt[i], base_len[i], encap[i], st0[i], lv0[i], st1[i],
         lv1[i], refused[i], pass_bytes[i]) = prep_row(
            v4, (encap_col[i] & 8) != 0 or vni[i] >= 0, max(np.int64(outer_csum[i]), 0), th[i], gso_size[i],
            gso_segs[i], l2[i], ip_len[i], ip_hlen[i], frag[i], tos[i], ttl[i], df[i], hlen[i], plen[i],
            csum_state[i], csum_level[i], csum_bad[i], ipok, has_noh and h_noh[i], has_soft and h_soft[i],
            h_onet[i] if has_onet else np.int64(-1), rx_mode, enabled, tunnel_old, nbuckets, hash_zero)


@njit(cache=True, nogil=True, inline="always")
def ip_header_sum(tos, ip_len, ip_id, df, frag, ttl, src, dst, check):
    """Folded one's-complement sum of a 20-byte IPv4 TCP header, checksum included (0xFFFF: correct)."""
    s = (np.int64(0x4500) | tos) + (np.int64(ip_len) & 0xFFFF if ip_len <= 0xFFFF else 0) + np.int64(ip_id)
    s += (np.int64(0x4000) if df else 0) | (np.int64(frag) & 0xBFFF)
    s += (np.int64(ttl) << 8) | 6
    s += (np.int64(src) >> 16) + (np.int64(src) & 0xFFFF) + (np.int64(dst) >> 16) + (np.int64(dst) & 0xFFFF)
    s += np.int64(check)
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    return s
