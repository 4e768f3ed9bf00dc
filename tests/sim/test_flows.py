"""Flows that differ in one run (size, start, RTT, congestion control): per-flow invariants (hypothesis)."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offloadkit.sim.scenario import Flow, Scenario
from offloadkit.sim.simulate import simulate

flows = st.lists(st.builds(Flow, bytes=st.integers(1, 400_000), start_ns=st.integers(0, 200_000_000),
                           extra_rtt_ns=st.integers(0, 30_000_000), cc=st.sampled_from([None, "newreno", "cubic"])),
                 min_size=1, max_size=5)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(per_flow=flows, loss=st.sampled_from([0.0, 0.005]), seed=st.integers(0, 100))
def test_every_flow_delivers_its_own_size_after_its_start(per_flow, loss, seed):
    sc = Scenario.simple(rate_bps=50_000_000, rtt_ns=5_000_000, loss=loss, bytes_per_flow=100_000,
                         flows=len(per_flow), seed=seed, trace_limit=2000).replace(per_flow=tuple(per_flow))
    r = simulate(sc)
    assert not r.partial
    for i, f in enumerate(per_flow):
        assert r.flow_delivered_bytes[i] == f.bytes
        # the last byte needs at least one one-way trip after the flow started
        assert r.completion_ns[i] >= f.start_ns + sc.base_rtt_ns // 2
        wire = r.at("wire")
        mine = wire[(wire.flow == i) & (wire.direction == 0)]
        assert len(mine) == 0 or mine.time_ns.min() >= f.start_ns
    assert r.delivered_bytes == sum(f.bytes for f in per_flow)


def test_a_longer_rtt_flow_takes_longer_for_the_same_size():
    near, far = Flow(bytes=2_000_000), Flow(bytes=2_000_000, extra_rtt_ns=40_000_000)
    sc = Scenario.simple(rate_bps=1_000_000_000, rtt_ns=2_000_000, bytes_per_flow=1, flows=2,
                         trace_limit=0).replace(per_flow=(near, far))
    r = simulate(sc)
    assert r.completion_ns[1] > r.completion_ns[0] + 40_000_000
