"""Dashboard of report 003 (splice): a splice() proxy hits a CPU cliff above ~1000 sessions.

Every control is a knob of ``offloadkit.reports.splice`` with the same name:
``mss``, ``mtu``, ``aggregation`` (myri10ge's driver LRO, kernel GRO or none),
``sessions`` and ``allocs_per_rx_skb`` (1: linear_to_page allocates a page per
received skb; 0: Jarek Poplawski's follow-up, linear data copied into a shared
per-socket page). The splice model has no checksum path (myri10ge checks receive
checksums in hardware), so there is no checksum control.
"""
from __future__ import annotations

import functools
from ..reports import get, load_facts
from ..sim.one_packet import max_mss
from . import views
from .controls import control
from .dashboard import Dashboard
from .report_common import (ReportView, excerpt, excerpt_panel, model_rate, mtu_room_note, report_rate, size_counts,
                            sizes_text, static_html)
from .report_views import rate_comparison, size_counts_chart

REPORT = "splice"
AGGREGATION = [("LRO (myri10ge driver)", "lro"), ("GRO (kernel)", "gro"), ("none", "off")]
ALLOCS = [("1 (linear_to_page)", 1), ("0 (shared page, Jarek's follow-up)", 0)]


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


def compute(v: dict, refs: list[dict]) -> ReportView:
    """One recompute; ``refs``: the report's rows of the rate chart (constant, computed once per dashboard)."""
    room = mtu_room_note(v["mss"], v["mtu"])
    m = get(REPORT)
    run = m.run("broken", **v)
    ats = {p: run.at(p) for p in m.POINTS}
    lines, window = excerpt(ats, m.POINTS, n=8, relative_seq=False)
    notes = [room] if room else []
    rates = [model_rate("your settings", run.info["wire_rate_bps"] / 1e9, "Gb/s")] + refs
    which, measured = measured_profile(int(v["sessions"]))
    shares = run.result.compared_shares(measured)
    top = sorted(shares.items(), key=lambda kv: -kv[1][0])[:12]
    profile = ([{"symbol": s, "share": model, "case": "model (your settings)"} for s, (_, model) in top]
               + [{"symbol": s, "share": meas, "case": f"report: kerneltop {which} the limit"}
                  for s, (meas, _) in top])
    return ReportView(REPORT, dict(v), run, lines, window, rates, notes, extra={"ats": ats, "profile": profile})


def readout(r: ReportView) -> str:
    info = r.run.info
    return (f"wire rate {views.format_rate(info['wire_rate_bps'])} · CPU {100 * info['cpu']:.0f} % "
            f"({info['bottleneck']}-limited) · {info['segments_per_skb']:.2f} segments per received skb · "
            f"skbs after aggregation: {sizes_text(size_counts(r.extra['ats']['lro']), top=3)} B")


VIEWS = {
    "sizes": lambda r: size_counts_chart(r.extra["ats"], r.run.points, top=6, width=520,
                                         title="packet sizes over the whole train"),
    "throughput": lambda r: rate_comparison(r.rates, "Gb/s (wire)", title="throughput: model vs the report"),
    "cpu": lambda r: views.cpu_profile(r.extra["profile"], top=12),
}
TEXTS = {"trace": lambda r: excerpt_panel(r, max_lines=8)}

DESCRIPTION = ("<p style='margin:2px 0 6px 0;max-width:980px'>haproxy splices every session socket → pipe → "
               "socket on one 10 GbE host (myri10ge). Capture points: <i>nic</i> (frames of all sessions, "
               "interleaved) and <i>lro</i> (the skbs splice sees after aggregation). CPU shares are over the "
               "symbols the report lists. Recomputed by <code>offloadkit.reports.splice</code>."
               " The tcpdump lines leave out the TCP options.</p>")


def build(**overrides) -> Dashboard:
    """``dashboard("splice", mss=1448, mtu=1500, aggregation="lro", sessions=1000, allocs_per_rx_skb=1)``:
    each a knob of ``reports.splice``."""
    m, f = get(REPORT), load_facts(REPORT)
    mtu = int(f.value("mtu_bytes"))
    controls = {
        "mss": control("mss", max_mss(mtu), 88, max_mss(mtu)),
        "mtu": control("mtu", mtu, 576, 9000),
        "aggregation": control("aggregation", "lro", options=AGGREGATION),
        "sessions": control("sessions", m.ABOVE_SESSIONS, 1, 3000, step=10),
        "allocs_per_rx_skb": control("allocs_per_rx_skb", 1, options=ALLOCS),
    }
    return Dashboard("Report 003: splice proxy and the session cliff", controls,
                     functools.partial(compute, refs=reference_rates()),
                     VIEWS, texts=TEXTS,
                     readout=readout, notes=lambda r: " ".join(r.notes) or None, static_html=static_html,
                     overrides=overrides, mss_max=lambda v: max_mss(v["mtu"]),
                     description=DESCRIPTION, layout=[["trace"], ["sizes", "cpu"], ["throughput"]])
