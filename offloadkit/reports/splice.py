"""Report 003 (splice): a splice() proxy hits a CPU cliff between 800 and 1000 sessions.

Mechanism (``engine.host_paths.splice_proxy`` on ``data/hosts/x86-2009-myri10ge.json``):
myri10ge LRO (8 descriptors, 64 packets) feeds haproxy, which splices socket ->
pipe -> socket; every received skb and every sent skb allocates (``__alloc_skb``,
``sk_stream_alloc_skb``, linear-to-page copies). Once the sessions' working set
overflows the cache, allocations miss (``__slab_alloc``, page-block lookups), the
CPU reaches 100 % and the rate falls to ~6.7 Gb/s.

Variants: ``below`` (600 sessions: the lower edge of the cliff window),
``broken`` (1000 sessions: above the limit), ``workaround`` (haproxy ``maxconn``
keeping a process below the cliff), ``fixed`` (Jarek Poplawski's follow-up: the
linear part is copied into a per-socket page reused until full, so received skbs
no longer allocate a page each; commit title [I] per the notes), ``gro`` (kernel
GRO instead of driver LRO), ``recv_path`` not modelled.

Calibration: the allocator's missed cache lines per allocation are solved in code
from the rate above the limit (6.7 Gb/s at 1000 sessions). The host file's
per-symbol costs were scaled from the 60 % CPU figure and its session footprint
from the 800-1000 cliff, and its per-symbol split follows the kerneltop samples
below the limit (derivations in the file): those rows (CPU below, cliff,
allocation share below) are marked fitted. Predicted: line rate below, 100 % CPU
above, and the allocation symbols' share of the profile above the limit.

Weakest row: the model puts the cliff's extra cost mostly on allocation cache
misses (the host file's ``miss_line`` weights), so the allocation share above
the limit sits near the top of its band (report 41.5 %, +-5 points); in the
seed the TX path (``ip_queue_xmit`` x2.1, ``tcp_sendpage`` x1.24, new
``ip_finish_output``, ``fget_light``) grows too.
"""
from __future__ import annotations

import functools

from ..engine import cpu
from ..sim import host_paths, hosts
from ..trace import Trace
from .facts import load_facts
from .presets import Fit, Knob, PresetRun, Variant, labelled, settings_for, settings_mss, solve_linear
from .table import Reproduction

REPORT = "splice"
HOST = "x86-2009-myri10ge"
POINTS = ("nic", "lro")
POINT_HELP = {"nic": "frames arriving at the myri10ge NIC (all sessions interleaved)",
              "lro": "skbs after LRO, as tcp_read_sock/splice sees them"}
# The allocator's functions (kerneltop symbols of seed 003 that allocate memory).
ALLOC_SYMBOLS = ("__alloc_skb", "sk_stream_alloc_skb", "__kmalloc_track_caller", "kmem_cache_alloc",
                 "__slab_alloc", "get_pageblock_flags_group")

_F = load_facts(REPORT)
_CLIFF = _F.targets["cliff_sessions"]
BELOW_SESSIONS = int(_CLIFF.reported[0] - _CLIFF.tolerance.allowance(_CLIFF.reported[0]))   # 600
ABOVE_SESSIONS = int(_F.value("sessions_cliff_high"))                                       # 1000

KNOBS = {
    "sessions": Knob(ABOVE_SESSIONS, "concurrent proxied sessions", lo=1, hi=100_000),
    "aggregation": Knob("lro", "receive aggregation: driver LRO, kernel GRO or none", choices=("lro", "gro", "off")),
    "lro_descriptors": Knob(8, "LRO descriptors (myri10ge: 8)", lo=1, hi=1024),
    "lro_max_pkts": Knob(64, "packets per LRO aggregate (myri10ge: 64)", lo=1, hi=1024),
    "allocs_per_rx_skb": Knob(1, "allocations per received skb (linear_to_page: 1; shared page: 0)", lo=0, hi=8),
    "allocs_per_tx_skb": Knob(3, "allocations per sent skb (head, data, clone)", lo=0, hi=8),
    "mtu": Knob(int(_F.value("mtu_bytes")), "MTU, bytes", lo=576, hi=9000),
    "mss": Knob(None, "TCP payload per segment (default: MTU - 52)", lo=64, hi=8948),
    "cache_bytes": Knob(None, "last-level cache, bytes (default: the host file's)", lo=1e5, hi=1e10),
    "packets": Knob(6000, "frames in the arriving train", lo=500, hi=200_000),
    "fitted": Knob(True, "use the fitted allocator miss cost (False: the host file's values)"),
}

VARIANTS = {v.name: v for v in (
    Variant("broken", "broken", f"{ABOVE_SESSIONS} sessions, LRO: above the limit, allocation misses",
            {"sessions": ABOVE_SESSIONS}),
    Variant("below", "extra", f"{BELOW_SESSIONS} sessions: below the limit", {"sessions": BELOW_SESSIONS}),
    Variant("workaround", "workaround", f"haproxy maxconn keeps each process at {BELOW_SESSIONS} sessions",
            {"sessions": BELOW_SESSIONS}),
    Variant("fixed", "fixed", "linear data copied into a per-socket page reused until full "
            "(Jarek Poplawski's follow-up), at the broken load", {"sessions": ABOVE_SESSIONS, "allocs_per_rx_skb": 0}),
    Variant("gro", "extra", "kernel GRO instead of driver LRO, at the broken load",
            {"sessions": ABOVE_SESSIONS, "aggregation": "gro"}),
)}


