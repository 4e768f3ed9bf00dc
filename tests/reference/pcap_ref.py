"""The dpkt reference reader: Ethernet (VLAN, MPLS) IPv4/IPv6 TCP packets of a pcap, one dpkt decode each.

:func:`offloadkit.io.capture.read_capture` (numba fast path and ``packet.decode``)
is held to this small independent loop (tests/io/test_capture_read.py).
"""
from __future__ import annotations

import struct

import dpkt

from offloadkit import codes
from offloadkit.packet.csum import tcp_checksums, tcpdump_verdict
from offloadkit.packet.tcp_options import parse_options
from offloadkit.trace import Trace


def read_pcap(path, with_payload: bool = False):
    """Ethernet (VLAN) IPv4/IPv6 TCP packets of a pcap, one dpkt decode per packet.

    Header-only aware: payload length comes from the IP total length (from the
    frame when it is 0). Returns a Trace, or ``(Trace, list[bytes])`` with the
    captured payload bytes of each row when ``with_payload``. The reference for
    :func:`offloadkit.io.capture.read_capture`, which is the robust reader.
    """
    rows: list[dict] = []
    payloads: list[bytes] = []
    with open(path, "rb") as f:
        try:
            reader = dpkt.pcap.Reader(f)
        except (ValueError, dpkt.NeedData) as e:
            raise ValueError(f"{path}: not a pcap file ({e})") from None
        frame = 0
        for ts, buf in safe_iter(reader):
            frame += 1
            row = _dpkt_row(buf, frame)
            if row is None:
                continue
            row["time_ns"] = _ts_ns(ts)
            payloads.append(row.pop("_payload"))
            rows.append(row)
    trace = Trace.from_rows(rows)
    return (trace, payloads) if with_payload else trace


def safe_iter(reader):
    """Iterate a dpkt reader, stopping quietly at a truncated or malformed record."""
    it = iter(reader)
    while True:
        try:
            yield next(it)
        except StopIteration:
            return
        except (dpkt.NeedData, dpkt.UnpackError, struct.error, ValueError):
            return


def _ts_ns(ts) -> int:
    from decimal import Decimal
    if isinstance(ts, Decimal):
        return int(ts * 1_000_000_000)
    return int(round(ts * 1_000_000)) * 1000


def _dpkt_row(buf: bytes, frame: int) -> dict | None:
    try:
        eth = dpkt.ethernet.Ethernet(buf)
    except (dpkt.UnpackError, dpkt.NeedData):
        return None
    ip = eth.data
    row = {"frame": frame}
    tags = getattr(eth, "vlan_tags", None) or []
    labels = getattr(eth, "mpls_labels", None) or []
    l2 = 14 + 4 * len(tags) + 4 * len(labels)
    if tags:
        row["encap"] = codes.ENC_VLAN
        t = tags[0]
        row["vlan_tci"] = t.pri << 13 | t.cfi << 12 | t.id
    if labels:
        row["encap"] = row.get("encap", 0) | codes.ENC_MPLS
        row["mpls_labels"] = len(labels)
    if isinstance(ip, dpkt.ip.IP):
        if ip.p != 6 or ip.offset:
            return None
        ihl = ip.hl * 4
        ip_len = ip.len if ip.len else len(buf) - l2
        ipbuf = buf[l2:]
        src, dst = ip.src, ip.dst
        row.update(ip_version=4, src_ip=struct.unpack("!I", src)[0], dst_ip=struct.unpack("!I", dst)[0],
                   ip_id=ip.id, ttl=ip.ttl, tos=ip.tos, df=bool(ip.df),
                   frag=ip.mf << 13 | ip.offset >> 3,
                   ip_hlen=ihl, ip_len=ip_len, ip_csum=ip.sum)
        seg_total = ip_len - ihl
    elif isinstance(ip, dpkt.ip6.IP6):
        if ip.nxt != 6:
            return None
        ihl = 40
        ipbuf = buf[l2:]
        src, dst = ip.src, ip.dst
        plen6 = ip.plen if ip.plen else len(buf) - l2 - 40
        ip_len = 40 + plen6
        row.update(ip_version=6, src_ip6=list(src), dst_ip6=list(dst), ttl=ip.hlim, tos=ip.fc,
                   ip_hlen=40, ip_len=ip_len, df=True)
        seg_total = plen6
    else:
        return None
    row["l2_bytes"] = l2
    tcpb = ipbuf[ihl:]
    if len(tcpb) < 20:
        return None
    sport, dport, seq, ack, off, fl, win, csum, urp = struct.unpack("!HHIIBBHHH", tcpb[:20])
    thl = (off >> 4) * 4
    if thl < 20:
        return None
    flags = fl | (off & 1) << 8
    plen = max(seg_total - thl, 0)
    payload = bytes(tcpb[thl:thl + plen])
    row.update(sport=sport, dport=dport, seq=seq, ack=ack, flags=flags, window=win, urg_ptr=urp,
               tcp_hlen=thl, payload_len=plen, tcp_csum=csum, truncated=len(payload) < plen or len(tcpb) < thl)
    row.update(parse_options(bytes(tcpb[20:thl])))
    if not row["truncated"] and row.get("frag", 0) == 0:
        correct, partial = tcp_checksums(bytes(src), bytes(dst),
                                         tcpb[:16] + b"\0\0" + tcpb[18:thl], payload, plen)
        if tcpdump_verdict(csum, correct) is not None:
            if csum == partial:
                row["csum_state"] = codes.CSUM_PARTIAL
            else:
                row["csum_bad"] = True
    elif len(tcpb) >= thl:
        _, partial = tcp_checksums(bytes(src), bytes(dst), tcpb[:16] + b"\0\0" + tcpb[18:thl],
                                   b"", plen)
        if csum == partial:
            row["csum_state"] = codes.CSUM_PARTIAL
    row["_payload"] = payload
    return row
