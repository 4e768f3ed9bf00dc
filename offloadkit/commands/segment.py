"""``offloadkit segment IN OUT --mss N``: segment a capture's super-packets (see ``rewrite.segment``)."""
from __future__ import annotations

import json
import sys
from itertools import chain
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
    from ..io.batch import pcap_kind, pcap_writer, read_batch, write_batch
    from ..io.capture import check_loaded, check_path
    from ..io.records import STDIO
    from ..io.stream import open_pcap_stream
    from ..rewrite.segment import segment_batch, segment_stream
    try:
        mss = int(str(args.mss), 10)
    except ValueError:
        raise UsageError(f"--mss {args.mss!r} is not a whole number of bytes") from None
    check_gso_size(mss)
    opts = dict(nic=args.nic, tx_csum=not args.no_tx_csum, fixed_id=args.fixed_id)
    check_path(args.input)
    stream, source = open_pcap_stream(args.input)
    if stream is None:                                  # pcapng: read whole, written in chunks if a pcap holds it
        batch, info = read_batch(source)
        check_loaded(args.input, info, len(batch))
        kind = pcap_kind(batch, info)
        with counter(args, len(batch), "segment") as progress:
            if kind is None:
                run = segment_batch(batch, mss, progress=progress, **opts)
                fmt = write_batch(args.output, run.records, info)
            else:
                writer = pcap_writer(args.output, kind, info)
                try:
                    run = segment_stream([batch], writer.write, mss, progress=progress, **opts)
                finally:
                    writer.close()
                fmt = "pcap-ns" if info.nano else "pcap"
    else:
        run, info, fmt = _segment_stream(args, stream, mss, opts)
    n_in = run.packets
    say = sys.stderr if args.output == STDIO else sys.stdout     # OUT '-' is the capture on stdout
    if info.error:
        print(f"offloadkit segment: warning: {args.input}: {info.error} Used the {n_in} complete records.",
              file=sys.stderr)
    if run.unsegmented:
        print(f"offloadkit segment: warning: {run.unsegmented} tunnelled (VXLAN/IPIP) super-packets over MSS {mss} "
              f"were copied whole: tunnel GSO is not modelled yet", file=sys.stderr)
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


def _segment_stream(args, stream, mss: int, opts: dict):
    """Segment a classic pcap chunk by chunk: (totals, CaptureResult, format)."""
    from ..io.batch import pcap_writer
    from ..io.capture import check_loaded
    from ..io.records import STDIO
    from ..rewrite.segment import segment_stream
    info = stream.result
    check_loaded(args.input, info, 1)
    chunks = iter(stream)
    first = next(chunks, None)
    if first is None:
        check_loaded(args.input, info, 0)
    size = Path(args.input).stat().st_size if args.input != STDIO and not str(args.input).endswith(".gz") else 0
    per = 16 + float(first.cap.mean()) if first is not None and len(first) else 0
    writer = pcap_writer(args.output, (info.linktype, info.fcs[0] if info.fcs else 0), info)
    try:
        with counter(args, int((size - 24) / per) if per and size else None, "segment") as progress:
            run = segment_stream(chain([first] if first is not None else [], chunks), writer.write, mss,
                                 progress=progress, **opts)
    finally:
        writer.close()
    return run, info, "pcap-ns" if info.nano else "pcap"
