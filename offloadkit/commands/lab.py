"""``offloadkit lab run|compare|sweep``: the same knobs on the real Linux kernel.

Needs root and network namespaces; otherwise it refuses with one sentence and
exit status 2. Set OFFLOADKIT_LAB_FORCE_REFUSE=1 to get the refusal anywhere.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys

from .options import add_bool_flag


def _knobs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mss", type=int, help="iperf3 -M: TCP_MAXSEG of the sender (payload = MSS - options)")
    p.add_argument("--mtu", type=int, default=1500, help="MTU of every link (default 1500)")
    p.add_argument("--path-mtu", type=int, help="MTU of the router -> receiver hop, e.g. 1492")
    p.add_argument("--clamp", type=int, help="iptables TCPMSS --set-mss on the router's forwarded SYNs")
    for name, where in (("tso", "sender"), ("gso", "sender"), ("gro", "receiver"),
                        ("rx-csum", "receiver"), ("tx-csum", "sender")):
        add_bool_flag(p, name, True, f"ethtool -K {name} on the {where}", onoff=True)
    add_bool_flag(p, "timestamps", True, "TCP timestamps in sender and receiver", onoff=True)
    p.add_argument("--delay", help="netem delay on the bottleneck egress, e.g. 10ms")
    p.add_argument("--rate", help="tbf rate on the bottleneck egress, e.g. 1Gbit")
    p.add_argument("--loss", help="random loss on the bottleneck, e.g. 0.1%%")
    p.add_argument("--bytes", default="4M", help="iperf3 -n (default 4M)")
    p.add_argument("--duration", type=float, help="iperf3 -t seconds instead of --bytes")
    p.add_argument("--gro-flush-timeout", type=int, default=0, metavar="NS",
                   help="receiver sysfs gro_flush_timeout (batch NAPI polls, e.g. 200000)")
    p.add_argument("--napi-defer-hard-irqs", type=int, default=0, metavar="N",
                   help="receiver sysfs napi_defer_hard_irqs (e.g. 10)")
    p.add_argument("--topology", choices=("router", "direct"), default="router")
    p.add_argument("--capture", metavar="DIR", help="keep the pcaps in DIR")
    p.add_argument("--json", action="store_true", help="print JSON for machines")


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="lab_action", metavar="ACTION")
    run = sub.add_parser("run", help="run iperf3 through lab namespaces and capture it")
    _knobs(run)
    cmp_ = sub.add_parser("compare", help="run the lab and the kit's segment/gro on its captures")
    _knobs(cmp_)
    cmp_.add_argument("--throughput-direction", action="store_true",
                      help="also run with TSO+GSO off on the sender and compare goodput")
    cmp_.add_argument("--no-simulation", action="store_true", help="skip the kit's simulation")
    sw = sub.add_parser("sweep", help="remove leftovers of crashed lab runs (okl-* namespaces)")
    sw.add_argument("--all", action="store_true", help="also namespaces of lab runs still alive")


def _settings(args):
    from ..lab import LabSettings
    return LabSettings(
        mss=args.mss, mtu=args.mtu, path_mtu=args.path_mtu, clamp=args.clamp, tso=args.tso,
        gso=args.gso, gro=args.gro, rx_csum=args.rx_csum, tx_csum=args.tx_csum,
        timestamps=args.timestamps, delay=args.delay, rate=args.rate, loss=args.loss,
        bytes=None if args.duration else args.bytes, duration_s=args.duration,
        topology=args.topology, gro_flush_timeout_ns=args.gro_flush_timeout,
        napi_defer_hard_irqs=args.napi_defer_hard_irqs,
        captures=("router-in", "router-out", "rcv") if args.topology == "router" else ("snd", "rcv"))


def _fmt_sizes(h: dict) -> str:
    return ", ".join(f"{k} B x{v}" for k, v in h.items()) or "no data packets"


def run(args) -> int:
    from ..lab import LabInterrupted, LabUnavailable, check_available, sweep
    from ..lab.compare import compare, size_histogram
    from ..lab.runner import run_lab
    from ..lab.safety import temp_dir
    action = getattr(args, "lab_action", None)
    if action is None:
        raise ValueError("choose an action: offloadkit lab run | compare | sweep")
    try:
        check_available()
    except LabUnavailable as e:
        print(str(e), file=sys.stderr)
        return 2
    if action == "sweep":
        removed = sweep(everything=args.all)
        print(json.dumps({"removed": removed}) if getattr(args, "json", False)
              else (f"removed {len(removed)} leftover(s): {' '.join(removed)}" if removed
                    else "nothing to remove"))
        return 0
    settings = _settings(args)
    tmp = None if args.capture else temp_dir("captures")
    try:
        if action == "run":
            result = run_lab(settings, args.capture or tmp)
            out = result.to_dict()
            out["segment_sizes"] = {p: size_histogram(f, result.sender_ip) for p, f in result.captures.items()}
        else:
            out = compare(settings, args.capture or tmp, throughput_direction=args.throughput_direction,
                          simulation=not args.no_simulation)
        if tmp:
            out["captures"] = {p: None for p in out.get("captures", {})}
    except LabUnavailable as e:
        print(str(e), file=sys.stderr)
        return 2
    except LabInterrupted as e:
        print(f"offloadkit lab: {e}; the lab's namespaces were removed", file=sys.stderr)
        return 128 + e.signum
    except RuntimeError as e:
        print(f"offloadkit lab: {e}", file=sys.stderr)
        return 1
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    _print_human(action, out)
    return 0


def _print_human(action: str, out: dict) -> None:
    print(f"goodput {out['goodput_bps'] / 1e9:.3f} Gbit/s, {out['retransmits']} retransmissions")
    if action == "run":
        for p, h in out["segment_sizes"].items():
            print(f"  {p:>10}: {_fmt_sizes(h)}")
    else:
        for p, h in out["kernel"].items():
            print(f"  kernel {p:>10}: {_fmt_sizes(h)}")
            if p in out["kit"]:
                print(f"  kit    {p:>10}: {_fmt_sizes(out['kit'][p])}")
        if "gso_size" in out:
            print(f"gso_size from the egress: {out['gso_size']} (settings predict {out['expected_gso_size']})")
        for what in ("segmentation", "gro"):
            if what in out:
                print(f"{what}: {'matches the kernel' if out[what]['ok'] else 'DIFFERS'}: {out[what]['summary']}")
        sim = out.get("simulation", {})
        if "segment_sizes" in sim:
            print(f"simulation: goodput {sim['goodput_bps'] / 1e9:.3f} Gbit/s ({sim['note']})")
            for p, h in sim["segment_sizes"].items():
                print(f"  sim    {p:>10}: {_fmt_sizes(h)}")
        elif sim:
            print(f"simulation: {sim['note']}")
        td = out.get("throughput_direction")
        if td:
            print(f"throughput: TSO+GSO on {td['tso_gso_on_bps'] / 1e9:.3f} Gbit/s, off "
                  f"{td['tso_gso_off_bps'] / 1e9:.3f} Gbit/s: off is {'slower' if td['off_is_slower'] else 'NOT slower'}")
        for n in out["notes"]:
            print(f"note: {n}")
    print("commands run:")
    for c in out["commands"]:
        print(f"  {c}")
