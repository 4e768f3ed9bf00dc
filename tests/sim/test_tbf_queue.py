"""A byte-limited queue is a tbf: forwarded GSO skbs up to its burst are queued or dropped whole."""
import dataclasses

import pytest

from offloadkit.sim.scenario import TBF_BURST_BYTES, Hop, Scenario
from offloadkit.sim.simulate import simulate


def _tbf(burst: int) -> Scenario:
    sc = Scenario.simple(rate_bps=200_000_000, rtt_ns=30_000, queue_bytes=32_000, duration_ns=300_000_000,
                         kernel="6.18")
    return sc.replace(path=(dataclasses.replace(sc.path[0], tbf_burst_bytes=burst),))


def test_queue_bytes_makes_the_hop_a_tbf_and_packets_keep_per_segment_queueing():
    assert Scenario.simple(queue_bytes=64_000, duration_ns=10**8).path[0].tbf_burst_bytes == TBF_BURST_BYTES
    assert Scenario.simple(duration_ns=10**8).path[0].tbf_burst_bytes == 0
    with pytest.raises(ValueError, match="tbf burst"):
        Hop(tbf_burst_bytes=-1)


def test_whole_skbs_lose_more_segments_than_a_segment_queue():
    whole, single = simulate(_tbf(TBF_BURST_BYTES)), simulate(_tbf(0))
    assert whole.retransmits > single.retransmits > 0, (whole.retransmits, single.retransmits)

