"""Chart builders of offloadkit.ui.views on hand-built traces."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from offloadkit.codes import DROP_MTU_SILENT, PASS_GRO_VALIDATE, PASS_SW_GSO
from offloadkit.trace import Trace
from offloadkit.ui import views as V

from dashboard_helpers import spec_rows


def four_points():
    return Trace.from_columns(
        points=("stack", "wire", "hop", "gro"), point=[0, 1, 1, 2, 2, 3],
        seq=[1, 1, 1449, 1, 1449, 1449], payload_len=[2880, 1448, 1432, 1448, 1432, 1432],
        ip_len=[2932, 1500, 1484, 1500, 1484, 1484], drop=[0, 0, 0, DROP_MTU_SILENT, 0, 0])


def test_segment_sizes_rows_follow_the_trace():
    spec = V.segment_sizes(four_points(), rules=[("MSS 1448", 1448)]).to_dict()
    rows = [r for r in spec_rows(spec) if "point" in r]
    assert [(r["point"], r["payload"]) for r in rows] == [
        ("stack", 2880), ("wire", 1448), ("wire", 1432), ("hop", 1448), ("hop", 1432), ("gro", 1432)]
    assert [r["fate"] for r in rows if r["point"] == "hop"] == ["dropped", "delivered"]
    assert rows[3]["why"] == "over MTU, dropped silently"
    assert {"v": 1448, "label": "MSS 1448"} in spec_rows(spec)


def test_segment_sizes_switches_to_a_histogram_for_many_packets():
    n = 200
    t = Trace.from_columns(payload_len=np.where(np.arange(n) % 2, 1448, 1432), ip_len=1500)
    rows = spec_rows(V.segment_sizes(t, max_bars=48).to_dict())
    assert sorted((r["size"], r["count"]) for r in rows) == [(1432, 100), (1448, 100)]
    with pytest.raises(ValueError, match="measure"):
        V.segment_sizes(t, measure="bogus")


def test_trace_text_panels_and_overflow():
    lines = {"wire": [f"line {i}" for i in range(15)], "gro": []}
    spec = V.trace_text(lines, max_lines=10).to_dict()
    texts = [r["line"] for r in spec_rows(spec) if "line" in r]
    assert texts[:10] == [f"line {i}" for i in range(10)]
    assert "... 5 more" in texts and "(no packets)" in texts
    titles = [c["title"]["text"] for c in spec["concat"]]
    assert titles == ["wire (15 packets)", "gro (0 packets)"]


def test_time_sequence_marks_retransmissions_and_drops():
    seq = np.r_[np.arange(6) * 1000, 2000, 6000]
    t = Trace.from_columns(time_ns=np.arange(8) * 1_000_000, seq=seq + 5000, payload_len=1000,
                           drop=[0, 0, 1, 0, 0, 0, 0, 0])
    rows = spec_rows(V.time_sequence(t).to_dict())
    assert [r["fate"] for r in rows] == ["delivered"] * 2 + ["dropped"] + ["delivered"] * 3 + [
        "retransmission", "delivered"]
    assert rows[0]["seq"] == 0 and rows[-1]["end"] == 7000 and rows[-1]["t_ms"] == 7.0


def test_time_sequence_thins_but_keeps_every_retransmission():
    n = 10_000
    seq = np.arange(n, dtype=np.int64) * 100
    seq[5000] = 0  # one retransmission
    t = Trace.from_columns(time_ns=np.arange(n) * 1000, seq=seq, payload_len=100)
    rows = spec_rows(V.time_sequence(t, max_points=500).to_dict())
    assert len(rows) <= 500 and sum(r["fate"] == "retransmission" for r in rows) == 1


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "csum_partial"]), st.floats(0, 1)), min_size=1, max_size=20))
def test_cpu_profile_sorted_and_capped(items):
    rows = [{"symbol": s, "share": x} for s, x in items]
    spec = V.cpu_profile(rows, top=2).to_dict()
    data = spec_rows(spec)
    shares = [r["share"] for r in data]
    assert shares == sorted(shares, reverse=True)
    assert len({r["symbol"] for r in data}) <= 2


def test_checksum_passes_names_places():
    rows = spec_rows(V.checksum_passes([{"place": PASS_GRO_VALIDATE, "count": 2, "bytes": 2896},
                                        {"place": PASS_SW_GSO, "count": 1, "bytes": 1468}]).to_dict())
    assert [(r["place"], r["label"]) for r in rows] == [
        ("GRO validation", "2 passes, 2 896 B"), ("software GSO checksum", "1 pass, 1 468 B")]
    empty = spec_rows(V.checksum_passes([]).to_dict())
    assert "no software checksum" in empty[0]["m"]


def test_throughput_vs_report_labels():
    rows = spec_rows(V.throughput_vs_report([{"case": "TSO on", "source": "model", "bps": 6.0e5},
                                             {"case": "TSO on", "source": "report", "bps": 5.78e6}]).to_dict())
    assert [r["label"] for r in rows] == ["600 kb/s", "5.78 Mb/s"]


@pytest.mark.parametrize("bps,text", [(6.65e9, "6.65 Gb/s"), (2e6, "2 Mb/s"), (723e3 * 8, "5.78 Mb/s"), (12, "12 b/s")])
def test_format_rate(bps, text):
    assert V.format_rate(bps) == text


def test_trace_text_prints_a_shared_head_once():
    lines = {"a": ["IP 1.2.3.4.5 > 6.7.8.9.10: Flags [.], seq 1:2, length 1"],
             "b": ["IP 1.2.3.4.5 > 6.7.8.9.10: Flags [P.], seq 2:3, length 1"]}
    spec = V.trace_text(lines).to_dict()
    assert [r["line"] for r in spec_rows(spec)] == ["Flags [.], seq 1:2, length 1", "Flags [P.], seq 2:3, length 1"]
    assert spec["title"]["text"] == "every line starts with: IP 1.2.3.4.5 > 6.7.8.9.10:"
    lines["b"].append("IP 9.9.9.9.1 > 6.7.8.9.10: Flags [S], seq 0, length 0")
    spec = V.trace_text(lines).to_dict()
    assert "title" not in spec and spec_rows(spec)[0]["line"].startswith("IP 1.2.3.4.5")


def _all_builder_outputs():
    t = four_points()
    many = Trace.from_columns(payload_len=np.where(np.arange(100) % 2, 1448, 1432), ip_len=1500)
    seq = Trace.from_columns(time_ns=np.arange(5) * 1000, seq=np.arange(5) * 100, payload_len=100, drop=[0, 1, 0, 0, 0])
    return {
        "trace_text": V.trace_text({"a": ["IP 1.1.1.1.1 > 2.2.2.2.2: x"], "b": []}),
        "trace_text_empty": V.trace_text({}),
        "segment_sizes": V.segment_sizes(t, rules=[("MSS 1448", 1448), ("hop 1440", 1440)]),
        "size_histogram": V.segment_sizes(many),
        "throughput": V.throughput_vs_report([{"case": "a", "source": "model", "bps": 1e6},
                                              {"case": "a", "source": "report", "bps": 2e6}]),
        "time_sequence": V.time_sequence(seq),
        "time_sequence_empty": V.time_sequence(Trace.from_columns(payload_len=[0])),
        "cpu_profile": V.cpu_profile([{"symbol": "x", "share": 0.5, "case": "on"}]),
        "cpu_profile_plain": V.cpu_profile([{"symbol": "x", "share": 0.5}]),
        "checksum": V.checksum_passes([{"place": PASS_GRO_VALIDATE, "count": 1, "bytes": 10}]),
        "checksum_none": V.checksum_passes([]),
        "message": V.message_chart("hello"),
    }


@pytest.mark.parametrize("name", list(_all_builder_outputs()))
def test_every_builder_writes_valid_vega_lite(name):
    import altair as alt
    from altair.utils.schemapi import validate_jsonschema
    spec = _all_builder_outputs()[name].to_dict()
    validate_jsonschema(spec, alt.vegalite.v6.schema.core.load_schema())  # raises on any schema error
    assert spec["$schema"] == alt.SCHEMA_URL
    names = {d["name"] for d in _named_data(spec)}
    assert names <= set(spec.get("datasets", {})), "every named dataset is attached"


def _named_data(node):
    if isinstance(node, dict):
        if isinstance(node.get("data"), dict) and "name" in node["data"]:
            yield node["data"]
        for v in node.values():
            yield from _named_data(v)
    elif isinstance(node, list):
        for v in node:
            yield from _named_data(v)


def test_schema_validation_catches_a_broken_spec():
    import altair as alt
    from altair.utils.schemapi import validate_jsonschema
    with pytest.raises(Exception):
        validate_jsonschema({"mark": "nonsense-mark", "encoding": {}}, alt.vegalite.v6.schema.core.load_schema())


def test_a_live_excerpt_box_is_as_high_whatever_it_holds():
    import re
    styles = lambda html: re.findall(r"<pre style='([^']*)'", html)
    few = V.excerpt_html({"wire": ["a: x"], "gro": []}, max_lines=6, fixed=True)
    many = V.excerpt_html({"wire": [f"a: {i}" * 40 for i in range(30)], "gro": ["a: y"] * 6}, max_lines=6,
                          fixed=True)
    assert len(set(styles(few) + styles(many))) == 1 and "height:9.45em" in styles(few)[0]   # 7 lines of 1.35
    assert "white-space:pre;" in styles(few)[0] and "... 24 more lines" in many
    assert "pre-wrap" in styles(V.excerpt_html({"wire": ["a: x"]}))[0]          # a stored snapshot wraps
