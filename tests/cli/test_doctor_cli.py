"""``offloadkit doctor``: text, --json, hints, exit codes; every committed capture; report exports."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from doctor.test_doctor_flows import on_wire, transfer, with_resends

from offloadkit import cli
from offloadkit import codes as C
from offloadkit.doctor import diagnose_file
from offloadkit.engine.path import Hop
from offloadkit.io.capture import read_capture
from offloadkit.io.pcap import write_pcap

ROOT = Path(__file__).resolve().parents[2]
TEST_PCAPS = sorted((ROOT / "tests" / "data").glob("*.pcap*"))
REAL_PCAPS = sorted((ROOT / "offloadkit" / "data" / "captures").glob("*/*.pcap"))


@pytest.fixture(scope="module")
def broken(tmp_path_factory):
    """A wire capture of report 000's flow before the PPPoE hop (1448/1432, 1448s resent as 1440)."""
    wire = on_wire(transfer(n_super=30, seg=1440, k=2, peer_mss=1452, side="wire"), nic="rtl8139-legacy")
    before, _ = with_resends(wire, Hop(1500, C.ENC_PPPOE), 1440)
    path = tmp_path_factory.mktemp("doctor") / "rtl.pcap"
    write_pcap(path, before)
    return path


def test_text_output_and_exit_one_with_errors(broken, capsys):
    assert cli.main(["doctor", str(broken)]) == 1
    out = capsys.readouterr().out
    assert "[ERROR] mss-mismatch" in out and "[ERROR] black-hole" in out
    assert "packets: #" in out and "1448" in out and "1440" in out


def test_json_output(broken, capsys):
    assert cli.main(["doctor", str(broken), "--json"]) == 1
    js = json.loads(capsys.readouterr().out)
    kinds = {f["kind"]: f for f in js["findings"]}
    assert kinds["mss-mismatch"]["severity"] == "error"
    assert kinds["black-hole"]["evidence"]["lost_size"] == 1448
    assert js["worst"] == "error" and js["flows"][0]["retransmitted_packets"] == 30


def test_hints_reach_the_checks(broken, capsys):
    assert cli.main(["doctor", str(broken), "--json", "--mtu", "1492", "--side", "sender", "--gro", "off"]) == 1
    capsys.readouterr()
    assert cli.main(["doctor", str(broken), "--json", "--mtu", "1492", "--side", "sender", "--no-gro"]) == 1
    js = json.loads(capsys.readouterr().out)
    assert js["mtu"] == 1492 and js["mtu_from"] == "given with --mtu"
    assert js["flows"][0]["side"] == "sender"


@pytest.mark.parametrize("content", [b"", b"garbage, not a capture", None,
                                     b"\xd4\xc3\xb2\xa1\x02\x00\x04\x00\x00\x00"])  # a cut 10-byte header
