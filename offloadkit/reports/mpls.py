"""Report 001 (mpls): TCP over an MPLS-encap route collapses from ~30 Gb/s to a few Mb/s.

Mechanism (``offloadkit.sim.simulate`` with the ``drop-gso`` NIC model): before
Linux 4.9, ``mpls_output()`` pushed the label without setting the inner
protocol and veth had no ``mpls_features``, so every GSO skb went to software
GSO in ``validate_xmit_skb()`` and was freed: ``-EPROTONOSUPPORT`` without the
``mpls_gso`` module, ``-EINVAL`` with it (``skb_network_protocol()`` is 0).
Only 1-MSS skbs (retransmissions at a small cwnd, tail-loss probes) get through.
The 4.7 receiver re-enters quick-ACK mode on out-of-order data, so after every
loss it ACKs each segment; once an ACK covers two (GRO merged them), the cwnd
quota is 2 MSS per skb, every skb of the burst is dropped, and nothing moves
until the 10-ms loss probe: a few segments per 10 ms, single-digit Mb/s.

Variants: ``broken`` (no ``mpls_gso``), ``mpls_gso_no_inner`` (``mpls_gso``
loaded, inner protocol unset: still broken, different drop reason),
``workaround`` (TSO and GSO off on the sender: every skb is one MSS),
``fixed`` (48d2ab609b6b "net: mpls: Fixups for GSO", Linux 4.9: software GSO
segments the labelled skb), ``healthy`` (the same route without MPLS).

Calibration: one physical parameter, the veth pair's data rate (what one
sending CPU pushes through veth), is solved in code from the healthy
throughput (30000 Mb/s). Predicted: the broken rates, both drop reasons and
the fixed kernel's rate. Healthy/fixed runs simulate 20 ms (steady state);
broken runs simulate netperf's 10 s.
"""
from __future__ import annotations

import functools

from .. import codes
from ..sim.scenario import REPORT_TSO_DEFER, Hop, Nic, Receiver, Scenario, Tcp, kernel_rules
from ..sim.scenario import tso_requires_tx_csum
from ..sim.simulate import simulate
from ..trace import Trace
from . import tcpsetup
from .facts import load_facts
from .presets import Fit, Knob, PresetRun, Variant, fit_rate, settings_for
from .table import Reproduction

REPORT = "mpls"
POINTS = ("ns0", "ns0-out", "ns1", "netserver")
POINT_HELP = {"ns0": "the sender's stack (netperf in ns0): skbs as TCP built them, GSO drops included",
              "ns0-out": "what leaves ns0's veth after validate_xmit_skb (labelled when MPLS is on)",
              "ns1": "arriving in ns1, the namespace that pops the label",
              "netserver": "the receiver in ns2 (after GRO)"}

_F = load_facts(REPORT)
KERNEL_RULES = {"4.6": False, "4.7": True}    # TSO retransmits ("tcp-tso: do not split TSO packets...") since 4.7
_ERRNO = {codes.DROP_GSO_EPROTONOSUPPORT: "EPROTONOSUPPORT", codes.DROP_GSO_EINVAL: "EINVAL"}

KNOBS = {
    "mpls": Knob(True, "the route pushes an MPLS label (encap mpls 100)"),
    "segmenter": Knob("drop-gso", "what happens to GSO skbs on the labelled route: dropped (pre-4.9), "
                      "software GSO (4.9 fix) or device TSO", choices=("drop-gso", "sw-gso", "hw-tso")),
    "drop_reason": Knob("EPROTONOSUPPORT", "errno of the GSO drop: no mpls_gso (EPROTONOSUPPORT) or "
                        "mpls_gso without the inner protocol (EINVAL)", choices=("EPROTONOSUPPORT", "EINVAL")),
    "tso": Knob(True, "TSO on the sender's device (Linux turns it off without tx_csum)"),
    "tx_csum": Knob(True, "TX checksum offload on the sender's veth"),
    "gso": Knob(True, "GSO on the sender's device"),
    "kernel": Knob("4.7", "sender kernel's retransmit rule (4.6: 1-MSS retransmits; 4.7: TSO retransmits); "
                   "the seed is dated 25 Jul 2016, the day after 4.7", choices=tuple(KERNEL_RULES)),
    "mtu": Knob(int(_F.value("mtu_lock_bytes")), "route MTU (mtu lock 1496)", lo=576, hi=9000),
    "mss": Knob(None, "TCP payload per segment (default: route MTU - 52 = 1444)", lo=64, hi=8948),
    "gro": Knob(True, "GRO at the receiving namespace"),
    "sessions": Knob(1, "concurrent netperf streams", lo=1, hi=64),
    "rate_bps": Knob(None, "veth data rate, bit/s (default: fitted to the healthy 30 Gb/s)", lo=1e6, hi=1e12),
    "rtt_us": Knob(20.0, "round-trip time across the namespaces, microseconds", lo=1.0, hi=100_000.0),
    "duration_s": Knob(None, "simulated seconds (default: 10 broken, healthy_duration_s healthy)",
                       lo=0.001, hi=60.0),
    "trace_limit": Knob(5000, "packets recorded per capture point (a live view records fewer)",
                        lo=0, hi=50_000_000),
    "healthy_duration_s": Knob(0.02, "simulated seconds of a run whose GSO skbs get through (steady state)",
                               lo=0.001, hi=60.0),
}

