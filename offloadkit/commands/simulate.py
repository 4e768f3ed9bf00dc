"""``offloadkit simulate``: TCP flows over one bottleneck hop through the offload engine.

Prints goodput, retransmissions, drops by reason and the segment sizes seen
at each capture point; ``--json`` prints the same as one JSON object. The
simulator (numba) is imported when the verb runs, not for ``--help``.
"""
from __future__ import annotations

import dataclasses
import json
import sys

from ..codes import KERNELS, NEWEST_KERNEL, NIC_MODELS
from ..errors import UsageError
from ..units import parse_rate, parse_size, parse_time


def configure(parser) -> None:
    parser.add_argument("--rate", default="100Mbit", help="bottleneck rate (default 100Mbit)")
    parser.add_argument("--rtt", default="20ms", help="round-trip propagation delay (default 20ms)")
    parser.add_argument("--loss", type=float, default=0.0, help="random loss probability per packet (e.g. 0.001)")
    parser.add_argument("--mss", type=int, default=None,
                        help="TCP payload bytes per segment (default: from --mtu; 1448 for 1500 with timestamps)")
    parser.add_argument("--mtu", type=int, default=1500, help="the sender NIC's MTU (default 1500)")
    parser.add_argument("--ipv6", action="store_true",
                        help="IPv6 instead of IPv4: 40-byte IP headers (MSS 1428 with timestamps at MTU 1500)")
    parser.add_argument("--path-mtu", type=int, default=None,
                        help="MTU of the bottleneck hop (default: --mtu); bigger packets are dropped")
    parser.add_argument("--icmp", action="store_true",
                        help="the hop sends ICMP frag-needed for oversize packets (default: silent black hole)")
    g = parser.add_mutually_exclusive_group()
    g.add_argument("--tso", dest="tso", action="store_true", default=True, help="TSO and GSO on (default)")
    g.add_argument("--no-tso", dest="tso", action="store_false", help="TSO and GSO off: one MSS per packet")
    g2 = parser.add_mutually_exclusive_group()
    g2.add_argument("--gro", dest="gro", action="store_true", default=True, help="GRO on at the receiver (default)")
    g2.add_argument("--no-gro", dest="gro", action="store_false", help="GRO off at the receiver")
    parser.add_argument("--nic", default="hw-tso", choices=list(NIC_MODELS), help="the sender NIC model")
    parser.add_argument("--cc", default="cubic", choices=["newreno", "cubic"], help="congestion control")
    parser.add_argument("--old-kernel", action="store_true",
                        help="Linux 4.4 TCP: no PSH on GSO packets, 1-MSS retransmissions, no RACK timer")
    parser.add_argument("--kernel", default=None, metavar="X.Y",
                        help=f"the TCP rules of that Linux release ({', '.join(KERNELS)}; "
                             f"default {NEWEST_KERNEL})")
    parser.add_argument("--mtu-probing", type=int, default=0, choices=(0, 1, 2),
                        help="net.ipv4.tcp_mtu_probing: 0 off, 1 after RTOs reveal a black hole, 2 always")
    parser.add_argument("--queue", default=None, metavar="BYTES|Np",
                        help="the bottleneck queue: bytes (64KB, a tbf limit) or packets (100p); "
                             "default one BDP, at least 100 packets")
    g3 = parser.add_mutually_exclusive_group()
    g3.add_argument("--duration", default=None, help="simulated time, e.g. 20s (default 10s)")
    g3.add_argument("--bytes", default=None,
                    help="bytes per flow, e.g. 100MB (runs to completion; a run estimated at more than 2e9 "
                         "events, or more than 2 GiB of state, is refused up front with the estimate)")
    parser.add_argument("--flows", type=int, default=1, help="parallel flows (default 1)")
    parser.add_argument("--flow", action="append", default=[], metavar="size=..,start=..,rtt=..,cc=..",
                        help="one flow that differs from the others (repeat it, one per flow; then --flows is "
                             "their number): size (bytes, e.g. 2MB), start (e.g. 1s), rtt (this flow's RTT, at "
                             "least --rtt: the rest is its access link), cc (newreno, cubic); a key left out "
                             "keeps the default")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    parser.add_argument("--no-trace", dest="trace", action="store_false", default=True,
                        help="record no packet traces: statistics only, faster (no segment-size lines)")
    parser.add_argument("--json", action="store_true", help="print a JSON object")
    parser.add_argument("--pcap", metavar="OUT.pcap", help="write the packets at --point as a pcap (with "
                                                          "--ipv6: IPv6 headers and flow labels)")
    parser.add_argument("--point", default=None, help="capture point for --pcap (default the first; the "
                                                      "points are listed under 'segment sizes')")


def scenario_from_args(args):
    """The Scenario the flags describe."""
    from ..sim.scenario import Scenario
    duration = parse_time(args.duration) if args.duration else None
    nbytes = parse_size(args.bytes) if args.bytes else None
    if duration is None and nbytes is None:
        duration = 10 * 10**9
    rate = parse_rate(args.rate)
    rtt = parse_time(args.rtt)
    if rtt < 2:
        raise UsageError(f"--rtt {args.rtt} is too small: give at least 2 ns")
    qpkts, qbytes = parse_queue(args.queue)
    sc = Scenario.simple(rate_bps=rate, rtt_ns=rtt, loss=args.loss, mss=args.mss, mtu=args.mtu,
                         path_mtu=args.path_mtu, tso=args.tso, gro=args.gro, nic=args.nic, cc=args.cc,
                         duration_ns=duration, bytes_per_flow=nbytes, flows=args.flows, seed=args.seed,
                         icmp=args.icmp, trace_limit=20_000, queue_packets=qpkts, queue_bytes=qbytes,
                         kernel=args.kernel, mtu_probing=args.mtu_probing, ip_version=6 if args.ipv6 else 4)
    if args.flow:
        if args.flows not in (1, len(args.flow)):
            raise UsageError(f"--flows {args.flows} and {len(args.flow)} --flow options: give one --flow per flow")
        sc = sc.replace(flows=len(args.flow), per_flow=tuple(parse_flow(text, rtt) for text in args.flow))
    if args.old_kernel:
        sc = sc.replace(tcp=dataclasses.replace(sc.tcp, psh_on_gso=False, tso_retransmits=False,
                                                   rack_reo_timer=False))
    return sc


