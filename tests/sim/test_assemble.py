"""simulate()'s trace assembly equals the reference assembly (tests/reference/assemble_ref.py: the batch GRO
re-run over what each NAPI poll took) row for row."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offloadkit import codes
from offloadkit.sim import simulate as S
from offloadkit.sim.ipv6 import ipv6_partial_check
from offloadkit.sim.scenario import Hop, Nic, Receiver, Scenario
from reference import assemble_ref


def assert_same_result(sc: Scenario) -> None:
    W = S.run(sc, rx_rows=True)
    new, old = S.assemble(sc, W), assemble_ref.assemble(sc, W)
    assert new.trace.points == old.trace.points
    assert len(new.trace) == len(old.trace) > 0
    for name, col in old.trace.columns.items():
        assert np.array_equal(new.trace.columns[name], col), name
        assert new.trace.columns[name].dtype == col.dtype, name
    assert np.array_equal(new.retransmission, old.retransmission)
    for name, col in old.loop_receiver.columns.items():
        assert np.array_equal(new.loop_receiver.columns[name], col), name
    assert new.loop_receiver.points == old.loop_receiver.points
    assert new.summary() == old.summary()


def test_bulk_newreno_with_loss_and_20k_row_traces():
    assert_same_result(Scenario.simple(rate_bps=100_000_000, rtt_ns=20_000_000, loss=0.001, cc="newreno",
                                       duration_ns=1_000_000_000, trace_limit=20_000))


def test_many_flows_fill_gro_buckets_as_the_kernel_table():
    """64 flows interleaved (no TSO) in 1024-packet polls: more than 8 flows held in one bucket
    (gro_flush_oldest, GRO_TABLE_FULL)."""
    sc = Scenario.simple(rate_bps=10_000_000_000, rtt_ns=200_000, flows=64, bytes_per_flow=100_000, tso=False,
                         trace_limit=4000).replace(receiver=Receiver(napi_budget=1024, napi_delay_ns=500_000))
    assert_same_result(sc)
    r = S.simulate(sc)
    assert (r.at("receiver").gro_reason == codes.GRO_TABLE_FULL).any()


def test_without_rx_rows_the_same_trace():
    sc = Scenario.simple(rate_bps=1_000_000_000, rtt_ns=2_000_000, loss=0.01, flows=2, bytes_per_flow=300_000,
                         trace_limit=300)
    a, b = S.assemble(sc, S.run(sc)), S.assemble(sc, S.run(sc, rx_rows=True))
    for name, col in a.trace.columns.items():
        assert np.array_equal(b.trace.columns[name], col), name


def test_ipv6_aggregates_carry_the_pseudo_header_sum():
    """tcp6_gro_complete: an IPv6 aggregate's TCP checksum field is ~tcp_v6_check(len, saddr, daddr, 0)."""
    sc = Scenario.simple(rate_bps=10_000_000_000, rtt_ns=200_000, bytes_per_flow=500_000, trace_limit=2000)
    rx = S.simulate(sc.replace(ip_version=6)).at("receiver")
    agg = rx[rx.gso_segs > 1]
    assert len(agg) and (agg.csum_state == codes.CSUM_PARTIAL).all()
    want = ipv6_partial_check(agg.src_ip6, agg.dst_ip6, agg.tcp_hlen.astype(np.int64) + agg.payload_len)
    assert np.array_equal(agg.tcp_csum, want)


def test_partial_checksums_and_two_hops():
    sc = Scenario(nic=Nic(tso=False), path=(Hop("a", rate_bps=50_000_000, delay_ns=2_000_000, loss=0.01),
                                            Hop("b", rate_bps=20_000_000, delay_ns=3_000_000, mtu=1400)),
                  bytes_per_flow=400_000, trace_limit=3000)
    assert_same_result(sc)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rate=st.sampled_from([20_000_000, 100_000_000, 1_000_000_000, 10_000_000_000]),
       rtt_us=st.integers(200, 30_000), loss=st.sampled_from([0.0, 0.001, 0.02]), flows=st.integers(1, 4),
       tso=st.booleans(), gro=st.booleans(), budget=st.sampled_from([8, 64]), limit=st.sampled_from([50, 2000]),
       seed=st.integers(0, 1000))
def test_any_scenario(rate, rtt_us, loss, flows, tso, gro, budget, limit, seed):
    sc = Scenario.simple(rate_bps=rate, rtt_ns=rtt_us * 1000, loss=loss, flows=flows, tso=tso, gro=gro,
                         bytes_per_flow=300_000, trace_limit=limit, seed=seed)
    assert_same_result(sc.replace(receiver=Receiver(gro=gro, napi_budget=budget)))
