"""Checksum states and software checksum passes (spec §3.8, §3.9, §5)."""
import itertools
import struct

import numpy as np
import pytest
from reference import gro_ref as ref

from offloadkit import codes
from offloadkit.codes import ACK, PSH
from offloadkit.engine import checksum as ck
from offloadkit.engine import gro as G
from offloadkit.engine.segment import segment
from offloadkit.packet import csum
from offloadkit.packet.tcp_options import options_bytes
from offloadkit.trace import Trace


def tr(**cols):
    n = next(len(v) for v in cols.values())
    cols.setdefault("payload_len", [100] * n)
    cols.setdefault("ip_len", [40 + p for p in cols["payload_len"]])
    return Trace.from_columns(**cols)


def test_csum_passes_api():
    a = ck.CsumPasses.at(codes.PASS_GRO_VALIDATE, [10, 20], [0, 1])
    b = ck.CsumPasses.at(codes.PASS_CONNTRACK, [5], [3])
    c = ck.CsumPasses.concat([a, b, ck.CsumPasses.empty()])
    assert len(c) == c.len == 3 and c.total_bytes() == 35
    assert c.total_bytes(codes.PASS_CONNTRACK) == 5
    assert c.by_place() == {"GRO validation": 30, "conntrack nf_conntrack_checksum": 5}
    assert c.place.dtype == np.uint8 and c.nbytes.dtype == np.int64 and c.row.dtype == np.int64
    with pytest.raises(ValueError):
        ck.CsumPasses(np.zeros(2, np.uint8), np.zeros(1, np.int64), np.zeros(2, np.int64))


def test_rx_states_per_nic_mode():
    t = tr(vni=[-1, 7, -1, 7], csum_bad=[False, False, True, True], outer_udp_csum=[-1, 0, -1, 0])
    assert ck.rx_states(t, "unnecessary")[0].tolist() == [1, 1, 0, 0]
    assert ck.rx_states(t, "unnecessary")[1].tolist() == [0, 1, 0, 0]
    assert ck.rx_states(t, "unnecessary-outer-only")[0].tolist() == [1, 1, 0, 1]
    assert ck.rx_states(t, "unnecessary-outer-only")[1].tolist() == [0, 0, 0, 0]
    assert ck.rx_states(t, "none")[0].tolist() == [0] * 4
    assert ck.rx_states(t, "complete")[0].tolist() == [2] * 4
    with pytest.raises(ValueError, match="receive checksum mode"):
        ck.rx_states(t, "hardware")


@pytest.mark.parametrize("rule", ["old", "new"])
def test_gro_validation_equals_reference_for_every_state(rule):
    combos = list(itertools.product([0, 1, 2, 3], [0, 1, 2], [False, True], [-1, 9], [0, 0x55]))
    t = tr(csum_state=[c[0] for c in combos], csum_level=[c[1] for c in combos],
           csum_bad=[c[2] for c in combos], vni=[c[3] for c in combos],
           outer_udp_csum=[c[4] if c[3] >= 0 else -1 for c in combos], tcp_hlen=[32] * len(combos))
    st, lv = ck.rx_states(t, "trace")
    ok, refused, passes, _, _ = ck.gro_rx_validate(t, st, lv, np.ones(len(t), bool), rule)
    got = dict(zip(passes.row.tolist(), passes.nbytes.tolist()))
    for i, row in enumerate(ref.trace_rows(t)):
        e_ok, e_ref, e_bytes, _ = ref.rx_csum_verdict(row, "trace", rule)
        assert (ok[i], refused[i], got.get(i, 0)) == (e_ok, e_ref, e_bytes), combos[i]


def test_validation_skipped_for_packets_that_do_not_reach_l4():
    t = tr(csum_bad=[True, True])
    st, lv = ck.rx_states(t, "none")
    ok, _, passes, _, _ = ck.gro_rx_validate(t, st, lv, np.array([False, True]))
    assert ok.tolist() == [True, False] and passes.row.tolist() == [1]


def test_conntrack_check_nf_ip_checksum():
    t = tr(csum_state=[0, 0, 2, 2, 1, 3], csum_bad=[False, True, False, True, False, False], tcp_hlen=[20] * 6)
    t2, p = ck.conntrack_check(t, enabled=True)
    assert p.row.tolist() == [0, 1, 3] and p.nbytes.tolist() == [120] * 3
    assert set(p.place.tolist()) == {codes.PASS_CONNTRACK}
    assert t2.csum_state.tolist() == [codes.CSUM_COMPLETE, 0, codes.CSUM_UNNECESSARY, 2, 1, 3]
    assert len(ck.conntrack_check(t, enabled=False)[1]) == 0
    assert len(ck.conntrack_check(t2, enabled=True)[1]) == 2     # only the bad ones again


