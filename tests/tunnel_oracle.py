"""What the tunnel oracle tests (tests/oracle/test_oracle_tunnel.py, test_oracle_overlay6.py) share."""
from __future__ import annotations

from kit_cli import run_verb

from offloadkit.lab import oracle

UNDERLAY_RECEIVER = {4: "198.18.2.2", 6: "2001:2:2::2"}   # the routed lab's receiver, by underlay IP version


def segment_equals_egress(c: dict, mss: int, fields: tuple, outer_rows, tmp_path):
    """``offloadkit segment`` on the case's router-ingress super-packets equals the kernel's egress
    (``fields`` compared per packet); returns (the kit's outer rows by key, the egress outer rows)."""
    ing = outer_rows(c["paths"]["router-in"])
    assert sum(r["payload"] > mss for r in ing) >= 3
    out = tmp_path / "kit.pcap"
    code, err = run_verb(["segment", c["paths"]["router-in"], out, "--mss", mss])
    assert code == 0 and "copied whole" not in err, err
    rep = oracle.compare_segmentation(out, c["paths"]["router-out"], c["sender_ip"], fields)
    assert rep.ok and rep.matched == rep.egress_packets > 200, rep.summary()
    return {r["key"]: r for r in outer_rows(out)}, outer_rows(c["paths"]["router-out"])
