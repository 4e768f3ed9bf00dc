"""pcap export: accepted by tcpdump, tshark and capinfos; checksums as the trace says; payload API."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from reference import pcap_ref

from offloadkit import codes as C
from offloadkit.io import pcap as P
from offloadkit.io.capture import read_capture
from offloadkit.packet import build
from offloadkit.trace import Trace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data"))
import make_fixtures as F  # noqa: E402

TOOLS = {name: shutil.which(name) for name in ("tcpdump", "tshark", "capinfos")}
TRACES = {
    "plain": F.base_trace(),
    "ipv6": F.base_trace(v6=True),
    "vlan": F.with_encap(F.base_trace(), encap=C.ENC_VLAN, vlan_tci=5),
    "mpls": F.with_encap(F.base_trace(), encap=C.ENC_MPLS, mpls_labels=3),
    "pppoe": F.with_encap(F.base_trace(), encap=C.ENC_PPPOE),
    "vxlan": F.with_encap(F.base_trace(), encap=C.ENC_VXLAN, vni=7, outer_udp_csum=0),
    "vlan+pppoe+mpls": F.with_encap(F.base_trace(), encap=C.ENC_VLAN | C.ENC_PPPOE | C.ENC_MPLS, mpls_labels=1),
    "superpacket": F.base_trace().replace(payload_len=np.array([0, 0, 0, 65483, 70000, 0, 0])),
}


def _run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("header_only", [False, True])
@pytest.mark.parametrize("name", list(TRACES))
def test_tools_accept_written_pcap(tmp_path, name, header_only):
    if not all(TOOLS.values()):
        pytest.skip(f"missing tools: {[k for k, v in TOOLS.items() if not v]}")
    t = TRACES[name]
    f = tmp_path / f"{name}.pcap"
    assert P.write_pcap(f, t, header_only=header_only) == len(t)
    assert _run("capinfos", str(f)).returncode == 0
    td = _run("tcpdump", "-n", "-r", str(f))
    assert td.returncode == 0 and "truncated" not in td.stderr, td.stderr
    assert sum(ln[:1].isdigit() for ln in td.stdout.splitlines()) == len(t)
    ts = _run("tshark", "-r", str(f), "-o", "tcp.check_checksum:TRUE", "-T", "fields",
              "-e", "tcp.len", "-e", "tcp.checksum.status", "-e", "frame.len")
    assert ts.returncode == 0, ts.stderr
    fields = [ln.split("\t") for ln in ts.stdout.splitlines()]
    assert len(fields) == len(t)
    status = [row[1] for row in fields]
    frame_len = np.array([int(row[2]) for row in fields])
    ip_ok = t.l2_bytes.astype(int) + (t.encap & C.ENC_VXLAN > 0) * 50 + (t.encap & C.ENC_VLAN > 0) * 4 \
        + (t.encap & C.ENC_PPPOE > 0) * 8 + (t.encap & C.ENC_MPLS > 0) * 4 * np.maximum(t.mpls_labels, 1)
    assert (frame_len == ip_ok + t.ip_hlen + t.tcp_hlen + t.payload_len).all()   # orig_len right
    expect_good = (t.csum_state != C.CSUM_PARTIAL) & ~t.csum_bad
    for i, st in enumerate(status):
        whole = not header_only or t.payload_len[i] == 0
        if t.ip_hlen[i] + t.tcp_hlen[i] + t.payload_len[i] > 65535:
            continue                              # IP total length 0: tshark does not verify
        if whole:
            assert st == ("1" if expect_good[i] else "0"), (i, st)
        else:
            assert st in ("2", ""), (i, st)


def test_checksum_kinds_read_back(tmp_path):
    """Correct, PARTIAL and deliberately wrong checksums survive write -> read (both readers)."""
    t = F.base_trace()
    f = tmp_path / "c.pcap"
    P.write_pcap(f, t)
    for back in (read_capture(f).trace, pcap_ref.read_pcap(f)):
        assert back.csum_bad.tolist() == t.csum_bad.tolist()
        assert (back.csum_state == C.CSUM_PARTIAL).tolist() == (t.csum_state == C.CSUM_PARTIAL).tolist()
        assert back.tcp_csum[t.csum_bad].tolist() == [0x1234]


def test_wrong_checksum_that_happens_to_be_right_is_made_wrong(tmp_path):
    t = F.base_trace()[2:3]
    f = tmp_path / "x.pcap"
    P.write_pcap(f, t)
    right = read_capture(f).trace.tcp_csum[0]
    P.write_pcap(f, t.replace(csum_bad=[True], tcp_csum=[right]))
    back = read_capture(f).trace
    assert back.csum_bad[0] and back.tcp_csum[0] != right


def test_header_only_keeps_original_length(tmp_path):
    t = F.base_trace()
    f = tmp_path / "h.pcap"
    P.write_pcap(f, t, header_only=True, snaplen=96)
    r = read_capture(f)
    assert r.ok and (r.trace.payload_len == t.payload_len).all() and (r.trace.ip_len == t.ip_len).all()
    assert r.trace.truncated.tolist() == (t.payload_len > 0).tolist()
    assert f.stat().st_size < 24 + len(t) * (16 + 100)


def test_superpacket_written_with_ip_length_zero(tmp_path):
    t = TRACES["superpacket"]
    f = tmp_path / "s.pcap"
    P.write_pcap(f, t, header_only=True)
    back = read_capture(f)
    assert back.trace.payload_len.tolist() == t.payload_len.tolist()
    assert any("IP total length 0" in m for m in back.messages)


def test_payload_api_callable_and_sequence(tmp_path):
    t = F.base_trace(payload_scale=8)
    rng = np.random.default_rng(1)
    data = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in t.payload_len.tolist()]
    f1, f2 = tmp_path / "a.pcap", tmp_path / "b.pcap"
    P.write_pcap(f1, t, payload=data)
    P.write_pcap(f2, t, payload=lambda i: data[i])
    assert f1.read_bytes() == f2.read_bytes()
    for fast in (True, False):
        r = read_capture(f1, with_payload=True, fast=fast)
        assert r.payloads == data
        assert r.trace.csum_bad.tolist() == t.csum_bad.tolist()      # checksums cover the real bytes
    back, payloads = pcap_ref.read_pcap(f1, with_payload=True)
    assert payloads == data
    # fewer bytes than payload_len: the record is written cut, as a capture would be
    short = [d[:3] for d in data]
    P.write_pcap(f1, t, payload=short)
    r = read_capture(f1, with_payload=True)
    assert r.payloads == short and r.trace.truncated.tolist() == (t.payload_len > 3).tolist()


def test_invalid_arguments(tmp_path):
    t = F.base_trace()
    with pytest.raises(ValueError, match="snaplen"):
        P.write_pcap(tmp_path / "x.pcap", t, snaplen=0)
    with pytest.raises(ValueError, match="payload_len"):
        P.write_pcap(tmp_path / "x.pcap", t, payload=[b"x" * 5000] * len(t))


def test_nanosecond_pcap_keeps_nanoseconds(tmp_path):
    t = F.base_trace()
    f = tmp_path / "n.pcap"
    P.write_pcap(f, t, nano=True)
    r = read_capture(f)
    assert r.format == "pcap-ns" and (r.trace.time_ns == t.time_ns).all()
    P.write_pcap(f, t)
    assert (read_capture(f).trace.time_ns == t.time_ns // 1000 * 1000).all()


def test_empty_trace_writes_valid_file(tmp_path):
    f = tmp_path / "e.pcap"
    P.write_pcap(f, Trace.empty())
    r = read_capture(f)
    assert r.ok and len(r.trace) == 0
    if TOOLS["capinfos"]:
        assert _run("capinfos", str(f)).returncode == 0


def test_frames_with_original_l2_headers(tmp_path):
    """Rebuilt packets can keep the captured frame's own L2 header (e.g. real MAC addresses)."""
    t = F.base_trace(payload_scale=8)
    own = [bytes.fromhex("aabbccddeeff112233445566") + b"\x08\x00"] * len(t)
    built = build.frames(t, l2_headers=own, header_only=True)
    f = tmp_path / "o.pcap"
    P.write_records(f, [(int(x), fr, o) for x, (fr, o) in zip(t.time_ns, built)])
    back = read_capture(f)
    assert back.ok and (back.trace.seq == t.seq).all() and (back.trace.payload_len == t.payload_len).all()
    assert all(fr.startswith(own[0]) for fr, _ in built)
    assert [o for _, o in built] == (14 + t.ip_len).tolist()
