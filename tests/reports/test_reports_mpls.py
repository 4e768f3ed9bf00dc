"""Report 001 (mpls) from the TCP simulation: drop reasons, healthy, broken and fixed rates."""
from __future__ import annotations

import pytest

from offloadkit import codes
from offloadkit.reports import mpls
from offloadkit.reports.facts import load_facts

F = load_facts("mpls")
T = F.targets


@pytest.fixture(scope="module")
def runs():
    return {v: mpls.run(v) for v in ("healthy", "broken", "mpls_gso_no_inner", "fixed", "workaround")}


def test_drop_reasons(runs):
    assert T["drop_errno_broken"].check(mpls._one(runs["broken"].info["gso_drop_errnos"]))
    assert T["drop_errno_mpls_gso_no_inner"].check(mpls._one(runs["mpls_gso_no_inner"].info["gso_drop_errnos"]))
    for v in ("healthy", "fixed", "workaround"):
        assert runs[v].info["gso_drop_errnos"] == [], v
    # the drops happen at the sender, to multi-segment skbs only; 1-MSS skbs pass
    s = runs["broken"].at("ns0")
    dropped = s[s.drop == codes.DROP_GSO_EPROTONOSUPPORT]
    assert len(dropped) > 0 and (dropped.gso_segs > 1).all()
    out = runs["broken"].at("ns0-out")
    assert (out.payload_len[out.direction == 0] <= F.value("mpls_route_mss_bytes")).all()


def test_healthy_and_fixed(runs):
    assert T["throughput_healthy_Mbps"].check(runs["healthy"].info["goodput_Mbps"])
    assert T["throughput_fixed_Mbps"].check(runs["fixed"].info["goodput_Mbps"])
    assert runs["workaround"].info["goodput_Mbps"] > 1000


def test_broken_is_thousands_of_times_slower(runs):
    h = runs["healthy"].info["goodput_Mbps"]
    for v in ("broken", "mpls_gso_no_inner"):
        assert 0 < runs[v].info["goodput_Mbps"] < h / 1000, v


@pytest.mark.parametrize("variant,q", [("broken", "throughput_broken_Mbps"),
                                       ("mpls_gso_no_inner", "throughput_mpls_gso_no_inner_Mbps")])
def test_broken_rate_in_the_reported_band(runs, variant, q):
    assert T[q].check(runs[variant].info["goodput_Mbps"])


def test_label_costs_four_bytes_of_mtu():
    with pytest.raises(ValueError):
        mpls.run("fixed", mtu=100000)
