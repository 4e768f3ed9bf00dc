"""Fuzzing read_capture with hypothesis: random and mutated pcap/pcapng bytes.

More than 10,000 inputs in the default run (about 20-30 s); set
OFFLOADKIT_FUZZ_SCALE=10 for a longer campaign. Properties: no exception
escapes, and every packet whose record lies wholly before the first damaged
byte is returned exactly as from the intact file.
"""
from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offloadkit import codes as C
from offloadkit.io.capture import CaptureResult, read_capture

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data"))
import make_fixtures as F  # noqa: E402

SCALE = int(os.environ.get("OFFLOADKIT_FUZZ_SCALE", "1"))
COMPARE = ["time_ns", "frame", "ip_version", "src_ip", "dst_ip", "src_ip6", "dst_ip6", "sport", "dport", "seq",
           "ack", "payload_len", "flags", "window", "tcp_hlen", "opt_mss", "opt_ts", "tsval", "sack_n", "sack",
           "ip_id", "ip_len", "l2_bytes", "encap", "vlan_tci", "mpls_labels", "vni", "csum_bad", "csum_state",
           "truncated"]


def _bases() -> dict[str, bytes]:
    small = F.base_trace(payload_scale=16)
    fx = F.fixtures()
    enc = F.with_encap(small, encap=C.ENC_VLAN | C.ENC_MPLS | C.ENC_VXLAN, mpls_labels=2, vni=9, vlan_tci=3)
    sll2 = [(a, F.sll2(f), o + 6) for a, f, o in F.frames(small)]
    v6 = F.frames(F.base_trace(payload_scale=16, v6=True))
    mixed = F.frames(small)[:3] + F.non_tcp_frames(0) + F.frames(small)[3:]
    return {
        "eth_small.pcap": fx["eth_small.pcap"][0],
        "header_only.pcap": fx["header_only.pcap"][0],
        "small.pcapng": fx["small.pcapng"][0],
        "encap.pcap": F.pcap_bytes(F.frames(enc), nano=True),
        "sll2.pcap": F.pcap_bytes(sll2, linktype=276, big_endian=True),
        "mixed.pcap": F.pcap_bytes(mixed),
        "multi.pcapng": F.pcapng_bytes([(1, 9, 0), (276, 0x80 | 20, 5), (101, None, 0)],
                                       [(i % 3, a, F.sll2(f) if i % 3 == 1 else f[14:] if i % 3 == 2 else f, o)
                                        for i, (a, f, o) in enumerate(v6)]),
    }


BASES = _bases()
INTACT = {name: read_capture(data) for name, data in BASES.items()}


def _record_ends(data: bytes) -> list[int]:
    """End offset of each packet record (pcap) or packet block (pcapng), in file order."""
    ends = []
    if data[:4] == b"\x0a\x0d\x0d\x0a":
        pos = 0
        while pos + 8 <= len(data):
            btype, blen = struct.unpack("<II", data[pos:pos + 8])
            pos += blen
            if btype in (2, 3, 6):
                ends.append(pos)
        return ends
    big = data[:4] in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d")
    rec = 24 if data[:4] == b"\x34\xcd\xb2\xa1" else 16
    pos = 24
    while pos < len(data):
        cap = struct.unpack(">I" if big else "<I", data[pos + 8:pos + 12])[0]
        pos += rec + cap
        ends.append(pos)
    return ends


ENDS = {name: _record_ends(data) for name, data in BASES.items()}


def check_prefix(name: str, damaged: bytes, first_change: int) -> CaptureResult:
    """read_capture on damaged bytes: no exception, and the intact records' rows come back unchanged."""
    r = read_capture(damaged)
    assert isinstance(r, CaptureResult) and r.trace is not None
    full = INTACT[name].trace
    intact_records = sum(e <= first_change for e in ENDS[name])
    m_exp = int(np.searchsorted(full.frame, intact_records, side="right"))
    m_got = int(np.searchsorted(r.trace.frame, intact_records, side="right"))
    assert m_got == m_exp, (name, first_change, r.messages)
    for c in COMPARE:
        assert np.array_equal(r.trace.columns[c][:m_got], full.columns[c][:m_exp]), c
    return r


mutation = st.tuples(st.sampled_from(["set", "flip", "insert", "delete", "cut"]), st.integers(0, 1 << 16),
                     st.binary(min_size=1, max_size=8))


@settings(max_examples=5000 * SCALE, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(name=st.sampled_from(sorted(BASES)), ops=st.lists(mutation, min_size=1, max_size=4))
def test_mutated_captures(name, ops):
    data = bytearray(BASES[name])
    first = len(data)
    for kind, pos, blob in ops:
        if not data:
            break
        pos %= len(data)
        if kind == "set":
            data[pos:pos + len(blob)] = blob[:max(0, len(data) - pos)]
        elif kind == "flip":
            data[pos] ^= blob[0] | 1
        elif kind == "insert":
            data[pos:pos] = blob
        elif kind == "delete":
            del data[pos:pos + len(blob)]
        else:
            del data[pos:]
        first = min(first, pos)
    if bytes(data[:first]) != BASES[name][:first]:
        first = next(i for i in range(first) if data[i] != BASES[name][i])
    check_prefix(name, bytes(data), first)


@settings(max_examples=2500 * SCALE, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(head=st.sampled_from([b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\x34\xcd\xb2\xa1",
                             b"\x0a\x0d\x0d\x0a", b""]), body=st.binary(max_size=600))
def test_random_bytes(head, body):
    r = read_capture(head + body)
    assert isinstance(r, CaptureResult)
    assert len(r.trace) <= max(1, len(body) // 16)


@settings(max_examples=2000 * SCALE, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(linktype=st.sampled_from([0, 1, 12, 101, 108, 113, 228, 229, 276, 147]),
       pcapng=st.booleans(), resol=st.integers(0, 255),
       frames=st.lists(st.binary(min_size=0, max_size=120), max_size=6))
def test_random_frames_in_valid_files(linktype, pcapng, resol, frames):
    """Well-formed files holding random frame bytes: every record is seen, decoding never raises."""
    pk = [(i * 1000, f, len(f)) for i, f in enumerate(frames)]
    if pcapng:
        data = F.pcapng_bytes([(linktype, resol, 0)], [(0, 0, f, o) for _, f, o in pk]) if frames else \
            F.pcapng_bytes([(linktype, resol, 0)], [])
    else:
        data = F.pcap_bytes(pk, linktype=linktype)
    r = read_capture(data)
    assert r.ok and r.records == len(frames) and len(r.trace) <= len(frames)


@settings(max_examples=500 * SCALE, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(name=st.sampled_from(["eth_small.pcap", "header_only.pcap", "mixed.pcap"]), pos=st.integers(0, 1 << 16),
       blob=st.binary(min_size=1, max_size=4))
def test_fast_path_equals_python_decoder_on_damaged_files(name, pos, blob):
    data = bytearray(BASES[name])
    pos %= len(data)
    data[pos:pos + len(blob)] = blob
    a, b = read_capture(bytes(data)), read_capture(bytes(data), fast=False)
    assert a.error == b.error and len(a.trace) == len(b.trace)
    for c in COMPARE:
        assert np.array_equal(a.trace.columns[c], b.trace.columns[c]), c