FLOW_KEYS = ("size", "start", "rtt", "cc")


def parse_flow(text: str, path_rtt_ns: int):
    """``--flow size=2MB,start=1s,rtt=40ms,cc=newreno`` -> a ``sim.scenario.Flow``."""
    from ..sim.scenario import Flow
    fields = {}
    for part in filter(None, str(text).split(",")):
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq or key not in FLOW_KEYS:
            raise UsageError(f"--flow {text}: write KEY=VALUE pairs with keys {', '.join(FLOW_KEYS)} "
                             f"(e.g. --flow size=2MB,start=1s,rtt=40ms,cc=newreno)")
        if key in fields:
            raise UsageError(f"--flow {text}: {key} is given twice")
        fields[key] = value.strip()
    try:
        rtt = parse_time(fields["rtt"]) if "rtt" in fields else path_rtt_ns
        if rtt < path_rtt_ns:
            raise ValueError(f"rtt {fields['rtt']} is shorter than the path's --rtt; give at least that")
        return Flow(bytes=parse_size(fields["size"], 1) if "size" in fields else None,
                    start_ns=parse_time(fields["start"]) if "start" in fields else 0,
                    extra_rtt_ns=rtt - path_rtt_ns, cc=fields.get("cc"))
    except ValueError as e:
        raise UsageError(f"--flow {text}: {e}") from None


def parse_queue(text: str | None) -> tuple[int | None, int | None]:
    """``--queue``: '100p' -> (100, None) packets, '64KB' -> (None, 64000) bytes, None -> (None, None)."""
    if text is None:
        return None, None
    t = str(text).strip()
    if t.lower().endswith("p") and t[:-1].isdigit():
        return int(t[:-1]), None
    try:
        return None, parse_size(t)
    except ValueError:
        raise UsageError(f"--queue {text}: give bytes (64KB) or packets (100p)") from None


def _sizes(sizes: dict[int, int], top: int = 4) -> str:
    total = sum(sizes.values())
    if not total:
        return "no data packets"
    best = sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    parts = [f"{size} B x{count}" for size, count in best]
    if len(sizes) > top:
        parts.append(f"{len(sizes) - top} more sizes")
    return f"{total} packets: " + ", ".join(parts)


def run(args) -> int:
    from ..errors import UsageError
    from ..sim.simulate import simulate
    if args.pcap and not args.trace:
        raise UsageError("--pcap writes the trace: drop --no-trace")
    if args.point and not args.pcap:
        raise UsageError("--point chooses where --pcap captures: give --pcap OUT.pcap too")
    result = simulate(scenario_from_args(args), trace=args.trace)
    if args.pcap:
        write_point_pcap(result, args.point, args.pcap)
    for w in result.warnings:
        if w.startswith("PARTIAL"):
            print(f"offloadkit simulate: {w}", file=sys.stderr)
    if args.json:
        print(json.dumps(result.summary(), indent=1))
        return 0
    sc = result.scenario
    print(f"goodput      {result.goodput_bps / 1e6:.3f} Mbit/s over {result.duration_s:.3f} s "
          f"(bottleneck {sc.bottleneck_bps / 1e6:g} Mbit/s, MSS {sc.mss_bytes}, {sc.flows} flow(s))")
    print(f"delivered    {result.delivered_bytes} bytes")
    print(f"retransmits  {result.retransmits} segments in {result.retransmit_packets} packets "
          f"({result.tlp_probes} loss probes, {result.rtos} RTOs, {result.recoveries} fast recoveries)")
    if result.drops:
        print("drops        " + ", ".join(f"{name}: {n}" for name, n in result.drops.items()))
    else:
        print("drops        none")
    print(f"events       {result.events}")
    if args.flow:
        for i, (done, got) in enumerate(zip(result.completion_ns, result.flow_delivered_bytes)):
            end = f"done at {done / 1e9:.3f} s" if done >= 0 else "not done"
            print(f"  flow {i:<3} {int(got)} bytes delivered, {end}")
    if args.trace:
        print("segment sizes (first packets at each capture point):")
        for p in result.points:
            print(f"  {p:<10} {_sizes(result.segment_sizes(p))}")
    for w in result.warnings:
        print(f"warning: {w}")
    return 0


def write_point_pcap(result, point: str | None, out: str) -> None:
    """The packets tcpdump at ``point`` (default the first) would see, as a pcap; one line on stderr."""
    from ..errors import UsageError
    from ..io.pcap import write_pcap
    from .trace import seen_at
    point = point or result.points[0]
    if point not in result.points:
        raise UsageError(f"--point {point!r}: this run's capture points are {', '.join(result.points)}")
    n = write_pcap(out, seen_at(result, point))
    print(f"offloadkit simulate: wrote {n} packets at {point} to {out}", file=sys.stderr)
