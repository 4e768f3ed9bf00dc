"""Steady-state goodput of a simulated run: what a longer run at the same settings would report.

A netperf-like run (flows without a byte limit, a fixed duration) settles after its
start (slow start, an early RTO stall) into a steady delivery rate. ``steady_rate_bps``
measures that rate over the run's last quarter (``Result.series_delivered_bytes``) and
calls it steady only when the quarter's two halves agree within ``tol``;
``goodput_over`` extends the run at that rate to a longer duration: the goodput the
longer run reports, at a fraction of its events (tests/sim/test_steady.py compares both
on the report presets).
"""
from __future__ import annotations

TAIL = 0.25          # the part of the run the steady rate is measured over
TOL = 0.02           # the two halves of the tail agree within 2 %: steady


def steady_rate_bps(res, tail: float = TAIL, tol: float = TOL) -> float | None:
    """Delivered payload bit/s over the last ``tail`` of the run, or None if that part is not steady
    (its halves differ by more than ``tol``, or nothing was delivered in it)."""
    t, d = res.series_time_ns, res.series_delivered_bytes
    n = len(t)
    if n < 8:
        return None
    a = int(n * (1 - tail))
    m = (a + n - 1) // 2
    if t[m] <= t[a] or t[n - 1] <= t[m]:
        return None
    first = (d[m] - d[a]) / (t[m] - t[a])
    second = (d[n - 1] - d[m]) / (t[n - 1] - t[m])
    if second <= 0 or abs(first - second) > tol * max(first, second):
        return None
    return float(d[n - 1] - d[a]) * 8e9 / float(t[n - 1] - t[a])


def goodput_over(res, duration_s: float, tail: float = TAIL, tol: float = TOL) -> float | None:
    """The goodput (bit/s) of the same run lasting ``duration_s``: what it delivered, plus the rest of
    the time at its steady rate. None when the run is not steady or not open-ended (a flow with a byte
    limit, no fixed duration): simulate ``duration_s`` then."""
    sc = res.scenario
    if sc.duration_ns is None or any(b is not None for b in sc.flow_bytes):
        return None
    if duration_s * 1e9 <= res.duration_ns:
        return float(res.goodput_bps)
    rate = steady_rate_bps(res, tail, tol)
    if rate is None:
        return None
    return (res.delivered_bytes * 8.0 + rate * (duration_s - res.duration_ns / 1e9)) / duration_s
