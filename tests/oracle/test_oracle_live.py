"""Real-kernel oracle, regenerated live (root only, ``-m kernel``): captures over a grid
(MSS 536..1460, timestamps on/off, TCPMSS clamp, MTU 1500/1492/9000, GRO on/off);
the kit's ``segment`` must equal the kernel's segmentation and its ``gro`` must be
consistent with the kernel's aggregates; TSO+GSO off must be slower than on."""
from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest
from kit_cli import run_verb

from offloadkit.lab import LabSettings, oracle, safety
from offloadkit.lab.grid import LIVE, capture_case, load_case
from offloadkit.lab.packets import read_headers
from offloadkit.lab.runner import run_lab

pytestmark = [pytest.mark.kernel,
              pytest.mark.skipif(not safety.available(), reason="needs root, ip netns, iperf3 and tcpdump")]


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("live-captures")
    for name, settings in LIVE.items():
        capture_case(name, settings, root)
    return root


@pytest.mark.parametrize("name", sorted(LIVE))
def test_live_capture_is_complete_and_mss_as_tcp_picks(live, name):
    c = load_case(live / name)
    for point, s in c["capture_stats"].items():
        assert s["captured"] == s["received"] and s["dropped"] == 0, f"{point}: {s}"
    eg = read_headers(c["paths"]["router-out"], "x", c["sender_ip"])[0]
    assert oracle.gso_size_from_egress(eg) == c["expected_gso_size"]


@pytest.mark.parametrize("name", sorted(LIVE))
def test_live_segment_equals_kernel(live, name, tmp_path):
    c = load_case(live / name)
    eg = read_headers(c["paths"]["router-out"], "x", c["sender_ip"])[0]
    out = tmp_path / "kit.pcap"
    code, err = run_verb(["segment", c["paths"]["router-in"], str(out), "--mss", str(oracle.gso_size_from_egress(eg))])
    assert code == 0, err
    rep = oracle.compare_segmentation(out, c["paths"]["router-out"], c["sender_ip"],
                                      extra_fields=("ack", "window", "tsval", "tsecr", "tcp_csum"))
    assert rep.ok, rep.summary()


@pytest.mark.parametrize("name", sorted(n for n, s in LIVE.items() if s.gro))
def test_live_gro_consistent_with_kernel(live, name, tmp_path):
    c = load_case(live / name)
    polls = oracle.kernel_poll_ends(c["paths"]["rcv"], c["paths"]["router-out"], c["sender_ip"])
    arrived = oracle.arrivals(c["paths"]["router-out"], tmp_path / "arrivals.pcap", c["receiver_ip"], polls)
    out = tmp_path / "kit.pcap"
    code, err = run_verb(["gro", arrived, str(out), *oracle.KERNEL_POLLS_GRO_ARGS])
    assert code == 0, err
    rep = oracle.compare_gro(out, c["paths"]["rcv"], c["paths"]["router-out"], c["sender_ip"])
    assert rep.exact and rep.kernel_psh_crossings == 0, rep.summary()


def test_tso_gso_off_is_slower_over_veth(tmp_path):
    """Throughput direction, both measured here: per-MSS packets through the whole stack cost more."""
    base = LabSettings(topology="direct", bytes=None, duration_s=1.5, captures=())
    on = run_lab(base, tmp_path)
    off = run_lab(replace(base, tso=False, gso=False), tmp_path)
    assert off.goodput_bps < on.goodput_bps, (on.goodput_bps, off.goodput_bps)
    assert not [n for n in safety.lab_namespaces() if n.startswith(f"okl-{os.getpid()}-")]
