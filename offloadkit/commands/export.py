"""``offloadkit export ID OUT.pcap [--variant V] [--point P] [-n N]``: a preset's packets as pcap.

Writes the packets ``offloadkit trace ID`` prints (same variant, point and
count) to an Ethernet pcap; ``tcpdump -n -v -r OUT.pcap`` prints what
``offloadkit trace ID -v`` prints. Payload bytes are zeros; checksums are the
ones the model says (e.g. CHECKSUM_PARTIAL on a sender with TX offload).
"""
from __future__ import annotations

from .progress import add_progress_arg, counter
from .trace import add_preset_args, preset_packets


def configure(parser) -> None:
    add_preset_args(parser)
    parser.add_argument("output", metavar="OUT.pcap", help="where to write the capture")
    parser.add_argument("-n", type=int, default=0, metavar="N", help="packets to write (default 0: all)")
    add_progress_arg(parser)


def run(args) -> int:
    from ..errors import UsageError
    from ..io.pcap import write_pcap
    if args.n < 0:
        raise UsageError(f"-n {args.n}: give a number of packets >= 0 (0 writes all)")
    with counter(args, None, "export") as progress:
        _, _, point, t = preset_packets(args)
        if args.n:
            t = t[: args.n]
        progress.total = len(t)
        n = write_pcap(args.output, t)
        progress.update(n)
    print(f"{args.report}/{args.variant} at {point}: wrote {n} packets to {args.output}")
    return 0
