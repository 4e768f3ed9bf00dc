"""io.flows: connections numbered by first appearance, whatever the chunking (the table grows and rehashes)."""
from __future__ import annotations

import numpy as np
import pytest

from offloadkit.io.flows import FlowNumbering, endpoint_keys
from offloadkit.trace import Trace


def many_flows(n: int = 3000, flows: int = 700, seed: int = 5) -> Trace:
    """Packets of ``flows`` IPv4/IPv6 connections in random order, each direction sending some bytes."""
    rng = np.random.default_rng(seed)
    f = rng.integers(0, flows, n)
    rev = rng.random(n) < 0.4
    v6 = f % 5 == 0
    ip6a = np.zeros((n, 16), np.uint8)
    ip6a[:, 15] = f % 251
    ip6a[:, 0] = 0x20
    ip6b = ip6a.copy()
    ip6b[:, 14] = 1
    src6, dst6 = np.where(rev[:, None], ip6b, ip6a), np.where(rev[:, None], ip6a, ip6b)
    return Trace.from_columns(
        ip_version=np.where(v6, 6, 4), src_ip=np.where(rev, 0xC6120002, 0xC6120001 + f),
        dst_ip=np.where(rev, 0xC6120001 + f, 0xC6120002), sport=np.where(rev, 5201, 10000 + f),
        dport=np.where(rev, 10000 + f, 5201), src_ip6=src6, dst_ip6=dst6,
        payload_len=np.where(rev, rng.integers(0, 3, n) * 100, rng.integers(0, 2, n) * 1448))


def reference(t: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flow number, endpoint bit and direction by a plain dict walk in capture order."""
    a, b = endpoint_keys(t)
    ids, first, sent = {}, [], []
    flow, side = [], []
    for x, y, p in zip(a.tolist(), b.tolist(), t.payload_len.tolist()):
        key = (min(x, y), max(x, y))
        s = int(x != key[0])
        if key not in ids:
            ids[key] = len(ids)
            first.append(s)
            sent.append([0, 0])
        flow.append(ids[key])
        side.append(s)
        sent[ids[key]][s] += p
    data = [0 if n0 > n1 else 1 if n1 > n0 else f0 for (n0, n1), f0 in zip(sent, first)]
    direction = [int(s != data[f]) for f, s in zip(flow, side)]
    return np.array(flow), np.array(side), np.array(direction)


@pytest.mark.parametrize("chunk", [1, 7, 1 << 16])
def test_numbering_equals_a_dict_walk_whatever_the_chunks(chunk):
    t = many_flows()
    numbering = FlowNumbering()
    got = [numbering.add(t[i:i + chunk]) for i in range(0, len(t), chunk)]
    flow = np.concatenate([f for f, _ in got])
    side = np.concatenate([s for _, s in got])
    ref_flow, ref_side, ref_dir = reference(t)
    assert numbering.count == len(np.unique(ref_flow)) > 128        # past the first table size
    assert np.array_equal(flow, ref_flow) and np.array_equal(side, ref_side)
    assert np.array_equal(numbering.directions(flow, side), ref_dir)
