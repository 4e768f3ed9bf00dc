"""``offloadkit gro IN OUT``: aggregate a capture's packets as Linux GRO would (see ``rewrite.gro``).

IN's packets, in file order, arrive on one receive queue; a NAPI poll ends after
``--napi-budget`` packets or when the next packet arrives more than ``--poll-gap``
after the previous one. OUT holds what the stack sees after GRO, in delivery order.
"""
from __future__ import annotations

import json
import sys

from ..errors import UsageError
from ..units import parse_time
from .options import count
from .progress import add_progress_arg, counter

MAX_POLL_GAP_NS = 10**15
MAX_NAPI_BUDGET = 2**31 - 1
RX_CHOICES = ("none", "unnecessary", "complete", "unnecessary-outer-only")


def configure(parser) -> None:
    parser.add_argument("input", metavar="IN", help="pcap or pcapng (.gz too; - for stdin): packets as they "
                                                    "arrive at the receiving NIC")
    parser.add_argument("output", metavar="OUT", help="where to write what the stack sees after GRO (- for "
                                                      "stdout): pcap, pcapng when the input mixes link types")
    parser.add_argument("--napi-budget", type=count(1, 2**31 - 1), default=64, metavar="N",
                        help="packets per NAPI poll (default 64, NAPI_POLL_WEIGHT); see --hz for what a "
                             "poll that uses it all flushes")
    parser.add_argument("--poll-gap", default="1ms", metavar="T",
                        help="a gap longer than this between two packets means the queue ran empty: the poll "
                             "ends and every held packet is flushed (default 1ms; units ns, us, ms, s; "
                             "'none' turns the rule off)")
    parser.add_argument("--hz", type=count(1, 100_000), default=1000, metavar="HZ",
                        help="the receiver's CONFIG_HZ (default 1000). A poll that uses its whole budget "
                             "flushes only packets held since an earlier jiffy when HZ >= 1000, everything "
                             "when HZ < 1000 (e.g. Debian's 250); a poll that runs empty flushes everything")
    parser.add_argument("--rx-csum", default="unnecessary", choices=RX_CHOICES,
                        help="receive checksum offload of the NIC (default unnecessary)")
    parser.add_argument("--cwr-rule", default="old", choices=("old", "accecn"),
                        help="old: a CWR segment flushes (kernels up to 2025, default); accecn: CWR compared "
                             "like other flags")
    parser.add_argument("--max-size", type=count(1, 2**31 - 1), default=65536, metavar="BYTES",
                        help="gro_max_size (default 65536: merged IP packets <= 65535; more is BIG TCP)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_progress_arg(parser)


def parse_duration_ns(text: str) -> int | None:
    """``--poll-gap``: '1ms' -> 1000000; bare numbers are seconds; 'none' -> None."""
    if str(text).strip().lower() in ("none", "off", "inf"):
        return None
    try:
        ns = parse_time(text)
    except (ValueError, UsageError) as e:
        raise UsageError(f"--poll-gap {text!r}: {e}; write e.g. 1ms, 250us, 0.002s or none") from None
    if ns < 0:
        raise UsageError(f"--poll-gap {text!r} is negative")
    if ns > MAX_POLL_GAP_NS:
        raise UsageError(f"--poll-gap {text!r} is longer than any capture (at most 1000000s); "
                         f"write none to turn the rule off")
    return ns


def run(args) -> int:
    from ..engine.gro import GroParams                # the engine (numba) only when the verb runs
    from ..io.records import STDIO
    if not 1 <= args.napi_budget <= MAX_NAPI_BUDGET:
        raise UsageError(f"--napi-budget {args.napi_budget}: a poll handles 1 to {MAX_NAPI_BUDGET} packets "
                         f"(default 64)")
    params = GroParams(napi_budget=args.napi_budget, poll_gap_ns=parse_duration_ns(args.poll_gap),
                       rx_csum=args.rx_csum, cwr_rule=args.cwr_rule, max_size=args.max_size, hz=args.hz)
    run, info, fmt = _gro(args, params)
    n_in, n_out = run.packets, run.written
    say = sys.stderr if args.output == STDIO else sys.stdout     # OUT '-' is the capture on stdout
    summary = {"input": str(args.input), "output": str(args.output), "packets_in": n_in,
               "packets_out": n_out, "merged": run.merged, "reasons": run.reason_counts(),
               "software_checksum_bytes": run.checksum_bytes, "format": fmt}
    if args.json:
        print(json.dumps(summary), file=say)
    else:
        rs = ", ".join(f"{k} {v}" for k, v in sorted(summary["reasons"].items(), key=lambda kv: -kv[1]))
        print(f"{args.input}: {n_in} packets -> {n_out} after GRO ({run.merged} merged; {rs}); "
              f"wrote {args.output} ({fmt})", file=say)
    if info.error:
        print(f"offloadkit gro: warning: {args.input}: {info.error} Used the complete records.", file=sys.stderr)
    return 0


def _gro(args, params):
    """(totals, CaptureResult, format written): IN streamed chunk by chunk (``io.sink``), OUT a pcap
    written as it comes when one holds it, else pcapng."""
    from ..io.sink import open_input, run_into
    from ..rewrite.gro import gro_stream
    inp = open_input(args.input)
    with counter(args, inp.total, "gro") as progress:
        run, fmt = run_into(args.output, inp, lambda chunks, write: gro_stream(chunks, write, params, progress))
    return run, inp.info, fmt
