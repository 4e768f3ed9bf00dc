"""Report 000 (rtl8139): a QEMU guest with 8139cp and TSO is ~10x slower behind a PPPoE link.

Mechanism (``offloadkit.sim.simulate`` with the ``rtl8139-legacy`` NIC model): the
peer's MSS option is 1452 (router clamp), so with timestamps the guest's
gso_size is 1440 and TSO builds 2880-byte skbs. QEMU's RTL8139C+ emulation
(before QEMU 7.2) ignores the descriptor MSS and cuts 1500 - 20 - 32 = 1448
bytes: 1448 + 1432. The 1500-byte IP packet is dropped silently at the PPPoE
hop (MTU 1492); a 1-MSS retransmission is not TSO, goes out as 1440 and passes.

Variants: ``broken`` (TSO/GSO on, legacy emulation), ``workaround`` (TSO and
GSO off in the guest, as the reporter did), ``fixed`` (QEMU 6d71357a3b65
"rtl8139: honor large send MSS value": the emulation cuts at the descriptor
MSS), ``gso_only`` (TSO off, GSO on: the kernel segments correctly),
``mask12`` (the first, 12-bit-mask version of the QEMU patches).

Calibration: one physical parameter, the bottleneck rate of the PPPoE access
link, is solved in code from the TSO-off throughput (723 KB/s). Everything
else is predicted: the packet sizes at both capture points, the drops, the
retransmission size, the TSO-on throughput and the fixed NIC's throughput.
The RTT is the one read from the seed's trace timestamps (``rtt_guest_ms``).
KB/s is taken as 1000 bytes per second.
"""
from __future__ import annotations

import functools

import numpy as np

from .. import codes
from ..engine.segment import tcp_forces_psh, tcp_options_bytes
from ..io.tcpdump import render
from ..sim.scenario import REPORT_TSO_DEFER, Hop, Nic, Receiver, Scenario, Tcp, kernel_rules
from ..sim.scenario import tso_requires_tx_csum
from ..sim.simulate import simulate
from ..trace import Trace
from . import tcpsetup
from .facts import load_facts
from .presets import Fit, Knob, PresetRun, Variant, fit_rate, settings_for
from .table import Reproduction, Tolerance

REPORT = "rtl8139"
POINTS = ("guest", "macvtap", "ppp", "laptop")
POINT_HELP = {"guest": "inside the guest, before the emulated NIC (TSO super-packets)",
              "macvtap": "on the host's macvtap, after the emulated NIC segmented",
              "ppp": "after the PPPoE access link (packets over its MTU are gone)",
              "laptop": "at the receiving laptop (after its GRO)"}

_F = load_facts(REPORT)
REQUEST_BYTES = int(_F.value("request_payload_bytes"))   # the HTTP GET in front of the download
GUEST_KERNEL = tuple(int(x) for x in str(_F.value("guest_kernel")).split(".")[:2])   # (4, 4)
KB = 1000.0
TSO_RETRANSMITS_SINCE = (4, 7)   # "tcp-tso: do not split TSO packets at retransmit time"; 4.4 retransmits 1 MSS

