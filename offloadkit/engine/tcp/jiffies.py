"""Timer ticks: when a TCP timer the kernel arms in jiffies fires.

``inet_csk_reset_xmit_timer(sk, what, when)`` arms the timer for the tick
``jiffies + when`` (``usecs_to_jiffies`` rounds up), and the timer wheel's
``calc_index`` rounds that up by one more tick ("a timer does not fire
early": it may be armed at the edge of a tick), so a delay of d ns armed at
``now`` fires at ``(now // JIFFY_NS + ceil(d / JIFFY_NS) + 1) * JIFFY_NS``,
one to two ticks after d: a loss probe never fires while ACKs come. ``Tcp.loss_timers`` picks the form of the loss-probe (TLP)
and RACK reordering timers (``sender.set_timer``, ``recovery.mark_lost``):

* 0, Linux < 4.13: exact times; PTO = max(2 srtt, 10 ms) (1.5 srtt + 200 ms
  with one packet out);
* 1, 4.13-6.6 (bb4d991a28cc "tcp: adjust tail loss probe timeout"): PTO =
  jiffies(2 srtt) + TCP_TIMEOUT_MIN (2 ticks; TCP_RTO_MIN with one packet out),
  the reordering timer jiffies(wait) + 2 ticks;
* 2, 6.7+ ("tcp: change TCP_TIMEOUT_MIN to be in microseconds", Oct 2023):
  PTO = jiffies(2 srtt + 2 ms), the reordering timer jiffies(wait + 2 ms).
"""
from __future__ import annotations

from numba import njit

JIFFY_NS = 4_000_000             # CONFIG_HZ=250: Debian's, Ubuntu's and the lab kernel's
TCP_TIMEOUT_MIN = 2              # ticks
TCP_TIMEOUT_MIN_NS = 2_000_000   # TCP_TIMEOUT_MIN_US
LOSS_TIMERS_EXACT, LOSS_TIMERS_TICKS, LOSS_TIMERS_US_MIN = 0, 1, 2


@njit(cache=True, nogil=True, _nrt=False)
def usecs_to_jiffies(delay_ns):
    """Ticks covering ``delay_ns`` (rounded up, as usecs_to_jiffies does)."""
    return (delay_ns + JIFFY_NS - 1) // JIFFY_NS


@njit(cache=True, nogil=True, _nrt=False)
def timer_expiry(now, ticks):
    """When a timer armed at ``now`` for ``ticks`` jiffies fires (a tick boundary, calc_index's round-up)."""
    return (now // JIFFY_NS + ticks + 1) * JIFFY_NS


@njit(cache=True, nogil=True, _nrt=False)
def tcp_rack_reo_expiry(form, now, wait):
    """tcp_rack_mark_lost's ICSK_TIME_REO_TIMEOUT for a unit that has ``wait`` ns left."""
    if form == LOSS_TIMERS_EXACT:
        return now + wait
    if form == LOSS_TIMERS_TICKS:
        return timer_expiry(now, usecs_to_jiffies(wait) + TCP_TIMEOUT_MIN)
    return timer_expiry(now, usecs_to_jiffies(wait + TCP_TIMEOUT_MIN_NS))


@njit(cache=True, nogil=True, _nrt=False)
def tcp_schedule_loss_probe(form, now, srtt, one_out, min_rto):
    """When the loss probe fires (before the RTO cap the caller applies)."""
    if form == LOSS_TIMERS_EXACT:
        pto = max(2 * srtt, 10_000_000)
        if one_out:
            pto = max(pto, 3 * srtt // 2 + min_rto)
        return now + pto
    if form == LOSS_TIMERS_TICKS:
        extra = usecs_to_jiffies(min_rto) if one_out else TCP_TIMEOUT_MIN
        return timer_expiry(now, usecs_to_jiffies(2 * srtt) + extra)
    return timer_expiry(now, usecs_to_jiffies(2 * srtt + (min_rto if one_out else TCP_TIMEOUT_MIN_NS)))
