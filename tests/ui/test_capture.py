"""offloadkit.ui.capture (notebook 06): the doctor's findings with their evidence as charts."""
from __future__ import annotations

import pytest

from offloadkit.resources import data_dir
from offloadkit.ui import capture as C


def test_receiver_capture_shows_aggregates_and_points_to_a_notebook():
    r = C.explore("ts-mss536/rcv")
    assert "aggregates" in r.diagnosis.kinds()
    assert set(r.charts) == {"sizes", "time-sequence", "shape"}
    page = r._repr_html_()
    assert page.count("<svg") == 3
    assert r.match and r.match[0].endswith(".ipynb")
    shapes = {row["shape"] for row in r.charts["shape"].to_dict()["datasets"]["shape"]}
    assert "aggregate (after GRO/LRO)" in shapes


def test_sender_side_capture_shows_super_packets():
    r = C.explore("ts-mss536/router-in")
    shapes = {row["shape"] for row in r.charts["shape"].to_dict()["datasets"]["shape"]}
    assert "super-packet (before segmentation)" in shapes
    sides = {row["side"] for row in r.charts["sizes"].to_dict()["datasets"]["sizes"]}
    assert sides == {C.SIDES["sender"]}


def test_unmerged_bulk_flow_matches_the_vxlan_report():
    r = C.explore("ts-mss1200-gro-off/rcv")
    assert r.match[0] == "03-vxlan-gro.ipynb"


def test_upload_bytes_and_paths_give_the_same_report():
    path = data_dir() / "captures" / "ts-mtu1500" / "rcv.pcap"
    a, b = C.explore(path.read_bytes()), C.explore(str(path))
    assert a.diagnosis.kinds() == b.diagnosis.kinds() and a.name == "uploaded capture"


def test_a_bad_name_says_what_to_give():
    with pytest.raises(ValueError, match="give a pcap/pcapng path or one of"):
        C.explore("no/such")


def test_explorer_stores_a_static_copy_and_reports_a_bad_upload():
    e = C.explorer("ts-mss536/router-out")
    bundle = e._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle and bundle["text/html"].count("<svg") == 3
    e.show(b"not a capture at all")
    assert e.error and e.error.startswith("cannot read that capture") and e.error.endswith(".")
