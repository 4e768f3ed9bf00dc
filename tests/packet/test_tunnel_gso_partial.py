"""GSO_PARTIAL for UDP tunnels (``rewrite.gso_partial``), against the kernel's rules on built frames.

``stage="stack"``: the partial skb (p = L // mss full segments in one GSO skb with one segment's
lengths, the pseudo-header TCP checksum over the whole, the outer UDP checksum gso_make_checksum
computes over the whole) and the tail; ``stage="wire"``: the frames the device cuts, with the static
block from the outer UDP to the inner TCP header copied. Checked against the kit's software tunnel GSO
(``segment_records``) and the plain checksum algorithms.
"""
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_tunnel_segment import SHAPES, outer_udp_verifies, tunnel_frame

from offloadkit.io.records import Record
from offloadkit.packet import decode as D
from offloadkit.packet.csum import fold, pseudo_sum
from offloadkit.rewrite.gso_partial import gso_partial_segments
from offloadkit.rewrite.segment import segment_records

ID0_INNER, ID0_OUTER = 7, 300           # tunnel_frame's IPv4 IDs


def _inner_id(frame, lay):
    return struct.unpack_from("!H", frame, lay.ip + 4)[0] if lay.ver == 4 else None


@settings(max_examples=30, deadline=None)
@given(shape=st.sampled_from(SHAPES), csum=st.booleans(), plen=st.integers(1400, 9000),
       mss=st.sampled_from([536, 1000, 1398]), seed=st.integers(0, 255))
def test_gso_partial_stack_and_wire_follow_the_kernel(shape, csum, plen, mss, seed):
    kind, outer_ver, inner_ver = shape
    payload = bytes((seed + 5 * i) & 0xFF for i in range(plen))
    frame = tunnel_frame(kind, outer_ver, inner_ver, payload, csum)
    rec = Record(0, 0, 1, frame, len(frame), 0)
    sw = segment_records([rec], mss, nic="hw-tso", tx_csum=False).records
    p, n = plen // mss, -(-plen // mss)
    wire = gso_partial_segments(rec, mss, "wire")
    stack = gso_partial_segments(rec, mss, "stack")
    _, lay = D.decode(1, frame, len(frame))
    if p <= 1:
        assert [r.data for r in wire] == [r.data for r in stack] == [r.data for r in sw]
        return
    # the wire: software GSO's frames with segment 0's static block on the first p
    assert len(wire) == n and b"".join(r.data[lay.pay:] for r in wire) == payload
    first = wire[0].data
    for k, r in enumerate(wire):
        seg = r.data
        row, sl = D.decode(1, seg, len(seg))
        assert not row["csum_bad"] and row["payload_len"] == min(mss, plen - k * mss)
        o, u = sl.outer, sl.udp
        if outer_ver == 4:
            assert struct.unpack_from("!HH", seg, o + 2) == (len(seg) - o, ID0_OUTER + k)
        else:
            assert struct.unpack_from("!H", seg, o + 4)[0] == len(seg) - o - 40
        if csum:
            assert outer_udp_verifies(seg)
        if k < p:
            assert seg[u:sl.tcp] == first[u:sl.tcp]
            assert _inner_id(seg, sl) in (None, ID0_INNER)          # MANGLEID: a fixed inner ID
        else:
            assert seg == sw[k].data and _inner_id(seg, sl) in (None, ID0_INNER + p)
    if inner_ver == 6:                      # no inner ID: the device's frames are software GSO's
        assert [r.data for r in wire] == [r.data for r in sw]
    # the stack: one partial skb with one segment's lengths, then the tail
    big = stack[0]
    assert len(stack) == 1 + (plen % mss > 0) and [r.data for r in stack[1:]] == [r.data for r in sw[p:]]
    assert big.orig_len == lay.pay + p * mss and big.data[lay.pay:] == payload[:p * mss]
    s0 = sw[0].data
    assert big.data[:lay.tcp] == s0[:lay.tcp]     # lengths, IDs and the outer UDP checksum of segment 0
    tcph = big.data[lay.tcp:lay.pay]
    assert tcph[:13] == s0[lay.tcp:lay.tcp + 13] and tcph[18:] == s0[lay.tcp + 18:lay.pay]
    assert tcph[13] == (0x18 if plen % mss == 0 else 0x10)     # PSH only when the partial skb is the last
    isrc, idst = (frame[lay.ip + 8:lay.ip + 24], frame[lay.ip + 24:lay.ip + 40]) if inner_ver == 6 else \
        (frame[lay.ip + 12:lay.ip + 16], frame[lay.ip + 16:lay.ip + 20])
    assert struct.unpack_from("!H", tcph, 16)[0] == fold(pseudo_sum(isrc, idst, lay.thl + p * mss))


def test_gso_partial_refuses_what_it_does_not_model():
    frame = tunnel_frame("vxlan", 4, 4, bytes(3000), True)
    with pytest.raises(ValueError, match="stage"):
        gso_partial_segments(Record(0, 0, 1, frame, len(frame), 0), 1000, "device")
    plain = frame[:12] + frame[50:]           # the inner Ethernet frame: no tunnel
    with pytest.raises(ValueError, match="UDP-tunnelled"):
        gso_partial_segments(Record(0, 0, 1, plain, len(plain), 0), 1000)
