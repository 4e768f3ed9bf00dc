"""The simulated flows' addresses and ports, and the GRO hash bucket they land in.

Flow ``f`` runs from 198.18.0.1 port 40000 + f to 198.19.0.1 port 5201 (IPv6:
``sim.ipv6``'s addresses); ``gro_buckets`` hashes each flow's headers with the
batch GRO's own key code (``engine.gro.prepare``) so the loop's receiver
walks its held flows in the kernel's bucket order.
"""
from __future__ import annotations

import numpy as np

from ..engine.gro import GroParams, prepare
from ..trace import Trace
from .ipv6 import as_ipv6

SENDER_IP = 0xC6120001      # 198.18.0.1
RECEIVER_IP = 0xC6130001    # 198.19.0.1
DPORT = 5201
SPORT_BASE = 40000


def gro_buckets(flows: int, ip_version: int) -> np.ndarray:
    """Per flow: the receiver's GRO hash bucket of its data packets (``GroParams`` defaults: 8 buckets)."""
    f = np.arange(flows, dtype=np.int64)
    t = Trace.from_columns(src_ip=SENDER_IP, dst_ip=RECEIVER_IP, sport=SPORT_BASE + f, dport=DPORT)
    if ip_version == 6:
        t = as_ipv6(t, SENDER_IP)
    return prepare(t, GroParams())["bucket"].astype(np.int64)
