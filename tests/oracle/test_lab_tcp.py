"""TCP dynamics, the kit against this machine's kernel (issue 16's tolerances, ``lab.tcp.within``).

Two halves: the kernel's figures recorded in ``offloadkit/data/lab/tcp-*.json`` (by
``lab.tcp.record``: healthy run for capacity and RTT, then the pathology) against the
simulator given those figures; and short live runs (root only) of the scenario kinds
whose outcome does not hang on the machine's load. The cases the model does not match
yet are strict xfails: they fail the day the model starts to fit, so the marker goes.
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from offloadkit.lab import LabSettings, safety
from offloadkit.lab.grid import TCP, TCP_HELD_OUT
from offloadkit.lab.tcp import RETRANS_SLACK, STALL_BPS, compare_tcp, healthy, scenario_for_tcp, simulate_argv, within
from offloadkit.resources import data_dir
from offloadkit.sim.simulate import simulate

RECORDED = sorted((data_dir() / "lab").glob("tcp-*.json"))
CASES = {**TCP, **TCP_HELD_OUT}
#: kinds the model does not reproduce yet (see the module docstring of lab.tcp and the report)
NOT_YET = {
    "drop-gso": "kit ~2.8x the kernel's goodput and ~12x its retransmits (3 RTOs against 36): since loss probes "
                "follow tcp_schedule_loss_probe (none in Disorder; RACK's timer replaces a pending one) the kit "
                "repairs every 8 ms on RACK's reordering timer (3 probes; kernel 43), its cwnd back to 5 by "
                "tcp_cong_avoid_ai's credit, where the kernel holds 3 (ssthresh 2 at the next loss): CUBIC's "
                "HZ/32 hold of ca->cnt (bictcp_update) is the missing rule, see the round-5 report",
    "drop-gso-mtu1400": "as drop-gso",
    "no-tso-loss-1pct": "kit ~4x the kernel's goodput and retransmits: at 1 % loss the kernel's one-MSS veth "
                        "path reaches 0.5 Gb/s of the 2.6 the healthy run measured (CPU-bound, 2 shared cores)",
    "no-tso-loss-0.3pct": "as no-tso-loss-1pct (kit 1.9x the goodput, retransmits agree)",
    "blackhole-1300-probing-1": "goodput fits (1.42x, found at the same 5th RTO on the timer wheel), but the "
                                "kernel retransmitted 198 segments (64 retransmissions lost again) against the "
                                "kit's 32",
}


def _recorded():
    for path in RECORDED:
        for name, case in json.loads(path.read_text())["cases"].items():
            yield pytest.param(name, case, id=f"{path.stem}:{name}")


def test_the_measurements_are_recorded_with_kernel_and_commands():
    assert RECORDED, "offloadkit/data/lab/tcp-*.json is missing"
    for path in RECORDED:
        data = json.loads(path.read_text())
        assert data["kernel_version"].startswith("6.")
        for name, case in data["cases"].items():
            assert name in CASES
            assert case["lab"][:4] == ["offloadkit", "lab", "compare", "--tcp"]
            assert any("iperf3 -c" in c for c in case["commands"]) and case["healthy"]["commands"]
            assert case["simulate"][2:] == simulate_argv(CASES[name], case["capacity_bps"],
                                                         case["base_rtt_ns"], "6.18")


@pytest.mark.parametrize("name, case", list(_recorded()))
def test_kit_within_the_tolerances_of_the_recorded_kernel(name, case, request):
    if name in NOT_YET:
        request.applymarker(pytest.mark.xfail(reason=NOT_YET[name], strict=True))
    r = simulate(scenario_for_tcp(CASES[name], case["capacity_bps"], case["base_rtt_ns"], "6.18"))
    k = case["kernel"]
    assert within(k["goodput_bps"], r.goodput_bps, "goodput"), (k["goodput_bps"], r.goodput_bps)
    assert within(k["retransmits"], r.retransmits, "retransmits"), (k["retransmits"], r.retransmits)


@pytest.mark.parametrize("name, case", [p for p in _recorded() if "blackhole" in p.values[0]])
def test_the_black_hole_is_found_at_the_kernels_rto(name, case):
    """tcp_mtu_probing runs from tcp_write_timeout: the kit needs as many RTOs as the kernel
    (give or take the one a lost probe can cost) and, with probing, recovers as it does."""
    r = simulate(scenario_for_tcp(CASES[name], case["capacity_bps"], case["base_rtt_ns"], "6.18"))
    k = case["kernel"]
    assert abs(r.rtos - k["rtos"]) <= 1, (r.rtos, k["rtos"])
    assert (r.goodput_bps < STALL_BPS) == (k["goodput_bps"] < STALL_BPS)
    if CASES[name].mtu_probing:
        assert k["counters"]["TcpExtTCPMTUPSuccess"] >= 1
        assert abs(r.retransmits - k["retransmits"]) <= max(RETRANS_SLACK, k["retransmits"])


def test_within_follows_the_issue():
    assert within(1e9, 1.4e9, "goodput") and not within(1e9, 1.5e9, "goodput")
    assert within(5e5, 9e5, "goodput") and not within(5e5, 1.1e6, "goodput")
    assert within(0.0, 9e3, "goodput") and not within(0.0, 2e4, "goodput")
    assert within(100, 199, "retransmits") and not within(100, 201, "retransmits")
    assert within(5, 2, "retransmits") and not within(10, 4, "retransmits")


def test_healthy_run_drops_only_the_pathology():
    s = LabSettings(bytes=None, duration_s=3, loss="1%", blackhole_mtu=1400, mtu_probing=1, rate="1Gbit",
                    queue="64KB", tso=True, captures=())
    h = healthy(s)
    assert (h.loss, h.blackhole_mtu, h.mtu_probing, h.queue, h.drop_gso) == (None, None, None, None, False)
    assert h.rate == s.rate and h.duration_s == 3 and h.measure_rtt
    assert healthy(LabSettings(bytes=None, duration_s=8)).duration_s == 3
    assert h.tso is False, "the healthy run keeps the sender's veth as the lossy one had it"


# -- live, on this machine's kernel --------------------------------------------
kernel = pytest.mark.kernel
needs_lab = pytest.mark.skipif(not safety.available(), reason="needs root, ip netns, iperf3 and tcpdump")


@kernel
@needs_lab
@pytest.mark.parametrize("mtu", [1400, 1300])
def test_live_black_hole_stalls_on_kernel_and_kit(mtu):
    out = compare_tcp(LabSettings(bytes=None, duration_s=2, blackhole_mtu=mtu, mtu_probing=0, captures=()), "6.18")
    k, kit = out["kernel"], out["kit"]
    assert k["goodput_bps"] < STALL_BPS and kit["goodput_bps"] < STALL_BPS
    assert out["agree"]["goodput"] and out["agree"]["retransmits"], out
    assert abs(k["rtos"] - kit["rtos"]) <= 1
    assert any("--icmp-type fragmentation-needed -j DROP" in c for c in out["commands"])
    assert [n for n in safety.lab_namespaces() if n.startswith(f"okl-{os.getpid()}-")] == []


@kernel
@needs_lab
def test_live_mtu_probing_finds_the_black_hole_on_kernel_and_kit():
    """Black-hole detection waits retries1's 15 x 200 ms after the first retransmission: the 5th RTO,
    at 6.3-6.7 s on the timer wheel, so a 7 s run recovers on both."""
    out = compare_tcp(LabSettings(bytes=None, duration_s=7, blackhole_mtu=1400, mtu_probing=1, captures=()),
                      "6.18")
    k, kit = out["kernel"], out["kit"]
    assert k["counters"]["TcpExtTCPMTUPSuccess"] >= 1 and k["goodput_bps"] > STALL_BPS
    assert kit["goodput_bps"] > STALL_BPS
    assert abs(k["rtos"] - kit["rtos"]) <= 1, (k["rtos"], kit["rtos"])


@kernel
@needs_lab
def test_live_drop_gso_delivers_only_single_segments():
    """The router's -m length rule: every skb over the MTU dies, so only 1-MSS packets arrive."""
    from offloadkit.lab.runner import run_lab
    from offloadkit.lab.compare import size_histogram
    work = Path(safety.temp_dir("captures"))
    try:
        r = run_lab(LabSettings(bytes=None, duration_s=1, drop_gso=True, captures=("router-in", "router-out")),
                    work)
        rin = size_histogram(r.captures["router-in"], r.sender_ip, top=50)
        out = size_histogram(r.captures["router-out"], r.sender_ip, top=50)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert max(rin) > 1448, "the sender still builds GSO super-packets"
    assert max(out) <= 1448 and r.retransmits > 0 and r.rtos > 0
    assert r.goodput_bps < 0.1 * 1e9