VARIANTS = {v.name: v for v in (
    Variant("broken", "broken", "MPLS route, mpls_gso not loaded: GSO skbs dropped with -EPROTONOSUPPORT", {}),
    Variant("mpls_gso_no_inner", "extra", "mpls_gso loaded, inner protocol unset: dropped with -EINVAL",
            {"drop_reason": "EINVAL"}),
    Variant("workaround", "workaround", "TSO and GSO off on the sender: every skb is one MSS",
            {"tso": False, "gso": False}),
    Variant("fixed", "fixed", "Linux 4.9, 48d2ab609b6b 'net: mpls: Fixups for GSO': software GSO of labelled skbs",
            {"segmenter": "sw-gso", "tso": False}),
    Variant("healthy", "extra", "the same namespaces without MPLS labelling", {"mpls": False, "segmenter": "hw-tso",
                                                                             "mtu": 1500}),
)}


def gso_skbs_pass(s: dict) -> bool:
    """GSO skbs reach the wire: the route is plain IP, the kernel segments labelled skbs
    (4.9), or TCP builds no GSO skbs at all (TSO and GSO off)."""
    return not s["mpls"] or s["segmenter"] != "drop-gso" or not (tso_requires_tx_csum(s["tso"], s["tx_csum"]) or s["gso"])


def duration_s(s: dict) -> float:
    """Simulated seconds: ``duration_s``, else ``healthy_duration_s`` when GSO skbs pass (steady state),
    else netperf's 10 s."""
    if s["duration_s"] is not None:
        return float(s["duration_s"])
    return float(s["healthy_duration_s"]) if gso_skbs_pass(s) else float(_F.value("netperf_duration_s"))


def scenario(s: dict) -> Scenario:
    rate = s["rate_bps"] if s["rate_bps"] is not None else fitted_rate_bps()
    dur = duration_s(s)
    nic_model = s["segmenter"] if (s["mpls"] or s["segmenter"] != "drop-gso") else "hw-tso"
    return Scenario(
        tcp=Tcp(mss=None if s["mss"] is None else int(s["mss"]), psh_on_gso=False,
                tso_retransmits=KERNEL_RULES[s["kernel"]], rack_reo_timer=False,    # RACK timer: 4.11+
                prr_ss_una=False,                               # PRR's slow-start bound on retransmit ACKs: 4.3-5.11
                ofo_quickack=True,                              # out-of-order data -> quick-ACK mode: < 4.18
                tso_defer=REPORT_TSO_DEFER, loss_timers=kernel_rules(s["kernel"])["loss_timers"],
                rto_timer=kernel_rules(s["kernel"])["rto_timer"]),
        # Not set although 4.6/4.7 have them: rack_time_based=False (4.4-4.9 RACK) and fack=True. They leave the
        # broken run unchanged (8.5 Mb/s), but the healthy 20-ms run then collapses to ~1.3 Gb/s (slow-start
        # overshoot into the 1000-packet hop queue, recovered slowly without time-based RACK), so the veth-rate
        # fit fails.
        nic=Nic(model=nic_model, tso=tso_requires_tx_csum(s["tso"], s["tx_csum"]), gso=s["gso"], tx_csum=s["tx_csum"],
                mtu=int(s["mtu"]), rate_bps=max(int(rate) * 2, 10**9),
                drop_reason=s["drop_reason"]),
        path=(Hop("ns1", rate_bps=int(rate), delay_ns=int(s["rtt_us"] * 500), mtu=1500,
                  encap=("mpls",) if s["mpls"] else ()),),
        receiver=Receiver(gro=s["gro"]), flows=int(s["sessions"]), duration_ns=int(dur * 1e9),
        trace_limit=int(s["trace_limit"]),
        sender_point="ns0", wire_point="ns0-out", receiver_point="netserver")