def test_tx_checksum_skb_checksum_help():
    t = tr(csum_state=[3, 3, 0, 3], payload_len=[100, 3000, 100, 50], gso_size=[0, 1448, 0, 0], tcp_hlen=[32] * 4)
    assert len(ck.tx_checksum(t, device_can_csum=True)) == 0
    p = ck.tx_checksum(t, device_can_csum=False)
    assert p.row.tolist() == [0, 3] and p.nbytes.tolist() == [132, 82]


def test_sw_gso_passes_one_per_segment():
    t = tr(payload_len=[3000, 1000, 2896], gso_size=[1448, 1448, 1448], tcp_hlen=[32] * 3,
           flags=[ACK | PSH] * 3, seq=[1, 3001, 4001])
    p = ck.sw_gso_passes(t, device_can_csum=False)
    assert p.row.tolist() == [0, 0, 0, 2, 2]
    assert p.nbytes.tolist() == [1480, 1480, 32 + 104, 1480, 1480]
    segs = segment(t)
    assert len(segs) == 6 and len(p) == 5                         # one pass per produced segment (row 1 passes whole)
    assert p.total_bytes() == int((segs.tcp_hlen.astype(int) + segs.payload_len)[[0, 1, 2, 4, 5]].sum())
    assert len(ck.sw_gso_passes(t, device_can_csum=True)) == 0


def test_stack_rx_passes():
    t = tr(csum_state=[0, 1, 3, 0], tcp_hlen=[20] * 4)
    p = ck.stack_rx_passes(t)
    assert p.row.tolist() == [0, 3] and p.total_bytes(codes.PASS_STACK_RX) == 240


def _tcp_bytes_checksum(t, i):
    """Independent: the pcap writer's byte-level checksum of row i (zero payload)."""
    c = {k: v[i] for k, v in t.columns.items()}
    opts = options_bytes(int(c["opt_mss"]), bool(c["opt_sackok"]), bool(c["opt_ts"]),
                         int(c["tsval"]), int(c["tsecr"]), int(c["opt_wscale"]), int(c["sack_n"]),
                         [int(x) for x in c["sack"]], int(c["tcp_hlen"]))
    thl = 20 + len(opts)
    hdr = struct.pack("!HHIIBBHHH", int(c["sport"]), int(c["dport"]), int(c["seq"]), int(c["ack"]),
                      (thl // 4) << 4, int(c["flags"]) & 0xFF, int(c["window"]), 0, int(c["urg_ptr"])) + opts
    return csum.tcp_checksums(struct.pack("!I", int(c["src_ip"])), struct.pack("!I", int(c["dst_ip"])), hdr,
                               b"", int(c["payload_len"]))


def test_fill_checksums_true_partial_and_deliberately_wrong():
    t = tr(src_ip=[0xC6120001] * 3, dst_ip=[0xC6120002] * 3, seq=[1, 2, 3], tcp_hlen=[32] * 3,
           opt_ts=[True] * 3, tsval=[9] * 3, flags=[ACK] * 3, csum_state=[0, 3, 0], csum_bad=[False, False, True])
    f = ck.fill_checksums(t)
    full0, _ = _tcp_bytes_checksum(t, 0)
    _, partial1 = _tcp_bytes_checksum(t, 1)
    full2, _ = _tcp_bytes_checksum(t, 2)
    assert f.tcp_csum[0] == full0 and f.tcp_csum[1] == partial1
    assert f.tcp_csum[2] != full2 and csum.tcpdump_verdict(int(f.tcp_csum[2]), full2) is not None
    assert ck.ip_header_ok(f).all()
    bad = f.replace(ip_csum=f.ip_csum ^ np.uint16(0x10))
    assert not ck.ip_header_ok(bad).any()


def test_report_004_pass_accounting_gro_on_vs_off():
    """bgmac router: rx csum none, conntrack on, no TX csum, no TSO (report 004)."""
    n = 40
    t = ck.fill_checksums(Trace.from_columns(seq=1 + 1448 * np.arange(n), payload_len=1448, ip_len=1500,
                                             tcp_hlen=32, opt_ts=True, flags=ACK, ip_id=np.arange(n),
                                             time_ns=np.arange(n) * 1000))
    on = G.gro(t, G.GroParams(rx_csum="none"))
    assert len(on.passes) == n                                   # pass #1: GRO validates every segment
    after, ct = ck.conntrack_check(on.out, enabled=True)
    assert len(ct) == 0                                          # merged = PARTIAL: conntrack trusts it
    tx = ck.sw_gso_passes(after, device_can_csum=False)
    assert len(tx) == n                                          # pass #2: every segment again on TX
    off = G.gro(t, G.GroParams(rx_csum="none", enabled=False))
    assert len(off.passes) == 0
    _, ct_off = ck.conntrack_check(off.out, enabled=True)
    assert len(ct_off) == n                                      # GRO off: conntrack's single pass