def test_unreadable_input_exits_2_with_one_line(tmp_path, capsys, content):
    p = tmp_path / "x.pcap"
    if content is not None:
        p.write_bytes(content)
    assert cli.main(["doctor", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("offloadkit doctor: ") and "\n" not in err and "Traceback" not in err


def test_bad_option_values_exit_2(broken, capsys):
    assert cli.main(["doctor", str(broken), "--mtu", "10"]) == 2
    assert "MTU" in capsys.readouterr().err


def test_exit_zero_when_nothing_is_above_info(capsys):
    d = diagnose_file(TEST_PCAPS[0])
    path = next(p for p in TEST_PCAPS + REAL_PCAPS if diagnose_file(p).worst() == "info")
    assert cli.main(["doctor", str(path)]) == 0 and d is not None
    assert "Exit status: 0 when no finding is above info; 1 when there is a warning" in \
        cli.build_parser("doctor")._subparsers._group_actions[0].choices["doctor"].format_help().replace("\n", " ")


def test_truncated_capture_exits_1_and_says_so(broken, tmp_path, capsys):
    raw = broken.read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(raw[: len(raw) // 2 + 5])
    assert cli.main(["doctor", str(cut)]) == 1
    out = capsys.readouterr().out
    assert "[WARNING] capture-damaged" in out and "black-hole" in out


@pytest.mark.parametrize("path", TEST_PCAPS + REAL_PCAPS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_committed_capture_is_diagnosed_without_crash(path):
    d = diagnose_file(path)
    assert d.packets == len(read_capture(path).trace)      # every TCP packet the reader finds is diagnosed
    json.dumps(d.to_dict())
    for f in d.findings:
        assert f.message and f.severity in ("info", "warning", "error")


@pytest.mark.parametrize("path", REAL_PCAPS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_real_kernel_captures_raise_no_alarm(path):
    d = diagnose_file(path)
    assert d.alarms() == [], [(f.kind, f.message) for f in d.alarms()]
    point = path.stem
    kinds = d.kinds()
    if point == "router-in":                # the sender's TSO super-packets
        assert "super-packets" in kinds
    if point == "rcv" and "gro-off" not in path.parent.name:
        assert "aggregates" in kinds


def test_real_capture_sides_are_inferred():
    d = diagnose_file(ROOT / "offloadkit" / "data" / "captures" / "ts-mtu1500" / "router-in.pcap")
    assert {f["side"] for f in d.flows} == {"sender"}
    d = diagnose_file(ROOT / "offloadkit" / "data" / "captures" / "ts-mtu1500" / "rcv.pcap")
    assert {f["side"] for f in d.flows} == {"receiver"}


# -- report presets exported with `offloadkit export` --------------------------------------------
def _export(tmp_path, report, variant, point):
    out = tmp_path / f"{report}-{variant}-{point}.pcap"
    rc = cli.main(["export", report, str(out), "--variant", variant, "--point", point])
    assert rc == 0 and out.exists(), f"offloadkit export {report} --variant {variant} --point {point}: exit {rc}"
    return diagnose_file(out)


@pytest.mark.parametrize("point,kinds", [("guest", {"black-hole", "super-packets"}),
                                         ("macvtap", {"mss-mismatch", "black-hole"}),
                                         ("ppp", {"black-hole"})])
def test_report_000_exports_show_its_signature(tmp_path, point, kinds):
    d = _export(tmp_path, "rtl8139", "broken", point)
    assert kinds <= d.kinds(), d.kinds()
    assert {"black-hole"} <= d.kinds("error")


@pytest.mark.parametrize("point", ["guest", "macvtap", "ppp"])
def test_report_000_fixed_exports_show_no_offload_problem(tmp_path, point):
    d = _export(tmp_path, "rtl8139", "fixed", point)
    assert not d.kinds() & {"black-hole", "mss-mismatch", "checksum-corruption"}


@pytest.mark.parametrize("point", ["nic", "tap"])
def test_report_002_exports_show_no_aggregation(tmp_path, point):
    d = _export(tmp_path, "vxlan", "broken", point)
    f = [f for f in d.findings if f.kind == "no-aggregation"]
    assert f and f[0].evidence["max_payload"] == 1398 and f[0].evidence["ip_len"] == 1450
    assert d.alarms() == []


def test_report_002_bnx2x_tap_shows_aggregates(tmp_path):
    d = _export(tmp_path, "vxlan", "bnx2x", "tap")
    assert "no-aggregation" not in d.kinds()
    assert d.kinds() & {"aggregates", "super-packets"}
    assert d.alarms() == []


def test_report_003_lro_export_names_interleaved_flows(tmp_path):
    d = _export(tmp_path, "splice", "broken", "lro")
    f = [f for f in d.findings if f.kind == "aggregation-ratio"]
    assert f and f[0].evidence["flows"] >= 64 and f[0].evidence["segments_per_packet"] < 2
    assert "report 003" in f[0].message
    assert d.alarms() == []


@pytest.mark.parametrize("variant,gro_seen", [("broken", True), ("fixed", False)])
def test_report_004_forward_export_shows_vlan_gro(tmp_path, variant, gro_seen):
    d = _export(tmp_path, "vlan-nat", variant, "forward")
    agg = [f for f in d.findings if f.kind in ("aggregates", "super-packets")]
    assert bool(agg) == gro_seen
    if gro_seen:
        assert agg[0].evidence["vlan_tagged"] > 0 and "report 004" in agg[0].message
    assert d.alarms() == []