KNOBS = {
    "nic": Knob("rtl8139-legacy", "who segments the guest's TSO packets",
                choices=("rtl8139-legacy", "rtl8139-legacy-mask12", "hw-tso")),
    "tso": Knob(True, "TSO on the guest's 8139cp (Linux turns it off without tx_csum)"),
    "tx_csum": Knob(True, "TX checksum offload on the guest's 8139cp"),
    "gso": Knob(True, "GSO in the guest kernel"),
    "gro": Knob(True, "GRO at the receiving laptop"),
    "mss_clamp": Knob(int(_F.value("mss_clamp_bytes")), "MSS option after the router's TCPMSS clamp", lo=88, hi=9000),
    "mtu": Knob(int(_F.value("mss_standard_bytes")) + 40, "the guest NIC's MTU", lo=576, hi=9000),
    "mss": Knob(None, "TCP payload per segment (default: from the MTU, the clamp and timestamps: 1440); "
                "given, the peer's clamp becomes mss + 12 option bytes", lo=64, hi=8948),
    "sessions": Knob(1, "concurrent downloads through the same link", lo=1, hi=64),
    "path_mtu": Knob(int(_F.value("pppoe_mtu_bytes")), "largest IP packet the PPPoE hop carries", lo=576, hi=9000),
    "icmp": Knob(False, "the PPPoE hop sends ICMP 'fragmentation needed' (no black hole)"),
    "rate_bps": Knob(None, "access-link rate, bit/s (default: fitted to the TSO-off throughput)", lo=1e5, hi=1e10),
    "rtt_ms": Knob(float(_F.value("rtt_guest_ms")), "round-trip time, ms (from the seed's timestamps)", lo=0.1, hi=1000),
    "bytes": Knob(2_000_000, "bytes the guest sends (one HTTP download)", lo=10_000, hi=100_000_000),
    "queue_packets": Knob(100, "access-link queue, packets", lo=2, hi=100_000),
    "trace_limit": Knob(20_000, "packets recorded per capture point (a live view records fewer)",
                        lo=0, hi=50_000_000),
}

VARIANTS = {v.name: v for v in (
    Variant("broken", "broken", "TSO/GSO on; QEMU's RTL8139C+ cuts 1448-byte chunks (before QEMU 7.2)", {}),
    Variant("workaround", "workaround", "TSO and GSO off in the guest (the reporter's fix)",
            {"tso": False, "gso": False}),
    Variant("fixed", "fixed", "QEMU 6d71357a3b65 'rtl8139: honor large send MSS value' (QEMU 7.2)",
            {"nic": "hw-tso"}),
    Variant("gso_only", "extra", "TSO off, GSO on: the guest kernel segments at 1440", {"tso": False}),
    Variant("mask12", "extra", "the first QEMU patches: MSS read with a 12-bit mask after status bits were cleared",
            {"nic": "rtl8139-legacy-mask12"}),
)}


def peer_clamp(s: dict) -> int:
    """The peer's MSS option: the ``mss_clamp`` knob, or the clamp that gives the ``mss`` knob
    (``mss`` + timestamp option bytes): the one place the two meanings of MSS meet."""
    return int(s["mss_clamp"]) if s["mss"] is None else int(s["mss"]) + tcp_options_bytes(timestamps=True)


def scenario(s: dict) -> Scenario:
    """The Scenario of a settings dict (see ``KNOBS``)."""
    rate = s["rate_bps"] if s["rate_bps"] is not None else fitted_rate_bps()
    delay = int(round(s["rtt_ms"] * 1e6 / 2))
    return Scenario(
        tcp=Tcp(mss=None if s["mss"] is None else int(s["mss"]), mss_clamp=peer_clamp(s),
                psh_on_gso=tcp_forces_psh(GUEST_KERNEL),
                tso_retransmits=GUEST_KERNEL >= TSO_RETRANSMITS_SINCE,
                rack_reo_timer=GUEST_KERNEL >= (4, 11),     # RACK reordering timer since 4.11
                tso_defer=REPORT_TSO_DEFER, loss_timers=kernel_rules("%d.%d" % GUEST_KERNEL)["loss_timers"],
                rto_timer=kernel_rules("%d.%d" % GUEST_KERNEL)["rto_timer"]),
        nic=Nic(model=s["nic"], tso=tso_requires_tx_csum(s["tso"], s["tx_csum"]), gso=s["gso"], tx_csum=s["tx_csum"],
                mtu=int(s["mtu"]), rate_bps=1_000_000_000),
        path=(Hop("ppp", rate_bps=int(rate), delay_ns=delay, mtu=int(s["path_mtu"]), icmp=s["icmp"],
                  queue_packets=int(s["queue_packets"])),),
        receiver=Receiver(gro=s["gro"]), bytes_per_flow=int(s["bytes"]), flows=int(s["sessions"]),
        trace_limit=int(s["trace_limit"]), sender_point="guest", wire_point="macvtap", receiver_point="laptop")


