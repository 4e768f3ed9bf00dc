"""Timer ticks: when a TCP timer the kernel arms in jiffies fires.

``inet_csk_reset_xmit_timer(sk, what, when)`` arms the timer for the tick
``jiffies + when`` (``usecs_to_jiffies`` rounds up), and the timer wheel's
``calc_index`` rounds that up by one more tick ("a timer does not fire
early": it may be armed at the edge of a tick), so a delay of d ns armed at
``now`` fires at ``(now // JIFFY_NS + ceil(d / JIFFY_NS) + 1) * JIFFY_NS``,
one to two ticks after d: a loss probe never fires while ACKs come. Timers
further out land in a coarser level of the wheel (Linux >= 4.8, 500462a9de65
"timers: Switch to a non-cascading wheel"): 8 ticks from 63 ticks (252 ms)
on, 64 ticks from 504 (2 s), so a backed-off RTO fires up to 256 ms late
(:func:`timer_expiry`, :func:`inet_csk_rto_expiry`; ``Tcp.rto_timer``). ``Tcp.loss_timers`` picks the form of the loss-probe (TLP)
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

from ...packet.jit import njit

JIFFY_NS = 4_000_000             # CONFIG_HZ=250: Debian's, Ubuntu's and the lab kernel's
TCP_TIMEOUT_MIN = 2              # ticks
TCP_TIMEOUT_MIN_NS = 2_000_000   # TCP_TIMEOUT_MIN_US
LOSS_TIMERS_EXACT, LOSS_TIMERS_TICKS, LOSS_TIMERS_US_MIN = 0, 1, 2
RTO_TIMER_EXACT, RTO_TIMER_WHEEL = 0, 1
LVL_CLK_SHIFT, LVL_SIZE, LVL_DEPTH = 3, 64, 9   # kernel/time/timer.c (HZ > 100: 9 levels)


@njit(cache=True, nogil=True, _nrt=False)
def usecs_to_jiffies(delay_ns):
    """Ticks covering ``delay_ns`` (rounded up, as usecs_to_jiffies does)."""
    return (delay_ns + JIFFY_NS - 1) // JIFFY_NS


@njit(cache=True, nogil=True, _nrt=False)
def timer_expiry(now, ticks):
    """When a timer armed at ``now`` for ``ticks`` jiffies fires: calc_wheel_index picks the level
    whose range holds the delta (level n from LVL_START(n) = 63 << 3(n-1) ticks), and calc_index
    rounds the expiry up to the next multiple of that level's granularity (8^n ticks)."""
    clk = now // JIFFY_NS
    shift = 0
    lvl = 1
    while lvl < LVL_DEPTH and ticks >= (LVL_SIZE - 1) << ((lvl - 1) * LVL_CLK_SHIFT):
        shift = lvl * LVL_CLK_SHIFT
        lvl += 1
    return ((((clk + ticks) >> shift) + 1) << shift) * JIFFY_NS


@njit(cache=True, nogil=True, _nrt=False)
def inet_csk_rto_expiry(form, now, rto_ns, backoff, max_rto_ns):
    """When the retransmission timer armed at ``now`` fires: icsk_rto is in jiffies (tcp_set_rto's
    usecs_to_jiffies), inet_csk_rto_backoff shifts it by icsk_backoff up to TCP_RTO_MAX, and the
    timer wheel places it (:func:`timer_expiry`). Form 0 (``RTO_TIMER_EXACT``): ``rto_ns`` doubled
    per backoff in ns, the model before the wheel was (Linux < 4.8)."""
    if form == RTO_TIMER_EXACT:
        r = rto_ns
        for _ in range(backoff):
            r *= 2
            if r >= max_rto_ns:
                return now + max_rto_ns
        return now + min(r, max_rto_ns)
    cap = usecs_to_jiffies(max_rto_ns)
    ticks = usecs_to_jiffies(rto_ns)
    for _ in range(backoff):
        ticks *= 2
        if ticks >= cap:
            break
    return timer_expiry(now, min(ticks, cap))


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
