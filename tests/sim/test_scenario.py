"""Scenario validation: every bad value gives a message a student can act on."""
import pytest

from offloadkit.sim.scenario import Hop, Nic, Receiver, Scenario, Tcp
from offloadkit.units import parse_rate, parse_size, parse_time


def test_mss_that_does_not_fit_names_the_room_left():
    with pytest.raises(ValueError, match=r"^MSS 1600 does not fit in MTU 1500: IPv4 \(20\) \+ TCP \(20\) "
                                         r"\+ options \(12\) leave 1448$"):
        Scenario(tcp=Tcp(mss=1600), bytes_per_flow=1000)


def test_mss_without_timestamps_counts_no_options():
    with pytest.raises(ValueError, match=r"options \(0\) leave 1460"):
        Scenario(tcp=Tcp(mss=1461, timestamps=False), bytes_per_flow=1000)
    assert Scenario(tcp=Tcp(mss=1460, timestamps=False), bytes_per_flow=1000).mss_bytes == 1460


@pytest.mark.parametrize("tcp, nic_mtu, expected", [
    (Tcp(), 1500, 1448),                                  # MTU 1500 with timestamps
    (Tcp(timestamps=False), 1500, 1460),
    (Tcp(mss_clamp=1452), 1500, 1440),                    # report 000: clamp 1452 - 12 option bytes
    (Tcp(), 1496, 1444),                                  # report 001: mtu lock 1496
    (Tcp(mss=1000), 1500, 1000),
])
def test_mss_from_mtu_clamp_and_options(tcp, nic_mtu, expected):
    assert Scenario(tcp=tcp, nic=Nic(mtu=nic_mtu), bytes_per_flow=1).mss_bytes == expected


@pytest.mark.parametrize("make, message", [
    (lambda: Tcp(cc="bbr"), "congestion control 'bbr' is not modelled"),
    (lambda: Tcp(initial_cwnd=0), "initial cwnd 0 must be between 1 and 1000"),
    (lambda: Tcp(min_rto_ns=10), "min RTO 10 must be between"),
    (lambda: Tcp(mss_clamp=20), "MSS clamp 20 must be between 48"),
    (lambda: Nic(model="e1000"), "unknown NIC model 'e1000'; choose one of"),
    (lambda: Nic(tso=True, tx_csum=False), "TSO needs TX checksum offload"),
    (lambda: Nic(drop_reason="ENOMEM"), "drop_reason 'ENOMEM'"),
    (lambda: Hop(loss=1.5), "hop link: loss 1.5 must be a probability"),
    (lambda: Hop(mtu=40), "hop link: MTU 40 must be between 68 and 65535"),
    (lambda: Hop(encap=("gre",)), "unknown encapsulation 'gre'"),
    (lambda: Hop(queue_packets=None, queue_bytes=None), "give a queue size"),
    (lambda: Hop(name="a b"), "hop name 'a b'"),
    (lambda: Hop(mtu=70, encap=("vxlan",)), "leaves 20 for IP"),
    (lambda: Receiver(rx_csum="maybe"), "RX checksum state 'maybe'"),
    (lambda: Receiver(napi_budget=0), "NAPI budget 0 must be between 1 and 4096"),
    (lambda: Scenario(), "say how much to send"),
    (lambda: Scenario(bytes_per_flow=1, path=()), "at least one hop"),
    (lambda: Scenario(bytes_per_flow=1, flows=0), "flows 0 must be between 1 and 64"),
    (lambda: Scenario(bytes_per_flow=1, path=(Hop("wire"),)), "capture point names must differ"),
    (lambda: Scenario(bytes_per_flow=1.5), "bytes per flow must be an integer"),
    (lambda: Scenario(bytes_per_flow=1, flows=64, tcp=Tcp(rwnd_bytes=1 << 30)), "too many to simulate"),
    (lambda: Tcp(timestamps="yes"), "tcp timestamps must be True or False, not 'yes'"),
    (lambda: Nic(gso=1), "nic gso must be True or False, not 1"),
    (lambda: Receiver(gro="off"), "receiver gro must be True or False"),
    (lambda: Hop(icmp=None), "hop icmp must be True or False"),
    (lambda: Hop(loss="0.1"), "hop link: loss must be a number"),
    (lambda: Scenario(bytes_per_flow=1, nic=Nic(mtu=9000), path=(Hop(mtu=9000, queue_packets=None,
                                                                     queue_bytes=2000),)),
     "a 2000-byte queue cannot hold one 9014-byte frame"),
    (lambda: Scenario.simple(path_mtu=0, bytes_per_flow=1), "MTU 0 must be between 68 and 65535"),
])
def test_invalid_parts_raise_actionable_errors(make, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make()


def test_pppoe_hop_forwards_1492_byte_ip_packets():
    h = Hop("ppp", mtu=1500, encap=("pppoe",))
    assert h.ip_mtu_bytes == 1492
    assert h.frame_overhead_bytes == 14 + 8


def test_scenario_is_frozen_and_replace_revalidates():
    sc = Scenario(bytes_per_flow=1000)
    with pytest.raises(Exception):
        sc.flows = 2
    assert sc.replace(flows=3).flows == 3
    with pytest.raises(ValueError, match="flows 99"):
        sc.replace(flows=99)


def test_point_names_follow_the_path():
    sc = Scenario(path=(Hop("access"), Hop("ppp")), bytes_per_flow=1, sender_point="guest",
                  wire_point="macvtap", receiver_point="tap")
    assert sc.point_names == ("guest", "macvtap", "access", "ppp", "tap")
    assert sc.base_rtt_ns == 4 * Hop().delay_ns


@pytest.mark.parametrize("text, value", [("100Mbit", 100_000_000), ("9.6Mbit", 9_600_000), ("1Gbit", 10**9),
                                         ("30gbps", 30 * 10**9), (2000, 2000)])
def test_parse_rate(text, value):
    assert parse_rate(text) == value


@pytest.mark.parametrize("text, value", [("20ms", 20_000_000), ("10s", 10**10), ("50us", 50_000), ("2", 2 * 10**9)])
def test_parse_time(text, value):
    assert parse_time(text) == value


@pytest.mark.parametrize("text, value", [("100MB", 10**8), ("64KiB", 65536), ("1.5kB", 1500)])
def test_parse_size(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("fn, text", [(parse_rate, "fast"), (parse_time, "soon"), (parse_size, "10 parsecs")])
def test_parse_errors_show_an_example(fn, text):
    with pytest.raises(ValueError, match="e.g."):
        fn(text)


def test_the_kernel_rules_the_dashboards_share():
    from offloadkit.sim.scenario import rx_csum_mode, tso_requires_tx_csum
    assert tso_requires_tx_csum(True, True) and not tso_requires_tx_csum(True, False)
    assert not tso_requires_tx_csum(False, True)
    assert rx_csum_mode(True) == "unnecessary" and rx_csum_mode(False) == "none"


def test_the_default_queue_is_capped_by_what_the_windows_can_put_in_flight():
    sc = Scenario.simple(rate_bps=10**12, rtt_ns=300_000_000, duration_ns=10**9)   # BDP: 25 M packets
    assert sc.path[0].queue_packets == (4 << 20) // 1448 + 64
