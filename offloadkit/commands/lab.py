"""``offloadkit lab run|compare|sweep``: the same knobs on the real Linux kernel.

Needs root and network namespaces; otherwise it refuses with one sentence and
exit status 2. Set OFFLOADKIT_LAB_FORCE_REFUSE=1 to get the refusal anywhere.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys

from ..errors import UsageError
from ..units import parse_fraction, parse_rate, parse_size, parse_time


def _knobs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mss", type=int, help="iperf3 -M: TCP_MAXSEG of the sender (payload = MSS - options)")
    p.add_argument("--mtu", type=int, default=1500, help="MTU of every link (default 1500)")
    p.add_argument("--path-mtu", type=int, help="MTU of the router -> receiver hop, e.g. 1492 (ICMP frag-needed "
                                                 "goes back: PMTU discovery works)")
    p.add_argument("--clamp", type=int, help="iptables TCPMSS --set-mss on the router's forwarded SYNs")
    for name, where in (("tso", "sender"), ("gso", "sender"), ("gro", "receiver"),
                        ("rx-csum", "receiver"), ("tx-csum", "sender")):
        p.add_argument(f"--{name}", action=argparse.BooleanOptionalAction, default=True,
                       help=f"ethtool -K on the {where} (default on)")
    p.add_argument("--timestamps", action=argparse.BooleanOptionalAction, default=True,
                   help="net.ipv4.tcp_timestamps in sender and receiver (default on)")
    p.add_argument("--cc", default="cubic", choices=("cubic", "reno", "bbr"),
                   help="the sender's congestion control, iperf3 -C (default cubic; a new namespace would "
                        "otherwise inherit the host's, and may not set its own default to cubic)")
    p.add_argument("--delay", help="netem delay on the bottleneck egress, e.g. 10ms (needs netem)")
    p.add_argument("--rate-limit", "--rate", dest="rate", metavar="RATE",
                   help="tc tbf rate on the router egress, e.g. 500Mbit (SI: 1Mbit = 10^6 bit/s)")
    p.add_argument("--queue", metavar="BYTES", help="tbf limit with --rate-limit, e.g. 64KB (default: "
                                                     "100 ms of the rate)")
    p.add_argument("--burst", metavar="BYTES", help="tbf bucket with --rate-limit (default 64KiB)")
    p.add_argument("--loss", metavar="P",
                   help="drop each data segment with probability P (0.01 or 1%%) in the router's FORWARD "
                        "chain (iptables -m statistic); the sender's veth gets tso off, gso on, so TCP still "
                        "builds GSO super-packets but the router sees single segments, as a wire after TSO")
    p.add_argument("--drop-gso", action="store_true",
                   help="the router drops every forwarded skb longer than its egress MTU (iptables -m length "
                        "in FORWARD), as a device that cannot segment: the sender's TSO/GSO super-packets die")
    p.add_argument("--blackhole-mtu", type=int, metavar="N",
                   help="router egress MTU N with its ICMP frag-needed dropped (iptables OUTPUT): a PMTU "
                        "black hole")
    p.add_argument("--mtu-probing", type=int, choices=(0, 1, 2),
                   help="the sender's net.ipv4.tcp_mtu_probing (0 off, 1 after a black hole is detected, "
                        "2 always; default: the kernel's, 0)")
    p.add_argument("--bytes", default="4M", help="iperf3 -n (default 4M = 4,000,000 bytes)")
    p.add_argument("--duration", metavar="TIME",
                   help="iperf3 -t instead of --bytes, e.g. 8s (a bare number is seconds)")
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
    cmp_.add_argument("--tcp", action="store_true",
                      help="TCP dynamics: a healthy run (no pathology flags) measures capacity and base RTT, "
                           "then the pathology runs on the kernel and in `offloadkit simulate` with those "
                           "figures; prints goodput, retransmits and RTOs side by side (no captures)")
    cmp_.add_argument("--kernel", default=None, metavar="X.Y",
                      help="with --tcp: the simulator's TCP rules (default: the newest it knows)")
    sw = sub.add_parser("sweep", help="remove leftovers of crashed lab runs (okl-* namespaces)")
    sw.add_argument("--all", action="store_true", help="also namespaces of lab runs still alive")


#: option -> (args attribute, the kit's unit parser): each is read here so an error names it
_NUMBERS = {"--duration": ("duration", parse_time), "--rate-limit": ("rate", parse_rate),
            "--queue": ("queue", parse_size), "--burst": ("burst", parse_size), "--bytes": ("bytes", parse_size),
            "--loss": ("loss", parse_fraction)}


def _settings(args):
    from ..lab import LabSettings
    for flag, (name, parse) in _NUMBERS.items():
        value = getattr(args, name)
        if value is None or (name == "bytes" and args.duration is not None):
            continue
        try:
            parsed = parse(value)
            if isinstance(parsed, float) and not math.isfinite(parsed) or parsed > 10**15:
                raise ValueError(f"{value!r} is too large")
        except (ValueError, OverflowError) as e:
            raise UsageError(f"{flag}: {e}") from None
    return LabSettings(
        mss=args.mss, mtu=args.mtu, path_mtu=args.path_mtu, clamp=args.clamp, tso=args.tso,
        gso=args.gso, gro=args.gro, rx_csum=args.rx_csum, tx_csum=args.tx_csum,
        timestamps=args.timestamps, cc=args.cc, delay=args.delay, rate=args.rate, queue=args.queue,
        burst=args.burst, loss=args.loss, drop_gso=args.drop_gso, blackhole_mtu=args.blackhole_mtu,
        mtu_probing=args.mtu_probing,
        bytes=None if args.duration is not None else args.bytes, duration_s=args.duration,
        topology=args.topology, gro_flush_timeout_ns=args.gro_flush_timeout,
        napi_defer_hard_irqs=args.napi_defer_hard_irqs,
        captures=("router-in", "router-out", "rcv") if args.topology == "router" else ("snd", "rcv"))


def _fmt_sizes(h: dict) -> str:
    return ", ".join(f"{k} B x{v}" for k, v in h.items()) or "no data packets"


def run(args) -> int:
    from ..lab import LabInterrupted, LabUnavailable, check_available, sweep
    from ..lab.safety import signals_raise
    from ..lab.tcp import tcp_text
    action = getattr(args, "lab_action", None)
    if action is None:
        raise UsageError("choose an action: offloadkit lab run | compare | sweep")
    settings = None if action == "sweep" else _settings(args)  # bad input: exit 2 before anything is built
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
    try:
        with signals_raise():
            out = _run_action(action, args, settings)
    except LabUnavailable as e:
        print(str(e), file=sys.stderr)
        return 2
    except LabInterrupted as e:
        print(f"offloadkit lab: {e}; the lab's namespaces were removed", file=sys.stderr)
        return 128 + e.signum
    except RuntimeError as e:
        print(f"offloadkit lab: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    if out.get("kind") == "tcp":
        print(tcp_text(out))
        return 0
    _print_human(action, out)
    return 0


def _run_action(action: str, args, settings) -> dict:
    """One lab action; its scratch folder (when --capture is not given) goes on the way out."""
    from ..lab.compare import compare, size_histogram
    from ..lab.runner import run_lab
    from ..lab.safety import scratch_dir
    from ..lab.tcp import compare_tcp
    if action == "compare" and args.tcp:
        return compare_tcp(settings, kernel=args.kernel)
    with contextlib.ExitStack() as stack:
        where = args.capture or stack.enter_context(scratch_dir("captures"))
        if action == "run":
            result = run_lab(settings, where)
            out = result.to_dict()
            out["segment_sizes"] = {p: size_histogram(f, result.sender_ip) for p, f in result.captures.items()}
        else:
            out = compare(settings, where, throughput_direction=args.throughput_direction,
                          simulation=not args.no_simulation)
        if not args.capture:
            out["captures"] = {p: None for p in out.get("captures", {})}
        return out


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
