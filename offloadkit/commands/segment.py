"""``offloadkit segment IN OUT --mss N``: segment a capture's super-packets (see ``rewrite.segment``)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from ..codes import NIC_MODELS
from ..errors import UsageError
from .progress import add_progress_arg, counter


def configure(parser) -> None:
    parser.add_argument("input", metavar="IN", help="pcap or pcapng (.gz too; - for stdin) with super-packets "
                                                    "(e.g. taken before a TSO-off device)")
    parser.add_argument("output", metavar="OUT", help="where to write the segmented capture (- for stdout): pcap, "
                                                      "pcapng when the input mixes link types")
    parser.add_argument("--mss", required=True, metavar="N",
                        help="gso_size: TCP payload bytes per segment (MTU 1500 with timestamps: 1448)")
    parser.add_argument("--nic", default="sw-gso", choices=list(NIC_MODELS),
                        help="who segments (default sw-gso: Linux software GSO; rtl8139-legacy: old QEMU)")
    parser.add_argument("--no-tx-csum", action="store_true",
                        help="no TX checksum offload: write full TCP checksums instead of the pseudo-header sum")
    parser.add_argument("--fixed-id", action="store_true",
                        help="SKB_GSO_TCP_FIXEDID: every segment keeps the packet's IP ID")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_progress_arg(parser)


def run(args) -> int:
    from ..engine.segment import check_gso_size      # the engine (numba) only when the verb runs
    from ..io.records import STDIO
    from ..io.sink import open_input, run_into
    from ..rewrite.segment import segment_stream
    try:
        mss = int(str(args.mss), 10)
    except ValueError:
        raise UsageError(f"--mss {args.mss!r} is not a whole number of bytes") from None
    check_gso_size(mss)
    opts = dict(nic=args.nic, tx_csum=not args.no_tx_csum, fixed_id=args.fixed_id)
    inp = open_input(args.input)
    info = inp.info
    with counter(args, inp.total if inp.total is not None else _records_estimate(args.input, inp), "segment") \
            as progress:
        run, fmt = run_into(args.output, inp, lambda chunks, write: segment_stream(chunks, write, mss,
                                                                                    progress=progress, **opts))
    n_in = run.packets
    say = sys.stderr if args.output == STDIO else sys.stdout     # OUT '-' is the capture on stdout
    if info.error:
        print(f"offloadkit segment: warning: {args.input}: {info.error} Used the {n_in} complete records.",
              file=sys.stderr)
    if run.unsegmented:
        print(f"offloadkit segment: warning: {run.unsegmented} IPIP super-packets over MSS {mss} "
              f"were copied whole: IPIP GSO is not modelled yet", file=sys.stderr)
    csum = "partial" if args.nic == "sw-gso" and not args.no_tx_csum else "full"
    if args.json:
        print(json.dumps({"input": str(args.input), "output": str(args.output), "packets": n_in,
                          "super_packets": run.super_packets, "segments": run.segments, "dropped": run.dropped,
                          "unsegmented": run.unsegmented,
                          "written": run.written, "format": fmt, "mss": mss, "nic": args.nic,
                          "tcp_checksum": csum, "input_truncated": bool(info.error)}), file=say)
        return 0
    csum = "pseudo-header (PARTIAL)" if csum == "partial" else "full"
    dropped = f", dropped {run.dropped}" if run.dropped else ""
    print(f"{args.input}: {n_in} packets, {run.super_packets} over MSS {mss} -> {run.segments} segments "
          f"({args.nic}, {csum} TCP checksums{dropped}); wrote {run.written} packets to {args.output} ({fmt})",
          file=say)
    return 0


def _records_estimate(path, inp) -> int | None:
    """Records in a streamed IN, from its size and its first chunk's records (None: not known)."""
    from ..io.records import STDIO
    if inp.first is None or not len(inp.first) or str(path) == STDIO or str(path).endswith(".gz"):
        return None
    per = (32 if inp.info.format == "pcapng" else 16) + float(inp.first.cap.mean())
    return int(Path(path).stat().st_size / per)