@functools.lru_cache(maxsize=8)    # the variants; each Result holds its traces (MBs): keep few
def _simulate(sc: Scenario):
    res = simulate(sc)
    return res


@functools.lru_cache(maxsize=1)
def calibrate() -> dict[str, Fit]:
    """Solve the veth data rate from the healthy throughput (fixed-point iteration on the rate)."""
    s = settings_for(KNOBS, VARIANTS, "healthy", {"trace_limit": 0})   # goodput only: no traces cached
    target = float(_F.value("throughput_healthy_veth_Mbps")) * 1e6
    rate = fit_rate(lambda r: _simulate(scenario(dict(s, rate_bps=r))).goodput_bps, target,
                    target * 1538 / 1448, 2e-3, "veth-rate", " bit/s")
    return {"veth_rate_bps": Fit("veth_rate_bps", float(round(rate)), "bit/s", "throughput_healthy_Mbps",
                                 "fixed-point iteration: rate *= 30000 Mb/s / simulated healthy goodput",
                                 prior=float(_F.value("link_rate_Gbps")) * 1e9)}


def fitted_rate_bps() -> float:
    return calibrate()["veth_rate_bps"].value


def gso_drop_errnos(res) -> list[str]:
    """Errno names of the GSO drops the run recorded (e.g. ['EPROTONOSUPPORT'])."""
    names = {codes.DROP_NAMES[c]: e for c, e in _ERRNO.items()}
    return sorted(names[k] for k, v in res.drops.items() if k in names and v)


def run(variant: str = "broken", **overrides) -> PresetRun:
    """Simulate netperf over the route; ``result`` is a ``simulate.Result``."""
    s = settings_for(KNOBS, VARIANTS, variant, overrides)
    sc = scenario(s)
    res = _simulate(sc)

    def build() -> Trace:
        t = tcpsetup.with_setup(res.trace, POINTS, peer_mss_option=1460, own_mss_option=int(s["mtu"]) - 40,
                                rtt_ns=sc.base_rtt_ns, server_port=None, opener="sender")
        return Trace(t.columns, t.points, {"report": REPORT, "variant": variant, "scenario": sc})

    return PresetRun(REPORT, variant, s, res, POINTS, build, res.goodput_bps,
                     info={"goodput_Mbps": res.goodput_bps / 1e6, "drops": dict(res.drops),
                           "gso_drop_errnos": gso_drop_errnos(res), "rtos": res.rtos, "tlp_probes": res.tlp_probes,
                           "rate_bps": sc.path[0].rate_bps})


def _one(errnos: list[str]):
    return errnos[0] if len(errnos) == 1 else (", ".join(errnos) or None)


def reproduce() -> Reproduction:
    tg = _F.targets
    rep = Reproduction(REPORT)
    healthy, broken, einval, fixed = (run(v) for v in ("healthy", "broken", "mpls_gso_no_inner", "fixed"))
    rep.add_target(tg["throughput_healthy_Mbps"], healthy.info["goodput_Mbps"], "fitted")
    rep.add_target(tg["throughput_broken_Mbps"], broken.info["goodput_Mbps"], "predicted")
    rep.add_target(tg["drop_errno_broken"], _one(broken.info["gso_drop_errnos"]), "predicted")
    rep.add_target(tg["throughput_mpls_gso_no_inner_Mbps"], einval.info["goodput_Mbps"], "predicted")
    rep.add_target(tg["drop_errno_mpls_gso_no_inner"], _one(einval.info["gso_drop_errnos"]), "predicted")
    rep.add_target(tg["throughput_fixed_Mbps"], fixed.info["goodput_Mbps"], "predicted")
    return rep