@functools.lru_cache(maxsize=64)
def _arrivals(link_bps: float, mss: int, sessions: int, packets: int) -> Trace:
    return cpu.arrival_trace(link_bps, mss, sessions, packets=packets)


def _path_kw(s: dict) -> dict:
    return dict(aggregation=s["aggregation"], lro_descriptors=s["lro_descriptors"], lro_max_pkts=s["lro_max_pkts"],
                allocs_per_rx_skb=s["allocs_per_rx_skb"], allocs_per_tx_skb=s["allocs_per_tx_skb"])


def _proxy(host, s: dict):
    trace = _arrivals(host.link_bps, settings_mss(s), s["sessions"], s["packets"])
    return host_paths.splice_proxy(trace, host, sessions=s["sessions"], **_path_kw(s)), trace


@functools.lru_cache(maxsize=1)
def calibrate() -> dict[str, Fit]:
    """Solve the allocator's missed lines per allocation from the rate above the limit."""
    host = hosts.load_host(HOST)
    s = settings_for(KNOBS, VARIANTS, "broken", {})
    res, _ = _proxy(host, s)
    wire_bps = _F.value("throughput_above_Gbps") * 1e9
    payload_bps = wire_bps * res.payload_bytes / res.wire_bytes
    cores = host.contexts["cpu"]
    lines = solve_linear(lambda p: _proxy(host.with_(alloc_miss_lines=p), s)[0].ns_per_byte("cpu"),
                         cores * 8e9 / payload_bps)
    return {"alloc_miss_lines": Fit("alloc_miss_lines", lines, "lines/alloc", "throughput_above_Gbps",
                                    f"linear solve: CPU ns per byte at {ABOVE_SESSIONS} sessions = 8e9 / 6.7 Gb/s "
                                    "(wire rate converted to payload)", prior=host.memory["alloc_miss_lines"])}


def fitted_host(fitted: bool = True, cache_bytes: float | None = None):
    host = hosts.load_host(HOST)
    if fitted:
        host = host.with_(alloc_miss_lines=calibrate()["alloc_miss_lines"].value)
    if cache_bytes is not None:
        host = host.with_(cache_bytes=cache_bytes)
    return host


def cliff(fitted: bool = True, **overrides) -> int:
    """The fewest sessions at which the proxy is CPU-bound (``host_paths.splice_cliff``)."""
    s = settings_for(KNOBS, VARIANTS, "broken", overrides)
    host = fitted_host(fitted, s["cache_bytes"])
    return host_paths.splice_cliff(host, hi=20 * ABOVE_SESSIONS, rate_bps=host.link_bps, mss=settings_mss(s),
                                  packets=min(s["packets"], 1200), **_path_kw(s))


def run(variant: str = "broken", **overrides) -> PresetRun:
    """Proxy one arriving train at the variant's session count; ``result`` is a ``CpuResult``."""
    s = settings_for(KNOBS, VARIANTS, variant, overrides)
    host = fitted_host(s["fitted"], s["cache_bytes"])
    res, _ = _proxy(host, s)

    def build() -> Trace:
        t = Trace.concat([res.traces[p].with_point(p) for p in POINTS])
        return Trace(t.columns, t.points, {"report": REPORT, "variant": variant})

    def point(p: str) -> Trace:
        return labelled(res.traces[p], POINTS, p, {"report": REPORT, "variant": variant})

    return PresetRun(REPORT, variant, s, res, POINTS, build, res.rate_bps, point_fn=point,
                     info={"bottleneck": res.bottleneck, "cpu": res.utilisation()["cpu"],
                           "wire_rate_bps": res.wire_rate_bps, "segments_per_skb": res.info["segments_per_skb"]})


def alloc_share(result, top_n: int) -> float:
    """Allocation symbols' share of the model profile's top ``top_n`` symbols, as in the
    report's kerneltop listing (its shares are of the symbols it lists)."""
    prof = result.profile()
    top = prof[prof.symbol != "[idle/other]"].head(top_n)
    alloc = top[top.symbol.isin(ALLOC_SYMBOLS)]
    return float(alloc.cycles_per_s.sum() / top.cycles_per_s.sum())


def reproduce() -> Reproduction:
    tg = _F.targets
    rep = Reproduction(REPORT)
    below, above = run("below"), run("broken")
    rep.add_target(tg["throughput_below_Gbps"], below.info["wire_rate_bps"] / 1e9, "predicted")
    rep.add_target(tg["cpu_below_pct"], 100 * below.info["cpu"], "fitted")
    rep.add_target(tg["throughput_above_Gbps"], above.info["wire_rate_bps"] / 1e9, "fitted")
    rep.add_target(tg["cpu_above_pct"], 100 * above.info["cpu"], "predicted")
    rep.add_target(tg["cliff_sessions"], cliff(), "fitted")
    rep.add_target(tg["alloc_share_below_pct"], 100 * alloc_share(below.result, len(_F.group("samples.below."))),
                   "fitted")
    rep.add_target(tg["alloc_share_above_pct"], 100 * alloc_share(above.result, len(_F.group("samples.above."))),
                   "predicted")
    return rep
