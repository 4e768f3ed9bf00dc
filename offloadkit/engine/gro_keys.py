"""Flow and option keys of GRO's rows: hashes of the fields the kernel compares (numba).

``keys_kernel`` gives each row a tuple hash (addresses and ports: the RSS hash
that picks a GRO bucket), a flow hash (the tuple plus VLAN tag, VNI, outer UDP
checksum zero/non-zero, the IPv6 flow label and hinted extension-header identity: what
``gro_rules.gro_list_prepare`` compares) and an option hash (the TCP option
bytes: what ``gro_rules.tcp_gro_receive_flush`` compares). ``dense_ids`` turns
hashes into dense ids. Used by ``engine.gro`` and ``engine.lro``.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _mix(h, v):
    """Fold ``v`` into hash ``h`` (both uint64): one multiply-xorshift step."""
    x = (h ^ v) * np.uint64(0x9E3779B97F4A7C15)
    return x ^ (x >> np.uint64(29))


@njit(cache=True, nogil=True)
def _final(h):
    """splitmix64's finaliser: spreads every input bit over the whole hash."""
    h ^= h >> np.uint64(30)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(27)
    h *= np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


@njit(cache=True, nogil=True, inline="always")
def ipv6_gro_flow_word(flow_label):
    """What ``ipv6_gro_receive`` requires equal in the first header word besides the version: the flow
    label (``first_word & htonl(0xF00FFFFF)``; a differing traffic class only flushes, see ``netk``)."""
    return np.uint64(np.int64(flow_label) & 0xFFFFF) | np.uint64(1 << 20)


@njit(cache=True, nogil=True, inline="always")
def _ports_final(h, sport, dport):
    return _final(_mix(h, np.uint64(sport) | (np.uint64(dport) << np.uint64(16))))


@njit(cache=True, nogil=True, inline="always")
def tuple_hash_v4(src, dst, sport, dport):
    """The tuple hash (RSS bucket) of an IPv4 row: what ``keys_kernel`` gives it."""
    h = _mix(_mix(np.uint64(7), np.uint64(4)), np.uint64(src) | (np.uint64(dst) << np.uint64(32)))
    return _ports_final(h, sport, dport)


@njit(cache=True, nogil=True, inline="always")
def flow_hash(th, v6, flow_label, vlan, vni, outer_nz, extra):
    """The flow hash of a row from its tuple hash (vlan and vni -1 when absent)."""
    f = _mix(th, np.uint64(np.int64(vlan) + 1))
    if v6:
        f = _mix(f, ipv6_gro_flow_word(flow_label))
    f = _mix(f, np.uint64(np.int64(vni) + 1) | (np.uint64(outer_nz) << np.uint64(40)))
    return _final(_mix(f, extra))


@njit(cache=True, nogil=True, inline="always")
def _row_hashes(i, ver, src, dst, src6, dst6, flow_label, sport, dport, vlan, vni, outer_nz, extra,
                hlen, mss, sackok, ts, tsval, tsecr, wscale, sack_n, sack):
    """(tuple hash, flow hash, option hash) of row i; vlan/vni/wscale are -1 when absent."""
    if ver[i] == 6:
        h = _mix(np.uint64(7), np.uint64(ver[i]))
        for k in range(16):
            h = _mix(h, np.uint64(src6[i, k]) | (np.uint64(dst6[i, k]) << np.uint64(8)))
        th = _ports_final(h, sport[i], dport[i])
    else:
        th = tuple_hash_v4(src[i], dst[i], sport[i], dport[i])
    fk = flow_hash(th, ver[i] == 6, flow_label[i], vlan[i], vni[i], outer_nz, extra)
    o = _mix(np.uint64(11), np.uint64(hlen[i]) | (np.uint64(mss[i]) << np.uint64(8))
             | (np.uint64(sackok[i]) << np.uint64(24)) | (np.uint64(ts[i]) << np.uint64(25))
             | (np.uint64(np.int64(wscale[i]) + 1) << np.uint64(32)) | (np.uint64(sack_n[i]) << np.uint64(48)))
    if ts[i]:
        o = _mix(o, np.uint64(tsval[i]) | (np.uint64(tsecr[i]) << np.uint64(32)))
    for k in range(2 * min(np.int64(sack_n[i]), 4)):
        o = _mix(o, np.uint64(sack[i, k]))
    return th, fk, _final(o)


