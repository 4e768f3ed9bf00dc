"""read_capture: every format, link type and encapsulation; fast path == Python decoder == dpkt; damaged files."""
from __future__ import annotations

import struct
import sys
from pathlib import Path

import numpy as np
import pytest
from reference import pcap_ref

from offloadkit import codes as C
from offloadkit.io import capture as K
from offloadkit.io import pcap as P
from offloadkit.io.capture import read_capture
from offloadkit.trace import FIELDS

DATA = Path(__file__).resolve().parents[1] / "data"
sys.path.insert(0, str(DATA))
import make_fixtures as F  # noqa: E402

FIX = F.fixtures()
PACKET_COLUMNS = ["ip_version", "src_ip", "dst_ip", "src_ip6", "dst_ip6", "sport", "dport", "seq", "ack",
                  "payload_len", "flags", "window", "urg_ptr", "tcp_hlen", "opt_mss", "opt_sackok", "opt_ts",
                  "tsval", "tsecr", "opt_wscale", "sack_n", "sack", "ip_id", "ttl", "tos", "df", "ip_len",
                  "encap", "vlan_tci", "mpls_labels", "vni", "outer_udp_csum", "csum_state", "csum_bad",
                  "truncated"]
L2 = {"sll.pcap": 16, "sll2.pcap": 20, "raw4_228.pcap": 0, "raw_101.pcap": 0, "null_0.pcap": 4,
      "vlan.pcap": 18, "qinq.pcap": 22, "mpls.pcap": 22, "pppoe.pcap": 22, "vxlan.pcap": 64}


def assert_same_rows(a, b, columns=tuple(FIELDS)):
    assert len(a) == len(b)
    for c in columns:
        assert np.array_equal(a.columns[c], b.columns[c]), c


def test_fixture_files_are_reproducible():
    """The committed fixtures are exactly what make_fixtures.py builds."""
    for name, (data, _) in FIX.items():
        assert (DATA / name).read_bytes() == data, name


@pytest.mark.parametrize("name", [n for n in FIX if n != "unsupported_147.pcap"])
@pytest.mark.parametrize("fast", [True, False])
def test_fixture_reads_back_its_trace(name, fast):
    exp = FIX[name][1]
    r = read_capture(DATA / name, fast=fast)
    assert r.ok, r.messages
    assert_same_rows(r.trace, exp, PACKET_COLUMNS)
    assert r.trace.frame.tolist() == sorted(r.trace.frame.tolist())
    ns_exact = name in ("eth_ns.pcap",) or name == "small.pcapng"
    dt = np.abs(r.trace.time_ns - exp.time_ns)
    if ns_exact:
        assert dt.max() == 0
    else:
        assert dt.max() < 1000                      # microsecond (or 2^-20 s) resolution
    if name != "multi_if.pcapng":
        assert (r.trace.l2_bytes == L2.get(name, 14)).all()
    # the numba decoder takes the Ethernet records without FCS, of pcap and pcapng alike
    assert r.fast_path == (fast and (1, 0) in zip(r.linktypes, r.fcs))


def test_multi_interface_pcapng():
    r = read_capture(DATA / "multi_if.pcapng")
    assert r.format == "pcapng" and r.linktypes == [1, 228, 113]
    exp = FIX["multi_if.pcapng"][1]
    dt = r.trace.time_ns - exp.time_ns
    iface = np.arange(len(exp)) % 3
    assert (np.abs(dt[iface == 0]) < 1000).all()                 # microseconds (default resolution)
    assert (np.abs(dt[iface == 1]) < 954).all()                  # 2^-20 s
    assert (dt[iface == 2] == 0).all()                           # nanoseconds + if_tsoffset
    assert (r.trace.l2_bytes == np.array([14, 0, 16])[iface]).all()


