"""``simulate --ipv6``: 40-byte IPv6 headers through the whole simulated path, and the trace as tcpdump prints it."""
import json

import pytest

from offloadkit.cli import main
from offloadkit.io.tcpdump import render
from offloadkit.sim.scenario import Scenario
from offloadkit.sim.simulate import simulate


def run(**kw):
    return simulate(Scenario.simple(rate_bps=50_000_000, rtt_ns=2_000_000, bytes_per_flow=300_000, **kw))


def test_ipv6_mss_is_1428_with_timestamps_at_mtu_1500_and_packets_fill_the_mtu():
    assert Scenario.simple(ip_version=6, bytes_per_flow=1).mss_bytes == 1428
    assert Scenario.simple(bytes_per_flow=1).mss_bytes == 1448
    r4, r6 = run(), run(ip_version=6)
    w4, w6 = r4.trace.at("wire"), r6.trace.at("wire")
    data6 = w6[w6.payload_len > 0]
    assert (data6.ip_version == 6).all() and (data6.ip_hlen == 40).all() and (data6.ip_id == 0).all()
    assert int(data6.payload_len.max()) == 1428 and int(data6.ip_len.max()) == 1500
    assert int(w4[w4.payload_len > 0].ip_len.max()) == 1500
    snd = r6.trace.at("sender")
    big = snd[snd.gso_segs > 1]
    assert len(big) and (big.gso_type & 0x200).all()          # GSO_TCPV6


def test_ipv6_path_mtu_with_icmp_lowers_the_mss_by_the_ipv6_header():
    r = run(ip_version=6, path_mtu=1400, icmp=True)
    hop = r.trace.at("path")
    ok = hop[(hop.drop == 0) & (hop.payload_len > 0)]
    assert int(ok.ip_len.max()) == 1400 and int(ok.payload_len.max()) == 1400 - 40 - 32


def test_ipv6_trace_text_is_tcpdumps():
    t = run(ip_version=6).trace
    lines = render(t[:400])
    data = [ln for ln in lines if "length 1428" in ln]
    assert data and all(" IP6 2001:2:1::1.40000 > 2001:2:2::1.5201: Flags [" in ln and ", seq " in ln for ln in data)
    acks = [ln for ln in lines if " IP6 2001:2:2::1.5201 > 2001:2:1::1.40000: Flags [.], ack " in ln]
    assert acks and all(ln.endswith("length 0") for ln in acks)


def test_simulate_verb_ipv6(capsys):
    assert main(["simulate", "--ipv6", "--rate", "20Mbit", "--rtt", "10ms", "--bytes", "200kB", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["goodput_bps"] > 0
    assert main(["simulate", "--ipv6", "--nic", "rtl8139-legacy"]) == 2
    assert "8139cp offers TSO for IPv4 only" in capsys.readouterr().err


@pytest.mark.parametrize("mss,ok", [(1428, True), (1429, False)])
def test_ipv6_mss_must_fit_the_mtu(mss, ok):
    if ok:
        assert Scenario.simple(ip_version=6, mss=mss, bytes_per_flow=1).mss_bytes == mss
    else:
        with pytest.raises(ValueError, match="does not fit in MTU 1500"):
            Scenario.simple(ip_version=6, mss=mss, bytes_per_flow=1)


def test_ipv6_sender_checksums_are_the_ipv6_pseudo_header_sums():
    from offloadkit import codes
    from offloadkit.packet.csum import fold, pseudo_sum
    t = run(ip_version=6).trace.at("sender")
    part = t[t.csum_state == codes.CSUM_PARTIAL]
    assert len(part) > 10
    for i in range(len(part)):
        want = fold(pseudo_sum(bytes(part.src_ip6[i]), bytes(part.dst_ip6[i]),
                               int(part.tcp_hlen[i]) + int(part.payload_len[i])))
        assert int(part.tcp_csum[i]) == want
