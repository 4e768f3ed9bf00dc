"""The numba decoder of plain Ethernet(+VLAN)/IPv4/TCP frames, over a capture's record arrays.

``decode_eth_ipv4_tcp`` fills Trace columns (``FAST_COLUMNS``) for the records it
can read and leaves every other record (status 2) to ``packet.decode``, the one
decoder it is tested against (tests/io, tests/rewrite); status 1 is not TCP, 3 not IP.
"""
from __future__ import annotations

import numpy as np
from .jit import njit

from .csum import fold_nb


@njit(cache=True)
def _be16n(data, o):
    return (np.int64(data[o]) << 8) | np.int64(data[o + 1])


@njit(cache=True)
def _be32n(data, o):
    return (np.int64(data[o]) << 24) | (np.int64(data[o + 1]) << 16) | (np.int64(data[o + 2]) << 8) \
        | np.int64(data[o + 3])


@njit(cache=True)
def decode_eth_ipv4_tcp(data, off, cap, orig, status, src_ip, dst_ip, sport, dport, seq, ack, payload_len,
                        flags, window, urg_ptr, tcp_hlen, opt_mss, opt_sackok, opt_ts, tsval, tsecr,
                        opt_wscale, sack_n, sack, ip_id, ttl, tos, df, frag, ip_hlen, ip_len, ip_csum,
                        l2_bytes, encap, vlan_tci, tcp_csum, csum_bad, csum_state, truncated):
    """Decode Ethernet(+VLAN)/IPv4/TCP records in place.

    status: 0 decoded, 1 not TCP, 3 not IP, 2 left to the Python decoder."""
    for i in range(off.size):
        b = off[i]
        c = np.int64(cap[i])
        status[i] = 2
        if c < 14:
            continue
        et = _be16n(data, b + 12)
        p = np.int64(14)
        tci = -1
        enc = 0
        while et == 0x8100 or et == 0x88A8 or et == 0x9100:
            if c < p + 4:
                break
            if tci < 0:
                tci = _be16n(data, b + p)
            enc |= 1
            et = _be16n(data, b + p + 2)
            p += 4
        if et == 0x8100 or et == 0x88A8 or et == 0x9100:
            continue
        if et == 0x86DD or et == 0x8847 or et == 0x8848 or et == 0x8864:
            continue
        if et != 0x0800:
            status[i] = 3
            continue
        if c < p + 20:
            continue
        vihl = data[b + p]
        ihl = np.int64(vihl & 15) * 4
        if (vihl >> 4) != 4 or ihl < 20 or c < p + ihl:
            continue
        proto = data[b + p + 9]
        fr = _be16n(data, b + p + 6)
        if fr & 0x1FFF:
            continue
        if proto == 17:
            if c >= p + ihl + 4:
                d = _be16n(data, b + p + ihl + 2)
                if d != 4789 and d != 8472:
                    status[i] = 1
            continue
        if proto != 6:
            status[i] = 1
            continue
        il = _be16n(data, b + p + 2)
        if il < ihl:
            continue
        t = p + ihl
        if c < t + 20:
            continue
        thl = np.int64(data[b + t + 12] >> 4) * 4
        if thl < 20:
            continue
        # decoded: fill the row
        status[i] = 0
        encap[i] = enc
        vlan_tci[i] = tci
        l2_bytes[i] = p
        ip_hlen[i] = ihl
        ip_len[i] = il
        tos[i] = data[b + p + 1]
        ip_id[i] = _be16n(data, b + p + 4)
        df[i] = (fr & 0x4000) != 0
        frag[i] = fr & 0xBFFF
        ttl[i] = data[b + p + 8]
        ip_csum[i] = _be16n(data, b + p + 10)
        sa = _be32n(data, b + p + 12)
        da = _be32n(data, b + p + 16)
        src_ip[i] = sa
        dst_ip[i] = da
        sport[i] = _be16n(data, b + t)
        dport[i] = _be16n(data, b + t + 2)
        seq[i] = _be32n(data, b + t + 4)
        ack[i] = _be32n(data, b + t + 8)
        fl = np.int64(data[b + t + 13]) | (np.int64(data[b + t + 12] & 1) << 8)
        flags[i] = fl
        window[i] = _be16n(data, b + t + 14)
        cs = _be16n(data, b + t + 16)
        tcp_csum[i] = cs
        urg_ptr[i] = _be16n(data, b + t + 18)
        tcp_hlen[i] = thl
        plen = il - ihl - thl
        if plen < 0:
            plen = 0
        payload_len[i] = plen
        oend = t + thl
        if oend > c:
            oend = c
        avail = c - (t + thl)
        if avail < 0:
            avail = 0
        trunc = c < t + thl or avail < plen
        truncated[i] = trunc
        # options
        k = t + 20
        while k < oend:
            kind = data[b + k]
            if kind == 0:
                break
            if kind == 1:
                k += 1
                continue
            if k + 1 >= oend:
                break
            ln = np.int64(data[b + k + 1])
            if ln < 2 or k + ln > oend:
                break
            if kind == 2 and ln == 4:
                opt_mss[i] = _be16n(data, b + k + 2)
            elif kind == 3 and ln == 3:
                ws = data[b + k + 2]
                opt_wscale[i] = ws if ws < 127 else 127
            elif kind == 4 and ln == 2:
                opt_sackok[i] = True
            elif kind == 8 and ln == 10:
                opt_ts[i] = True
                tsval[i] = _be32n(data, b + k + 2)
                tsecr[i] = _be32n(data, b + k + 6)
            elif kind == 5 and (ln - 2) % 8 == 0:
                nb = (ln - 2) // 8
                if nb > sack.shape[1] // 2:
                    nb = sack.shape[1] // 2
                sack_n[i] = nb
                for j in range(2 * nb):
                    sack[i, j] = _be32n(data, b + k + 2 + 4 * j)
                for j in range(2 * nb, sack.shape[1]):
                    sack[i, j] = 0
            k += ln
        # checksum
        if c >= t + thl:
            seg = thl + plen
            ph = (sa >> 16) + (sa & 0xFFFF) + (da >> 16) + (da & 0xFFFF) + 6 + (seg >> 16) + (seg & 0xFFFF)
            partial = fold_nb(ph)
            whole = (not trunc) and (fr & 0x2000) == 0
            if whole:
                s = ph
                e = t + seg
                j = t
                while j + 1 < e:
                    if j != t + 16:
                        s += (np.int64(data[b + j]) << 8) | np.int64(data[b + j + 1])
                    j += 2
                if j < e:
                    s += np.int64(data[b + j]) << 8
                correct = (~fold_nb(s)) & 0xFFFF
                s_without = fold_nb((~correct) & 0xFFFF)
                computed = (~fold_nb(s_without + cs)) & 0xFFFF
                if computed != 0:
                    if cs == partial:
                        csum_state[i] = 3
                    else:
                        csum_bad[i] = True
            elif cs == partial:
                csum_state[i] = 3


FAST_COLUMNS = ("src_ip", "dst_ip", "sport", "dport", "seq", "ack", "payload_len", "flags", "window",
                 "urg_ptr", "tcp_hlen", "opt_mss", "opt_sackok", "opt_ts", "tsval", "tsecr", "opt_wscale",
                 "sack_n", "sack", "ip_id", "ttl", "tos", "df", "frag", "ip_hlen", "ip_len", "ip_csum",
                 "l2_bytes", "encap", "vlan_tci", "tcp_csum", "csum_bad", "csum_state", "truncated")