@functools.lru_cache(maxsize=8)    # the variants; each Result holds its traces (MBs): keep few
def _simulate(sc: Scenario):
    return simulate(sc)


def _goodput_kBps(s: dict, rate_bps: float) -> float:
    return _simulate(scenario(dict(s, rate_bps=rate_bps))).goodput_bps / 8 / KB


@functools.lru_cache(maxsize=1)
def calibrate() -> dict[str, Fit]:
    """Solve the access-link rate from the TSO-off throughput (fixed-point iteration on the rate)."""
    s = settings_for(KNOBS, VARIANTS, "workaround", {"trace_limit": 0})   # goodput only: no traces cached
    target = float(_F.value("throughput_tso_off_kBps"))
    rate = fit_rate(lambda r: _goodput_kBps(s, r), target, target * KB * 8 * 1500 / 1440,  # payload + headers
                    1e-4, "link-rate", " KB/s")
    return {"link_rate_bps": Fit("link_rate_bps", float(round(rate)), "bit/s", "throughput_tso_off_kBps",
                                 "fixed-point iteration: rate *= 723 KB/s / simulated TSO-off goodput",
                                 prior=float(_F.value("link_down_Mbps")) * 1e6)}


def fitted_rate_bps() -> float:
    return calibrate()["link_rate_bps"].value


def run(variant: str = "broken", **overrides) -> PresetRun:
    """Simulate the download; ``result`` is a ``simulate.Result``."""
    s = settings_for(KNOBS, VARIANTS, variant, overrides)
    sc = scenario(s)
    res = _simulate(sc)

    def build() -> Trace:
        t = tcpsetup.with_setup(res.trace, POINTS, peer_mss_option=peer_clamp(s), own_mss_option=int(s["mtu"]) - 40,
                                request_bytes=REQUEST_BYTES, rtt_ns=sc.base_rtt_ns)
        return Trace(t.columns, t.points, {"report": REPORT, "variant": variant, "scenario": sc})

    return PresetRun(REPORT, variant, s, res, POINTS, build, res.goodput_bps,
                     info={"goodput_kBps": res.goodput_bps / 8 / KB, "drops": dict(res.drops),
                           "retransmits": res.retransmits, "rtos": res.rtos, "rate_bps": sc.path[0].rate_bps})


# ------------------------------------------------------------------ what the traces show


def established(run: PresetRun, t: Trace) -> Trace:
    """Rows of ``run.result`` (the simulation, no handshake) numbered as ``run.trace`` numbers them."""
    return tcpsetup.established(t, request_bytes=REQUEST_BYTES, rtt_ns=run.result.scenario.base_rtt_ns)


def first_super_packet(run: PresetRun):
    """(guest super-packet, its macvtap segments) of the first multi-segment send."""
    g = run.at("guest")
    g = g[(g.direction == 0) & (g.gso_segs > 1)]
    if len(g) == 0:
        return None, None
    m = run.at("macvtap")
    lo = int(g.seq[0])
    hi = lo + int(g.payload_len[0])
    sel = (m.direction == 0) & (m.seq >= lo) & (m.seq < hi) & (m.payload_len > 0)
    return g[0], m[sel][: int(g.gso_segs[0]) + 4]


def first_retransmission(t: Trace):
    """The first data packet that starts below the highest sequence already sent."""
    d = t[(t.direction == 0) & (t.payload_len > 0)]
    seq = d.seq.astype(np.int64)
    end = seq + d.payload_len
    high = np.maximum.accumulate(end)
    idx = np.nonzero(seq[1:] < high[:-1])[0]
    return d[int(idx[0]) + 1] if len(idx) else None


