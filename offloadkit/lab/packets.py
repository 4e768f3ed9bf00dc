"""Read header-only lab captures into Traces with dpkt (independent of offloadkit.io).

The lab and its oracle tests use this reader on purpose: comparing the kit's
``segment``/``gro`` output with the kernel's captures through a reader the kit
did not write keeps the oracle independent. Payload lengths come from the IP
total length (captures keep ~128 bytes of each frame); IPv6 from the payload
length, or from the hop-by-hop jumbo option of a BIG TCP packet (payload length 0).
"""
from __future__ import annotations

import socket
import struct
from decimal import Decimal

import numpy as np

from ..trace import Trace

_COLS = ("time_ns", "frame", "src_ip", "dst_ip", "sport", "dport", "seq", "ack", "payload_len",
         "flags", "window", "tcp_hlen", "opt_mss", "opt_ts", "tsval", "tsecr", "ip_id", "ttl",
         "tos", "df", "frag", "ip_hlen", "ip_len", "ip_csum", "tcp_csum", "truncated", "ip_version",
         "src_ip6", "dst_ip6", "flow_label", "hbh_jumbo", "vni", "outer_udp_csum", "l2_bytes")
VXLAN_PORT = 4789
GENEVE_PORT = 6081


def udp_tunnel_inner(buf: bytes):
    """(inner Ethernet frame, VNI, outer UDP checksum) of a VXLAN or GENEVE frame over IPv4 or IPv6, or None."""
    if len(buf) < 14 + 20 + 16 or buf[12:14] not in (b"\x08\x00", b"\x86\xdd"):
        return None
    if buf[12:14] == b"\x86\xdd":
        if len(buf) < 14 + 40 + 16 or buf[20] != 17:
            return None
        u = 14 + 40
    else:
        if buf[23] != 17:
            return None
        u = 14 + (buf[14] & 0x0F) * 4
    if len(buf) < u + 16:
        return None
    port = struct.unpack("!H", buf[u + 2:u + 4])[0]
    if port == VXLAN_PORT and buf[u + 8] & 0x08:
        inner = u + 16
    elif port == GENEVE_PORT and buf[u + 8] >> 6 == 0 and buf[u + 10:u + 12] == b"\x65\x58":
        inner = u + 16 + (buf[u + 8] & 0x3F) * 4
    else:
        return None
    return buf[inner:], struct.unpack("!I", buf[u + 12:u + 16])[0] >> 8, struct.unpack("!H", buf[u + 6:u + 8])[0]


IPV6_EXT = (0, 43, 60)        # hop-by-hop, routing, destination options (GSO walks these)


def ip_to_key(addr: str):
    """An address as the reader stores it: IPv4 as an int, IPv6 as its 16 bytes."""
    return bytes(socket.inet_pton(socket.AF_INET6, addr)) if ":" in addr else ip_to_int(addr)


def _ipv6(ip: bytes):
    """(fields of an IPv6 TCP header, TCP header offset) or None: extension headers walked,
    a BIG TCP packet's length taken from its jumbo option."""
    if len(ip) < 40 or ip[0] >> 4 != 6:
        return None
    word0, plen, nh, hlim = struct.unpack("!IHBB", ip[:8])
    off, jumbo = 40, False
    while nh in IPV6_EXT and len(ip) >= off + 8:
        if nh == 0 and off == 40 and ip[off + 1] == 0 and ip[off + 2] == 0xC2 and ip[off + 3] == 4:
            jumbo = plen == 0
            if jumbo:
                plen = struct.unpack("!I", ip[off + 4:off + 8])[0]
        nh, off = ip[off], off + (ip[off + 1] + 1) * 8
    if nh != 6 or len(ip) < off + 20:
        return None
    return {"ip_version": 6, "tos": (word0 >> 20) & 0xFF, "flow_label": word0 & 0xFFFFF, "ttl": hlim,
            "ip_hlen": off, "ip_len": 40 + plen, "hbh_jumbo": jumbo, "src_ip6": list(ip[8:24]),
            "dst_ip6": list(ip[24:40]), "src_ip": 0, "dst_ip": 0, "ip_id": 0, "df": True, "frag": 0, "ip_csum": 0}, off