def test_encapsulation_columns():
    vx = read_capture(DATA / "vxlan.pcap").trace
    assert (vx.encap == C.ENC_VXLAN).all() and (vx.vni == 4242).all() and (vx.outer_udp_csum == 0xBEEF).all()
    assert (read_capture(DATA / "qinq.pcap").trace.vlan_tci == 7).all()       # outer tag
    assert (read_capture(DATA / "mpls.pcap").trace.mpls_labels == 2).all()
    assert (read_capture(DATA / "pppoe.pcap").trace.encap == C.ENC_PPPOE).all()


def test_header_only_and_ip_length_zero_notes():
    r = read_capture(DATA / "header_only.pcap")
    assert r.ok and r.trace.truncated.sum() == 2
    assert any("snaplen" in m for m in r.messages)
    r = read_capture(DATA / "iplen0.pcap")
    assert r.trace.payload_len.tolist() == FIX["iplen0.pcap"][1].payload_len.tolist()
    assert any("IP total length 0" in m for m in r.messages)


def test_non_tcp_packets_are_counted_not_returned():
    for fast in (True, False):
        r = read_capture(DATA / "eth_non_tcp.pcap", fast=fast)
        assert len(r.trace) == 7 and r.records == 9
        assert r.trace.frame.tolist() == [1, 2, 3, 6, 7, 8, 9]
        assert "1 packets skipped: not IP." in r.messages and "1 packets skipped: not TCP." in r.messages


def test_unsupported_link_type_is_named():
    r = read_capture(DATA / "unsupported_147.pcap")
    assert len(r.trace) == 0 and r.linktypes == [147]
    assert any("link type 147" in m for m in r.messages)


@pytest.mark.parametrize("name", ["eth_us.pcap", "eth_ns.pcap", "eth_be.pcap", "eth_small.pcap", "vlan.pcap",
                                  "qinq.pcap", "mpls.pcap", "ipv6.pcap", "header_only.pcap", "eth_non_tcp.pcap"])
def test_fast_path_equals_dpkt_reference(name):
    fast = read_capture(DATA / name)
    ref = pcap_ref.read_pcap(DATA / name)
    cols = [c for c in PACKET_COLUMNS if c not in ("encap", "mpls_labels", "vlan_tci")] + ["time_ns", "frame"]
    assert_same_rows(fast.trace, ref, cols)
    assert (fast.trace.l2_bytes == ref.l2_bytes).all()


def test_fast_and_python_decoders_agree_with_payloads(tmp_path):
    t = F.base_trace(payload_scale=4)
    rng = np.random.default_rng(0)
    data = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in t.payload_len.tolist()]
    f = tmp_path / "p.pcap"
    P.write_pcap(f, t, payload=data)
    a, b = read_capture(f, with_payload=True), read_capture(f, with_payload=True, fast=False)
    assert a.fast_path and not b.fast_path
    assert_same_rows(a.trace, b.trace)
    assert a.payloads == b.payloads == data


def test_bytes_input_and_bad_paths(tmp_path):
    r = read_capture(FIX["eth_small.pcap"][0])
    assert len(r.trace) == 7
    with pytest.raises(ValueError, match="cannot read capture"):
        read_capture(tmp_path / "missing.pcap")
    for content, words in ((b"", "too short"), (b"hello world, not a capture", "not a pcap or pcapng"),
                           (b"\xd4\xc3\xb2\xa1\x02\x00", "24-byte pcap header")):
        r = read_capture(content)
        assert len(r.trace) == 0 and r.error and words in r.error and r.messages[-1] == r.error


def test_corrupt_caplen_stops_with_message():
    data = bytearray(FIX["eth_small.pcap"][0])
    # the third record's caplen field
    pos = 24
    for _ in range(2):
        pos += 16 + struct.unpack("<I", data[pos + 8:pos + 12])[0]
    data[pos + 8:pos + 12] = struct.pack("<I", 10_000_000)
    for fast in (True, False):
        r = read_capture(bytes(data), fast=fast)
        assert len(r.trace) == 2 and "corrupt" in r.error and "record 3" in r.error


