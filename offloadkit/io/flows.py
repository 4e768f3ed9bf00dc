"""Connections and their directions: numbered by first appearance, the data side is direction 0.

:class:`FlowNumbering` does it chunk by chunk (a streaming reader keeps only a flow
number and an endpoint bit per packet, and the byte counts per flow); :func:`assign_flows`
is the same for one whole Trace.
"""
from __future__ import annotations

import numpy as np

from ..trace import Trace


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


class FlowNumbering:
    """Flow numbers across chunks: :meth:`add` each chunk in capture order, then :meth:`directions`."""

    def __init__(self):
        self.ids: dict[tuple[int, int], int] = {}
        self.first_side: list[int] = []          # per flow: the endpoint bit of its first packet
        self.nbytes = np.zeros((0, 2))           # per flow: payload bytes sent by each endpoint

    def add(self, trace: Trace) -> tuple[np.ndarray, np.ndarray]:
        """(flow number, endpoint bit: 1 when the source is the higher endpoint) per packet."""
        n = len(trace)
        if n == 0:
            return np.zeros(0, np.int32), np.zeros(0, np.uint8)
        a, b = endpoint_keys(trace)
        lo = np.minimum(a, b)
        keys = np.empty(n, dtype=[("lo", "u8"), ("hi", "u8")])
        keys["lo"], keys["hi"] = lo, np.maximum(a, b)
        side = (a != lo).astype(np.uint8)
        uniq, first, inv = np.unique(keys, return_index=True, return_inverse=True)
        number = np.empty(len(uniq), np.int64)
        los, his, firsts = uniq["lo"].tolist(), uniq["hi"].tolist(), first.tolist()
        for j in np.argsort(first, kind="stable").tolist():      # new flows in order of appearance
            k = (los[j], his[j])
            f = self.ids.get(k)
            if f is None:
                f = self.ids[k] = len(self.ids)
                self.first_side.append(int(side[firsts[j]]))
            number[j] = f
        flow = number[inv.ravel()]
        F = len(self.ids)
        if len(self.nbytes) < F:
            self.nbytes = np.concatenate([self.nbytes, np.zeros((F - len(self.nbytes), 2))])
        self.nbytes += np.bincount(flow * 2 + side, weights=trace.payload_len.astype(np.float64),
                                   minlength=2 * F).reshape(-1, 2)
        return flow.astype(np.int32), side

    def directions(self, flow: np.ndarray, side: np.ndarray) -> np.ndarray:
        """Per packet: 0 from the side that sent more payload bytes (ties: the side of the flow's
        first packet), 1 from the other."""
        nb, first = self.nbytes, np.array(self.first_side, np.int64)
        data_side = np.where(nb[:, 0] > nb[:, 1], 0, np.where(nb[:, 1] > nb[:, 0], 1, first))
        return (side != data_side[flow]).astype(np.uint8)


def assign_flows(trace: Trace) -> Trace:
    """Set ``flow`` (connections numbered by first appearance) and ``direction``
    (0: the side that sends more payload bytes, ties: the side of the flow's first packet)."""
    if len(trace) == 0:
        return trace
    numbering = FlowNumbering()
    flow, side = numbering.add(trace)
    return trace.replace(flow=flow, direction=numbering.directions(flow, side))
