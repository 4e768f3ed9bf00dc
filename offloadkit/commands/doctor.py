"""``offloadkit doctor CAPTURE [--json] [--side sender|receiver] [--mtu N] [--gro on|off]``.

Reads a pcap/pcapng (see ``offloadkit.io.capture``) and prints what the offloads
did to it and what went wrong, in plain words with packet numbers and sizes
(``--json``: the findings as objects with kind, severity, message, evidence, plus
a per-flow table). Exit status 0 whenever the capture could be read, whatever
the findings (read the ``worst`` field or the severities); 2 when the input
cannot be read at all, with one line on stderr. A truncated or corrupt capture
is diagnosed on the packets read, the reader's message being a finding.
"""
from __future__ import annotations

import json


def configure(parser) -> None:
    parser.epilog = ("Exit status: 0 whenever the capture could be read, with or without findings (see the "
                     "severities, or 'worst' in --json); 2 when it cannot be read at all.")
    parser.add_argument("capture", metavar="CAPTURE", help="pcap or pcapng file")
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    parser.add_argument("--side", choices=("sender", "receiver"),
                        help="where the capture was taken (default: inferred from TTLs and checksums)")
    parser.add_argument("--mtu", type=int, metavar="N",
                        help="the link MTU (default: from the SYNs' MSS options, else 1500)")
    parser.add_argument("--gro", choices=("on", "off"),
                        help="whether GRO is on at the capture point, if you know")


def run(args) -> int:
    from ..doctor import diagnose_file
    from ..doctor.render import render_text
    d = diagnose_file(args.capture, side=args.side, mtu=args.mtu, gro=args.gro)
    if args.json:
        print(json.dumps(d.to_dict(), indent=1))
    else:
        print(render_text(d))
    return 0
