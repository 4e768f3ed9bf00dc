"""``offloadkit gro IN OUT``: aggregate a capture's packets as Linux GRO would (see ``rewrite.gro``).

IN's packets, in file order, arrive on one receive queue; a NAPI poll ends after
``--napi-budget`` packets or when the next packet arrives more than ``--poll-gap``
after the previous one. OUT holds what the stack sees after GRO, in delivery order.
"""
from __future__ import annotations

import json
import sys
from itertools import chain

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
    """(totals, CaptureResult, format written): a classic pcap or a pcapng streamed chunk by
    chunk, written as a pcap when one holds it (see :class:`_Sink`), else as pcapng; other input
    read whole and run in chunks."""
    from ..io.batch import pcap_kind, read_batch
    from ..io.capture import check_loaded, check_path
    from ..io.stream import CHUNK, PcapStream, open_pcap_stream
    from ..rewrite.gro import gro_stream
    check_path(args.input)
    stream, source = open_pcap_stream(args.input, pcapng=True)
    if stream is not None:
        info = stream.result
        check_loaded(args.input, info, 1)
        chunks = iter(stream)
        first = next(chunks, None)
        check_loaded(args.input, info, int(first is not None))
        chunks = chain([first], chunks) if first is not None else iter(())
        kind = (info.linktype, info.fcs[0] if info.fcs else 0) if isinstance(stream, PcapStream) else "check"
        total = None
    else:
        batch, info = read_batch(source)
        check_loaded(args.input, info, len(batch))
        kind = pcap_kind(batch, info)
        chunks = (batch.slice(a, a + CHUNK) for a in range(0, len(batch), CHUNK))
        total = len(batch)
    with counter(args, total, "gro") as progress:
        sink = _Sink(args.output, info, kind)
        try:
            run = gro_stream(sink.inputs(chunks), sink.write, params, progress)
        except BaseException:
            sink.abort()
            raise
        fmt = sink.close()
    return run, info, fmt


class _Sink:
    """Where gro's output goes: a pcap of ``kind`` (link type, FCS) written as it comes; pcapng,
    written at the end, when ``kind`` is None (the input mixes link types or has times a pcap
    cannot hold). ``kind`` "check" (a streamed pcapng): the kind of the input's chunks, checked
    as they are read; the output is held (up to HOLD bytes) until the input ends or it is
    committed to a pcap, read back and held if a later chunk does not fit it (a later interface
    of another link type or a finer time resolution; refused in one line when OUT is stdout)."""

    HOLD = 1 << 23

    def __init__(self, path, info, kind):
        from ..io.batch import pcap_writer
        self.path, self.info, self.kind = path, info, kind
        self.held, self.held_bytes, self.writer, self.like = [], 0, None, None
        self.check = kind == "check"
        if not self.check and kind is not None:
            self._commit(pcap_writer)

    def _commit(self, pcap_writer):
        self.writer = pcap_writer(self.path, self.kind, self.info)
        self.like = (self.info.snaplen, self.info.nano)
        for b in self.held:
            self.writer.write(b)
        self.held, self.held_bytes = [], 0

    def inputs(self, chunks):
        from ..io.batch import pcap_kind
        first = True
        for c in chunks:
            if self.check:
                k = pcap_kind(c, self.info)
                if first:
                    self.kind, first = k, False
                if k != self.kind or k is None or (self.writer is not None and self._moved()):
                    self._give_up()
            yield c

    def _moved(self) -> bool:
        return self.like != (self.info.snaplen, self.info.nano)

    def _give_up(self):
        """Stop writing a pcap: what was written is read back and held with what follows."""
        from ..io.batch import read_batch
        from ..io.records import STDIO
        self.check, self.kind = False, None
        if self.writer is not None:
            self.writer.close()
            self.writer = None
            if str(self.path) == STDIO:
                raise UsageError("the input's link types or time resolution change after the first "
                                 f"{self.HOLD >> 20} MB of output already written to stdout as a pcap; "
                                 "give OUT a file name")
            self.held = [read_batch(self.path)[0], *self.held]

    def write(self, b):
        if self.writer is not None:
            self.writer.write(b)
            return
        self.held.append(b)
        self.held_bytes += int(b.cap.sum()) + 16 * len(b)
        if self.check and self.held_bytes > self.HOLD:
            from ..io.batch import pcap_writer
            self._commit(pcap_writer)

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.close()

    def close(self) -> str:
        from ..io.batch import Batch, pcap_writer, write_batch
        if self.kind == "check":                     # no packets: the kind the file describes
            self.kind = (self.info.linktype, self.info.fcs[0] if self.info.fcs else 0)
        if self.writer is not None and self.check and self._moved():
            self._give_up()
        if self.writer is None and self.kind is not None:
            self._commit(pcap_writer)
        if self.writer is not None:
            self.writer.close()
            return "pcap-ns" if self.info.nano else "pcap"
        return write_batch(self.path, Batch.concat(self.held), self.info)
