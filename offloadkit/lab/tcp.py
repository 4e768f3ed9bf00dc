"""TCP dynamics on the kernel beside the simulator: ``offloadkit lab compare --tcp``.

A healthy lab run (the same settings without the pathology: no ``drop_gso``,
``loss``, ``blackhole_mtu``, ``mtu_probing`` or ``queue``) measures the path's
capacity (iperf3 goodput) and base RTT (the fastest of 200 one-byte TCP
ping-pongs over the idle path, before iperf3 starts). Then the pathology runs on the kernel, and in the
simulator with ``--rate <capacity> --rtt <base RTT>`` and the same flags
(:func:`simulate_argv` spells them as the ``offloadkit simulate`` command
line, :func:`scenario_for_tcp` builds that Scenario). Goodput, retransmitted
segments and RTOs are put side by side with the verdict of the issue's
tolerances (:func:`within`). No captures: tcpdump would cost the CPU the
veth path runs on.
"""
from __future__ import annotations

import json
import platform
from dataclasses import replace

from ..sim.scenario import Scenario
from ..sim.simulate import simulate
from .runner import LabResult, run_lab
from .topology import LabSettings

#: goodput ratio kit/kernel allowed, and below 1 Mb/s; both under STALL_BPS agree as a stall
GOODPUT_TOL, SLOW_GOODPUT_TOL, SLOW_BPS, STALL_BPS = (0.7, 1.43), (0.5, 2.0), 1e6, 1e4
RETRANS_TOL = (0.5, 2.0)
#: retransmission counts this small agree whatever their ratio (one RTO more or less)
RETRANS_SLACK = 3


#: the healthy run's length when the pathology runs longer (capacity settles within a second on veth)
HEALTHY_S = 3.0


def healthy(settings: LabSettings) -> LabSettings:
    """The same path and offloads without the pathology: what measures capacity and RTT."""
    dur = settings.duration_s
    return replace(settings, drop_gso=False, loss=None, blackhole_mtu=None, mtu_probing=None, queue=None,
                   tso=settings.sender_tso, captures=(), measure_rtt=True,
                   duration_s=None if dur is None else min(dur, HEALTHY_S), iperf_timeout_s=None)


def within(kernel: float, kit: float, what: str) -> bool:
    """Whether the kit's figure is within the tolerance of the kernel's (``goodput`` or ``retransmits``)."""
    if what == "goodput":
        if kernel < STALL_BPS and kit < STALL_BPS:
            return True
        lo, hi = SLOW_GOODPUT_TOL if kernel < SLOW_BPS else GOODPUT_TOL
    else:
        if abs(kernel - kit) <= RETRANS_SLACK:
            return True
        lo, hi = RETRANS_TOL
    return kernel > 0 and lo <= kit / kernel <= hi


def simulate_argv(settings: LabSettings, rate_bps: float, rtt_ns: int, kernel: str | None = None) -> list[str]:
    """The ``offloadkit simulate`` arguments that mean what ``settings`` do on the lab's path."""
    dur = settings.duration_s
    argv = ["--rate", f"{int(rate_bps)}bit", "--rtt", f"{max(int(rtt_ns), 2)}ns", "--cc", settings.cc
            if settings.cc != "reno" else "newreno"]
    argv += ["--duration", f"{dur:g}s"] if dur is not None else ["--bytes", str(settings.bytes)]
    if kernel:
        argv += ["--kernel", kernel]
    if not (settings.tso and settings.tx_csum):
        argv += ["--no-tso"]
    if not settings.gro:
        argv += ["--no-gro"]
    if settings.drop_gso:
        argv += ["--nic", "drop-gso"]
    if settings.loss:
        argv += ["--loss", f"{settings.loss:g}"]
    if settings.blackhole_mtu:
        argv += ["--path-mtu", str(settings.blackhole_mtu)]
    elif settings.path_mtu:
        argv += ["--path-mtu", str(settings.path_mtu), "--icmp"]
    if settings.mtu_probing is not None:
        argv += ["--mtu-probing", str(settings.mtu_probing)]
    if settings.queue:
        argv += ["--queue", str(settings.queue)]
    if settings.mtu != 1500:
        argv += ["--mtu", str(settings.mtu)]
    if settings.mss or settings.clamp:
        argv += ["--mss", str(settings.expected_payload())]
    return argv


def scenario_for_tcp(settings: LabSettings, rate_bps: float, rtt_ns: int, kernel: str | None = None) -> Scenario:
    """The Scenario of :func:`simulate_argv` (the same fields ``offloadkit simulate`` sets)."""
    dur = settings.duration_s
    sc = Scenario.simple(
        rate_bps=int(rate_bps), rtt_ns=max(int(rtt_ns), 2), loss=settings.loss or 0.0,
        mss=settings.expected_payload() if (settings.mss or settings.clamp) else None, mtu=settings.mtu,
        path_mtu=settings.blackhole_mtu or settings.path_mtu, tso=settings.tso and settings.tx_csum,
        gso=settings.gso, gro=settings.gro, nic="drop-gso" if settings.drop_gso else "hw-tso",
        cc="newreno" if settings.cc == "reno" else settings.cc,
        duration_ns=None if dur is None else int(dur * 1e9),
        bytes_per_flow=settings.bytes if dur is None else None, icmp=settings.blackhole_mtu is None,
        queue_bytes=settings.queue, kernel=kernel, mtu_probing=settings.mtu_probing or 0, trace_limit=0)
    if not settings.timestamps:
        sc = sc.replace(tcp=replace(sc.tcp, timestamps=False))
    return sc


