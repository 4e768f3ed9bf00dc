"""sim.steady: the steady rate of a run's tail, and the goodput of the same run continued at it."""
from types import SimpleNamespace

import numpy as np
import pytest

from offloadkit.sim import steady


def result(delivered_at, duration_s=1.0, flow_bytes=(None,), fixed_duration=True, n=101):
    """A stand-in for simulate.Result: ``delivered_at(t_s)`` bytes delivered by time t."""
    t = np.linspace(0, duration_s, n)
    d = np.array([delivered_at(x) for x in t], dtype=np.int64)
    dur = int(duration_s * 1e9)
    return SimpleNamespace(series_time_ns=(t * 1e9).astype(np.int64), series_delivered_bytes=d,
                           duration_ns=dur, delivered_bytes=int(d[-1]), goodput_bps=d[-1] * 8 / duration_s,
                           scenario=SimpleNamespace(duration_ns=dur if fixed_duration else None,
                                                    flow_bytes=flow_bytes))


def stall_then_flow(t):          # nothing for 0.4 s, then 1 MB/s
    return max(0.0, t - 0.4) * 1e6


def test_a_steady_tail_is_extended_to_the_longer_run():
    r = result(stall_then_flow)
    assert steady.steady_rate_bps(r) == pytest.approx(8e6)
    assert steady.goodput_over(r, 10.0) == pytest.approx(stall_then_flow(10.0) * 8 / 10)
    assert steady.goodput_over(r, 1.0) == r.goodput_bps          # no longer than the run: its own goodput


def test_a_tail_that_is_not_steady_gives_none():
    ramp = result(lambda t: 1e6 * t * t)                           # still accelerating
    assert steady.steady_rate_bps(ramp) is None and steady.goodput_over(ramp, 10.0) is None
    stalled = result(lambda t: 1e6 * min(t, 0.5))                  # nothing delivered at the end
    assert steady.goodput_over(stalled, 10.0) is None
    assert steady.steady_rate_bps(ramp, tail=0.02, tol=0.5) is not None   # a short tail, a loose tolerance


def test_only_open_ended_fixed_duration_runs_are_extended():
    assert steady.goodput_over(result(stall_then_flow, flow_bytes=(10**6,)), 10.0) is None
    assert steady.goodput_over(result(stall_then_flow, flow_bytes=(None, 10**6)), 10.0) is None
    assert steady.goodput_over(result(stall_then_flow, fixed_duration=False), 10.0) is None
