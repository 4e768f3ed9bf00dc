"""Segmentation rules (spec §1-§1.4), NIC models, checksum arithmetic, and equality with the reference."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from numba import njit

from offloadkit import codes
from offloadkit.codes import ACK, CWR, ECE, FIN, PSH, URG
from offloadkit.engine import csum_math as cm
from offloadkit.engine import segment as sg
from offloadkit.trace import Trace
from reference import segment_ref as ref

SRC, DST = 0xC6120001, 0xC6120002


def sp(payload_len, gso_size, **kw):
    """A one-row super-packet trace with timestamps (tcp_hlen 32)."""
    cols = dict(payload_len=[payload_len], gso_size=[gso_size], tcp_hlen=[32], opt_ts=[True], tsval=[7],
                tsecr=[9], ip_len=[52 + payload_len], flags=[ACK | PSH], seq=[1000], ack=[5], ip_id=[100],
                src_ip=[SRC], dst_ip=[DST], sport=[80], dport=[40000], window=[235], time_ns=[123], frame=[7])
    cols.update({k: [v] for k, v in kw.items()})
    return Trace.from_columns(**cols)


def col(t, name):
    return t.columns[name].tolist()


# -- the per-segment rules -------------------------------------------------

def test_split_seq_lengths_ids_and_headers():
    t = Trace.concat([sp(3000, 1448), sp(0, 0, flags=ACK, ip_len=52, seq=4000, ip_id=103)])
    o = sg.segment(t)
    assert col(o, "payload_len") == [1448, 1448, 104, 0]
    assert col(o, "seq") == [1000, 2448, 3896, 4000]
    assert col(o, "ip_id") == [100, 101, 102, 103]
    assert col(o, "ip_len") == [1500, 1500, 156, 52]
    assert col(o, "gso_size") == [0, 0, 0, 0] and col(o, "gso_segs") == [0, 0, 0, 0]
    assert col(o, "time_ns") == [123] * 4 and col(o, "frame") == [7, 7, 7, 7]
    assert col(o, "tsval") == [7] * 4 and col(o, "ack") == [5] * 4 and col(o, "window") == [235] * 4


def test_rows_at_or_below_gso_size_pass_unchanged():
    t = Trace.concat([sp(1448, 1448), sp(500, 0), sp(1448, 1448, ip_version=6), sp(3000, 1448, drop=5)])
    o = sg.segment(t)
    assert len(o) == 4
    for name in ("payload_len", "seq", "ip_id", "gso_size", "drop", "ip_version"):
        assert col(o, name) == col(t, name)


def test_fin_psh_only_on_last_cwr_only_on_first_other_flags_copied():
    o = sg.segment(sp(3000, 1000, flags=ACK | PSH | FIN | CWR | ECE | URG))
    f = col(o, "flags")
    assert [bool(x & (PSH | FIN)) for x in f] == [False, False, True]
    assert [bool(x & CWR) for x in f] == [True, False, False]
    assert all(x & (ACK | ECE | URG) == ACK | ECE | URG for x in f)


def test_accecn_keeps_cwr_on_every_segment():
    o = sg.segment(sp(3000, 1000, flags=ACK | CWR, gso_type=codes.GSO_TCP_ACCECN))
    assert all(x & CWR for x in col(o, "flags"))


def test_fixedid_keeps_the_id_and_ids_wrap():
    assert col(sg.segment(sp(3000, 1000, gso_type=codes.GSO_TCP_FIXEDID)), "ip_id") == [100] * 3
    assert col(sg.segment(sp(3000, 1000, ip_id=65535)), "ip_id") == [65535, 0, 1]


def test_seq_wraps_mod_2_32():
    assert col(sg.segment(sp(3000, 1000, seq=2**32 - 500)), "seq") == [2**32 - 500, 500, 1500]


def test_gso_size_argument_overrides_column():
    assert col(sg.segment(sp(3000, 0), gso_size=1000), "payload_len") == [1000, 1000, 1000]
    assert col(sg.segment(sp(3000, 1448), gso_size=1500), "payload_len") == [1500, 1500]


def test_checksums_partial_and_full_match_independent_reference():
    t = sp(3000, 1448, tos=0x10, ttl=63)
    part = sg.segment(t, tx_csum=True)
    full = sg.segment(t, tx_csum=False)
    for o, state in ((part, codes.CSUM_PARTIAL), (full, codes.CSUM_NONE)):
        assert col(o, "csum_state") == [state] * 3
    for r in ref.trace_rows(full):
        assert r["ip_csum"] == ref.ip_csum(r)
        seg = ref.tcp_header_bytes(r, r["tcp_csum"]) + bytes(r["payload_len"])
        assert ref.ones_sum(ref.pseudo_header(r, len(seg)) + seg) == 0xFFFF      # verifies
    for r in ref.trace_rows(part):
        assert r["tcp_csum"] == ref.ones_sum(ref.pseudo_header(r, 32 + r["payload_len"]))


def test_hw_tso_writes_full_checksums_whatever_tx_csum():
    o = sg.segment(sp(3000, 1448), nic="hw-tso", tx_csum=True)
    assert col(o, "csum_state") == [codes.CSUM_NONE] * 3
    assert col(o, "tcp_csum") == col(sg.segment(sp(3000, 1448), tx_csum=False), "tcp_csum")


def test_csum_bad_cleared_on_recomputed_segments_only():
    t = Trace.concat([sp(3000, 1448, csum_bad=True), sp(10, 0, csum_bad=True)])
    assert col(sg.segment(t), "csum_bad") == [False, False, False, True]


# -- NIC models -------------------------------------------------------------

def test_rtl8139_legacy_report_000():
    """2880 bytes, 32-byte TCP header, MSS 1440 -> 1448 + 1432 with consecutive IDs (seed 000 macvtap)."""
    o = sg.segment(sp(2880, 1440, flags=ACK, ip_id=25879), nic="rtl8139-legacy")
    assert col(o, "payload_len") == [1448, 1432]
    assert col(o, "ip_len") == [1500, 1484]
    assert col(o, "ip_id") == [25879, 25880]
    assert col(o, "seq") == [1000, 2448]


def test_rtl8139_clears_psh_fin_on_every_frame_but_keeps_cwr():
    o = sg.segment(sp(2880, 1440, flags=ACK | PSH | FIN | CWR), nic="rtl8139-fixed")
    assert col(o, "flags") == [ACK | CWR, ACK | CWR]
    one = sg.segment(sp(1400, 1000, flags=ACK | PSH), nic="rtl8139-legacy")    # one frame: kept
    assert col(one, "flags") == [ACK | PSH] and col(one, "gso_size") == [0]


@pytest.mark.parametrize("asked,read", [(600, 2060), (800, 2308), (1000, 2316), (1023, 2307), (1200, 3076),
                                        (1320, 3340)])
def test_mask12_reads_tobias_fiebig_values(asked, read):
    gso = asked - 12                       # timestamps
    assert sg.rtl8139_read_mss(gso, 12, 1) == read
    o = sg.segment(sp(3 * gso, gso), nic="rtl8139-legacy-mask12")
    assert col(o, "payload_len")[0] == min(read, 3 * gso)


@pytest.mark.parametrize("asked,read", [(767, 3), (1000, 268)])
def test_clobbered_11bit_reads_report_values(asked, read):
    assert sg.rtl8139_read_mss(asked - 12, 11, 1) == read


def test_clobbered_mss_zero_sends_whole_frame():
    o = sg.segment(sp(1000, 512), nic="rtl8139-clobbered")       # 512 & 0x70f == 0
    assert col(o, "payload_len") == [1000] and col(o, "gso_size") == [0]


def test_rtl8139_large_gso_size_falls_back_to_kernel_gso():
    o = sg.segment(sp(6000, 3000, flags=ACK | PSH | CWR), nic="rtl8139-legacy")
    assert col(o, "payload_len") == [3000, 3000]
    assert col(o, "flags") == [ACK | CWR, ACK | PSH]


@pytest.mark.parametrize("reason", [codes.DROP_GSO_EPROTONOSUPPORT, codes.DROP_GSO_EINVAL])
def test_drop_gso_drops_multi_segment_skbs_only(reason):
    t = Trace.concat([sp(2880, 1440), sp(1440, 1440), sp(100, 0)])
    o = sg.segment(t, nic=sg.NicModel("drop-gso", drop_reason=reason))
    assert col(o, "drop") == [reason, 0, 0]
    assert col(o, "payload_len") == [2880, 1440, 100]


def test_nic_model_errors():
    with pytest.raises(ValueError, match="unknown NIC model 'e1000'; choose one of sw-gso"):
        sg.segment(sp(10, 0), nic="e1000")
    with pytest.raises(ValueError, match="drop_reason"):
        sg.NicModel("drop-gso", drop_reason=codes.DROP_MTU_SILENT)
    with pytest.raises(ValueError, match="MSS 0 is out of range"):
        sg.segment(sp(10, 0), gso_size=0)


# -- MSS from MTU, PSH by kernel version --------------------------------------

def test_mss_from_mtu():
    assert sg.mss_from_mtu(1500) == 1448
    assert sg.mss_from_mtu(1500, timestamps=False) == 1460
    assert sg.mss_from_mtu(1500, clamp=1452) == 1440                 # report 000
    assert sg.mss_from_mtu(1492) == 1440
    assert sg.mss_from_mtu(1500, sack_blocks=1) == 1436
    assert sg.mss_from_mtu(1450) == 1398                             # report 002 (VXLAN)
    assert sg.mss_from_mtu(68) == 48 - 12                            # TCP_MIN_SND_MSS floor
    with pytest.raises(ValueError, match="MTU 40 is outside 68..65535"):
        sg.mss_from_mtu(40)
    with pytest.raises(ValueError, match="SACK blocks do not fit"):
        sg.mss_from_mtu(1500, sack_blocks=4)


def test_check_mss_fits_message():
    with pytest.raises(ValueError) as e:
        sg.check_mss_fits(1600, 1500)
    assert str(e.value) == "MSS 1600 does not fit in MTU 1500: IPv4 (20) + TCP (20) + options (12) leave 1448"
    assert sg.check_mss_fits(1440, 1492) == 0


def test_tcp_forces_psh_by_kernel_version():
    assert not sg.tcp_forces_psh((4, 4)) and not sg.tcp_forces_psh((5, 3))
    assert sg.tcp_forces_psh((5, 4)) and sg.tcp_forces_psh((6, 8))


# -- checksum arithmetic ---------------------------------------------------

def test_csum_finish_zero_vs_mangled_and_corrupt():
    assert cm.csum_finish(0xFFFF) == 0 and cm.csum_finish_mangled(0xFFFF) == 0xFFFF
    assert cm.csum_finish(0x1234) == cm.csum_finish_mangled(0x1234) == (~0x1234) & 0xFFFF
    for c in (0, 1, 0xFFFE, 0xFFFF, 0x1234):
        bad = cm.corrupt_checksum(c)
        assert bad != c and {bad, c} != {0, 0xFFFF}


def test_tcp_checksum_buffer_over_real_payload():
    rng = np.random.default_rng(3)
    r = ref.trace_rows(sp(777, 0))[0]
    payload = bytes(rng.integers(0, 256, 777, dtype=np.uint8))
    buf = np.frombuffer(ref.tcp_header_bytes(r, 0xBEEF) + payload, dtype=np.uint8)
    assert cm.tcp_checksum_buffer(SRC, DST, buf, 0, len(buf)) == ref.tcp_full_csum(r, payload)
    ipb = np.frombuffer(ref.ip_header_bytes(r), dtype=np.uint8)
    assert cm.ip_checksum_buffer(ipb, 0, 20) == ref.ip_csum(r)


def test_trace_checksums_match_reference_with_syn_options():
    t = Trace.from_columns(tcp_hlen=[40, 44, 20], opt_mss=[1460, 0, 0], opt_sackok=[True, False, False],
                           opt_ts=[True, True, False], tsval=[5, 6, 0], opt_wscale=[7, -1, -1],
                           sack_n=[0, 2, 0], sack=[[0] * 8, [1, 2, 3, 4, 0, 0, 0, 0], [0] * 8],
                           flags=[codes.SYN, ACK, ACK], src_ip=SRC, dst_ip=DST, ip_len=[60, 64, 40])
    ip, full = cm.trace_checksums(t, True)
    _, part = cm.trace_checksums(t, False)
    for i, r in enumerate(ref.trace_rows(t)):
        assert ip[i] == ref.ip_csum(r) and full[i] == ref.tcp_full_csum(r) and part[i] == ref.tcp_pseudo_csum(r)


# -- njit building blocks are callable from other njit code --------------------

@njit
def _sim_step(payload_len, gso_size, flags, ip_id, params):
    chunk = sg.nic_chunk_size(sg.NIC_RTL8139_LEGACY, params, gso_size, 20, 32)
    n = sg.segments_for(payload_len, chunk)
    total = 0
    for k in range(n):
        total += sg.segment_payload(payload_len, chunk, k, n)
    return n, total, sg.segment_flags(flags, n - 1, n, 0, sg.NIC_SW_GSO), sg.segment_ip_id(ip_id, 1, 0, 0)


def test_building_blocks_from_njit():
    n, total, f, iid = _sim_step(2880, 1440, ACK | PSH, 7, sg.NicModel("rtl8139-legacy").params())
    assert (n, total, f, iid) == (2, 2880, ACK | PSH, 8)


# -- properties and equality with the reference --------------------------------

@st.composite
def traces(draw):
    n = draw(st.integers(1, 12))
    ints = lambda lo, hi: draw(st.lists(st.integers(lo, hi), min_size=n, max_size=n))
    return Trace.from_columns(
        payload_len=ints(0, 16000), gso_size=draw(st.lists(st.sampled_from([0, 8, 100, 536, 1000, 1440, 1448,
                                                                             2000, 2047, 3000]), min_size=n,
                                                            max_size=n)),
        tcp_hlen=draw(st.lists(st.sampled_from([20, 32, 44]), min_size=n, max_size=n)),
        opt_ts=[True] * n, tsval=ints(0, 2**32 - 1), sack_n=ints(0, 2),
        sack=[[draw(st.integers(0, 2**32 - 1)) for _ in range(8)] for _ in range(n)],
        flags=ints(0, 0x1FF), seq=ints(0, 2**32 - 1), ack=ints(0, 2**32 - 1), ip_id=ints(0, 65535),
        src_ip=ints(0, 2**32 - 1), dst_ip=ints(0, 2**32 - 1), sport=ints(0, 65535), dport=ints(0, 65535),
        window=ints(0, 65535), urg_ptr=ints(0, 65535), tos=ints(0, 255), ttl=ints(1, 255),
        df=draw(st.lists(st.booleans(), min_size=n, max_size=n)),
        gso_type=draw(st.lists(st.sampled_from([0, codes.GSO_TCP_FIXEDID, codes.GSO_TCP_ACCECN]), min_size=n,
                               max_size=n)),
        drop=draw(st.lists(st.sampled_from([0, 0, 0, 5]), min_size=n, max_size=n)),
        ip_version=draw(st.lists(st.sampled_from([4, 4, 4, 6]), min_size=n, max_size=n)))


def _fix_ip_len(t):
    return t.replace(ip_len=20 + t.tcp_hlen.astype(np.int32) + t.payload_len)


NICS = list(sg.NIC_MODELS)


@settings(max_examples=60, deadline=None)
@given(traces(), st.sampled_from(NICS), st.booleans(), st.sampled_from([None, 8, 536, 1448]))
def test_kernel_equals_reference(t, nic, tx_csum, gso):
    t = _fix_ip_len(t)
    o = sg.segment(t, gso_size=gso, nic=nic, tx_csum=tx_csum)
    want = ref.segment_rows(ref.trace_rows(t), gso_size=gso, nic=nic, tx_csum=tx_csum)
    got = ref.trace_rows(o)
    assert len(got) == len(want)
    src = [w["src_row"] for w in want]
    assert col(o, "frame") == [int(t.frame[i]) for i in src]
    for g, w in zip(got, want):
        for k in ref.ROW_FIELDS[:-1]:
            assert g[k] == w[k], (k, g, w)


@settings(max_examples=60, deadline=None)
@given(traces(), st.sampled_from(["sw-gso", "hw-tso", "rtl8139-fixed"]))
def test_properties(t, nic):
    t = _fix_ip_len(t).replace(frame=np.arange(len(t)))
    o = sg.segment(t, nic=nic)
    assert ref.trace_rows(sg.segment(t, nic=nic)) == ref.trace_rows(o)           # deterministic
    assert np.array_equal(np.unique(o.frame), np.arange(len(t)))                 # order, nothing lost
    assert np.all(np.diff(o.frame) >= 0)
    for i in range(len(t)):
        segs = o[o.frame == i]
        L, g, s0 = int(t.payload_len[i]), int(t.gso_size[i]), int(t.seq[i])
        assert int(segs.payload_len.sum()) == L                                     # bytes conserved
        if len(segs) == 1:
            continue
        assert np.all(segs.payload_len <= g) and np.all(segs.payload_len[:-1] == g)
        seq = segs.seq.astype(np.int64)
        assert np.all((seq[1:] - seq[:-1]) % 2**32 == segs.payload_len[:-1])        # sequence space
        assert (int(seq[-1]) + int(segs.payload_len[-1]) - s0) % 2**32 == L % 2**32
        ids = segs.ip_id.astype(np.int64)
        if t.ip_version[i] == 6 or (t.gso_type[i] & codes.GSO_TCP_FIXEDID and (nic != "rtl8139-fixed" or g > 2047)):
            assert np.all(ids == t.ip_id[i])
        else:
            assert np.all(np.diff(ids) % 65536 == 1)                                 # IDs consecutive
        f = segs.flags
        if nic == "rtl8139-fixed" and g <= 2047 and t.ip_version[i] == 4:
            assert not np.any(f & (PSH | FIN))
        else:
            assert not np.any(f[:-1] & (PSH | FIN))
            assert (f[-1] & (PSH | FIN)) == (t.flags[i] & (PSH | FIN))
            if not t.gso_type[i] & codes.GSO_TCP_ACCECN:
                assert not np.any(f[1:] & CWR)
        assert np.all(segs.ip_len == 20 + segs.tcp_hlen.astype(np.int32) + segs.payload_len)


def test_warmup_runs():
    sg.warmup()
    cm.warmup()


# -- seed 000 end to end: the guest's super-packets through each NIC model -----

def test_seed_000_guest_super_packets_become_the_macvtap_pattern():
    from pathlib import Path

    from offloadkit.engine.path import apply_hop
    from offloadkit.io.tcpdump import parse
    data = Path(__file__).resolve().parents[2] / "offloadkit" / "data" / "reports"
    guest = parse((data / "rtl8139_guest.txt").read_text())
    mac = parse((data / "rtl8139_macvtap.txt").read_text())
    gso = sg.mss_from_mtu(1500, clamp=1452)                        # peer MSS 1452, timestamps -> 1440
    sup = guest[guest.payload_len == 2 * gso]
    assert len(sup) >= 2
    legacy = sg.segment(sup.replace(gso_size=np.full(len(sup), gso)), nic="rtl8139-legacy")
    server = (mac.sport == 80) & (mac.payload_len > 0)
    seen = mac[server & (mac.payload_len != gso)]                   # macvtap: after the NIC, minus the retransmit
    n = min(len(legacy), len(seen))
    assert n >= 5
    assert col(legacy, "payload_len")[:n] == col(seen, "payload_len")[:n]
    assert col(legacy, "ip_len")[:n] == col(seen, "ip_len")[:n]
    assert np.all(np.diff(legacy.ip_id.astype(int)) == 1)                    # 38670, 38671, 38672, ...
    assert col(legacy, "flags") == [ACK] * len(legacy)                       # 4.4 guest: no PSH
    fixed = sg.segment(sup.replace(gso_size=np.full(len(sup), gso)), nic="rtl8139-fixed")
    assert set(col(fixed, "payload_len")) == {1440} and set(col(fixed, "ip_len")) == {1492}
    assert col(apply_hop(legacy, 1500, codes.ENC_PPPOE), "drop") == [codes.DROP_MTU_SILENT, 0] * len(sup)
    assert not apply_hop(fixed, 1500, codes.ENC_PPPOE).drop.any()


def test_untouched_columns_are_the_input_rows_repeated_and_writable():
    """segment() copies a one-value column by a fill (or calloc zeros): same values as np.repeat, writable."""
    from offloadkit.trace import repeat_rows
    t = Trace.from_columns(payload_len=[2896, 100, 4344], gso_size=[1448, 0, 1448], tcp_hlen=32, opt_ts=True,
                           ip_len=[2948, 152, 4396], flags=ACK, seq=[1, 2897, 2997], tsval=[5, 6, 7], ttl=64,
                           sack=[[1, 2] + [0] * 6, [0] * 8, [3, 4] + [0] * 6])
    out = sg.segment(t)
    counts = np.array([2, 1, 3])
    for name in ("tsval", "ttl", "vni", "src_ip6", "sack", "vlan_tci", "time_ns"):
        assert np.array_equal(out.columns[name], np.repeat(t.columns[name], counts, axis=0)), name
        assert out.columns[name].flags.writeable and out.columns[name].dtype == t.columns[name].dtype
    for col in (np.zeros((3, 16), np.uint8), np.full(3, -1, np.int32), np.array([1, 2, 3])):
        assert np.array_equal(repeat_rows(col, counts, 6), np.repeat(col, counts, axis=0))


def test_api_columns_made_on_first_read_equal_the_eager_ones():
    """segment() and gro() make the columns they do not compute when first read (trace.LazyColumns):
    the values of the eager gather, through replace() and pickling too."""
    import pickle

    from offloadkit.engine import gro as G
    from offloadkit.trace import FIELDS, LazyColumns, repeat_rows
    t = Trace.from_columns(payload_len=[2880, 100, 4000], gso_size=[1440, 0, 1000], tcp_hlen=32, opt_ts=True,
                           ip_len=[2932, 152, 4052], flags=[ACK | PSH, ACK, ACK], seq=[1, 2881, 3000],
                           tsval=[5, 6, 7], sport=[1, 2, 3], csum_bad=[True, True, False], ttl=[1, 2, 3])
    out = sg.segment(t)
    assert isinstance(out.columns, LazyColumns) and list(out.columns) == list(FIELDS)
    counts = sg.segment_counts(t)
    for k in ("tsval", "sport", "ttl", "time_ns", "sack"):
        assert np.array_equal(out.columns[k], repeat_rows(t.columns[k], counts, len(out))), k
    assert out.csum_bad.tolist() == [False, False, True, False, False, False, False]
    r = out.replace(window=np.arange(len(out)))
    assert np.array_equal(r.columns["ack"], out.columns["ack"]) and r.window.tolist() == list(range(len(out)))
    back = pickle.loads(pickle.dumps(out))
    assert all(np.array_equal(back.columns[k], out.columns[k]) for k in FIELDS)
    res = G.gro(t)
    first = np.unique(res.out_row, return_index=True)[1]
    for k in ("tsval", "sport", "ttl", "sack", "tcp_hlen"):
        assert np.array_equal(res.out.columns[k], t.columns[k][first]), k
