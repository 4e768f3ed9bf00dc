"""The doctor's numpy bookkeeping agrees with the plain-Python reference (tests/reference/doctor_ref.py)."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from reference.doctor_ref import flow_counts

from offloadkit import codes as C
from offloadkit.doctor import context, stats
from offloadkit.trace import Trace


def random_trace(seed: int, n: int, flows: int) -> Trace:
    """Random packets of a few flows: seq random walks with resends and holes, ACKs with repeats and SACK."""
    rng = np.random.default_rng(seed)
    flow = rng.integers(0, flows, n)
    direction = (rng.random(n) < 0.4).astype(np.uint8)
    plen = np.where(direction == 0, rng.choice([0, 100, 1448, 2896], n, p=[0.1, 0.2, 0.6, 0.1]),
                    rng.choice([0, 0, 0, 50], n))
    seq = np.zeros(n, np.int64)
    nxt = {k: int(rng.integers(0, 2**32)) for k in range(2 * flows)}
    for i in range(n):
        g = 2 * flow[i] + direction[i]
        step = rng.choice([0, 1, 2], p=[0.85, 0.1, 0.05])       # in order, resend, hole
        s = nxt[g] - (int(plen[i]) if step == 1 else 0) + (1448 if step == 2 else 0)
        seq[i] = s & 0xFFFFFFFF
        nxt[g] = max(nxt[g], s + int(plen[i])) if step != 1 else nxt[g]
    ack = (rng.integers(0, 5, n) * 1448 + 12345) & 0xFFFFFFFF
    window = rng.choice([500, 501], n, p=[0.9, 0.1])
    sack_n = np.where(rng.random(n) < 0.2, rng.integers(1, 4, n), 0)
    sack = ((ack[:, None] + rng.integers(-3000, 9000, (n, 8))) & 0xFFFFFFFF).astype(np.uint32)
    flags = np.where(rng.random(n) < 0.03, C.FIN | C.ACK, C.ACK) | np.where(rng.random(n) < 0.02, C.SYN, 0)
    return Trace.from_columns(flow=flow, direction=direction, payload_len=plen, seq=seq, ack=ack, window=window,
                              sack_n=sack_n, sack=sack, flags=flags, time_ns=np.arange(n) * 1000,
                              frame=np.arange(1, n + 1))


def compare(trace: Trace):
    ctx = context.build(trace, context.Hints())
    table = {r["flow"]: r for r in stats.flow_table(ctx)}
    ref = flow_counts(trace)
    for f, r in ref.items():
        if r["bytes"] == 0:
            assert f not in table or table[f]["data_packets"] == 0
            continue
        got = table[f]
        assert got["retransmitted_packets"] == r["retrans"], f
        assert got["retransmitted_bytes"] == r["retrans_bytes"], f
        assert got["holes_at_capture"] == r["holes"], f
        assert got["dup_acks"] == r["dup_acks"], f
        assert got["sack_holes"] == r["sack_holes"], f
        assert got["bytes"] == r["bytes"], f


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 400), flows=st.integers(1, 5))
def test_numpy_bookkeeping_matches_reference(seed, n, flows):
    compare(random_trace(seed, n, flows))


def test_reference_counts_can_fail():
    """A resend and a hole in a hand-made flow, counted by both."""
    t = Trace.from_columns(flow=0, direction=[0, 0, 0, 0], payload_len=[100, 100, 100, 100],
                           seq=[0, 100, 100, 400], flags=C.ACK, frame=[1, 2, 3, 4], time_ns=[0, 1, 2, 3])
    ref = flow_counts(t)[0]
    assert (ref["retrans"], ref["holes"]) == (1, 1)
    compare(t)


# -- robustness: any trace, any bytes ---------------------------------------------------------
@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 200))
def test_diagnose_never_raises_on_arbitrary_columns(seed, n):
    from offloadkit.doctor import diagnose
    rng = np.random.default_rng(seed)
    small = rng.random() < 0.5            # few distinct values: collisions, repeats, equal seqs
    hi = 4 if small else 2**32

    def r(lo, high, shape=(n,)):
        return rng.integers(lo, high, shape)
    t = Trace.from_columns(
        flow=r(0, 4), direction=r(0, 2), frame=np.arange(1, n + 1), time_ns=r(0, 10**9),
        seq=r(0, hi), ack=r(0, hi), payload_len=r(0, 3) * rng.choice([1, 1448, 30000]),
        flags=r(0, 512), tcp_hlen=r(5, 16) * 4, opt_mss=r(0, 3) * 700, opt_ts=r(0, 2), ttl=r(0, 256),
        ip_version=rng.choice([4, 6], n), ip_hlen=20, ip_len=r(0, 70000), csum_state=r(0, 4), csum_bad=r(0, 2),
        truncated=r(0, 2), sack_n=r(0, 5), sack=r(0, hi, (n, 8)), window=r(0, 3), encap=r(0, 16),
        mpls_labels=r(0, 3), outer_udp_csum=r(-1, 2))
    for hints in ({}, {"side": "receiver", "gro": "on", "mtu": 1400}):
        d = diagnose(t, **hints)
        d.to_dict()


def test_diagnose_file_on_mutated_captures(tmp_path):
    """Bytes of committed captures, damaged at random: a Diagnosis or a ValueError, nothing else."""
    from pathlib import Path

    from offloadkit.doctor import diagnose_file
    root = Path(__file__).resolve().parents[2]
    files = sorted((root / "tests" / "data").glob("*.pcap*")) + [root / "offloadkit/data/captures/ts-mtu1500/rcv.pcap"]
    rng = np.random.default_rng(7)
    n_ok = 0
    for i in range(300):
        raw = bytearray(files[i % len(files)].read_bytes())
        for _ in range(rng.integers(1, 6)):
            raw[rng.integers(0, len(raw))] = rng.integers(0, 256)
        if rng.random() < 0.3:
            raw = raw[: rng.integers(0, len(raw))]
        p = tmp_path / "m.pcap"
        p.write_bytes(bytes(raw))
        try:
            diagnose_file(p).to_dict()
            n_ok += 1
        except ValueError:
            pass
    assert n_ok > 150
