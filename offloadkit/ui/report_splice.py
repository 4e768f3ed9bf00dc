"""Dashboard of report 003 (splice): a splice() proxy hits a CPU cliff above ~1000 sessions.

Controls: ``mss``, ``mtu``, ``gro`` (kernel GRO), ``lro`` (myri10ge's driver
LRO, which aggregates first when both are on), ``csum_offload`` (shown for the
common layout; fixed on: myri10ge checks receive checksums and the splice model
has no software-checksum path), ``sessions`` and ``shared_page`` (Jarek
Poplawski's follow-up: linear data copied into a per-socket page, no page
allocation per received skb). The model is ``offloadkit.reports.splice``.
"""
from __future__ import annotations

from ..reports import get, load_facts
from . import views
from .dashboard import Dashboard, apply_overrides, int_slider, toggle
from .report_common import (ReportView, common_controls, mtu_room_note, excerpt, model_rate, report_rate, size_counts,
                            sizes_text, static_html, tag_controls)
from .report_views import rate_comparison, size_counts_chart

REPORT = "splice"
CSUM_NOTE = ("myri10ge checks receive checksums in hardware and the splice model has no software-checksum "
             "path, so this switch stays on here.")


def knobs(v: dict) -> dict:
    agg = "lro" if v["lro"] else ("gro" if v["gro"] else "off")
    return dict(sessions=int(v["sessions"]), aggregation=agg, allocs_per_rx_skb=0 if v["shared_page"] else 1,
                mtu=int(v["mtu"]), mss=int(v["mss"]))


def reference_rates() -> list[dict]:
    m, f = get(REPORT), load_facts(REPORT)
    wire = lambda name: m.run(name).info["wire_rate_bps"] / 1e9
    return [model_rate(f"{m.BELOW_SESSIONS} sessions", wire("below"), "Gb/s"),
            report_rate(f"{m.BELOW_SESSIONS} sessions", f.value("throughput_below_Gbps"), "Gb/s"),
            model_rate(f"{m.ABOVE_SESSIONS} sessions", wire("broken"), "Gb/s"),
            report_rate(f"{m.ABOVE_SESSIONS} sessions", f.value("throughput_above_Gbps"), "Gb/s"),
            model_rate(f"{m.ABOVE_SESSIONS} sessions, shared page", wire("fixed"), "Gb/s")]


def measured_profile(sessions: int) -> tuple[str, dict]:
    """The report's kerneltop samples nearest to ``sessions`` (below or above the cliff)."""
    m, f = get(REPORT), load_facts(REPORT)
    above = sessions >= m.ABOVE_SESSIONS
    which = "above" if above else "below"
    return which, {s: float(x.value) for s, x in f.group(f"samples.{which}.").items()}


def compute(v: dict) -> ReportView:
    room = mtu_room_note(v["mss"], v["mtu"])
    m = get(REPORT)
    run = m.run("broken", **knobs(v))
    ats = {p: run.at(p) for p in m.POINTS}
    lines, window = excerpt(ats, m.POINTS, n=8, relative_seq=False)
    notes = [room] if room else []
    if v["lro"] and v["gro"]:
        notes.append("LRO and GRO both on: the driver's LRO aggregates first, GRO finds nothing left to merge.")
    if not v["csum_offload"]:
        notes.append(CSUM_NOTE)
    rates = [model_rate("your settings", run.info["wire_rate_bps"] / 1e9, "Gb/s")] + reference_rates()
    which, measured = measured_profile(int(v["sessions"]))
    cmp = run.result.compare_profile(measured).sort_values("measured_share", ascending=False).head(12)
    profile = ([{"symbol": s, "share": float(x), "case": "model (your settings)"}
                for s, x in zip(cmp.symbol, cmp.model_share)]
               + [{"symbol": s, "share": float(x), "case": f"report: kerneltop {which} the limit"}
                  for s, x in zip(cmp.symbol, cmp.measured_share)])
    return ReportView(REPORT, dict(v), run, lines, window, rates, notes, extra={"ats": ats, "profile": profile})


def readout(r: ReportView) -> str:
    info = r.run.info
    return (f"wire rate {views.format_rate(info['wire_rate_bps'])} · CPU {100 * info['cpu']:.0f} % "
            f"({info['bottleneck']}-limited) · {info['segments_per_skb']:.2f} segments per received skb · "
            f"skbs after aggregation: {sizes_text(size_counts(r.extra['ats']['lro']), top=3)} B")


VIEWS = {
    "trace": lambda r: views.trace_text(r.lines, max_lines=8),
    "sizes": lambda r: size_counts_chart(r.run.trace, r.run.points, top=6, width=520,
                                         title="packet sizes over the whole train"),
    "throughput": lambda r: rate_comparison(r.rates, "Gb/s (wire)", title="throughput: model vs the report"),
    "cpu": lambda r: views.cpu_profile(r.extra["profile"], top=12),
}

DESCRIPTION = ("<p style='margin:2px 0 6px 0;max-width:980px'>haproxy splices every session socket → pipe → "
               "socket on one 10 GbE host (myri10ge). Capture points: <i>nic</i> (frames of all sessions, "
               "interleaved) and <i>lro</i> (the skbs splice sees after aggregation). CPU shares are over the "
               "symbols the report lists. Recomputed by <code>offloadkit.reports.splice</code>."
               " The tcpdump lines leave out the TCP options.</p>")


def build(**overrides) -> Dashboard:
    """``dashboard("splice", mss=1448, mtu=1500, gro=False, lro=True, sessions=1000, shared_page=False)``."""
    m, f = get(REPORT), load_facts(REPORT)
    mtu = int(f.value("mtu_bytes"))
    controls = common_controls(mtu - 52, mtu, False, True, mss_range=(64, 8948), gro_label="GRO",
                               csum_label="RX checksum offload")
    controls["csum_offload"].disabled = True
    controls["csum_offload"].tooltip = CSUM_NOTE
    controls["lro"] = toggle("LRO (myri10ge)", True)
    controls["sessions"] = int_slider("sessions", m.ABOVE_SESSIONS, 1, 3000, 10)
    controls["shared_page"] = toggle("shared page (Jarek's follow-up)", False)
    tag_controls(controls)
    apply_overrides(controls, overrides)
    return Dashboard("Report 003: splice proxy and the session cliff", controls, compute, VIEWS, readout=readout,
                     notes=lambda r: " ".join(r.notes) or None, static_html=static_html,
                     description=DESCRIPTION, layout=[["trace"], ["sizes", "cpu"], ["throughput"]])
