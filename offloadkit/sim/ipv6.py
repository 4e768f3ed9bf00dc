"""A simulated trace as IPv6: what ``simulate --ipv6`` records (``Scenario.ip_version == 6``).

The event loop counts the 40-byte header in the IP length of every data packet (``sim.pack``); this
gives the rows their IPv6 identity: version 6, header length 40, addresses in the benchmarking range
2001:2::/48 (sender 2001:2:1::1, receiver 2001:2:2::1), no IP ID, GSO type TCPV6, and every IP length
40 + TCP header + payload (the loop's ACK rows say 20 + TCP header).
"""
from __future__ import annotations

import ipaddress

import numpy as np

from .. import codes
from ..trace import Trace
from .scenario import IPV6_HLEN

SENDER_IP6 = np.frombuffer(ipaddress.IPv6Address("2001:2:1::1").packed, np.uint8)
RECEIVER_IP6 = np.frombuffer(ipaddress.IPv6Address("2001:2:2::1").packed, np.uint8)


def as_ipv6(trace: Trace, sender_ip: int) -> Trace:
    """``trace`` with its IPv4 rows (from the simulator; ``sender_ip`` its sender's IPv4 address) as IPv6
    rows; rows already IPv6 are kept."""
    v4 = trace.ip_version == 4
    from_sender = (trace.src_ip == sender_ip)[:, None]
    keep = ~v4[:, None]
    src6 = np.where(keep, trace.src_ip6, np.where(from_sender, SENDER_IP6, RECEIVER_IP6)).astype(np.uint8)
    dst6 = np.where(keep, trace.dst_ip6, np.where(from_sender, RECEIVER_IP6, SENDER_IP6)).astype(np.uint8)
    g = trace.gso_type.astype(np.int64)
    gso = np.where(v4 & (g & codes.GSO_TCPV4 != 0), (g ^ codes.GSO_TCPV4) | codes.GSO_TCPV6, g)
    return trace.replace(ip_version=np.where(v4, 6, trace.ip_version), src_ip6=src6, dst_ip6=dst6,
                         ip_hlen=np.where(v4, IPV6_HLEN, trace.ip_hlen), src_ip=np.where(v4, 0, trace.src_ip),
                         dst_ip=np.where(v4, 0, trace.dst_ip), ip_id=np.where(v4, 0, trace.ip_id),
                         df=np.where(v4, True, trace.df), gso_type=gso,
                         ip_len=np.where(v4, IPV6_HLEN + trace.tcp_hlen.astype(np.int64) + trace.payload_len,
                                         trace.ip_len))


def ipv6_partial_check(src6: np.ndarray, dst6: np.ndarray, tcp_len: np.ndarray) -> np.ndarray:
    """CHECKSUM_PARTIAL's field of IPv6 TCP rows: ``~tcp_v6_check(len, saddr, daddr, 0)``, folded."""
    words = lambda a: ((a[:, 0::2].astype(np.int64) << 8) | a[:, 1::2]).sum(axis=1)  # noqa: E731
    s = words(src6) + words(dst6) + 6 + tcp_len.astype(np.int64)
    for _ in range(3):
        s = (s & 0xFFFF) + (s >> 16)
    return s.astype(np.uint16)