def _record_ends(data: bytes) -> list[int]:
    """End offsets of the packet records (pcap) or blocks holding packets (pcapng)."""
    ends = []
    if data[:4] == b"\x0a\x0d\x0d\x0a":
        pos = 0
        while pos < len(data):
            btype, blen = struct.unpack("<II", data[pos:pos + 8])
            pos += blen
            if btype == 6:
                ends.append(pos)
        return ends
    pos = 24
    while pos < len(data):
        pos += 16 + struct.unpack("<I", data[pos + 8:pos + 12])[0]
        ends.append(pos)
    return ends


@pytest.mark.parametrize("name", ["eth_small.pcap", "small.pcapng", "header_only.pcap"])
def test_cut_at_every_byte_offset(name):
    """A file cut anywhere gives the packets before the cut plus one message (none on a clean boundary)."""
    data, exp = FIX[name]
    full = read_capture(data).trace
    ends = _record_ends(data)
    boundaries = set(ends) | {24 if name.endswith(".pcap") else None}
    block_starts = set()
    if name.endswith(".pcapng"):
        pos = 0
        while pos < len(data):
            block_starts.add(pos)
            pos += struct.unpack("<I", data[pos + 4:pos + 8])[0]
        block_starts.add(len(data))
    for cut in range(len(data)):
        r = read_capture(data[:cut])
        whole = sum(e <= cut for e in ends)
        assert len(r.trace) == whole, cut
        assert_same_rows(r.trace, full[:whole], [c for c in PACKET_COLUMNS] + ["time_ns", "frame"])
        clean = cut in (block_starts if name.endswith(".pcapng") else boundaries) and cut >= (24 if name.endswith(
            ".pcap") else 1)
        if clean:
            assert r.error is None, (cut, r.error)
        else:
            assert r.error and r.messages.count(r.error) == 1, cut
            assert any(w in r.error for w in ("truncated", "too short", "corrupt", "no packets")), r.error


def test_warmup_runs():
    K.warmup()


def test_assign_flows():
    t = read_capture(DATA / "eth_us.pcap").trace
    assert (t.flow == 0).all()
    assert t.direction.tolist() == [0 if s == 40000 else 1 for s in t.sport.tolist()]
    t6 = read_capture(DATA / "ipv6.pcap").trace
    assert (t6.flow == 0).all() and (t6.direction == t.direction).all()


@pytest.mark.parametrize("name", ["eth_non_tcp.pcap", "multi_if.pcapng", "header_only.pcap", "eth_be.pcap"])
def test_read_records_and_write_records_round_trip(tmp_path, name):
    """All records (TCP or not) come back raw; written back as pcap they read the same."""
    recs, info = K.read_records(DATA / name)
    assert info.ok and len(recs) == read_capture(DATA / name).records
    if name.endswith(".pcap"):
        f = tmp_path / "copy.pcap"
        assert P.write_records(f, recs, linktype=info.linktypes[0], nano=True) == len(recs)
        a, b = read_capture(DATA / name), read_capture(f)
        assert_same_rows(a.trace, b.trace, PACKET_COLUMNS + ["time_ns", "frame"])
    cut, info = K.read_records(FIX[name][0][:-3])
    assert len(cut) == len(recs) - 1 and "truncated" in info.error


@pytest.mark.skipif(__import__("shutil").which("tcpdump") is None, reason="tcpdump not installed")
@pytest.mark.parametrize("name", ["eth_us.pcap", "header_only.pcap", "ipv6.pcap", "vlan.pcap", "mpls.pcap",
                                  "pppoe.pcap", "vxlan.pcap"])
def test_read_then_render_equals_tcpdump(name):
    """Reader + renderer on a capture say what tcpdump -n -v says about it (no verdict on cut packets)."""
    import os
    import subprocess

    from offloadkit.io import tcpdump as T
    t = read_capture(DATA / name).trace
    real = subprocess.run(["tcpdump", "-n", "-v", "-r", str(DATA / name)], capture_output=True, text=True,
                          env={**os.environ, "TZ": "UTC"}).stdout.splitlines()
    assert "\n".join(T.render(t, verbose=True)).splitlines() == real
