"""IPv6 pcaps from the kit: ``simulate --ipv6`` traces and BIG TCP rows written by ``io.pcap.write_pcap``.

Every frame is read back by the kit's decoder and, where tshark is installed, by tshark: IPv6
headers (payload length, traffic class, flow label, hop limit, the BIG TCP hop-by-hop jumbo header),
TCP checksums correct -- except a sender's CHECKSUM_PARTIAL super-packets, which carry the IPv6
pseudo-header sum as tcpdump shows them on a host with TX offload.
"""
import shutil
import subprocess

import numpy as np
import pytest

from offloadkit import codes
from offloadkit.io.capture import read_records
from offloadkit.io.pcap import write_pcap
from offloadkit.packet.csum import fold, pseudo_sum
from offloadkit.packet.decode import decode
from offloadkit.sim.scenario import Scenario
from offloadkit.sim.simulate import simulate
from offloadkit.trace import Trace

SRC6 = list(bytes.fromhex("20010002000100000000000000000001"))
DST6 = list(bytes.fromhex("20010002000200000000000000000002"))


def tshark_fields(path, *fields):
    """One tuple of field values per frame, tcp checksum validation on."""
    out = subprocess.run(["tshark", "-r", str(path), "-o", "tcp.check_checksum:TRUE", "-T", "fields",
                          *sum((["-e", f] for f in fields), [])], capture_output=True, text=True, check=True)
    return [tuple(line.split("\t")) for line in out.stdout.splitlines()]


@pytest.fixture(scope="module")
def ipv6_run():
    sc = Scenario.simple(rate_bps=100_000_000, rtt_ns=20_000_000, duration_ns=40_000_000, ip_version=6,
                         trace_limit=20_000)
    return simulate(sc).trace


@pytest.mark.parametrize("point", ["sender", "wire", "receiver"])
def test_simulated_ipv6_points_export_as_ipv6_with_right_checksums(ipv6_run, point, tmp_path):
    t = ipv6_run.at(point)
    t = t[t.drop == codes.DROP_NONE]
    assert len(t) > 20 and (t.ip_version == 6).all()
    path = tmp_path / f"{point}.pcap"
    assert write_pcap(path, t) == len(t)
    partial = t.csum_state == codes.CSUM_PARTIAL
    recs = read_records(path)[0]
    assert len(recs) == len(t)
    for i, rec in enumerate(recs):
        row, lay = decode(rec.linktype, rec.data, rec.orig_len)
        assert row["ip_version"] == 6 and lay.ihl == 40 and row["src_ip6"] == list(t.src_ip6[i])
        assert (row["ip_len"], row["payload_len"], row["seq"]) == (int(t.ip_len[i]), int(t.payload_len[i]),
                                                                    int(t.seq[i]))
        if partial[i]:      # the pseudo-header sum over the 128-bit addresses and the TCP length
            field = int.from_bytes(rec.data[lay.tcp + 16:lay.tcp + 18], "big")
            assert field == fold(pseudo_sum(bytes(row["src_ip6"]), bytes(row["dst_ip6"]),
                                            lay.thl + row["payload_len"]))
        else:
            assert not row["csum_bad"]
    if point == "sender":
        assert partial.any() and (t.payload_len[partial] > 1428).any()
    if shutil.which("tshark"):
        got = tshark_fields(path, "ipv6.plen", "tcp.len", "tcp.checksum.status")
        assert [int(p) for p, _, _ in got] == (t.ip_len - 40).tolist()
        assert [int(n) for _, n, _ in got] == t.payload_len.tolist()
        good = np.array([s == "1" for _, _, s in got])      # 1 good, 0 bad
        assert (good == ~partial).all()


def test_ipv6_header_fields_and_big_tcp_jumbo_round_trip(tmp_path):
    """Flow label, traffic class and hop limit from the row; an 80,000-byte BIG TCP packet with
    payload length 0 and the hop-by-hop jumbo header (jumbo length = 8 + TCP bytes)."""
    t = Trace.from_columns(ip_version=6, src_ip6=[SRC6] * 2, dst_ip6=[DST6] * 2, ip_hlen=[40, 48],
                           hbh_jumbo=[False, True], payload_len=[1428, 80_000], tcp_hlen=32, opt_ts=True,
                           ip_len=[40 + 32 + 1428, 48 + 32 + 80_000], flow_label=0x12345, tos=0x28, ttl=63,
                           sport=40000, dport=5201, seq=[1, 1429], flags=codes.ACK)
    path = tmp_path / "v6.pcap"
    write_pcap(path, t)
    recs = read_records(path)[0]
    for i, rec in enumerate(recs):
        row, lay = decode(rec.linktype, rec.data, rec.orig_len)
        assert (row["flow_label"], row["tos"], row["ttl"]) == (0x12345, 0x28, 63)
        assert (row["hbh_jumbo"], row["ip_hlen"], row["payload_len"]) == (bool(i), 40 + 8 * i,
                                                                         int(t.payload_len[i]))
        assert not row["csum_bad"]
    assert recs[1].orig_len == 14 + 48 + 32 + 80_000
    if shutil.which("tshark"):
        got = tshark_fields(path, "ipv6.flow", "ipv6.tclass", "ipv6.plen", "ipv6.opt.jumbo", "tcp.len",
                            "tcp.checksum.status")
        assert [int(g[0], 16) for g in got] == [0x12345] * 2 and [int(g[1], 16) for g in got] == [0x28] * 2
        assert [g[2] for g in got] == ["1460", "0"] and got[1][3] == str(8 + 32 + 80_000)
        assert [g[4] for g in got] == ["1428", "80000"] and [g[5] for g in got] == ["1", "1"]
