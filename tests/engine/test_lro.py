"""LRO (inet_lro / myri10ge, report 003): descriptors, packet cap, looser rules, no forwarding."""
import pytest

from offloadkit import codes
from offloadkit.codes import ACK, FIN, PSH
from offloadkit.engine import gro as G
from offloadkit.engine import lro as L


def stream(n, flows=1, **kw):
    return L.round_robin_trace(flows, n, **kw)


def test_one_flow_aggregates_up_to_max_pkts():
    r = L.lro(stream(200, mss=500), L.LroParams(napi_budget=1000))
    assert r.out.gso_segs.tolist() == [64, 64, 64, 8]
    assert r.closed_by.tolist()[:3] == [codes.GRO_SIZE] * 3


def test_length_cap_0xffff_minus_mtu():
    r = L.lro(stream(100), L.LroParams(napi_budget=1000, mtu=1500))
    # 52 + 45 * 1448 = 65212 > 0xFFFF - 1500: flushed after the 45th segment
    assert r.out.gso_segs.tolist()[0] == 45 and r.out.ip_len[0] == 52 + 45 * 1448


def test_flows_beyond_descriptors_go_up_alone():
    r = L.lro(stream(64 * 4, flows=10), L.LroParams(napi_budget=64, poll_gap_ns=None))
    assert (r.reasons == codes.GRO_TABLE_FULL).sum() > 0
    assert L.mean_aggregate(4) > 10
    assert L.mean_aggregate(100) == pytest.approx(1.0)
    assert L.mean_aggregate(4) > L.mean_aggregate(8) > L.mean_aggregate(16) >= 1.0


def test_gro_holds_more_flows_than_lro():
    assert L.mean_aggregate(32, engine="gro") > L.mean_aggregate(32, engine="lro")


def test_ack_and_window_not_compared_last_values_win():
    t = stream(3)
    t = t.replace(ack=[1, 1, 3], window=[10, 20, 20], tsval=[5, 5, 7])
    r = L.lro(t)
    assert len(r.out) == 1 and r.out.ack[0] == 3 and r.out.window[0] == 20 and r.out.tsval[0] == 7
    assert r.out.csum_state[0] == codes.CSUM_UNNECESSARY
    assert G.gro(t).segments_per_packet == 1.0     # GRO refuses the same packets


def test_ineligible_packet_flushes_and_goes_up_alone():
    t = stream(4).replace(flags=[ACK, ACK, ACK | FIN, ACK])
    r = L.lro(t)
    assert r.out.payload_len.tolist() == [2 * 1448, 1448, 1448]
    assert r.reasons.tolist()[2] == codes.GRO_FLAGS
    t = stream(3).replace(flags=[ACK, ACK | PSH, ACK])
    assert len(L.lro(t).out) == 1                   # PSH is fine for inet_lro


def test_seq_gap_and_timestamp_going_back():
    t = stream(3)
    seq = t.seq.copy()
    seq[2] += 1
    r = L.lro(t.replace(seq=seq))
    assert r.reasons.tolist() == [codes.GRO_FIRST, codes.GRO_MERGED, codes.GRO_SEQ_GAP]
    r = L.lro(stream(3).replace(tsval=[5, 6, 4]))
    assert r.reasons.tolist()[2] == codes.GRO_OPTIONS_DIFFER


def test_lro_packets_cannot_be_forwarded():
    t = stream(10)
    lr = L.lro(t).out
    assert L.is_lro(lr).all()
    fwd = L.refuse_forwarding(lr)
    assert (fwd.drop == codes.DROP_LRO_FORWARD).all()
    g = G.gro(t).out                                   # GRO packets carry gso_type: forwardable
    assert not L.is_lro(g).any()
    assert (L.refuse_forwarding(g).drop == 0).all()


def test_out_row_and_end_of_poll():
    t = stream(10)
    r = L.lro(t, L.LroParams(napi_budget=4))
    assert r.out.gso_segs.tolist() == [4, 4, 2]
    assert r.out_row.tolist() == [0] * 4 + [1] * 4 + [2] * 2
    assert r.reasons.tolist()[4] == codes.GRO_END_OF_POLL


def test_params_validation():
    with pytest.raises(ValueError, match="descriptors"):
        L.LroParams(descriptors=0)
    with pytest.raises(ValueError, match="round_robin"):
        L.round_robin_trace(0, 10)
