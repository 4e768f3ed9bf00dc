"""The intro's IPv4/IPv6 toggle: the same super-packet with a 40-byte IPv6 header."""
from offloadkit import ui
from offloadkit.sim.one_packet import max_mss, one_packet


def test_ipv6_toggle_carries_the_mss_down_and_segments_as_ipv6():
    d = ui.dashboard("intro")
    assert d.result.sizes("wire") == [1448, 1432]
    d.controls["ip_version"].value = 6
    assert d.error is None, d.error
    assert d.controls["mss"].value == d.controls["mss"].max == max_mss(1500, 6) == 1428
    r = d.result
    assert r.settings["ip_version"] == 6 and r.sizes("wire") == [1428, 1428, 24]
    assert r.ip_lengths("wire") == [1500, 1500, 96]
    assert all(ln.startswith("IP6 2001:2:1::1.40000 > 2001:2:2::2.5001: Flags [") for ln in r.lines["wire"])
    assert r.lines == one_packet(**d.values).lines
    d.controls["ip_version"].value = 4
    assert d.controls["mss"].max == 1448 and d.result.lines["wire"][0].startswith("IP 198.18.0.1.40000 > ")


def test_ipv6_through_rtl8139_is_segmented_in_software_at_the_mss():
    """8139cp has no TSO6: the stack segments IPv6 itself, so QEMU's legacy 1500-byte cut never happens."""
    r6 = one_packet(mss=1400, nic="rtl8139-legacy", ip_version=6)
    r4 = one_packet(mss=1400, nic="rtl8139-legacy")
    assert r4.sizes("wire") == [1448, 1432] and r6.sizes("wire") == [1400, 1400, 80]
