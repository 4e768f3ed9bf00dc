"""The GRO rules as small functions (engine.gro_rules): each kernel rule alone, and one GRO.

Both GROs of the kit, the batch GRO over a trace (engine.gro) and the TCP
loop's receiver (engine.tcp.receiver), must call these same functions."""
import pytest

from offloadkit import codes as C
from offloadkit.engine import gro, gro_rules as R
from offloadkit.engine.tcp import receiver

A = C.ACK


def flush(**kw):
    args = dict(cwr_old=True, flags=A, head_flags=A, window=500, head_window=500, plen=100, seq=1100,
                head_seq_end=1100, ack=7, head_ack=7, hlen=32, head_hlen=32, optk=1, head_optk=1)
    args.update(kw)
    return R.tcp_gro_receive_flush(*args.values())


@pytest.mark.parametrize("change, reason", [
    ({}, C.GRO_MERGED),
    ({"flags": A | C.PSH}, C.GRO_MERGED),                         # PSH and FIN are not compared
    ({"flags": A | C.FIN}, C.GRO_MERGED),
    ({"flags": A | C.URG}, C.GRO_FLAGS),
    ({"flags": A | C.CWR}, C.GRO_FLAGS),                          # old rule: CWR never merges
    ({"flags": A | C.CWR, "head_flags": A | C.CWR, "cwr_old": False}, C.GRO_MERGED),   # AccECN: compared
    ({"window": 501}, C.GRO_FLAGS),                               # the window is part of the flag word
    ({"plen": 0}, C.GRO_PURE_ACK),
    ({"seq": 1101}, C.GRO_SEQ_GAP),
    ({"ack": 8}, C.GRO_ACK_DIFFERS),
    ({"optk": 2}, C.GRO_OPTIONS_DIFFER),
    ({"hlen": 20}, C.GRO_OPTIONS_DIFFER),
    ({"seq": 1101, "optk": 2}, C.GRO_SEQ_GAP),                    # the first rule that fires names it
])
def test_tcp_gro_receive_flush_one_rule_at_a_time(change, reason):
    assert flush(**change) == reason


def test_ip_id_rules_incrementing_and_fixed():
    assert not R.inet_gro_flush_id(12, 10, 2, False)               # head 10, 2 held: next is 12
    assert R.inet_gro_flush_id(13, 10, 2, False)
    assert R.inet_gro_flush_id(0, 0xFFFF, 2, False) and not R.inet_gro_flush_id(1, 0xFFFF, 2, False)  # wraps
    assert not R.inet_gro_flush_id(10, 10, 5, True)                # fixed IDs: always the head's
    assert R.inet_gro_id_fixed(10, 10, 1, False, False)            # the second packet decides
    assert not R.inet_gro_id_fixed(10, 10, 1, False, True)         # before 2025: only with DF
    assert not R.inet_gro_id_fixed(10, 10, 2, True, False)
    assert R.inet_gro_flush(1, 2, False, False) == C.GRO_IP_RULE   # TTL/TOS/DF differ
    assert R.inet_gro_flush(1, 1, True, False) == C.GRO_IP_RULE
    assert R.inet_gro_flush(1, 1, False, True) == C.GRO_IP_RULE    # the outer header's rules
    assert R.inet_gro_flush(1, 1, False, False) == C.GRO_MERGED


def test_size_rules():
    assert R.tcp_gro_receive_mss(1448, 1448, 0) == C.GRO_MERGED
    assert R.tcp_gro_receive_mss(1449, 1448, 0) == C.GRO_SIZE
    assert R.tcp_gro_receive_mss(2896, 1448, 1448) == C.GRO_MERGED  # a GSO packet: equal gso_size
    assert R.tcp_gro_receive_mss(2800, 1448, 1400) == C.GRO_SIZE
    assert R.skb_gro_receive(64000, 1447, 65536) == C.GRO_MERGED
    assert R.skb_gro_receive(64000, 1536, 65536) == C.GRO_SIZE     # < 65536, not <=
    assert R.skb_gro_receive(64000, 1536, 128 * 1024) == C.GRO_MERGED   # BIG TCP


def test_closing_and_delivering_at_once():
    assert R.tcp_gro_receive_close(A, 1448, 1448, 1, 0) == C.GRO_MERGED
    assert R.tcp_gro_receive_close(A, 1000, 1448, 1, 0) == C.GRO_SIZE
    assert R.tcp_gro_receive_close(A | C.PSH, 1448, 1448, 1, 0) == C.GRO_FLAGS
    assert R.tcp_gro_receive_new(A, 1448, 1, 0, False) == C.GRO_MERGED       # held
    assert R.tcp_gro_receive_new(A | C.PSH, 1448, 1, 0, False) == C.GRO_FLAGS
    assert R.tcp_gro_receive_new(A, 0, 1, 0, False) == C.GRO_PURE_ACK
    assert R.tcp_gro_receive_new(A, 1448, 1, 0, True) == C.GRO_IP_RULE       # CB.flush
    assert R.tcp_gro_receive_new(A, 2000, 2, 1448, False) == C.GRO_SIZE      # uneven GSO packet
    assert [R.dev_gro_receive_kind(k) for k in (R.KIND_GRO, R.KIND_IP_LAYER, R.KIND_CSUM, R.KIND_OFF)] == \
        [C.GRO_MERGED, C.GRO_IP_RULE, C.GRO_CHECKSUM, C.GRO_OFF]


@pytest.mark.parametrize("name", ["tcp_gro_receive_flush", "inet_gro_flush", "inet_gro_flush_id",
                                  "tcp_gro_receive_mss", "skb_gro_receive", "tcp_gro_receive_close",
                                  "tcp_gro_receive_new", "dev_gro_receive_kind"])
def test_one_gro_both_users_call_the_same_rule_functions(name):
    rule = getattr(R, name)
    assert getattr(receiver, name) is rule
    assert getattr(gro, name) is rule
