"""The ``offloadkit simulate`` verb: JSON and text output, bad input."""
import json

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