def _retransmission_times_s(trace) -> np.ndarray:
    """Seconds after the first data segment of the data flow at which a segment went out again."""
    d = trace[(trace.direction == 0) & (trace.payload_len > 0)]
    d = d[d.flow == np.bincount(d.flow, weights=d.payload_len).argmax()]     # iperf3's data connection
    seen, out = set(), []
    for t, s in zip(d.time_ns, d.seq):
        if int(s) in seen:
            out.append(int(t))
        seen.add(int(s))
    return (np.array(out) - int(d.time_ns[0])) / 1e9


@kernel
@needs_lab
def test_live_backed_off_rtos_fire_on_the_timer_wheel_as_the_kits():
    """A black hole without probing: 5 RTOs whose backed-off timers the wheel rounds up (8 ticks from
    252 ms on, 64 from 2 s): kernel and kit space them within a granule of each other, and fire the 5th
    after 6.32 s (the exact doubling gives 6.2 s)."""
    from offloadkit.lab.packets import read_headers
    from offloadkit.lab.runner import run_lab
    s = LabSettings(bytes=None, duration_s=7, blackhole_mtu=1400, mtu_probing=0, captures=("router-in",))
    work = Path(safety.temp_dir("captures"))
    try:
        lab = run_lab(s, work)
        k = _retransmission_times_s(read_headers(lab.captures["router-in"], "router-in", lab.sender_ip)[0])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    r = simulate(scenario_for_tcp(replace(s, captures=()), 1e9, 30_000, "6.18").replace(trace_limit=10_000))
    kit = r.retransmissions("sender")
    kit = (kit.time_ns - r.at("sender").time_ns[0]) / 1e9
    assert lab.rtos == r.rtos == 5 and len(k) >= 5 and len(kit) >= 5, (k, kit)
    k, kit = k[-5:], kit[-5:]                          # the RTOs (a loss probe may come first)
    assert 0.2 < k[0] < 0.25 and 0.2 < kit[0] < 0.25, (k, kit)
    granule = np.array([0.008, 0.032, 0.032, 0.256]) + 0.015      # per gap: its wheel level's, + a tick and load
    assert np.all(np.abs(np.diff(k) - np.diff(kit)) <= granule), (k, kit)
    assert 6.32 < k[-1] <= 6.75 and 6.32 < kit[-1] <= 6.7, (k, kit)