def model_excerpt(run: PresetRun, point: str, excerpt: str) -> list[str]:
    """The model's tcpdump -v lines shaped like the seed excerpt: the setup packets,
    the first data packets (as many as the seed shows), then the first retransmission."""
    seed = tcpsetup.packets(_F.excerpts[excerpt])
    n_data = sum(1 for p in seed if int(tcpsetup.packet_fields(p)["length"]) > 0) - 2   # minus request, retransmit
    n_setup = sum(1 for p in seed[: len(seed) - n_data - 1])
    t = run.at(point)
    t = t[t.drop == codes.DROP_NONE] if point not in ("guest", "macvtap") else t
    setup = t[:n_setup]
    body = t[n_setup:]
    data = body[(body.direction == 0) & (body.payload_len > 0)][:n_data]
    rtx = first_retransmission(body)
    rows = Trace.concat([setup, data] + ([rtx] if rtx is not None else []))
    return render(rows, verbose=True)


def trace_mismatches(run: PresetRun | None = None) -> dict[str, list[str]]:
    """Field-by-field differences between the model's and the seed's lines at guest and macvtap."""
    run = run or globals()["run"]("broken")
    return {p: tcpsetup.compare_lines(model_excerpt(run, p, p), _F.excerpts[p]) for p in ("guest", "macvtap")}


def reproduce() -> Reproduction:
    tg = _F.targets
    rep = Reproduction(REPORT)
    broken = run("broken")
    sp, segs = first_super_packet(broken)
    rep.add_target(tg["guest_tso_payload_bytes"], int(sp.payload_len[0]) if sp is not None else None, "predicted")
    rep.add_target(tg["guest_tso_ip_length_bytes"], int(sp.ip_len[0]) if sp is not None else None, "predicted")
    first_two = segs if segs is not None and len(segs) >= 2 else None
    rep.add_target(tg["host_payload_large_bytes"], int(first_two.payload_len[0]) if first_two else None, "predicted")
    rep.add_target(tg["host_payload_small_bytes"], int(first_two.payload_len[1]) if first_two else None, "predicted")
    rep.add_target(tg["host_ip_length_large_bytes"], int(first_two.ip_len[0]) if first_two else None, "predicted")
    rep.add_target(tg["host_ip_length_small_bytes"], int(first_two.ip_len[1]) if first_two else None, "predicted")
    ppp = broken.result.at("ppp")
    dropped = np.unique(ppp.ip_len[(ppp.direction == 0) & (ppp.drop != codes.DROP_NONE)])
    rep.add_target(tg["dropped_ip_length_bytes"], int(dropped[0]) if len(dropped) == 1 else
                   (None if len(dropped) == 0 else f"several: {dropped.tolist()}"), "predicted")
    rtx = first_retransmission(broken.result.at("guest"))
    rep.add_target(tg["retransmit_payload_bytes"], int(rtx.payload_len[0]) if rtx is not None else None, "predicted")
    rep.add_target(tg["retransmit_ip_length_bytes"], int(rtx.ip_len[0]) if rtx is not None else None, "predicted")
    rep.add_target(tg["throughput_tso_off_kBps"], run("workaround").info["goodput_kBps"], "fitted")
    rep.add_target(tg["throughput_tso_on_kBps"], broken.info["goodput_kBps"], "predicted")
    rep.add_target(tg["throughput_fixed_tso_on_kBps"], run("fixed").info["goodput_kBps"], "predicted")
    for p in ("guest", "macvtap"):
        n_seed = len(tcpsetup.packets(_F.excerpts[p]))
        bad = tcpsetup.compare_lines(model_excerpt(broken, p, p), _F.excerpts[p])
        bad_pkts = {b.split(":")[0] for b in bad if b.startswith("packet ")}
        matched = n_seed - len(bad_pkts) if not any(not b.startswith("packet ") for b in bad) else 0
        rep.add(f"trace_match_{p}_packets", "packets", n_seed, matched, Tolerance.exact(), "predicted",
                f"data/reports/rtl8139_{p}.txt (seed lines {', '.join(f'{a}-{b}' for a, b in _seed_ranges(p))})")
    return rep


def _seed_ranges(p: str):
    lines = _F.excerpt_lines[p]
    out, start = [], lines[0]
    for a, b in zip(lines, lines[1:] + (None,)):
        if b != a + 1:
            out.append((start, a))
            start = b
    return out
