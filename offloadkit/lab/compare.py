"""Put the real kernel beside the kit: one lab run, the kit's engine over its captures.

``compare(settings)`` runs the lab (router topology, captures at router-in,
router-out and rcv), then the kit's ``segment`` over the router-ingress capture
and its ``gro`` over the router-egress capture, through the functions the
``segment`` and ``gro`` verbs call (``offloadkit.rewrite``). ``gro`` gets the
packets that reach the receiver, with the kernel's NAPI poll ends (read off its aggregates, see ``oracle``) as time gaps.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from ..engine.gro import GroParams
from ..io.capture import read_records, write_capture
from ..rewrite.gro import gro_records
from ..rewrite.segment import segment_records
from ..sim.scenario import Hop, Nic, Receiver, Scenario, Tcp, rx_csum_mode, tso_requires_tx_csum
from ..sim.simulate import simulate
from ..units import parse_time
from . import oracle, safety
from .packets import read_headers
from .runner import LabResult, run_lab
from .topology import LabSettings

#: GRO parameters for arrivals whose time gaps mark the kernel's poll ends (``oracle.arrivals``).
WITH_KERNEL_POLLS = GroParams(napi_budget=1_000_000, poll_gap_ns=oracle.KERNEL_POLL_GAP_NS)


def size_histogram(pcap, sender_ip: str | None = None, top: int = 6) -> dict:
    """Data-direction payload sizes of a capture: {size: count}, most frequent first."""
    t = read_headers(pcap, "x", sender_ip)[0]
    d = t[(t.direction == 0) & (t.payload_len > 0)]
    v, c = np.unique(d.payload_len, return_counts=True)
    order = np.argsort(-c, kind="stable")[:top]
    return {int(v[k]): int(c[k]) for k in order}


def kit_segment(ingress: str, out: str, mss: int) -> None:
    """The kit's ``segment`` over a capture (``rewrite.segment``), written to ``out``."""
    records, info = read_records(ingress)
    write_capture(out, segment_records(records, mss).records, info)


def kit_gro(egress: str, out: str, params: GroParams = WITH_KERNEL_POLLS) -> None:
    """The kit's ``gro`` over a capture (``rewrite.gro``), written to ``out``."""
    records, info = read_records(egress)
    write_capture(out, gro_records(records, params).records, info)


def compare_captures(result: LabResult, work_dir: str | Path) -> dict:
    """The kit's segment/GRO over a lab run's captures, beside the kernel's."""
    work = Path(work_dir)
    caps = result.captures
    out = {"goodput_bps": result.goodput_bps, "retransmits": result.retransmits,
           "kernel": {p: size_histogram(f, result.sender_ip) for p, f in caps.items()},
           "kit": {}, "notes": []}
    if "router-in" in caps and "router-out" in caps:
        eg = read_headers(caps["router-out"], "router-out", result.sender_ip)[0]
        mss = oracle.gso_size_from_egress(eg)
        out["gso_size"] = mss
        out["expected_gso_size"] = result.settings.expected_payload()
        seg_out = str(work / "kit-segment.pcap")
        kit_segment(caps["router-in"], seg_out, mss)
        out["kit"]["router-out"] = size_histogram(seg_out, result.sender_ip)
        rep = oracle.compare_segmentation(seg_out, caps["router-out"], result.sender_ip)
        out["segmentation"] = {"ok": rep.ok, "summary": rep.summary()}
        if "rcv" in caps and result.settings.gro:
            gro_out = str(work / "kit-gro.pcap")
            polls = oracle.kernel_poll_ends(caps["rcv"], caps["router-out"], result.sender_ip)
            arrived = oracle.arrivals(caps["router-out"], work / "router-out-arrivals.pcap", result.receiver_ip,
                                      polls)
            kit_gro(arrived, gro_out)
            out["kit"]["rcv"] = size_histogram(gro_out, result.sender_ip)
            rep = oracle.compare_gro(gro_out, caps["rcv"], caps["router-out"], result.sender_ip)
            out["gro"] = {"ok": rep.exact, "summary": rep.summary(),
                          "kernel_poll_ends": sum(len(v) for v in polls.values())}
    else:
        out["notes"].append("the kit comparison needs the router topology with router-in and router-out captures")
    return out


def try_on_kernel(settings: LabSettings, capture_dir: str | Path | None = None) -> dict:
    """For notebooks: :func:`compare`, or ``{"skipped": sentence}`` where the lab cannot run
    (no root, no namespaces, e.g. on Binder), so the section says why it is skipped."""
    try:
        safety.check_available()
        return compare(settings, capture_dir)
    except safety.LabUnavailable as e:
        return {"skipped": str(e)}


def scenario_for(settings: LabSettings) -> Scenario:
    """The kit's simulation Scenario closest to a lab experiment (router-out is the one hop)."""
    clamps = [c for c in (settings.mss, settings.clamp) if c]
    hop = Hop(name="router-out", rate_bps=settings.rate or 10**10,
              delay_ns=parse_time(settings.delay) if settings.delay else 20_000,
              mtu=settings.path_mtu or settings.mtu, loss=settings.loss or 0.0,
              icmp=True, queue_packets=10_000)
    return Scenario(tcp=Tcp(mss_clamp=min(clamps) if clamps else None, timestamps=settings.timestamps),
                    nic=Nic(tso=tso_requires_tx_csum(settings.tso, settings.tx_csum), gso=settings.gso,
                            tx_csum=settings.tx_csum, mtu=settings.mtu, rate_bps=10**10),
                    path=(hop,), receiver=Receiver(gro=settings.gro, rx_csum=rx_csum_mode(settings.rx_csum)),
                    bytes_per_flow=settings.bytes or int(settings.duration_s * 1e9 / 8), sender_point="router-in")


def simulate_for(settings: LabSettings) -> dict:
    """The simulation's segment sizes per point and goodput, or {"note": why not} for settings
    the model refuses (its ValueError message)."""
    try:
        r = simulate(scenario_for(settings))
    except ValueError as e:
        return {"note": f"the simulation could not run these settings: {e}"}
    sizes = {}
    for p in r.points:
        h = r.segment_sizes(p)
        sizes[p] = dict(sorted(h.items(), key=lambda kv: -kv[1])[:6])
    return {"goodput_bps": r.goodput_bps, "retransmits": r.retransmits, "segment_sizes": sizes,
            "note": "the simulation's goodput is bounded by its links (10 Gbit/s here), not by CPU cost"}


def compare(settings: LabSettings, capture_dir: str | Path | None = None,
            throughput_direction: bool = False, simulation: bool = True) -> dict:
    """Run the lab with ``settings`` and the kit beside it; a dict for people and notebooks.

    ``throughput_direction``: also run the lab (no captures) with TSO and GSO off
    on the sender and report both goodputs: on veth, per-MSS packets through the
    whole stack cost more, so "off" should be slower.
    """
    settings = replace(settings, topology="router", captures=("router-in", "router-out", "rcv"))
    work = Path(capture_dir) if capture_dir else Path(safety.temp_dir("compare"))
    result = run_lab(settings, work)
    out = compare_captures(result, work)
    out["captures"] = dict(result.captures)
    out["commands"] = list(result.commands)
    if simulation:
        out["simulation"] = simulate_for(settings)
    if throughput_direction:
        off = run_lab(replace(settings, tso=False, gso=False, captures=()), work)
        out["throughput_direction"] = {"tso_gso_on_bps": result.goodput_bps,
                                       "tso_gso_off_bps": off.goodput_bps,
                                       "off_is_slower": off.goodput_bps < result.goodput_bps}
        out["commands"] += off.commands
    return out
