"""The doctor counts chunk by chunk: any chunk size gives the same diagnosis, byte for byte,
as one count over the whole capture."""
from __future__ import annotations

import json

import pytest
from test_doctor_flows import on_wire, transfer, with_resends

from offloadkit.doctor import diagnose_file
from offloadkit.io.pcap import write_pcap
from offloadkit.resources import data_dir
from offloadkit.sim.scenario import Hop
from offloadkit.trace import Trace

SHIPPED = sorted((data_dir() / "captures").rglob("*.pcap"))
SOME = [p for p in SHIPPED if p.name == "rcv.pcap" and p.parent.name in ("ts-mtu1492-pmtud", "v6-bigtcp-185000")]


def as_json(d) -> str:
    return json.dumps(d.to_dict(), indent=1)


def whole(path) -> str:
    """The diagnosis of the capture read as one Trace (counted in one go)."""
    d = diagnose_file(path)
    assert d.trace is not None and len(d.trace) == d.packets
    return as_json(d)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_shipped_captures_in_small_chunks(path):
    assert as_json(diagnose_file(path, keep_trace=False, chunk=7)) == whole(path)


@pytest.mark.parametrize("path", SOME, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_one_packet_chunks(path):
    assert as_json(diagnose_file(path, keep_trace=False, chunk=1)) == whole(path)


def test_black_hole_across_chunks(tmp_path):
    """Originals, their shrunken resends and the SACKs between them land in different chunks."""
    guest = transfer(n_super=40, seg=1440, k=2, peer_mss=1452, side="wire", partial=True)
    wire = on_wire(guest, nic="rtl8139-legacy")           # report 000: 1448/1432, PPPoE drops the 1448s
    before, after = with_resends(wire, Hop(mtu=1500, encap=("pppoe",)), 1440)
    for name, t in (("before.pcap", before), ("after.pcap", after)):
        path = tmp_path / name
        write_pcap(path, t)
        ref = whole(path)
        assert "black-hole" in ref
        for chunk in ((1, 7, 64) if name == "before.pcap" else (7, 64)):
            assert as_json(diagnose_file(path, keep_trace=False, chunk=chunk)) == ref, (name, chunk)


def test_a_later_syn_that_raises_the_mtu_is_counted_again(tmp_path):
    """A second connection's SYN (MSS 8960) arrives after the first one's packets were counted
    with MTU 1500: the capture is counted a second time with MTU 9000, as a whole count gives."""
    a = on_wire(transfer(n_super=10, seg=1448, k=2, side="wire"))
    b = transfer(n_super=10, seg=8948, k=1, peer_mss=8960, own_mss=8960, side="wire")
    b = b.replace(sport=b.sport + 1, time_ns=b.time_ns + int(a.time_ns.max()) + 1)
    path = tmp_path / "two.pcap"
    write_pcap(path, Trace.concat([a, b]))
    ref = whole(path)
    assert '"mtu": 9000' in ref
    assert as_json(diagnose_file(path, keep_trace=False, chunk=16)) == ref


def test_stdin_counted_twice_reads_its_copy(tmp_path, monkeypatch):
    """From stdin (``-``) too: the second count reads the copy made of it."""
    import io
    import sys
    a = on_wire(transfer(n_super=10, seg=1448, k=2, side="wire"))
    b = transfer(n_super=10, seg=8948, k=1, peer_mss=8960, own_mss=8960, side="wire")
    b = b.replace(sport=b.sport + 1, time_ns=b.time_ns + int(a.time_ns.max()) + 1)
    path = tmp_path / "two.pcap"
    write_pcap(path, Trace.concat([a, b]))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(path.read_bytes())))
    got = diagnose_file("-", keep_trace=False, chunk=16).to_dict()
    ref = diagnose_file(path).to_dict()
    assert got["mtu"] == ref["mtu"] == 9000
    assert got == {**ref, "capture": "-"}
