"""Synthetic TCP transfers for the doctor tests (imported by test_doctor*.py; checked here), built with the engine and written as pcap.

``transfer`` gives the sender's view (TSO super-packets of ``k`` segments plus the
receiver's ACKs, with a handshake); the helpers cut it with ``engine.segment``,
drop what a hop's MTU refuses with ``engine.path`` and aggregate with ``engine.gro``.
"""
from __future__ import annotations

import numpy as np

from offloadkit import codes as C
from offloadkit.engine.path import Hop, apply_hop
from offloadkit.engine.segment import segment
from offloadkit.trace import Trace

A, B = 0xC6120101, 0xC6120202          # 198.18.1.1 (data sender), 198.18.2.2 (receiver)
ISN_A, ISN_B = 1_000_000, 7_000_000
TTL_NEAR, TTL_FAR = 64, 63


def transfer(n_super: int = 60, seg: int = 1448, k: int = 4, peer_mss: int = 1460, own_mss: int = 1460,
             ts: bool = True, side: str = "sender", gap_ns: int = 1_000_000, partial: bool = False) -> Trace:
    """Handshake, ``n_super`` super-packets of ``k * seg`` bytes (gso_size ``seg``), one ACK each.

    side: "sender" (data TTL 64, ACK TTL 63), "receiver" (the reverse) or "wire" (64 both).
    partial: the data rows carry CHECKSUM_PARTIAL (TX checksum offload at the sender)."""
    ttl_a = TTL_NEAR if side in ("sender", "wire") else TTL_FAR
    ttl_b = TTL_NEAR if side in ("receiver", "wire") else TTL_FAR
    thl = 32 if ts else 20
    rows = []

    def row(t, d, seq, ack, flags, plen, **kw):
        r = dict(time_ns=t, direction=d, src_ip=A if d == 0 else B, dst_ip=B if d == 0 else A,
                 sport=40000 if d == 0 else 5201, dport=5201 if d == 0 else 40000, seq=seq & 0xFFFFFFFF,
                 ack=ack & 0xFFFFFFFF, flags=flags, payload_len=plen, tcp_hlen=thl, opt_ts=ts, tsval=t // 1000,
                 tsecr=t // 1000, window=502, ttl=ttl_a if d == 0 else ttl_b, ip_id=len(rows))
        r.update(kw)
        r["ip_len"] = 20 + r["tcp_hlen"] + plen
        rows.append(r)

    syn_opts = dict(tcp_hlen=40, opt_sackok=True, opt_ts=ts, opt_wscale=7)
    row(0, 0, ISN_A, 0, C.SYN, 0, opt_mss=own_mss, **syn_opts)
    row(30_000, 1, ISN_B, ISN_A + 1, C.SYN | C.ACK, 0, opt_mss=peer_mss, **syn_opts)
    row(60_000, 0, ISN_A + 1, ISN_B + 1, C.ACK, 0)
    seq = ISN_A + 1
    t = 100_000
    for _ in range(n_super):
        L = k * seg
        row(t, 0, seq, ISN_B + 1, C.ACK | C.PSH, L, gso_size=seg if k > 1 else 0, gso_segs=k if k > 1 else 0,
            gso_type=C.GSO_TCPV4 if k > 1 else 0, csum_state=C.CSUM_PARTIAL if partial else C.CSUM_NONE)
        seq += L
        row(t + 300_000, 1, ISN_B + 1, seq, C.ACK, 0)
        t += gap_ns
    cols = {key: np.array([r.get(key, 0 if key not in ("opt_wscale",) else -1) for r in rows])
            for key in set().union(*rows)}
    return Trace.from_columns(**cols)


def on_wire(t: Trace, nic: str = "sw-gso") -> Trace:
    """The segments the device puts on the wire (full checksums)."""
    return segment(t, nic=nic, tx_csum=False)


def with_resends(wire: Trace, hop: Hop, resend_size: int, delay_ns: int = 400_000) -> tuple[Trace, Trace]:
    """(capture before the hop, capture after it): every segment the hop drops is resent once,
    ``delay_ns`` later, at the same sequence number but ``resend_size`` bytes (it then fits)."""
    hopped = apply_hop(wire, hop)
    lost = hopped[hopped.drop != C.DROP_NONE]
    re = lost.replace(payload_len=np.full(len(lost), resend_size), time_ns=lost.time_ns + delay_ns,
                      ip_len=20 + lost.tcp_hlen.astype(np.int64) + resend_size, drop=np.zeros(len(lost)))
    before = Trace.concat([wire, re]).sort_by_time()
    after = Trace.concat([hopped[hopped.drop == C.DROP_NONE], re]).sort_by_time()
    return before, after


def test_builders_make_the_sizes_the_tests_rely_on():
    t = transfer(n_super=5, seg=1440, k=2, peer_mss=1452)
    data = t[(t.direction == 0) & (t.payload_len > 0)]
    assert data.payload_len.tolist() == [2880] * 5
    legacy = on_wire(t, nic="rtl8139-legacy")
    sizes = legacy.payload_len[legacy.payload_len > 0].tolist()
    assert sizes == [1448, 1432] * 5
    before, after = with_resends(legacy, Hop(1500, C.ENC_PPPOE), 1440)
    assert sorted(before.payload_len[before.payload_len > 0].tolist()) == [1432] * 5 + [1440] * 5 + [1448] * 5
    assert 1448 not in after.payload_len.tolist()
    assert np.all(np.diff(after.time_ns) >= 0)
