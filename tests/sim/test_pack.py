"""Scenario -> loop arrays (sim.pack): one field table, per-flow parameters, up-front refusals."""
import numpy as np
import pytest

from offloadkit.engine import tcp as K
from offloadkit.sim import pack as PK
from offloadkit.sim.scenario import Flow, Hop, Nic, Scenario, Tcp
from offloadkit.sim.simulate import simulate


def test_every_slot_has_one_line_in_the_field_table():
    assert tuple(PK.P_FROM) == K.P_FIELDS and tuple(PK.HP_FROM) == K.HP_FIELDS and tuple(PK.FP_FROM) == K.FP_FIELDS
    assert len(set(getattr(K, f"P_{n.upper()}") for n in K.P_FIELDS)) == K.P_LEN == len(K.P_FIELDS)


def test_pack_fills_the_slots_from_the_scenario():
    sc = Scenario(tcp=Tcp(cc="newreno", timestamps=False), flows=2, bytes_per_flow=10_000,
                  path=(Hop("a", rate_bps=10**7, delay_ns=10**6), Hop("b", delay_ns=2 * 10**6, mtu=1400)))
    P, HP, HL, NP, FP = PK.pack(sc)
    assert P[K.P_MSS] == sc.mss_bytes == 1460 and P[K.P_TS] == 0 and P[K.P_CC] == K.CC_NEWRENO
    assert P[K.P_NHOPS] == 2 and P[K.P_NPOINTS] == 5 and P[K.P_REV_DELAY] == 3 * 10**6
    assert HP.shape == (2, K.HP_LEN) and HP[1, K.HP_MTU] == 1400 and HP[0, K.HP_RATE] == 10**7
    assert FP.shape == (2, K.FP_LEN) and (FP[:, K.FP_TOTAL] == 10_000).all()


def test_flows_that_differ_in_size_start_rtt_and_congestion_control():
    base = Scenario(path=(Hop(rate_bps=50_000_000, delay_ns=2_000_000, queue_packets=200),), flows=3,
                    bytes_per_flow=2_000_000, trace_limit=0)
    r = simulate(base.replace(per_flow=(Flow(), Flow(bytes=500_000, start_ns=300_000_000),
                                        Flow(extra_rtt_ns=30_000_000, cc="newreno"))))
    assert list(r.flow_delivered_bytes) == [2_000_000, 500_000, 2_000_000] and not r.partial
    done = r.completion_ns
    assert done[1] > 300_000_000                                  # it started late
    assert done[2] > done[0]                                      # the long-RTT NewReno flow is slower
    FP = PK.pack(base.replace(per_flow=(Flow(), Flow(cc="newreno"), Flow())))[4]
    assert list(FP[:, K.FP_CC]) == [K.CC_CUBIC, K.CC_NEWRENO, K.CC_CUBIC]
    with pytest.raises(ValueError, match="one Flow per flow"):
        base.replace(per_flow=(Flow(),))


def test_a_nic_that_cuts_tiny_segments_gets_pools_for_them():
    """rtl8139-clobbered reads a garbled MSS: 536 becomes 8-byte segments (67 per MSS)."""
    sc = Scenario(tcp=Tcp(mss=536), nic=Nic(model="rtl8139-clobbered"), bytes_per_flow=300_000, trace_limit=0,
                  path=(Hop(rate_bps=10**9, delay_ns=100_000, queue_packets=10_000),))
    assert PK.segments_per_mss(sc, 536) == 67
    r = simulate(sc)
    assert not r.partial and r.delivered_bytes == 300_000


def test_runs_that_cannot_fit_are_refused_up_front():
    huge = Scenario.simple(rate_bps=40_000_000_000, rtt_ns=200_000, bytes_per_flow=10**13)
    with pytest.raises(ValueError, match="segments .* the simulator stops at"):
        PK.pack(huge)
    big = Scenario(trace_limit=50_000_000, duration_ns=10**9)
    with pytest.raises(ValueError, match="GiB of simulator state"):
        PK.pack(big)
    # the receive window bounds the rate: 1 Tbit/s at 300 ms is ~110 Mbit/s of 4 MB windows
    far = Scenario.simple(rate_bps=10**12, rtt_ns=300_000_000, duration_ns=10**10)
    assert PK.estimated_segments(far) < 200_000


def test_partial_results_say_so_loudly():
    sc = Scenario.simple(rate_bps=10**9, rtt_ns=1_000_000, bytes_per_flow=10**6, trace_limit=0)
    P, HP, HL, NP, FP = PK.pack(sc)
    P[K.P_MAX_EVENTS] = 500                                       # stop the loop early
    W = K.make_world(P, HP, HL, NP, FP)
    K.run_kernel(W)
    from offloadkit.sim.simulate import assemble
    r = assemble(sc, W)
    assert r.partial and "PARTIAL RESULT" in r.warnings[0] and "event limit" in r.warnings[0]
    assert r.summary()["partial"] is True
    assert not np.isnan(r.goodput_bps)