def ip_to_int(addr: str) -> int:
    return struct.unpack("!I", socket.inet_aton(addr))[0]


def inet_csum_ok(header: bytes) -> bool:
    """Whether an IPv4 header's checksum verifies (one's-complement sum is 0xffff)."""
    if len(header) % 2:
        header += b"\0"
    s = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s == 0xFFFF


def _tcp_options(opts: bytes) -> tuple[int, bool, int, int]:
    mss, ts, tsval, tsecr, i = 0, False, 0, 0, 0
    while i < len(opts):
        kind = opts[i]
        if kind == 0:
            break
        if kind == 1:
            i += 1
            continue
        if i + 1 >= len(opts) or opts[i + 1] < 2:
            break
        ln = opts[i + 1]
        if kind == 2 and ln == 4 and i + 4 <= len(opts):
            mss = struct.unpack("!H", opts[i + 2:i + 4])[0]
        elif kind == 8 and ln == 10 and i + 10 <= len(opts):
            ts = True
            tsval, tsecr = struct.unpack("!II", opts[i + 2:i + 10])
        i += ln
    return mss, ts, tsval, tsecr


def read_headers(path, point: str = "capture", sender_ip: str | None = None) -> tuple[Trace, np.ndarray]:
    """IPv4/TCP packets of an Ethernet pcap as a Trace, plus a bool array
    "IP header checksum verifies" aligned with its rows.

    ``direction`` is 0 for packets from ``sender_ip`` (or, if not given, from
    the address that sent the first SYN of the flow), 1 otherwise; ``flow``
    numbers the unordered 4-tuples in order of appearance.
    """
    import dpkt

    rows = {c: [] for c in _COLS}
    ip_ok = []
    with open(path, "rb") as f:
        try:
            reader = dpkt.pcap.Reader(f)
        except (ValueError, dpkt.dpkt.NeedData) as e:
            raise ValueError(f"{path}: not a pcap file ({e})") from None
        frame = -1
        for ts, buf in reader:
            frame += 1
            vx = udp_tunnel_inner(buf)                 # the TCP packet inside a VXLAN/GENEVE frame
            tunnel = {"vni": -1, "outer_udp_csum": -1, "l2_bytes": 14}
            if vx is not None:
                tunnel = {"vni": vx[1], "outer_udp_csum": vx[2], "l2_bytes": 14 + len(buf) - len(vx[0])}
                buf = vx[0]
            if len(buf) < 14 + 20 or buf[12:14] not in (b"\x08\x00", b"\x86\xdd"):
                continue
            ip = buf[14:]
            if buf[12:14] == b"\x86\xdd":
                v6 = _ipv6(bytes(ip))
                if v6 is None:
                    continue
                hdr, ihl = v6
                tot_len = hdr["ip_len"]
            else:
                ihl = (ip[0] & 0x0F) * 4
                if ip[0] >> 4 != 4 or ip[9] != 6 or len(ip) < ihl + 20:
                    continue
                tot_len, ip_id, frag = struct.unpack("!HHH", ip[2:8])
                hdr = {"ip_version": 4, "src_ip": struct.unpack("!I", ip[12:16])[0],
                       "dst_ip": struct.unpack("!I", ip[16:20])[0], "ip_id": ip_id, "ttl": ip[8], "tos": ip[1],
                       "df": bool(frag & 0x4000), "frag": frag & 0xBFFF, "ip_hlen": ihl, "ip_len": tot_len,
                       "ip_csum": struct.unpack("!H", ip[10:12])[0], "flow_label": 0, "hbh_jumbo": False,
                       "src_ip6": [0] * 16, "dst_ip6": [0] * 16}
            tcp = ip[ihl:]
            sport, dport, seq, ack, off_flags, win, tcsum = struct.unpack("!HHIIHHH", tcp[:18])
            thlen = (off_flags >> 12) * 4
            mss, has_ts, tsval, tsecr = _tcp_options(tcp[20:thlen])
            # nanosecond pcaps give Decimal timestamps (exact); microsecond ones floats
            t_ns = int(ts * 10**9) if isinstance(ts, Decimal) else int(round(ts * 1e6)) * 1000
            rows["time_ns"].append(t_ns)
            rows["frame"].append(frame)
            for k, v in (*hdr.items(), *tunnel.items()):
                rows[k].append(v)
            rows["sport"].append(sport)
            rows["dport"].append(dport)
            rows["seq"].append(seq)
            rows["ack"].append(ack)
            rows["payload_len"].append(max(tot_len - ihl - thlen, 0))
            rows["flags"].append(off_flags & 0x01FF)
            rows["window"].append(win)
            rows["tcp_hlen"].append(thlen)
            rows["opt_mss"].append(mss)
            rows["opt_ts"].append(has_ts)
            rows["tsval"].append(tsval)
            rows["tsecr"].append(tsecr)
            rows["tcp_csum"].append(tcsum)
            rows["truncated"].append(14 + tot_len > len(buf))
            ip_ok.append(hdr["ip_version"] == 6 or inet_csum_ok(bytes(ip[:ihl])))     # IPv6: no header checksum
    n = len(rows["frame"])
    cols = {k: np.asarray(v) for k, v in rows.items()} if n else {}
    if n:
        a, b = cols["src_ip"].astype(np.uint64), cols["dst_ip"].astype(np.uint64)
        v6 = cols["ip_version"] == 6
        if v6.any():         # IPv6 flows keyed by the addresses' low 32 bits (lab addresses differ there)
            a[v6] = np.frombuffer(cols["src_ip6"][v6][:, 12:].astype(np.uint8).tobytes(), ">u4")
            b[v6] = np.frombuffer(cols["dst_ip6"][v6][:, 12:].astype(np.uint8).tobytes(), ">u4")
        pa, pb = cols["sport"].astype(np.uint64), cols["dport"].astype(np.uint64)
        lo = np.where((a << 16 | pa) <= (b << 16 | pb), (a << 16) | pa, (b << 16) | pb)
        hi = np.where((a << 16 | pa) <= (b << 16 | pb), (b << 16) | pb, (a << 16) | pa)
        keys = list(zip(lo.tolist(), hi.tolist()))
        ids: dict = {}
        flow = np.array([ids.setdefault(k, len(ids)) for k in keys], dtype=np.int32)
        if sender_ip is not None and ":" in sender_ip:
            me = np.frombuffer(ip_to_key(sender_ip), np.uint8)
            direction = (~(cols["src_ip6"] == me).all(axis=1)).astype(np.uint8)
        elif sender_ip is not None:
            direction = (cols["src_ip"] != ip_to_int(sender_ip)).astype(np.uint8)
        else:
            client: dict = {}
            syn_only = (cols["flags"] & 0x12) == 0x02
            for i in np.flatnonzero(syn_only):
                client.setdefault(int(flow[i]), (int(cols["src_ip"][i]), int(cols["sport"][i])))
            direction = np.array([0 if client.get(int(f), (s, p)) == (s, p) else 1 for f, s, p in
                                  zip(flow, cols["src_ip"], cols["sport"])], dtype=np.uint8)
        cols["flow"] = flow
        cols["direction"] = direction
    t = Trace.from_columns(points=(point,), meta={"source": str(path)}, **cols) if n \
        else Trace.empty(0, (point,))
    return t, np.asarray(ip_ok, dtype=bool)


def data_packets(t: Trace) -> Trace:
    """The data direction's packets that carry payload."""
    return t[(t.direction == 0) & (t.payload_len > 0)]