def _kernel_figures(r: LabResult) -> dict:
    return {"goodput_bps": r.goodput_bps, "retransmits": r.retransmits, "rtos": r.rtos,
            "min_rtt_ns": r.min_rtt_ns, "counters": dict(r.counters)}


def compare_tcp(settings: LabSettings, kernel: str | None = None, base: LabResult | None = None) -> dict:
    """Healthy run, pathology run and simulation: a dict for ``--json``, :func:`tcp_text` and data/lab.

    ``base``: a healthy run already made (several pathologies on one path share it).
    """
    settings = replace(settings, captures=())
    base = base or run_lab(healthy(settings))
    rate = base.goodput_bps
    rtt = base.base_rtt_ns or base.min_rtt_ns or 20_000
    sick = run_lab(settings)
    argv = simulate_argv(settings, rate, rtt, kernel)
    res = simulate(scenario_for_tcp(settings, rate, rtt, kernel))
    kit = {"goodput_bps": res.goodput_bps, "retransmits": res.retransmits, "rtos": res.rtos,
           "tlp_probes": res.tlp_probes, "warnings": list(res.warnings)}
    k = _kernel_figures(sick)
    return {"kind": "tcp", "kernel_version": platform.release(), "settings": settings.to_dict(),
            "healthy": {"goodput_bps": base.goodput_bps, "min_rtt_ns": base.min_rtt_ns,
                        "retransmits": base.retransmits, "commands": list(base.commands)},
            "capacity_bps": rate, "base_rtt_ns": rtt, "kernel": k, "kit": kit,
            "simulate": ["offloadkit", "simulate", *argv],
            "agree": {"goodput": within(k["goodput_bps"], kit["goodput_bps"], "goodput"),
                      "retransmits": within(k["retransmits"], kit["retransmits"], "retransmits")},
            "commands": list(sick.commands)}


def _rate(bps: float) -> str:
    for unit, scale in (("Gb/s", 1e9), ("Mb/s", 1e6), ("kb/s", 1e3)):
        if bps >= scale:
            return f"{bps / scale:.3g} {unit}"
    return f"{bps:.0f} b/s"


def tcp_text(out: dict) -> str:
    """The side-by-side table of :func:`compare_tcp` for people."""
    k, s, a = out["kernel"], out["kit"], out["agree"]
    mark = {True: "ok", False: "DIFFERS"}
    lines = [f"healthy run: capacity {_rate(out['capacity_bps'])}, base RTT {out['base_rtt_ns'] / 1000:.0f} us "
             f"(Linux {out['kernel_version']})",
             f"{'':14}{'kernel':>14}{'kit':>14}",
             f"{'goodput':14}{_rate(k['goodput_bps']):>14}{_rate(s['goodput_bps']):>14}  {mark[a['goodput']]}",
             f"{'retransmits':14}{k['retransmits']:>14}{s['retransmits']:>14}  {mark[a['retransmits']]}",
             f"{'RTOs':14}{k['rtos']:>14}{s['rtos']:>14}",
             "kit: " + " ".join(out["simulate"])]
    lines += [f"warning: {w}" for w in s.get("warnings", ())]
    lines.append("commands run:")
    lines += [f"  {c}" for c in out["healthy"]["commands"] + out["commands"]]
    return "\n".join(lines)


def lab_argv(settings: LabSettings) -> list[str]:
    """The ``offloadkit lab compare --tcp`` arguments of the settings the grids use."""
    argv = ["--duration", f"{settings.duration_s:g}s"] if settings.duration_s else ["--bytes", str(settings.bytes)]
    for flag, on in (("--no-tso", not settings.tso), ("--no-gso", not settings.gso), ("--no-gro", not settings.gro),
                     ("--drop-gso", settings.drop_gso)):
        argv += [flag] if on else []
    for flag, v in (("--loss", settings.loss), ("--blackhole-mtu", settings.blackhole_mtu),
                    ("--path-mtu", settings.path_mtu), ("--mtu-probing", settings.mtu_probing),
                    ("--rate-limit", settings.rate and f"{settings.rate}bit"), ("--queue", settings.queue)):
        argv += [flag, f"{v:g}" if isinstance(v, float) else str(v)] if v is not None else []
    return argv


def record(cases: dict[str, LabSettings], path, kernel: str | None = None) -> dict:
    """Run each case on this kernel (one healthy run per path) and write the kernel's figures,
    the exact lab commands and the matching ``offloadkit simulate`` line to ``path`` (JSON)."""
    bases: dict = {}
    out = {"kernel_version": platform.release(), "cases": {}}
    for name, s in cases.items():
        key = healthy(s)
        if key not in bases:
            bases[key] = run_lab(key)
        r = compare_tcp(s, kernel, base=bases[key])
        out["cases"][name] = {"lab": ["offloadkit", "lab", "compare", "--tcp", *lab_argv(s)],
                              "healthy": r["healthy"], "capacity_bps": r["capacity_bps"],
                              "base_rtt_ns": r["base_rtt_ns"], "kernel": r["kernel"], "simulate": r["simulate"],
                              "kit_when_recorded": r["kit"], "commands": r["commands"]}
        with open(path, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")
    return out
