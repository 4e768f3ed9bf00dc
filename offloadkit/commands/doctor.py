"""``offloadkit doctor CAPTURE [--json] [--side sender|receiver] [--mtu N] [--gro|--no-gro]``.

Reads a pcap/pcapng (see ``offloadkit.io.capture``) and prints what the offloads
did to it and what went wrong, in plain words with packet numbers and sizes
(``--json``: the findings as objects with kind, severity, message, evidence, plus
a per-flow table). A truncated or corrupt capture is diagnosed on the packets
read, the reader's message being a warning.

Exit status: 0 when no finding is above info; 1 when there is a warning or an
error (a damaged capture is a warning); 2 when nothing can be read (not a
capture, empty, cut before its first packet) or an option is wrong.
"""
from __future__ import annotations

import json

from .options import add_bool_flag, count
from .progress import add_progress_arg, counter

EXIT_HELP = ("Exit status: 0 when no finding is above info; 1 when there is a warning or an error "
             "(a damaged capture is a warning); 2 when nothing can be read (not a capture, empty, "
             "cut before its first packet) or an option is wrong.")


def configure(parser) -> None:
    parser.epilog = EXIT_HELP
    parser.add_argument("capture", metavar="CAPTURE", help="pcap or pcapng file")
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    parser.add_argument("--side", choices=("sender", "receiver"),
                        help="where the capture was taken (default: inferred from TTLs and checksums)")
    parser.add_argument("--mtu", type=count(0, 2**31 - 1), metavar="N",
                        help="the link MTU (default: from the SYNs' MSS options, else 1500)")
    add_bool_flag(parser, "gro", None, "whether GRO is on at the capture point, if you know", onoff=True)
    add_progress_arg(parser)


def exit_status(worst: str) -> int:
    """0 for info, 1 for a warning or an error."""
    return 0 if worst == "info" else 1


def run(args) -> int:
    from ..doctor import diagnose_file
    from ..doctor.render import render_text
    gro = None if args.gro is None else ("on" if args.gro else "off")
    with counter(args, None, "doctor") as progress:
        d = diagnose_file(args.capture, side=args.side, mtu=args.mtu, gro=gro, progress=progress, keep_trace=False)
    if args.json:
        print(json.dumps(d.to_dict(), indent=1))
    else:
        print(render_text(d))
    return exit_status(d.worst())
