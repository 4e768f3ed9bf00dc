"""tcp_tso_should_defer: an ACK-clocked TSO sender waits for cwnd room and sends bigger skbs."""
import dataclasses

import pytest

from offloadkit.sim.scenario import Scenario, Tcp
from offloadkit.sim.simulate import simulate


def _tbf(form: int, **kw) -> Scenario:
    sc = Scenario.simple(rate_bps=500_000_000, rtt_ns=30_000, queue_bytes=64_000, duration_ns=200_000_000,
                         kernel="6.18", **kw)
    return sc.replace(tcp=dataclasses.replace(sc.tcp, tso_defer=form))


def _mean_skb(r) -> float:
    return r.sent_bytes / r.sent_packets


def test_deferring_sends_bigger_skbs_into_a_small_tbf_queue_and_loses_more():
    never, edt, now = (simulate(_tbf(f)) for f in (0, 2, 3))
    assert _mean_skb(edt) > 1.4 * _mean_skb(never), (_mean_skb(edt), _mean_skb(never))
    assert edt.retransmits > 1.5 * never.retransmits > 0, (edt.retransmits, never.retransmits)
    # at a 30 us RTT min(srtt/2, 1 ms) is srtt/2: 6.18's ACK-time test is the older one
    assert (now.retransmits, now.sent_packets) == (edt.retransmits, edt.sent_packets)


def test_without_tso_nothing_is_deferred():
    a, b = (simulate(_tbf(f, tso=False, gso=False)) for f in (0, 3))
    assert (a.sent_packets, a.retransmits) == (b.sent_packets, b.retransmits)
    assert _mean_skb(a) <= 1448


def test_the_form_is_checked():
    with pytest.raises(ValueError, match="tso_defer"):
        Tcp(tso_defer=4)
    with pytest.raises(ValueError, match="tso_defer"):
        Tcp(tso_defer=True)
