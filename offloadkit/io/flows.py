"""Connections and their directions: numbered by first appearance, the data side is direction 0.

:class:`FlowNumbering` does it chunk by chunk (a streaming reader keeps only a flow
number and an endpoint bit per packet, and the byte counts per flow); :func:`assign_flows`
is the same for one whole Trace.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..trace import Trace

_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xC2B2AE3D27D4EB4F)


def endpoint_keys(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """(source key, destination key) per packet: address and port in one uint64 (IPv6
    addresses hashed, with the top bit set so they never meet an IPv4 key)."""
    v6 = trace.ip_version == 6
    a = (trace.src_ip.astype(np.uint64) << np.uint64(16)) | trace.sport.astype(np.uint64)
    b = (trace.dst_ip.astype(np.uint64) << np.uint64(16)) | trace.dport.astype(np.uint64)
    if v6.any():
        for arr, ip6, port in ((a, trace.src_ip6, trace.sport), (b, trace.dst_ip6, trace.dport)):
            h = np.frombuffer(np.ascontiguousarray(ip6[v6]).tobytes(), dtype=">u8").reshape(-1, 2)
            mixed = (h[:, 0] * np.uint64(0x9E3779B97F4A7C15)) ^ h[:, 1]
            arr[v6] = (mixed << np.uint64(16)) | port[v6].astype(np.uint64) | np.uint64(1 << 63)
    return a, b


@njit(cache=True)
def _slot(lo, hi, mask):
    """The table slot a connection's probe starts at."""
    h = (lo * _M1) ^ (hi * _M2)
    return np.int64((h ^ (h >> np.uint64(29))) & mask)


@njit(cache=True)
def rehash(lo, hi, flow, table_lo, table_hi, table_flow):
    """Put the connections (lo, hi) -> flow into an empty table (``table_flow`` all -1)."""
    mask = np.uint64(table_flow.size - 1)
    for i in range(flow.size):
        j = _slot(lo[i], hi[i], mask)
        while table_flow[j] >= 0:
            j = (j + 1) & np.int64(mask)
        table_lo[j], table_hi[j], table_flow[j] = lo[i], hi[i], flow[i]


@njit(cache=True)
def number_flows(a, b, plen, count, table_lo, table_hi, table_flow, side0, sent, flow, side):
    """One pass in capture order: each packet's connection (its two endpoint keys ``a``, ``b``
    in either order) looked up or numbered next (``count`` flows so far), its endpoint bit, and
    the payload bytes each endpoint sent. Returns the new flow count. The table must stay
    under full and the per-flow arrays hold every new flow (``FlowNumbering._reserve``)."""
    mask = np.uint64(table_flow.size - 1)
    for i in range(a.size):
        lo, hi = min(a[i], b[i]), max(a[i], b[i])
        s = np.uint8(a[i] != lo)
        j = _slot(lo, hi, mask)
        while True:
            f = table_flow[j]
            if f < 0:
                f = count
                count += 1
                table_lo[j], table_hi[j], table_flow[j] = lo, hi, f
                side0[f] = s
                break
            if table_lo[j] == lo and table_hi[j] == hi:
                break
            j = (j + 1) & np.int64(mask)
        flow[i], side[i] = f, s
        sent[f, s] += plen[i]
    return count


class FlowNumbering:
    """Flow numbers across chunks: :meth:`add` each chunk in capture order, then :meth:`directions`.

    The connections live in an open-addressing table (``number_flows``), so a chunk costs
    one numba pass whatever its number of flows."""

    def __init__(self):
        self.count = 0
        self.table_lo = np.zeros(0, np.uint64)       # endpoint key pairs; slot free where table_flow < 0
        self.table_hi = np.zeros(0, np.uint64)
        self.table_flow = np.zeros(0, np.int64)
        self.side0 = np.zeros(0, np.uint8)           # per flow: the endpoint bit of its first packet
        self.sent = np.zeros((0, 2), np.int64)       # per flow: payload bytes sent by each endpoint

    @property
    def first_side(self) -> np.ndarray:
        return self.side0[:self.count]

    @property
    def nbytes(self) -> np.ndarray:
        return self.sent[:self.count]

    def _reserve(self, more: int) -> None:
        """Room for ``more`` new flows: per-flow arrays and a table at most half full."""
        need = self.count + more
        if len(self.side0) < need:
            cap = max(need, 2 * len(self.side0), 64)
            self.side0 = np.concatenate([self.side0, np.zeros(cap - len(self.side0), np.uint8)])
            self.sent = np.concatenate([self.sent, np.zeros((cap - len(self.sent), 2), np.int64)])
        if len(self.table_flow) < 2 * need:
            size = 1 << max(7, int(2 * need - 1).bit_length())
            lo, hi, fl = np.zeros(size, np.uint64), np.zeros(size, np.uint64), np.full(size, -1, np.int64)
            used = self.table_flow >= 0
            rehash(self.table_lo[used], self.table_hi[used], self.table_flow[used], lo, hi, fl)
            self.table_lo, self.table_hi, self.table_flow = lo, hi, fl

    def add(self, trace: Trace) -> tuple[np.ndarray, np.ndarray]:
        """(flow number, endpoint bit: 1 when the source is the higher endpoint) per packet."""
        n = len(trace)
        if n == 0:
            return np.zeros(0, np.int32), np.zeros(0, np.uint8)
        a, b = endpoint_keys(trace)
        self._reserve(n)
        flow = np.empty(n, np.int32)
        side = np.empty(n, np.uint8)
        self.count = number_flows(a, b, trace.payload_len, self.count, self.table_lo, self.table_hi,
                                  self.table_flow, self.side0, self.sent, flow, side)
        return flow, side

    def data_side(self) -> np.ndarray:
        """Per flow: the endpoint bit of the side that sent more payload bytes (ties: the side of
        the flow's first packet)."""
        nb, first = self.nbytes, self.first_side.astype(np.int64)
        return np.where(nb[:, 0] > nb[:, 1], 0, np.where(nb[:, 1] > nb[:, 0], 1, first))

    def directions(self, flow: np.ndarray, side: np.ndarray) -> np.ndarray:
        """Per packet: 0 from the data side (:meth:`data_side`), 1 from the other."""
        return (side != self.data_side()[flow]).astype(np.uint8)


def assign_flows(trace: Trace) -> Trace:
    """Set ``flow`` (connections numbered by first appearance) and ``direction``
    (0: the side that sends more payload bytes, ties: the side of the flow's first packet)."""
    if len(trace) == 0:
        return trace
    numbering = FlowNumbering()
    flow, side = numbering.add(trace)
    return trace.replace(flow=flow, direction=numbering.directions(flow, side))
