"""The loss-probe and RACK reordering timers fire on HZ=250 ticks, as the kernel arms them."""
import pytest

from offloadkit.engine.tcp.jiffies import (JIFFY_NS, LOSS_TIMERS_EXACT, LOSS_TIMERS_TICKS, LOSS_TIMERS_US_MIN,
                                           RTO_TIMER_EXACT, RTO_TIMER_WHEEL, inet_csk_rto_expiry,
                                           tcp_rack_reo_expiry, tcp_schedule_loss_probe, timer_expiry,
                                           usecs_to_jiffies)
from offloadkit.sim.scenario import kernel_rules
from offloadkit.sim.scenario import Tcp

MS = 1_000_000


def test_a_timer_fires_on_a_tick_one_to_two_ticks_after_its_delay():
    assert usecs_to_jiffies(1) == 1 and usecs_to_jiffies(JIFFY_NS) == 1 and usecs_to_jiffies(JIFFY_NS + 1) == 2
    for now in (0, 1, JIFFY_NS - 1, 10 * JIFFY_NS + 123):
        at = timer_expiry(now, 1)
        assert at % JIFFY_NS == 0 and JIFFY_NS < at - now <= 2 * JIFFY_NS


@pytest.mark.parametrize("ticks, gran", [(62, 1), (63, 8), (503, 8), (504, 64), (4031, 64), (4032, 512)])
def test_the_timer_wheel_rounds_far_timers_up_to_their_levels_granularity(ticks, gran):
    """calc_wheel_index: level n holds deltas from 63 << 3(n-1) ticks; calc_index rounds the expiry up
    to the next multiple of 8^n ticks (never early, at most one granule late)."""
    for clk in (0, 5, 1000, 123_457):
        at = timer_expiry(clk * JIFFY_NS + 7, ticks) // JIFFY_NS
        assert at % gran == 0 and clk + ticks < at <= clk + ticks + gran, (clk, at)


def test_backed_off_rtos_fire_late_on_the_wheel():
    """A 200 ms base RTO (51 ticks) backed off 4 times: 816 ticks, level 2, so the 5th RTO of a black
    hole fires 6.33-6.68 s after the first send (the lab's 6.18 kernel: 6.63 s), not the exact 6.2 s."""
    rto, cap = 200 * MS + 40_000, 120_000 * MS
    t = 0
    for backoff in range(5):
        t = inet_csk_rto_expiry(RTO_TIMER_WHEEL, t, rto, backoff, cap)
    assert 6_324 * MS < t <= 6_680 * MS, t / MS
    t = 0
    for backoff in range(5):
        t = inet_csk_rto_expiry(RTO_TIMER_EXACT, t, rto, backoff, cap)
    assert t == 31 * rto
    assert inet_csk_rto_expiry(RTO_TIMER_WHEEL, 0, rto, 20, cap) >= cap
    assert kernel_rules("4.7")["rto_timer"] == RTO_TIMER_EXACT and kernel_rules("4.8")["rto_timer"] == RTO_TIMER_WHEEL
    with pytest.raises(ValueError, match="rto_timer"):
        Tcp(rto_timer=2)


@pytest.mark.parametrize("form, lo, hi", [(LOSS_TIMERS_TICKS, 12 * MS, 16 * MS),    # 1 + 2 ticks, + the round-up
                                          (LOSS_TIMERS_US_MIN, 4 * MS, 8 * MS)])    # jiffies(0.1 ms + 2 ms) = 1
def test_loss_probe_at_a_microsecond_rtt(form, lo, hi):
    now = 7 * JIFFY_NS + 5
    at = tcp_schedule_loss_probe(form, now, 50_000, False, 200 * MS)
    assert lo < at - now <= hi, (at - now) / MS
    assert tcp_schedule_loss_probe(LOSS_TIMERS_EXACT, now, 50_000, False, 200 * MS) == now + 10 * MS
    # one packet out: the minimum RTO is added (delayed ACK at the receiver)
    assert tcp_schedule_loss_probe(form, now, 50_000, True, 200 * MS) - now > 200 * MS


def test_reordering_timer_forms():
    now, wait = 3 * JIFFY_NS + 17, 30_000
    assert tcp_rack_reo_expiry(LOSS_TIMERS_EXACT, now, wait) == now + wait
    assert 3 * JIFFY_NS < tcp_rack_reo_expiry(LOSS_TIMERS_TICKS, now, wait) - now <= 4 * JIFFY_NS
    assert JIFFY_NS < tcp_rack_reo_expiry(LOSS_TIMERS_US_MIN, now, wait) - now <= 2 * JIFFY_NS


def test_the_form_is_checked():
    with pytest.raises(ValueError, match="loss_timers"):
        Tcp(loss_timers=3)