@njit(cache=True, nogil=True)
def keys_kernel(ver, src, dst, src6, dst6, flow_label, sport, dport, vlan, vni, encap_col, outer_csum, h_flow,
                h_opt, hlen, mss, sackok, ts, tsval, tsecr, wscale, sack_n, sack, th, fk, ok):
    """Tuple hash, flow hash and option hash of every row (h_flow/h_opt: hints, empty when absent).

    A row whose hashed fields equal the previous row's reuses its hashes (bursts of
    one flow, equal timestamps): same values, a fraction of the multiplications.
    """
    has_flow = len(h_flow) > 0
    has_opt = len(h_opt) > 0
    for i in range(len(ver)):
        j = i - 1
        same_flow = (j >= 0 and ver[i] == ver[j] and sport[i] == sport[j] and dport[i] == dport[j]
                     and vlan[i] == vlan[j] and vni[i] == vni[j] and encap_col[i] == encap_col[j]
                     and outer_csum[i] == outer_csum[j] and (not has_flow or h_flow[i] == h_flow[j]))
        if same_flow:
            if ver[i] == 6:
                same_flow = flow_label[i] == flow_label[j]
                for k in range(16):
                    if src6[i, k] != src6[j, k] or dst6[i, k] != dst6[j, k]:
                        same_flow = False
                        break
            else:
                same_flow = src[i] == src[j] and dst[i] == dst[j]
        same_opt = (has_opt or (j >= 0 and sack_n[i] == 0 and sack_n[j] == 0 and hlen[i] == hlen[j]
                                and mss[i] == mss[j] and sackok[i] == sackok[j] and ts[i] == ts[j]
                                and wscale[i] == wscale[j] and tsval[i] == tsval[j] and tsecr[i] == tsecr[j]))
        if same_flow and same_opt:
            th[i] = th[j]
            fk[i] = fk[j]
            ok[i] = h_opt[i] if has_opt else ok[j]
            continue
        vx = (encap_col[i] & 8) != 0 or vni[i] >= 0
        onz = vx and outer_csum[i] > 0
        extra = h_flow[i] if has_flow else np.uint64(0)
        a, b, c = _row_hashes(i, ver, src, dst, src6, dst6, flow_label, sport, dport, vlan, vni, onz, extra,
                              hlen, mss, sackok, ts, tsval, tsecr, wscale, sack_n, sack)
        th[i] = a
        fk[i] = b
        ok[i] = h_opt[i] if has_opt else c


@njit(cache=True, nogil=True)
def dense_ids(h):
    """Dense ids 0..k-1 for the distinct values of ``h`` (first-seen order); returns (ids, k)."""
    ids, _, _, k = dense_ids_into(h, np.zeros(1024, np.uint64), np.full(1024, -1, np.int64), 0)
    return ids, k


@njit(cache=True, nogil=True)
def dense_ids_into(h, keys, vals, k):
    """:func:`dense_ids` continuing a table (``keys``, ``vals``: a power-of-two size, ``k`` ids
    given so far): returns (ids, keys, vals, k), the table possibly grown (chunks of one stream).

    Open addressing in a table kept at most half full, grown by rehashing, so
    that a few flows stay in cache whatever the trace length.
    """
    n = len(h)
    size = len(keys)
    mask = np.uint64(size - 1)
    ids = np.empty(n, np.int64)
    for i in range(n):
        j = h[i] & mask
        while True:
            if vals[j] < 0:
                keys[j] = h[i]
                vals[j] = k
                ids[i] = k
                k += 1
                if 2 * k > size:
                    size *= 2
                    mask = np.uint64(size - 1)
                    nkeys = np.zeros(size, np.uint64)
                    nvals = np.full(size, -1, np.int64)
                    for q in range(len(keys)):
                        if vals[q] >= 0:
                            jj = keys[q] & mask
                            while nvals[jj] >= 0:
                                jj = (jj + np.uint64(1)) & mask
                            nkeys[jj] = keys[q]
                            nvals[jj] = vals[q]
                    keys = nkeys
                    vals = nvals
                break
            if keys[j] == h[i]:
                ids[i] = vals[j]
                break
            j = (j + np.uint64(1)) & mask
    return ids, keys, vals, k
