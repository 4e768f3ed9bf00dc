"""``offloadkit trace ID [--variant V] [--point P] [-n N] [-v]``: a preset's packets as tcpdump prints them.

Runs the report's preset variant (default ``broken``) and prints the first N
packets seen at a capture point (default: the report's first point) in
``tcpdump -n`` form (``-v`` for ``tcpdump -n -v``). Packets dropped at that
point are not shown, as tcpdump there would not see them. ``--list`` prints the
variants and points.
"""
from __future__ import annotations

from ..reports.facts import REPORT_IDS
from .options import count, report_id


def add_preset_args(parser) -> None:
    """ID, --variant, --point: the arguments ``trace`` and ``export`` share."""
    parser.add_argument("report", metavar="ID", type=report_id,
                        help=f"report: {', '.join(REPORT_IDS)}, or its seed number 000-004")
    parser.add_argument("--variant", default="broken",
                        help="preset variant (default broken; `offloadkit trace ID --list` lists them)")
    parser.add_argument("--point", default=None,
                        help="capture point (default: the report's first; `offloadkit trace ID --list`)")


def configure(parser) -> None:
    add_preset_args(parser)
    parser.add_argument("-n", type=count(0), default=20, metavar="N", help="packets to print (default 20; 0: all)")
    parser.add_argument("-v", "--verbose", action="store_true", help="IP line and checksums, as tcpdump -v")
    parser.add_argument("--list", action="store_true", help="list the report's variants and capture points")


def preset_packets(args):
    """(module, PresetRun, point, Trace of the packets tcpdump at that point would see)."""
    from ..errors import UsageError
    from ..reports import presets
    if args.report not in REPORT_IDS:
        raise UsageError(f"unknown report {args.report!r}; the reports are {', '.join(REPORT_IDS)}")
    mod = presets.get(args.report)
    if args.variant not in mod.VARIANTS:
        raise UsageError(f"report {args.report} has no variant {args.variant!r}; "
                         f"its variants are {', '.join(mod.VARIANTS)}")
    point = args.point or mod.POINTS[0]
    if point not in mod.POINTS:
        raise UsageError(f"report {args.report} has no capture point {point!r}; "
                         f"its points are {', '.join(mod.POINTS)}")
    run = mod.run(args.variant)
    return mod, run, point, seen_at(run, point)


def seen_at(run, point: str):
    """The packets at ``point`` that tcpdump there would see (those not dropped before it)."""
    from .. import codes
    t = run.at(point)
    return t[t.drop == codes.DROP_NONE]


def listing(mod) -> str:
    lines = [f"report {mod.REPORT}", "variants:"]
    lines += [f"  {v.name:<12} {v.role:<10} {v.title}" for v in mod.VARIANTS.values()]
    lines.append("capture points:")
    help_ = getattr(mod, "POINT_HELP", {})
    lines += [f"  {p:<12} {help_.get(p, '')}".rstrip() for p in mod.POINTS]
    return "\n".join(lines)


def run(args) -> int:
    from ..io.tcpdump import render
    from ..reports import presets
    if args.list:
        print(listing(presets.get(args.report)))
        return 0
    _, _, _, t = preset_packets(args)
    if args.n:
        t = t[: args.n]
    for line in render(t, verbose=args.verbose):
        print(line)
    return 0
