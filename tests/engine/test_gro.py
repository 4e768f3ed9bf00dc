"""GRO rules (spec §3), one focused test per rule with two or three hand-built packets,
like the kernel's own tools/testing/selftests/net/gro.c; kernel == reference; round trips."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from offloadkit import codes
from offloadkit.codes import ACK, CWR, FIN, PSH, RST, SYN, URG
from offloadkit.engine import checksum as ck
from offloadkit.engine import gro as G
from offloadkit.trace import Trace
from reference import gro_ref as ref

R = codes
SRC, DST = 0xC0A801C8, 0xC0A80164          # gro.c's 192.168.1.200 -> 192.168.1.100
P = 100                                    # gro.c's PAYLOAD_LEN


def pkts(*specs, fill=True, **common):
    """A trace from per-packet dicts; seq defaults to contiguous, ip_id to incrementing."""
    rows = []
    seq = 100
    for k, s in enumerate(specs):
        r = dict(seq=seq, payload_len=P, flags=ACK, ack=100, window=65535, ip_id=k, time_ns=k * 1000,
                 src_ip=SRC, dst_ip=DST, sport=1500, dport=8000, ttl=8)
        r.update(common)
        r.update(s)
        r.setdefault("ip_len", r.get("ip_hlen", 20) + r.get("tcp_hlen", 20) + r["payload_len"])
        rows.append(r)
        seq = (r["seq"] + r["payload_len"]) & 0xFFFFFFFF
    defaults = Trace.empty(1).columns
    cols = {k: [r.get(k, defaults[k][0]) for r in rows] for k in set().union(*rows)}
    t = Trace.from_columns(**cols)
    return ck.fill_checksums(t) if fill else t


def run(t, **kw):
    kw.setdefault("poll_gap_ns", None)
    return G.gro(t, G.GroParams(**kw))


def lens(res):
    return res.out.payload_len.tolist()


def reasons(res):
    return res.reasons.tolist()


# -- data ------------------------------------------------------------------

def test_same_flow_data_merges_into_kernel_style_packet():
    t = pkts({}, {})
    r = run(t)
    assert lens(r) == [2 * P]
    assert reasons(r) == [R.GRO_FIRST, R.GRO_MERGED]
    o = r.out
    assert o.ip_len[0] == 20 + 20 + 2 * P and o.gso_size[0] == P and o.gso_segs[0] == 2
    assert o.csum_state[0] == R.CSUM_PARTIAL and o.seq[0] == 100 and o.ip_id[0] == 0
    assert o.gso_type[0] & R.GSO_TCPV4
    assert r.out_row.tolist() == [0, 0]
    assert r.annotated().gro_reason.tolist() == [R.GRO_FIRST, R.GRO_MERGED]
    assert r.reason_counts() == {"merged": 1, "first of a flow": 1} and r.segments_per_packet == 2
    ipc, _ = ck.csum_math.trace_checksums(o, True)
    _, pseudo = ck.csum_math.trace_checksums(o, False)
    assert o.ip_csum[0] == ipc[0] and o.tcp_csum[0] == pseudo[0]


def test_large_then_small_merges_and_closes():
    r = run(pkts({}, {"payload_len": P // 2}, {}))
    assert lens(r) == [P + P // 2, P]
    assert r.closed_by[0] == R.GRO_SIZE
    assert reasons(r) == [R.GRO_FIRST, R.GRO_MERGED, R.GRO_SIZE]


def test_small_then_large_does_not_merge():
    r = run(pkts({"payload_len": P // 2}, {}))
    assert lens(r) == [P // 2, P]
    assert reasons(r) == [R.GRO_FIRST, R.GRO_SIZE]


def test_single_packet_delivered_unchanged_with_gso_size_zero():
    t = pkts({"gso_size": 0})
    r = run(t)
    assert lens(r) == [P] and r.out.gso_size[0] == 0 and r.out.gso_segs[0] == 0
    assert r.out.ip_csum[0] == t.ip_csum[0] and r.out.tcp_csum[0] == t.tcp_csum[0]


# -- flags -------------------------------------------------------------------

def test_psh_merges_and_ends_coalescing():
    r = run(pkts({}, {}, {"flags": ACK | PSH}, {}, {}))
    assert lens(r) == [3 * P, 2 * P]
    assert r.out.flags[0] & PSH and not r.out.flags[1] & PSH
    assert r.closed_by[0] == R.GRO_FLAGS
    assert reasons(r)[3] == R.GRO_FLAGS           # boundary before packet 3: the PSH


@pytest.mark.parametrize("flag", [SYN, RST, URG])
def test_syn_rst_urg_end_coalescing(flag):
    t = pkts({}, {}, {"flags": ACK | flag, "payload_len": 0, "seq": 300}, {"seq": 300}, {})
    r = run(t)
    assert lens(r) == [2 * P, 0, 2 * P]
    assert reasons(r)[:3] == [R.GRO_FIRST, R.GRO_MERGED, R.GRO_FLAGS]


def test_fin_merges_and_is_ored_in():
    r = run(pkts({}, {"flags": ACK | FIN}))
    assert lens(r) == [2 * P] and r.out.flags[0] & FIN


def test_ack_differs():
    r = run(pkts({}, {"ack": 101}))
    assert lens(r) == [P, P] and reasons(r)[1] == R.GRO_ACK_DIFFERS


def test_window_differs_is_a_flag_word_difference():
    r = run(pkts({}, {"window": 1000}))
    assert lens(r) == [P, P] and reasons(r)[1] == R.GRO_FLAGS


def test_ece_differs():
    r = run(pkts({}, {"flags": ACK | codes.ECE}))
    assert lens(r) == [P, P] and reasons(r)[1] == R.GRO_FLAGS


def test_cwr_old_rule_flushes_new_rule_compares():
    t = pkts({}, {"flags": ACK | CWR})
    assert lens(run(t, cwr_rule="old")) == [P, P]
    assert reasons(run(t, cwr_rule="old"))[1] == R.GRO_FLAGS
    assert lens(run(t, cwr_rule="accecn")) == [P, P]     # a change of CWR flushes
    both = pkts({"flags": ACK | CWR}, {"flags": ACK | CWR})
    assert lens(run(both, cwr_rule="old")) == [P, P]
    r = run(both, cwr_rule="accecn")
    assert lens(r) == [2 * P] and r.out.gso_type[0] & R.GSO_TCP_ACCECN
    head = pkts({"flags": ACK | CWR}, {})
    r = run(head, cwr_rule="old")                        # later non-CWR segments merge onto a CWR head
    assert lens(r) == [2 * P] and r.out.gso_type[0] & R.GSO_TCP_ECN


# -- TCP -----------------------------------------------------------------------

def test_seq_gap():
    r = run(pkts({}, {"seq": 100 + P + 1}))
    assert lens(r) == [P, P] and reasons(r)[1] == R.GRO_SEQ_GAP


def test_pure_ack_never_held_and_flushes_the_flow():
    r = run(pkts({"payload_len": 0}, {"payload_len": 0}, {"payload_len": 0, "ack": 101}))
    assert lens(r) == [0, 0, 0] and reasons(r) == [R.GRO_PURE_ACK] * 3
    r = run(pkts({}, {"payload_len": 0, "seq": 200}))
    assert lens(r) == [P, 0] and reasons(r)[1] == R.GRO_PURE_ACK


def test_timestamps_must_be_identical():
    ts = dict(tcp_hlen=32, opt_ts=True)
    r = run(pkts(dict(ts, tsval=0), dict(ts, tsval=0), dict(ts, tsval=100), dict(ts, tsval=100)))
    assert lens(r) == [2 * P, 2 * P]
    assert reasons(r) == [R.GRO_FIRST, R.GRO_MERGED, R.GRO_OPTIONS_DIFFER, R.GRO_MERGED]


def test_option_layout_differs_via_raw_option_key():
    ts = dict(tcp_hlen=32, opt_ts=True)
    t = pkts(ts, ts, ts)
    r = G.gro(t, G.GroParams(poll_gap_ns=None), G.GroHints(opt_key=np.array([1, 1, 2], np.uint64)))
    assert lens(r) == [2 * P, P] and reasons(r)[2] == R.GRO_OPTIONS_DIFFER


def test_different_options_and_header_length():
    r = run(pkts(dict(tcp_hlen=32, opt_ts=True), dict(tcp_hlen=32, opt_ts=True), dict(tcp_hlen=24, opt_wscale=0)))
    assert lens(r) == [2 * P, P] and reasons(r)[2] == R.GRO_OPTIONS_DIFFER


def test_bad_tcp_checksum_validated_in_software_and_overtakes():
    t = pkts({}, {"csum_bad": True}, {"seq": 200, "ip_id": 1})
    r = run(t, rx_csum="none")
    assert lens(r) == [P, 2 * P]                       # the bad one first; the held packet kept going
    assert reasons(r) == [R.GRO_FIRST, R.GRO_CHECKSUM, R.GRO_MERGED]
    assert r.out.drop[0] == R.DROP_BAD_CSUM and r.out.csum_state[0] == R.CSUM_NONE
    assert r.passes.row.tolist() == [0, 1, 2]
    assert r.passes.nbytes.tolist() == [20 + P] * 3
    assert set(r.passes.place.tolist()) == {R.PASS_GRO_VALIDATE}


@pytest.mark.parametrize("mode", ["unnecessary", "complete"])
def test_bad_checksum_never_merges_whatever_the_nic(mode):
    r = run(pkts({}, {"csum_bad": True}), rx_csum=mode)
    assert lens(r) == [P, P] and reasons(r)[1] == R.GRO_CHECKSUM
    assert r.passes.row.tolist() == [1]                # only the bad one is summed in software


def test_rx_csum_states_and_passes():
    t = pkts({}, {})
    assert len(run(t, rx_csum="unnecessary").passes) == 0
    assert len(run(t, rx_csum="complete").passes) == 0
    r = run(pkts({}), rx_csum="none")
    assert r.out.csum_state[0] == R.CSUM_UNNECESSARY and r.out.csum_level[0] == 0
    assert r.passes.total_bytes(R.PASS_GRO_VALIDATE) == 20 + P
    r = run(pkts({"csum_state": R.CSUM_NONE}, {"csum_state": R.CSUM_UNNECESSARY}), rx_csum="trace")
    assert r.passes.row.tolist() == [0]


# -- IP ------------------------------------------------------------------------

def test_ttl_differs():
    r = run(pkts({}, {"ttl": 7}))
    assert lens(r) == [P, P] and reasons(r)[1] == R.GRO_IP_RULE


@pytest.mark.parametrize("tos", [1, 2])               # TOS and ECN bits
def test_tos_or_ecn_differs(tos):
    r = run(pkts({}, {"tos": tos}))
    assert lens(r) == [P, P] and reasons(r)[1] == R.GRO_IP_RULE


def test_df_differs():
    r = run(pkts({}, {"df": False}))
    assert lens(r) == [P, P] and reasons(r)[1] == R.GRO_IP_RULE


@pytest.mark.parametrize("ids,df,expect", [
    ((8, 9), True, [2 * P]), ((8, 8), True, [2 * P]), ((8, 9), False, [2 * P]), ((8, 8), False, [2 * P]),
    ((8, 9, 9), True, [2 * P, P]), ((8, 8, 9), True, [2 * P, P]), ((8, 500), True, [P, P]),
])
def test_ip_id_incrementing_fixed_random(ids, df, expect):
    t = pkts(*[{"ip_id": i, "df": df} for i in ids])
    r = run(t)
    assert lens(r) == expect
    if expect == [P, P]:
        assert reasons(r)[1] == R.GRO_IP_RULE


def test_ip_id_fixed_sets_fixedid_gso_type():
    r = run(pkts({"ip_id": 8}, {"ip_id": 8}, {"ip_id": 8}))
    assert lens(r) == [3 * P] and r.out.gso_type[0] & R.GSO_TCP_FIXEDID


def test_ip_id_old_rule_needs_df_for_fixed():
    t = pkts({"ip_id": 8, "df": False}, {"ip_id": 8, "df": False})
    assert lens(run(t, ipid_rule="df-fixed")) == [P, P]
    assert lens(run(t, ipid_rule="current")) == [2 * P]


def test_ip_options_overtake_the_held_packet():
    t = pkts({}, {"ip_hlen": 32}, {})
    r = run(t)
    assert lens(r) == [P, P, P]
    assert r.out.ip_hlen.tolist() == [32, 20, 20]      # delivered at once, before the held packet
    assert reasons(r) == [R.GRO_FIRST, R.GRO_IP_RULE, R.GRO_SEQ_GAP]


def test_fragment_overtakes_and_held_flow_continues():
    r = run(pkts({}, {"frag": 0x2000}, {"seq": 200, "ip_id": 1}))
    assert lens(r) == [P, 2 * P] and reasons(r) == [R.GRO_FIRST, R.GRO_IP_RULE, R.GRO_MERGED]


def test_bad_ip_header_checksum():
    t = pkts({}, {})
    t.ip_csum[1] ^= 0x0101
    r = run(t)
    assert lens(r) == [P, P] and reasons(r)[1] == R.GRO_IP_RULE
    assert lens(run(t, verify_ip_csum=False)) == [2 * P]


def test_length_mismatch_sets_cb_flush_and_flushes_the_held_packet():
    t = pkts({}, {}, {})
    h = G.GroHints(soft_flush=np.array([False, True, False]))
    r = G.gro(t, G.GroParams(poll_gap_ns=None), h)
    assert lens(r) == [P, P, P] and reasons(r) == [R.GRO_FIRST, R.GRO_IP_RULE, R.GRO_IP_RULE]


# -- size -----------------------------------------------------------------------

def _large(remainder, **kw):
    mss = 4096 - 20 - 40                                # gro.c's MSS
    n = (65535 - 20 - 40) // mss
    specs = [{"payload_len": mss}] * n + [{"payload_len": remainder},
                                          {"payload_len": remainder, "seq": 100 + (n + 1) * mss}]
    return run(pkts(*specs), **kw), mss, n


def test_64k_limit_like_gro_c():
    r, mss, n = _large(919)                              # 20+20+16*4036+919 = 65535: fits
    assert lens(r) == [n * mss + 919, 919]
    r, mss, n = _large(920)                              # one byte more: does not merge
    assert lens(r) == [n * mss, 920, 920]
    assert reasons(r)[n] == R.GRO_SIZE


def test_big_tcp_max_size_lifts_the_limit():
    r, mss, n = _large(920, max_size=200_000)
    assert lens(r)[0] == n * mss + 920 and r.out.ip_len[0] > 65535


# -- flow table and NAPI ------------------------------------------------------------

def test_budget_end_flushes_everything_below_hz_1000():
    r = run(pkts({}, {}, {}), napi_budget=2, hz=250)
    assert lens(r) == [2 * P, P] and reasons(r)[2] == R.GRO_END_OF_POLL


def test_budget_end_keeps_packets_held_this_jiffy():
    """HZ >= 1000: __napi_poll flushes only packets held before the current jiffy."""
    r = run(pkts({"time_ns": 0}, {"time_ns": 100}, {"time_ns": 200}), napi_budget=2)
    assert lens(r) == [3 * P] and reasons(r) == [R.GRO_FIRST, R.GRO_MERGED, R.GRO_MERGED]
    r = run(pkts({"time_ns": 0}, {"time_ns": 1_000_000}, {"time_ns": 1_000_100}), napi_budget=2)
    assert lens(r) == [2 * P, P] and reasons(r)[2] == R.GRO_END_OF_POLL   # held in jiffy 0, flushed in jiffy 1
    assert r.out.time_ns.tolist() == [1_000_000, 1_000_100]


def test_budget_end_walk_stops_at_first_young_packet():
    """__gro_flush_chain walks a bucket oldest first and returns at the first packet
    held this jiffy: the packets behind it stay held into the next poll."""
    a, b, c = ({"sport": 1000 + k, "seq": 100} for k in range(3))
    t = pkts(dict(a, time_ns=0), dict(b, time_ns=1_000_000), dict(c, time_ns=1_000_100),
             dict(a, seq=100 + P, ip_id=1, time_ns=1_000_200), dict(b, seq=100 + P, ip_id=2, time_ns=1_000_300))
    r = run(t, napi_budget=3, rx_hash="zero")            # one bucket: a (jiffy 0), b and c (jiffy 1)
    assert r.out.sport.tolist() == [1000, 1001, 1002, 1000] and lens(r) == [P, 2 * P, P, P]
    assert r.closed_by.tolist()[0] == R.GRO_END_OF_POLL and reasons(r)[3] == R.GRO_END_OF_POLL
    assert reasons(r)[4] == R.GRO_MERGED                # b, held this jiffy, survived the budget end
    r250 = run(t, napi_budget=3, rx_hash="zero", hz=250)  # HZ < 1000: everything goes at the budget end
    assert reasons(r250)[3:] == [R.GRO_END_OF_POLL, R.GRO_END_OF_POLL] and lens(r250) == [P] * 5


def _sports_in_buckets(want):
    """Source ports whose flows hash to the given buckets (of 8), in that order."""
    t = pkts(*({"sport": sp} for sp in range(1000, 1200)))
    bucket = G.prepare(t, G.GroParams())["bucket"]
    return [1000 + int(np.flatnonzero(bucket == b)[0]) for b in want]


def test_budget_end_on_last_queued_packet_then_queue_empty():
    """The budget runs out on the last packet before a gap: old packets go first
    (__napi_poll, every bucket), the rest at the empty repoll (napi_complete_done)."""
    young, old = _sports_in_buckets([0, 1])
    t = pkts({"sport": old, "seq": 100, "time_ns": 0}, {"sport": young, "seq": 100, "time_ns": 1_000_000},
             {"sport": old, "seq": 100 + P, "time_ns": 9_000_000})
    r = G.gro(t, G.GroParams(napi_budget=2, poll_gap_ns=1_000_000))
    assert r.out.sport.tolist() == [old, young, old]     # bucket 1's old packet before bucket 0's young one
    r250 = G.gro(t, G.GroParams(napi_budget=2, poll_gap_ns=1_000_000, hz=250))
    assert r250.out.sport.tolist() == [young, old, old]  # HZ 250: one flush, buckets ascending


def test_poll_gap_ends_the_poll():
    t = pkts({"time_ns": 0}, {"time_ns": 10}, {"time_ns": 5_000_000})
    r = G.gro(t, G.GroParams(poll_gap_ns=1_000_000))
    assert lens(r) == [2 * P, P] and reasons(r)[2] == R.GRO_END_OF_POLL
    assert r.out.time_ns.tolist() == [10, 5_000_000]


def test_table_full_evicts_oldest():
    flows = [{"sport": 1000 + f, "seq": 100} for f in range(9)]
    again = [{"sport": 1000, "seq": 100 + P, "ip_id": 0}, {"sport": 1008, "seq": 100 + P, "ip_id": 9}]
    r = run(pkts(*flows, *again), rx_hash="zero")
    assert r.closed_by[0] == R.GRO_TABLE_FULL and r.out.sport[0] == 1000
    assert reasons(r)[9] == R.GRO_TABLE_FULL            # flow 1000's held packet was evicted ...
    assert r.out.sport[1] == 1001 and r.closed_by[1] == R.GRO_TABLE_FULL   # ... and evicts the next oldest
    assert reasons(r)[10] == R.GRO_MERGED               # the newest flow is still held
    assert len(r.out) == 10


def test_flush_order_buckets_ascending_oldest_first():
    t = pkts(*[{"sport": 2000 + f} for f in range(12)])
    prep = G.prepare(t, G.GroParams())
    r = run(t)
    b = prep["bucket"][r.out.sport - 2000]
    assert np.all(np.diff(b) >= 0)
    for bb in np.unique(b):
        s = r.out.sport[b == bb]
        assert np.all(np.diff(s) > 0)                   # arrival order within a bucket


def test_gso_input_merges_by_count():
    t = pkts({"payload_len": 3 * P, "gso_size": P, "gso_segs": 3}, {"seq": 400, "ip_id": 3})
    r = run(t)
    assert lens(r) == [4 * P] and r.out.gso_segs[0] == 4 and r.out.gso_size[0] == P


def test_gro_off_passes_everything():
    r = run(pkts({}, {}), enabled=False)
    assert lens(r) == [P, P] and reasons(r) == [R.GRO_OFF] * 2 and len(r.passes) == 0


# -- VLAN, VXLAN, IPv6 ------------------------------------------------------------------

def test_vlan_tag_must_match():
    r = run(pkts({"vlan_tci": 5, "encap": R.ENC_VLAN, "l2_bytes": 18},
                 {"vlan_tci": 6, "encap": R.ENC_VLAN, "l2_bytes": 18}))
    assert lens(r) == [P, P] and reasons(r)[1] == R.GRO_NOT_SAME_FLOW
    r = run(pkts(*[{"vlan_tci": 5, "encap": R.ENC_VLAN, "l2_bytes": 18}] * 2))
    assert lens(r) == [2 * P]


VX = {"vni": 42, "encap": R.ENC_VXLAN, "l2_bytes": 64}


@pytest.mark.parametrize("mode,outer,rule,merged,passes", [
    ("unnecessary", 0, "old", True, 0),
    ("unnecessary-outer-only", 0, "old", False, 0),      # report 002: mlx4, zero outer checksum
    ("unnecessary-outer-only", 0, "new", True, 2),       # newer kernels sum the inner TCP in software
    ("unnecessary-outer-only", 0x1234, "old", True, 0),  # outer checksum conversion
    ("complete", 0, "old", True, 0),
    ("none", 0, "old", False, 0),
    ("none", 0x1234, "old", True, 2),                    # outer UDP summed in software
])
def test_vxlan_gate_per_checksum_state(mode, outer, rule, merged, passes):
    t = pkts(dict(VX, outer_udp_csum=outer), dict(VX, outer_udp_csum=outer))
    r = run(t, rx_csum=mode, tunnel_rule=rule)
    assert lens(r) == ([2 * P] if merged else [P, P])
    assert len(r.passes) == passes
    if not merged:
        assert reasons(r) == [R.GRO_CHECKSUM] * 2 and r.out.drop.tolist() == [0, 0]
    else:
        assert r.out.gso_type[0] & (R.GSO_UDP_TUNNEL_CSUM if outer else R.GSO_UDP_TUNNEL)


def test_ipv6_merges_and_traffic_class_differs():
    a = np.arange(16, dtype=np.uint8)
    v6 = dict(ip_version=6, src_ip6=a, dst_ip6=a[::-1], ip_hlen=40, ip_len=60 + P)
    r = run(pkts(v6, v6, fill=False))
    assert lens(r) == [2 * P] and r.out.ip_len[0] == 40 + 20 + 2 * P and r.out.gso_type[0] & G.GSO_TCPV6
    r = run(pkts(v6, dict(v6, tos=0xF0), fill=False))
    assert lens(r) == [P, P] and reasons(r)[1] == R.GRO_IP_RULE
    r = run(pkts(v6, dict(v6, ip_id=77), fill=False))  # no IP ID in IPv6
    assert lens(r) == [2 * P]


def test_ipv6_flow_label_is_part_of_the_flow():
    """ipv6_gro_receive: first_word & htonl(0xF00FFFFF) must be 0, so another flow label is another flow;
    a differing traffic class (0x0FF00000) only flushes (previous test)."""
    a = np.arange(16, dtype=np.uint8)
    v6 = dict(ip_version=6, src_ip6=a, dst_ip6=a[::-1], ip_hlen=40, ip_len=60 + P, flow_label=0x12345)
    r = run(pkts(v6, dict(v6, flow_label=0x12346), fill=False))
    assert lens(r) == [P, P] and reasons(r)[1] == R.GRO_NOT_SAME_FLOW
    r = run(pkts(v6, v6, dict(v6, flow_label=0x54321, seq=300), dict(v6, seq=300), fill=False))
    assert sorted(lens(r)) == [P, 3 * P]
    assert lens(run(pkts(dict(flow_label=0x12345), dict(flow_label=0x54321)))) == [2 * P]   # IPv4: no flow label


def test_ipv6_extension_headers_via_flow_key():
    a = np.arange(16, dtype=np.uint8)
    v6 = dict(ip_version=6, src_ip6=a, dst_ip6=a, ip_hlen=48, ip_len=68 + P)
    t = pkts(v6, v6, fill=False)
    same = G.gro(t, G.GroParams(), G.GroHints(flow_key=np.array([5, 5], np.uint64)))
    diff = G.gro(t, G.GroParams(), G.GroHints(flow_key=np.array([5, 6], np.uint64)))
    assert lens(same) == [2 * P] and lens(diff) == [P, P]
    assert reasons(diff)[1] == R.GRO_NOT_SAME_FLOW


def test_params_validation():
    with pytest.raises(ValueError, match="budget"):
        G.GroParams(napi_budget=0)
    with pytest.raises(ValueError, match="cwr_rule"):
        G.GroParams(cwr_rule="new")
    with pytest.raises(ValueError, match="receive checksum mode"):
        G.GroParams(rx_csum="maybe")
    with pytest.raises(ValueError, match="power of two"):
        G.GroParams(buckets=6)


# -- kernel == reference -----------------------------------------------------------------

def random_stream(seed, n=300, flows=12, dt=1000):
    rng = np.random.default_rng(seed)
    flow = rng.integers(0, flows, n)
    nxt = {f: 1000 * f for f in range(flows)}
    ids = {f: int(rng.integers(0, 65536)) for f in range(flows)}
    vni = {f: int(rng.choice([-1, -1, 40 + f])) for f in range(flows)}
    outer = {f: int(rng.choice([0, 0x1111])) if vni[f] >= 0 else -1 for f in range(flows)}
    specs = []
    t = 0
    for i in range(n):
        f = int(flow[i])
        plen = int(rng.choice([0, 1448, 1448, 1448, 1448, 700]))
        segs = int(rng.choice([2, 3])) if plen == 1448 and rng.random() < 0.05 else 0
        if segs:
            plen *= segs
        fl = ACK
        if rng.random() < 0.05:
            fl |= PSH
        if rng.random() < 0.02:
            fl |= int(rng.choice([FIN, CWR, URG, RST]))
        seq = nxt[f] if rng.random() > 0.05 else nxt[f] + 1448
        t += int(rng.choice([dt, dt, dt, 2_000_000]))
        ids[f] = (ids[f] + (max(segs, 1) if rng.random() > 0.02 else 7)) & 0xFFFF
        s = dict(seq=seq & 0xFFFFFFFF, payload_len=plen, flags=fl, sport=3000 + f, time_ns=t,
                 ip_id=ids[f], ack=100 + int(rng.random() < 0.03), window=65535 - int(rng.random() < 0.03),
                 ttl=64 - int(rng.random() < 0.02), tcp_hlen=32, opt_ts=True, tsval=int(rng.random() < 0.03),
                 csum_bad=bool(rng.random() < 0.02), vlan_tci=int(rng.choice([-1, -1, -1, 7])),
                 frag=int(rng.random() < 0.01) * 0x2000, ip_hlen=20 + 4 * int(rng.random() < 0.01),
                 gso_size=1448 if segs else 0, gso_segs=segs, vni=vni[f], outer_udp_csum=outer[f],
                 encap=codes.ENC_VXLAN if vni[f] >= 0 else 0, l2_bytes=64 if vni[f] >= 0 else 14)
        specs.append(s)
        nxt[f] = (seq + plen) & 0xFFFFFFFF
    return pkts(*specs)


RX_MODES = ["none", "unnecessary", "unnecessary-outer-only", "complete"]


def compare_with_reference(t, **kw):
    params = G.GroParams(**kw)
    res = G.gro(t, params)
    prep = G.prepare(t, params)
    rreasons, routs = ref.gro_reference(
        ref.trace_rows(t), prep["bucket"].tolist(), budget=params.napi_budget, gap_ns=params.poll_gap_ns,
        max_size=params.max_size, cwr_rule=params.cwr_rule, ipid_rule=params.ipid_rule, rx_csum=params.rx_csum,
        tunnel_rule=params.tunnel_rule, max_held=params.max_held, n_buckets=params.buckets,
        enabled=params.enabled, hz=params.hz)
    assert res.reasons.tolist() == rreasons
    groups = [[] for _ in range(len(res.out))]
    for i, o in enumerate(res.out_row.tolist()):
        groups[o].append(i)
    assert groups == [o["rows"] for o in routs]
    assert res.closed_by.tolist() == [o["close"] for o in routs]
    assert res.out.time_ns.tolist() == [o["time"] for o in routs]
    assert res.out.payload_len.tolist() == [int(t.payload_len[o["rows"]].sum()) for o in routs]
    return res


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("kw", [dict(), dict(rx_hash="zero", max_held=4), dict(napi_budget=7, cwr_rule="accecn"),
                                dict(rx_csum="none", poll_gap_ns=None, buckets=2),
                                dict(rx_csum="unnecessary-outer-only", tunnel_rule="new", max_size=20000),
                                dict(rx_csum="complete", ipid_rule="df-fixed", napi_budget=3)])
def test_kernel_equals_reference_on_random_streams(seed, kw):
    compare_with_reference(random_stream(seed), **kw)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 40), st.integers(1, 20), st.sampled_from(["flow", "zero"]),
       st.sampled_from(RX_MODES), st.integers(1, 8), st.sampled_from([250, 1000]),
       st.sampled_from([1000, 70_000, 400_000]), st.sampled_from([None, 1_000_000]))
def test_kernel_equals_reference_hypothesis(seed, budget, flows, rx_hash, rx_csum, held, hz, dt, gap):
    compare_with_reference(random_stream(seed, n=150, flows=flows, dt=dt), napi_budget=budget, rx_hash=rx_hash,
                           rx_csum=rx_csum, max_held=held, hz=hz, poll_gap_ns=gap)


@pytest.mark.parametrize("seed", range(4))
def test_budget_flush_old_exercised_and_equal_to_reference(seed):
    """Packets 70 us apart cross jiffies inside 8-packet polls: some budget ends flush
    old packets only, and both implementations agree on which."""
    t = random_stream(seed, dt=70_000)
    old = compare_with_reference(t, napi_budget=8, poll_gap_ns=None)
    every = compare_with_reference(t, napi_budget=8, poll_gap_ns=None, hz=250)
    assert len(old.out) < len(every.out)


def test_passes_match_reference_bytes():
    t = random_stream(3)
    res = G.gro(t, G.GroParams(rx_csum="none"))
    rows = ref.trace_rows(t)
    expect = {}
    for i, row in enumerate(rows):
        if ref.ip_early_flush(row) or (row["frag"] & 0x8000):
            continue
        _, _, nbytes, _ = ref.rx_csum_verdict(row, "none")
        if nbytes:
            expect[i] = nbytes
    assert dict(zip(res.passes.row.tolist(), res.passes.nbytes.tolist())) == expect


# -- round trips with engine.segment -------------------------------------------------------

def _super_stream(sizes, mss, fixed=False):
    specs = []
    seq, ip_id = 5000, 1
    for k, size in enumerate(sizes):
        segs = -(-size // mss)
        specs.append(dict(seq=seq, payload_len=size, gso_size=mss if size > mss else 0,
                          gso_segs=segs if size > mss else 0, flags=ACK | PSH, ip_id=ip_id, tcp_hlen=32,
                          opt_ts=True, tsval=10 + k, tsecr=3, time_ns=k * 10_000,
                          gso_type=(R.GSO_TCPV4 | (R.GSO_TCP_FIXEDID if fixed else 0)) if size > mss else 0))
        seq += size
        ip_id = ip_id if fixed else ip_id + segs
    return pkts(*specs)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 60000), min_size=1, max_size=6), st.sampled_from([536, 1448, 1460, 8948]),
       st.booleans())
def test_round_trip_gro_of_segment_is_identity(sizes, mss, fixed):
    from offloadkit.engine.segment import segment
    x = _super_stream(sizes, mss, fixed)
    y = segment(x)
    r = G.gro(y, G.GroParams(napi_budget=10**6, poll_gap_ns=None))
    o = r.out
    for name in ("seq", "payload_len", "flags", "ip_id", "ip_len", "tsval", "tsecr", "tcp_hlen", "ack", "window"):
        assert o.columns[name].tolist() == x.columns[name].tolist(), name
    multi = x.payload_len > mss
    assert o.gso_size.tolist() == np.where(multi, mss, 0).tolist()
    assert o.gso_segs.tolist() == np.where(multi, -(-x.payload_len // mss), 0).tolist()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 40), st.integers(1, 1448), st.booleans()), min_size=1, max_size=8),
       st.sampled_from([536, 1448]))
def test_round_trip_segment_of_gro_is_identity(bursts, mss):
    """y: wire segments as GSO emits them (full MSS, the last of a burst shorter or PSH)."""
    from offloadkit.engine.segment import segment
    specs = []
    seq, ip_id = 77, 9
    for n, last, psh in bursts:
        for k in range(n):
            plen = mss if k < n - 1 else min(last, mss)
            end = k == n - 1
            fl = ACK | (PSH if end and (psh or plen == mss) else 0)
            specs.append(dict(seq=seq, payload_len=plen, flags=fl, ip_id=ip_id, tcp_hlen=32, opt_ts=True))
            seq += plen
            ip_id += 1
        if not (psh or last < mss):
            break
    y = pkts(*specs)
    g = G.gro(y, G.GroParams(napi_budget=10**6, poll_gap_ns=None)).out
    back = segment(g.replace(gso_size=np.where(g.gso_segs > 1, g.gso_size, 0)))
    for name in ("seq", "payload_len", "flags", "ip_id", "ip_len", "tsval"):
        assert back.columns[name].tolist() == y.columns[name].tolist(), name


def test_report_002_vxlan_gate_mlx4_vs_bnx2x():
    """1398-byte inner segments, outer UDP checksum 0 (Linux < 4.6): a NIC that verifies the
    outer UDP only (mlx4 without the VXLAN port) gives no aggregation; one that vouches for the
    inner TCP (bnx2x-like) gives ~64 KB packets at the tap."""
    n = 200
    t = ck.fill_checksums(Trace.from_columns(
        seq=1 + 1398 * np.arange(n), payload_len=1398, ip_len=1450, tcp_hlen=32, opt_ts=True, flags=ACK,
        ip_id=np.arange(n), time_ns=np.arange(n) * 1000, vni=7, outer_udp_csum=0, encap=R.ENC_VXLAN, l2_bytes=64))
    mlx4 = G.gro(t, G.GroParams(rx_csum="unnecessary-outer-only", napi_budget=1000))
    assert set(mlx4.out.payload_len.tolist()) == {1398} and set(mlx4.reasons.tolist()) == {R.GRO_CHECKSUM}
    bnx2x = G.gro(t, G.GroParams(rx_csum="unnecessary", napi_budget=1000))
    biggest = int(bnx2x.out.payload_len.max())
    assert biggest // 1398 >= 44 and int(bnx2x.out.ip_len.max()) + 50 <= 65535
    assert bnx2x.segments_per_packet >= 40 * mlx4.segments_per_packet
