"""The ``offloadkit simulate`` verb: JSON and text output, bad input."""
import json

import pytest

from offloadkit.cli import main


def test_cli_json(capsys):
    assert main(["simulate", "--rate", "20Mbit", "--rtt", "10ms", "--loss", "0.01", "--duration", "2s",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("goodput_bps", "retransmits", "drops", "duration_s", "events"):
        assert key in out
    assert out["duration_s"] == 2.0 and 0 < out["goodput_bps"] < 20e6
    assert out["drops"].get("random loss", 0) > 0


def test_cli_text_and_errors(capsys):
    assert main(["simulate", "--nic", "rtl8139-legacy", "--path-mtu", "1492", "--rate", "9.6Mbit",
                 "--rtt", "29ms", "--mss", "1440", "--bytes", "200kB", "--old-kernel"]) == 0
    out = capsys.readouterr().out
    assert "goodput" in out and "over MTU, dropped silently" in out and "1448 B" in out
    assert main(["simulate", "--mss", "1600"]) == 2
    assert "MSS 1600 does not fit in MTU 1500" in capsys.readouterr().err
    assert main(["simulate", "--rate", "fast"]) == 2


def test_cli_no_trace_prints_the_same_statistics(capsys):
    args = ["simulate", "--rate", "20Mbit", "--rtt", "10ms", "--loss", "0.01", "--duration", "1s", "--json"]
    assert main(args) == 0
    traced = json.loads(capsys.readouterr().out)
    assert main(args + ["--no-trace"]) == 0
    bare = json.loads(capsys.readouterr().out)
    for key in ("goodput_bps", "retransmits", "drops", "events", "delivered_bytes"):
        assert bare[key] == traced[key]
    assert traced["segment_sizes"]["wire"] and not bare["segment_sizes"]["wire"]
    assert bare["partial"] is False


@pytest.mark.parametrize("args, message", [
    (["--path-mtu", "0"], "MTU 0 must be between 68 and 65535"),
    (["--rate", "40Gbit", "--rtt", "200us", "--bytes", "1e13"], "the simulator stops at"),
])
def test_cli_refuses_what_it_cannot_do_with_one_line(capsys, args, message):
    assert main(["simulate", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_cli_fast_long_path_needs_no_queue_option(capsys):
    assert main(["simulate", "--rate", "1Tbit", "--rtt", "300ms", "--duration", "2s", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert 0 < out["goodput_bps"] < 4 * (4 << 20) * 8 / 0.3      # bounded by the 4 MB receive window


def test_cli_flows_that_differ(capsys):
    assert main(["simulate", "--rate", "50Mbit", "--rtt", "10ms", "--duration", "3s", "--no-trace", "--json",
                 "--flow", "size=300kB", "--flow", "size=600kB,start=0.5s,rtt=40ms,cc=newreno"]) == 0
    out = json.loads(capsys.readouterr().out)
    first, second = out["completion_s"]
    assert out["delivered_bytes"] == 900_000
    assert 0 < first < 0.5 < second < 3


@pytest.mark.parametrize("flow, says", [
    ("size=1MB,foo=2", "keys size, start, rtt, cc"), ("rtt=5ms", "shorter than the path's --rtt"),
    ("cc=vegas", "choose one of"), ("size=lots", "--flow size=lots"), ("start=1s,start=2s", "given twice"),
])
def test_cli_bad_flow_is_one_line(flow, says, capsys):
    assert main(["simulate", "--rtt", "10ms", "--flow", flow]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1


def test_cli_pcap_writes_the_point_as_tcpdump_would_see_it(capsys, tmp_path):
    """``--ipv6 --pcap OUT --point P``: the packets at P, read back as IPv6 with the run's lengths."""
    from offloadkit.io.capture import read_capture
    out = tmp_path / "wire.pcap"
    assert main(["simulate", "--ipv6", "--duration", "40ms", "--json", "--pcap", str(out), "--point", "wire"]) == 0
    cap = capsys.readouterr()
    sizes = json.loads(cap.out)["segment_sizes"]["wire"]           # stdout stays one JSON object
    t = read_capture(out).trace
    assert len(t) == sum(sizes.values()) > 20 and "wrote" in cap.err and "at wire" in cap.err
    assert (t.ip_version == 6).all() and (t.payload_len[t.payload_len > 0] == 1428).all()
    for args, says in ((["--point", "wire"], "give --pcap"), (["--pcap", str(out), "--no-trace"], "--no-trace"),
                       (["--pcap", str(out), "--point", "nope"], "capture points are")):
        assert main(["simulate", "--duration", "10ms", *args]) == 2
        assert says in capsys.readouterr().err
