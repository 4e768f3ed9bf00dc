"""The CLI verbs reproduce, trace and export (export checked against the real tcpdump)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from offloadkit.cli import main
from offloadkit.reports import get
from offloadkit.reports.facts import REPORT_IDS
from offloadkit.reports.table import JSON_KEYS

TCPDUMP = shutil.which("tcpdump")


def test_reproduce_json_rows_and_exit_status(capsys):
    status = main(["reproduce", "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) >= 20
    assert all(tuple(r) == JSON_KEYS for r in rows)
    assert {r["report"] for r in rows} == set(REPORT_IDS)
    for rid in REPORT_IDS:
        assert any(r["role"] == "predicted" for r in rows if r["report"] == rid), rid
    assert {r["role"] for r in rows} <= {"fitted", "predicted"}
    assert status == (0 if all(r["ok"] for r in rows) else 1)


def test_reproduce_one_report_table(capsys):
    status = main(["reproduce", "--report", "vlan-nat"])
    out = capsys.readouterr().out
    assert "vlan-nat: 6/6 within tolerance" in out and "fitted parameter: csum_ns_per_byte" in out
    assert status == 0
    assert main(["reproduce", "--report", "vxlan", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["report"] for r in rows} == {"vxlan"}


def test_reproduce_exit_status_follows_the_rows(capsys, monkeypatch):
    mod = get("vxlan")
    real = mod.reproduce

    def failing():
        t = real()
        row = t.rows[2]
        t.rows[2] = type(row)(row.quantity, row.unit, row.reported, row.model * 2, row.tolerance, row.role)
        return t
    monkeypatch.setattr(mod, "reproduce", failing)
    assert main(["reproduce", "--report", "vxlan"]) == 1
    assert "FAIL" in capsys.readouterr().out
    assert main(["reproduce", "--report", "002", "--quiet"]) == 1
    quiet = capsys.readouterr()
    lines = quiet.out.splitlines()
    assert len(lines) == 2 and lines[0].startswith("FAIL vxlan: ") and "quantities" in lines[1]
    assert quiet.err == ""


def test_trace_prints_the_guest_super_packets(capsys):
    assert main(["trace", "rtl8139", "--point", "guest", "-n", "9"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 9
    assert "Flags [S]" in lines[0] and "mss 1452" in lines[0]
    assert any("seq 1:2881" in line and "length 2880" in line for line in lines)


def test_trace_list_and_errors(capsys):
    assert main(["trace", "rtl8139", "--list"]) == 0
    out = capsys.readouterr().out
    for name in ("broken", "workaround", "fixed", "guest", "macvtap"):
        assert name in out
    assert main(["trace", "rtl8139", "--variant", "nope"]) == 2
    err = capsys.readouterr().err
    assert "broken" in err and "workaround" in err
    assert main(["trace", "rtl8139", "--point", "wire"]) == 2
    assert "guest, macvtap" in capsys.readouterr().err
    assert main(["trace", "nope"]) == 2


def _tcpdump(path) -> list[str]:
    out = subprocess.run([TCPDUMP, "-n", "-v", "-r", str(path)], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "TZ": "UTC"})
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


@pytest.mark.skipif(TCPDUMP is None, reason="tcpdump not installed")
@pytest.mark.parametrize("rid,variant,point", [
    ("rtl8139", "broken", "guest"), ("rtl8139", "broken", "macvtap"), ("rtl8139", "broken", "ppp"),
    ("rtl8139", "broken", "laptop"), ("mpls", "healthy", "ns0"), ("mpls", "broken", "ns0-out"), ("vxlan", "broken", "nic"), ("vxlan", "bnx2x", "tap"),
    ("splice", "broken", "lro"), ("vlan-nat", "broken", "wan"), ("vlan-nat", "broken", "forward"),
])
def test_export_prints_like_trace_in_real_tcpdump(tmp_path, capsys, rid, variant, point):
    f = tmp_path / "x.pcap"
    assert main(["export", rid, str(f), "--variant", variant, "--point", point, "-n", "40"]) == 0
    capsys.readouterr()
    assert main(["trace", rid, "--variant", variant, "--point", point, "-n", "40", "-v"]) == 0
    ours = capsys.readouterr().out.splitlines()
    assert len(ours) >= 2
    assert _tcpdump(f) == ours
