"""MTU probing and the kernel-version presets of the TCP model (issue 16)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from offloadkit.sim.scenario import KERNELS, NEWEST_KERNEL, Scenario, Tcp, kernel_rules, with_kernel
from offloadkit.sim.simulate import simulate

ROOT = Path(__file__).resolve().parents[2]


def _black_hole(seconds: float, probing: int, mtu: int = 1400) -> Scenario:
    return Scenario.simple(rate_bps=1_000_000_000, rtt_ns=30_000, path_mtu=mtu, duration_ns=int(seconds * 1e9),
                           mtu_probing=probing, trace_limit=200_000)


def test_without_probing_a_black_hole_stalls_on_rtos():
    r = simulate(_black_hole(8, 0))
    assert r.delivered_bytes == 0
    assert r.rtos == 5 and r.retransmits == 5          # ~0.2, 0.6, 1.4, 3.0, 6.5 s (the timer wheel)


def test_black_hole_detection_waits_for_the_fifth_rto():
    """retries1's 15 x 200 ms count from the first retransmission: not yet at the 4th RTO (~3 s),
    at the 5th (6.3-6.7 s: the backed-off RTO rounded up by the timer wheel)."""
    assert simulate(_black_hole(6, 1)).delivered_bytes == 0
    r = simulate(_black_hole(8, 1))
    assert r.delivered_bytes > 10_000_000 and r.rtos == 5
    sizes = r.segment_sizes("path")
    assert sizes and max(sizes) <= 1400 - 52, "everything delivered fits the hole"


@pytest.mark.parametrize("mtu", [1400, 1300])
def test_probing_searches_up_to_the_path_mtu(mtu):
    """tcp_base_mss 1024 first, then probes of the middle of [search_low, search_high] until the
    interval is under tcp_probe_threshold (8 bytes)."""
    r = simulate(_black_hole(8, 2, mtu))
    sizes = r.segment_sizes("path")
    best = max(sizes)
    assert mtu - 52 - 8 <= best <= mtu - 52, sizes
    assert r.rtos == 0 and r.goodput_bps > 0.8e9
    assert 0 < r.drops.get("over MTU, dropped silently", 0) <= 8, "only the failed probes die"


def test_probing_from_the_start_on_a_clean_path_reaches_the_full_mss():
    r = simulate(Scenario.simple(rate_bps=1_000_000_000, rtt_ns=30_000, duration_ns=500_000_000, mtu_probing=2,
                                 trace_limit=200_000))
    assert max(r.segment_sizes("path")) >= 1448 - 8 and not r.drops


@pytest.mark.parametrize("version, knobs", [
    ("4.4", dict(tso_retransmits=False, rack_time_based=False, rack_reo_timer=False, fack=True, ofo_quickack=True,
                 psh_on_gso=False, prr_ss_una=False, tso_defer=1, loss_timers=0)),
    ("4.7", dict(rto_timer=0)), ("4.8", dict(rto_timer=1)),
    ("4.9", dict(tso_retransmits=True, rack_time_based=False, fack=True, ofo_quickack=True)),
    ("4.13", dict(loss_timers=1)), ("4.19", dict(tso_defer=1)), ("4.20", dict(tso_defer=2)),
    ("5.4", dict(fack=False, ofo_quickack=False, psh_on_gso=True, prr_ss_una=False, tso_defer=2, loss_timers=1)),
    ("5.10", dict(prr_ss_una=False)), ("6.1", dict(prr_ss_una=True)), ("6.6", dict(loss_timers=1)),
    ("6.7", dict(loss_timers=2)), ("6.12", dict(tso_defer=2)),
    ("6.18.44", dict(prr_ss_una=True, tso_defer=3, loss_timers=2)),
])
def test_kernel_presets_follow_the_version_knobs(version, knobs):
    rules = kernel_rules(version)
    assert {k: rules[k] for k in knobs} == knobs


def test_the_newest_kernel_is_the_default():
    assert kernel_rules() == kernel_rules(NEWEST_KERNEL) and NEWEST_KERNEL == "6.18"
    assert all(getattr(Tcp(), k) == v for k, v in kernel_rules().items())
    assert {"4.4", "4.7", "4.9", "5.4", "5.10", "6.1", "6.18"} <= set(KERNELS)
    sc = Scenario.simple(duration_ns=10**9)
    assert with_kernel(sc, "4.4").tcp.fack and not with_kernel(with_kernel(sc, "4.4"), "6.18").tcp.fack


@pytest.mark.parametrize("bad", ["3.10", "7.1", "latest", "6"])
def test_unknown_kernels_are_refused_with_the_range(bad):
    with pytest.raises(ValueError, match="from 4.4 to 6.18"):
        kernel_rules(bad)


def _simulate_cli(*args):
    return subprocess.run([sys.executable, "-m", "offloadkit", "simulate", "--duration", "20ms", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)


@pytest.mark.parametrize("args, words", [
    (["--kernel", "3.10"], "from 4.4 to 6.18"), (["--queue", "lots"], "--queue lots"),
    (["--queue", "100"], "at least one full-size frame"), (["--mtu-probing", "3"], "invalid choice"),
])
def test_bad_simulate_options_are_one_line_exit_2(args, words):
    p = _simulate_cli(*args)
    assert p.returncode == 2 and words in p.stderr.strip().splitlines()[-1], p.stderr


def test_queue_takes_bytes_or_packets():
    from offloadkit.commands.simulate import parse_queue
    assert parse_queue("100p") == (100, None) and parse_queue("64KB") == (None, 64_000)
    assert parse_queue(None) == (None, None)
    sc = Scenario.simple(duration_ns=10**9, queue_bytes=64_000)
    assert sc.path[0].queue_bytes == 64_000 and sc.path[0].queue_packets is None
