"""``offloadkit segment IN OUT --mss N``: segment a capture's super-packets (see ``rewrite.segment``)."""
from __future__ import annotations

import json
import sys

from ..codes import NIC_MODELS
from ..errors import UsageError
from .progress import add_progress_arg, bar


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
    from ..io.capture import load_records, write_capture
    from ..io.records import STDIO
    from ..rewrite.segment import segment_records
    try:
        mss = int(str(args.mss), 10)
    except ValueError:
        raise UsageError(f"--mss {args.mss!r} is not a whole number of bytes") from None
    check_gso_size(mss)
    records, info = load_records(args.input)
    run = segment_records(records, mss, nic=args.nic, tx_csum=not args.no_tx_csum, fixed_id=args.fixed_id,
                          progress=bar(args, len(records), "segment"))
    fmt = write_capture(args.output, run.records, info)
    say = sys.stderr if args.output == STDIO else sys.stdout     # OUT '-' is the capture on stdout
    if info.error:
        print(f"offloadkit segment: warning: {args.input}: {info.error} Used the {len(records)} complete records.",
              file=sys.stderr)
    if run.unsegmented:
        print(f"offloadkit segment: warning: {run.unsegmented} tunnelled (VXLAN/IPIP) super-packets over MSS {mss} "
              f"were copied whole: tunnel GSO is not modelled yet", file=sys.stderr)
    csum = "partial" if args.nic == "sw-gso" and not args.no_tx_csum else "full"
    if args.json:
        print(json.dumps({"input": str(args.input), "output": str(args.output), "packets": len(records),
                          "super_packets": run.super_packets, "segments": run.segments, "dropped": run.dropped,
                          "unsegmented": run.unsegmented,
                          "written": len(run.records), "format": fmt, "mss": mss, "nic": args.nic,
                          "tcp_checksum": csum, "input_truncated": bool(info.error)}), file=say)
        return 0
    csum = "pseudo-header (PARTIAL)" if csum == "partial" else "full"
    dropped = f", dropped {run.dropped}" if run.dropped else ""
    print(f"{args.input}: {len(records)} packets, {run.super_packets} over MSS {mss} -> {run.segments} segments "
          f"({args.nic}, {csum} TCP checksums{dropped}); wrote {len(run.records)} packets to {args.output} ({fmt})",
          file=say)
    return 0
