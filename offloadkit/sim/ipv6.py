"""A simulated trace as IPv6: what ``simulate --ipv6`` records (``Scenario.ip_version == 6``).

The event loop already counts the 40-byte header in every IP length (``sim.pack``); this gives the
rows their IPv6 identity: version 6, header length 40, addresses in the benchmarking range
2001:2::/48 (sender 2001:2:1::1, receiver 2001:2:2::1), no IP ID, GSO type TCPV6.
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
    """``trace`` (IPv4 rows from the simulator; ``sender_ip`` its sender's IPv4 address) as IPv6 rows."""
    n = len(trace)
    from_sender = (trace.src_ip == sender_ip)[:, None]
    src6 = np.where(from_sender, SENDER_IP6, RECEIVER_IP6).astype(np.uint8).reshape(n, 16)
    dst6 = np.where(from_sender, RECEIVER_IP6, SENDER_IP6).astype(np.uint8).reshape(n, 16)
    g = trace.gso_type.astype(np.int64)
    gso = np.where(g & codes.GSO_TCPV4, (g ^ codes.GSO_TCPV4) | codes.GSO_TCPV6, g).astype(trace.gso_type.dtype)
    return trace.replace(ip_version=np.full(n, 6, np.uint8), ip_hlen=np.full(n, IPV6_HLEN, np.uint8),
                         src_ip6=src6, dst_ip6=dst6, src_ip=np.zeros(n, np.uint32), dst_ip=np.zeros(n, np.uint32),
                         ip_id=np.zeros(n, trace.ip_id.dtype), df=np.ones(n, bool), gso_type=gso)
