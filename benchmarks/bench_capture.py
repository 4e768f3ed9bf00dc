"""Capture reading speed: the numba fast path vs per-packet dpkt loops, measured in the same run.

    python -m benchmarks.bench_capture [--packets 1000000] [--baseline 100000]

Writes a header-only pcap (like ``tcpdump -s 96``) of N TCP packets to a temp
dir, then times ``read_capture`` (fast path: numba record walker + header
decoder), the Python decoder (``fast=False``), a bare dpkt loop (decode
Ethernet/IP/TCP and collect the header fields) and the kit's dpkt reference
reader. The dpkt baselines run on the first ``--baseline`` packets (a full
million takes minutes); rates are packets per second, ratios are rate ratios.
Goal: 1 million packets in <= 3 s and >= 10x the bare dpkt loop.

    python -m benchmarks.bench_capture --verbs [N ...]      (default 1000000; e.g. 1000000 10000000)

times the verbs (``gro``, ``doctor``, ``segment``, ``export``) as commands against
``tcpdump -r IN -w OUT`` and ``tshark -r IN`` on the same files in the same run
(wall time, CPU time and peak RSS by /usr/bin/time), on the pcap and on the same
capture as pcapng.gz, and checks that the pcapng.gz gives byte-identical output.
"""
from __future__ import annotations

import argparse
import gzip
import json
import shutil
import subprocess
import struct
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from offloadkit import codes as C
from offloadkit.io import capture, pcap, pcapng
from offloadkit.trace import Trace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from reference import pcap_ref  # noqa: E402  (the dpkt reference reader)


PSH_EVERY = 22        # data segments per sender burst (a TSO packet's last segment carries PSH)


def make_header_only_pcap(path: Path, n: int) -> None:
    """N header-only records (``tcpdump -s 96`` at the receiver) of one bulk flow with its ACKs.

    Two data segments (1448 B, 12 µs apart) per ACK; the sender's IP IDs count its own
    segments, timestamps tick every millisecond, PSH ends every ``PSH_EVERY``-th segment, so
    GRO merges the data as the kernel would. TCP checksums are the pseudo-header sums a host
    with TX checksum offload writes. Built by tiling one written (data, data, ACK) block and
    patching each record's time, IP ID (and header checksum), seq, ack, flags and timestamps."""
    k = np.arange(3)
    data = k != 2
    t = Trace.from_columns(
        src_ip=np.where(data, 0xC6120001, 0xC6120002), dst_ip=np.where(data, 0xC6120002, 0xC6120001),
        sport=np.where(data, 40000, 5201), dport=np.where(data, 5201, 40000), flags=C.ACK,
        payload_len=np.where(data, 1448, 0), opt_ts=True, window=502, csum_state=C.CSUM_PARTIAL, tcp_hlen=32)
    tmp = path.with_suffix(".block")
    pcap.write_pcap(tmp, t, header_only=True, snaplen=96)
    raw = np.fromfile(tmp, dtype=np.uint8)
    tmp.unlink()
    recs = raw[24:].reshape(3, 16 + 66)
    with open(path, "wb") as f:
        f.write(raw[:24].tobytes())
        for a in range(0, n, 1 << 20):                   # 1M records at a time: memory stays flat at 10M
            f.write(_bulk_records(recs, np.arange(a, min(a + (1 << 20), n), dtype=np.int64)).tobytes())


def _be(v, dtype: str, n: int):
    return np.ascontiguousarray(v).astype(dtype).view(np.uint8).reshape(n, -1)


def _bulk_records(recs, i):
    """Records ``i`` of :func:`make_header_only_pcap` (offsets: pcap header 16 + Ethernet 14 + ...)."""
    n = len(i)
    out = recs[i % 3].copy()
    ack_row = i % 3 == 2
    d = i // 3 * 2 + np.minimum(i % 3, 1)                 # data segments sent up to this record
    t_us = i * 12
    ms = t_us // 1000
    out[:, 0:4] = _be(t_us // 1_000_000, "<u4", n)
    out[:, 4:8] = _be(t_us % 1_000_000, "<u4", n)
    out[:, 34:36] = _be(np.where(ack_row, i // 3, d) & 0xFFFF, ">u2", n)
    out[:, 54:58] = _be(np.where(ack_row, 1, 1 + d * 1448) % (1 << 32), ">u4", n)
    out[:, 58:62] = _be(np.where(ack_row, (1 + d * 1448) % (1 << 32), 1), ">u4", n)
    out[:, 63] = np.where(~ack_row & (d % PSH_EVERY == PSH_EVERY - 1), C.ACK | C.PSH, C.ACK)
    out[:, 74:78] = _be(ms + np.where(ack_row, 5000, 1), ">u4", n)
    out[:, 78:82] = _be(ms + np.where(ack_row, 1, 5000), ">u4", n)
    out[:, 40:42] = 0
    words = out[:, 30:50].astype(np.int64).reshape(n, 10, 2)
    s = (words[:, :, 0] << 8 | words[:, :, 1]).sum(axis=1)
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    out[:, 40:42] = _be(~s & 0xFFFF, ">u2", n)
    return out


def bare_dpkt_loop(path: Path, limit: int) -> int:
    """The per-packet dpkt baseline: decode each frame and collect the header fields."""
    import dpkt
    cols = [[] for _ in range(9)]
    n = 0
    with open(path, "rb") as f:
        for ts, buf in dpkt.pcap.Reader(f):
            eth = dpkt.ethernet.Ethernet(buf)
            ip = eth.data
            tcp = ip.data
            if isinstance(tcp, dpkt.tcp.TCP):
                sport, dport, seq, ack, flags = tcp.sport, tcp.dport, tcp.seq, tcp.ack, tcp.flags
            else:   # header-only frame: dpkt leaves the cut TCP segment as bytes
                sport, dport, seq, ack, off, flags = struct.unpack("!HHIIBB", bytes(tcp)[:14])
            for c, v in zip(cols, (ts, ip.src, ip.dst, ip.len, ip.id, sport, dport, seq, ack)):
                c.append(v)
            n += 1
            if n >= limit:
                break
    return n


def cut(path: Path, n: int, out: Path) -> None:
    raw = path.read_bytes()
    out.write_bytes(raw[:24 + n * 82])


def timed(fn, *args, repeat: int = 1):
    best = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = fn(*args)
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return best, res


def make_tso_pcap(path: Path, n: int) -> None:
    """N header-only TSO super-packets of 64,000 payload bytes (IP total length from the header)."""
    k = np.arange(n)
    t = Trace.from_columns(src_ip=0xC6120001, dst_ip=0xC6120002, sport=40000, dport=5201, seq=1 + k * 64000,
                           ack=1, flags=C.ACK, payload_len=64000, opt_ts=True, tsval=k, tsecr=k, window=502,
                           ip_id=k, time_ns=k * 50_000, tcp_hlen=32, ip_len=64052)
    pcap.write_pcap(path, t, header_only=True, snaplen=96)


def measured(argv: list[str], ok=(0,), out: list | None = None) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds (user + system), peak RSS in MB) of one command, by /usr/bin/time;
    ``ok``: exit codes that are success; ``out``: gets the command's stdout appended."""
    p = subprocess.run(["/usr/bin/time", "-f", "%e %U %S %M", *argv], capture_output=True, text=True, check=False)
    if p.returncode not in ok:
        raise SystemExit(f"{' '.join(argv)} failed ({p.returncode}): {p.stderr.strip()[-300:]}")
    if out is not None:
        out.append(p.stdout)
    wall, user, system, rss_kb = p.stderr.strip().splitlines()[-1].split()
    return float(wall), float(user) + float(system), int(rss_kb) / 1024


def pcapng_gz(src: Path, ng: Path) -> None:
    """``src`` as ``ng``.gz: written by editcap when it is installed (as Wireshark writes pcapng), else by the kit."""
    if shutil.which("editcap"):
        subprocess.run(["editcap", "-F", "pcapng", str(src), str(ng)], check=True, capture_output=True)
    else:
        recs, info = capture.read_records(src)
        pcapng.write_records(ng, recs, info.snaplen, nano=False)
        del recs
    with open(ng, "rb") as f, gzip.open(f"{ng}.gz", "wb", compresslevel=1) as g:
        shutil.copyfileobj(f, g, 1 << 22)
    ng.unlink()


VERBS = ("gro", "doctor", "segment", "export")


def verbs(n: int, d: Path, only=VERBS) -> None:
    """Every verb against ``tcpdump -r IN -w OUT`` and ``tshark -r IN -w OUT`` on the same files, in this run.

    tshark copies too (``-w``): printing a million dissected lines takes it minutes. Ratios are
    wall-time ratios and CPU-time ratios (the machine is shared: CPU time is the steadier figure)."""
    kit = [sys.executable, "-m", "offloadkit"]
    bulk, tso = d / "bulk.pcap", d / "tso.pcap"
    make_header_only_pcap(bulk, n)
    make_tso_pcap(tso, max(n // 30, 1))
    for src in (bulk, tso):                           # the same captures as pcapng.gz
        pcapng_gz(src, d / f"{src.stem}.pcapng")
    small = d / "small.pcap"
    cut(bulk, 2000, small)
    for argv in (["gro", small, d / "w.pcap"], ["doctor", small], ["segment", tso, d / "w.pcap", "--mss", "1448"],
                 ["export", "rtl8139", d / "w.pcap"]):
        if argv[0] in only:
            subprocess.run([*kit, *map(str, argv)], capture_output=True, check=False)   # caches filled: not timed
    rows = []
    base = {}
    said = defaultdict(list)                          # label -> stdout of its run

    def row(label, m, ref):
        rows.append((label, *m, m[0] / max(base[ref][0], 0.01), m[1] / max(base[ref][1], 0.01)))
        print(f"{label:38s} {m[0]:8.2f} s {m[1]:8.2f} cpu-s {m[2]:8.0f} MB", file=sys.stderr, flush=True)

    for name, src in (("bulk", bulk), ("tso", tso)):
        base[name] = measured(["tcpdump", "-r", str(src), "-w", str(d / f"td-{name}.pcap")])
        row(f"tcpdump -r -w ({name})", base[name], name)
        if shutil.which("tshark"):
            row(f"tshark -r -w ({name})", measured(["tshark", "-n", "-r", str(src), "-w", str(d / "ts.pcap")]), name)
    for label, argv, ref in (
            ("offloadkit gro", [*kit, "gro", "--json", str(bulk), str(d / "g.pcap")], "bulk"),
            ("offloadkit gro (pcapng.gz)", [*kit, "gro", f"{d / 'bulk.pcapng'}.gz", str(d / "g2.pcap")], "bulk"),
            ("offloadkit doctor", [*kit, "doctor", str(bulk)], "bulk"),
            ("offloadkit doctor (pcapng.gz)", [*kit, "doctor", f"{d / 'bulk.pcapng'}.gz"], "bulk"),
            ("offloadkit segment", [*kit, "segment", str(tso), str(d / "s.pcap"), "--mss", "1448"], "tso"),
            ("offloadkit segment (pcapng.gz)", [*kit, "segment", f"{d / 'tso.pcapng'}.gz", str(d / "s2.pcap"),
                                                "--mss", "1448"], "tso"),
            ("offloadkit export", [*kit, "export", "rtl8139", str(d / "x.pcap")], "bulk")):
        if label.split()[1] not in only:
            continue
        row(label, measured(argv, ok=(0, 1) if "doctor" in label else (0,), out=said[label]), ref)  # doctor: 1 = warnings
    if "segment" in only:
        base["seg"] = measured(["tcpdump", "-r", str(d / "s.pcap"), "-w", str(d / "td-seg.pcap")])
        row("tcpdump -r -w (segment's output)", base["seg"], "seg")
    print(f"\n{n:,} header-only packets (bulk flow with ACKs); {max(n // 30, 1):,} TSO super-packets for segment")
    print(f"{'command':38s} {'wall s':>7s} {'cpu s':>7s} {'peak MB':>8s} {'x wall':>7s} {'x cpu':>7s}")
    for label, wall, cpu, mb, rw, rc in rows:
        print(f"{label:38s} {wall:7.2f} {cpu:7.2f} {mb:8.0f} {rw:7.1f} {rc:7.1f}")
    if "segment" in only:
        seg = next(r for r in rows if r[0] == "offloadkit segment")
        print(f"segment against tcpdump copying its output: {seg[1] / max(base['seg'][0], 0.01):.1f}x wall, "
              f"{seg[2] / max(base['seg'][1], 0.01):.1f}x cpu (goal <= 5x; RSS goal <= 400 MB)")
    if said["offloadkit gro"]:
        g = json.loads(said["offloadkit gro"][0])
        print(f"gro: {g['packets_in']:,} packets -> {g['packets_out']:,} ({g['merged']:,} merged)")
    same = {v: same_bytes(d / f"{v[0]}.pcap", d / f"{v[0]}2.pcap") for v in ("gro", "segment") if v in only}
    print("pcapng.gz gives byte-identical output to the pcap: "
          + ", ".join(f"{v} {ok}" for v, ok in same.items()))


def same_bytes(a: Path, b: Path) -> bool:
    """Whether two files hold the same bytes (read in blocks: the 10M outputs are GBs)."""
    with open(a, "rb") as f, open(b, "rb") as g:
        while True:
            x, y = f.read(1 << 22), g.read(1 << 22)
            if x != y:
                return False
            if not x:
                return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packets", type=int, default=1_000_000)
    ap.add_argument("--baseline", type=int, default=100_000)
    ap.add_argument("--verbs", type=int, nargs="*", metavar="N",
                    help="instead: time gro/doctor/segment/export against tcpdump and tshark at N packets "
                         "(default 1000000; add 10000000 for the slow 10M run)")
    ap.add_argument("--only", nargs="+", choices=VERBS, default=VERBS, metavar="VERB",
                    help=f"with --verbs: time only these verbs ({', '.join(VERBS)})")
    a = ap.parse_args()
    if a.verbs is not None:
        for n in a.verbs or (1_000_000,):
            with tempfile.TemporaryDirectory() as d:
                verbs(n, Path(d), a.only)
        return
    capture.warmup()
    with tempfile.TemporaryDirectory() as d:
        big = Path(d) / "big.pcap"
        small = Path(d) / "small.pcap"
        t0 = time.perf_counter()
        make_header_only_pcap(big, a.packets)
        print(f"generated {a.packets:,} header-only packets ({big.stat().st_size / 1e6:.0f} MB) "
              f"in {time.perf_counter() - t0:.1f} s")
        cut(big, min(a.baseline, a.packets), small)
        nb = min(a.baseline, a.packets)

        dt_fast, r = timed(capture.read_capture, big, repeat=2)
        assert r.fast_path and len(r.trace) == a.packets and r.ok, r.messages
        dt_py, rp = timed(lambda p: capture.read_capture(p, fast=False), small)
        dt_dpkt, nd = timed(bare_dpkt_loop, small, nb)
        dt_ref, rr = timed(pcap_ref.read_pcap, small)
        assert nd == nb and len(rr) == nb and len(rp.trace) == nb
        same = all(np.array_equal(rr.columns[c], r.trace.columns[c][:nb])
                   for c in ("seq", "ack", "payload_len", "flags", "sport", "ip_id", "time_ns"))

    rate = {"fast": a.packets / dt_fast, "python": nb / dt_py, "dpkt": nb / dt_dpkt, "ref": nb / dt_ref}
    print(f"fast path (numba)          : {a.packets:>9,} pkts in {dt_fast:6.3f} s = {rate['fast'] / 1e6:7.2f} Mpkt/s")
    print(f"Python decoder (fast=False): {nb:>9,} pkts in {dt_py:6.3f} s = {rate['python'] / 1e6:7.2f} Mpkt/s")
    print(f"bare dpkt loop             : {nb:>9,} pkts in {dt_dpkt:6.3f} s = {rate['dpkt'] / 1e6:7.2f} Mpkt/s")
    print(f"dpkt reference read_pcap   : {nb:>9,} pkts in {dt_ref:6.3f} s = {rate['ref'] / 1e6:7.2f} Mpkt/s")
    print(f"ratio fast / bare dpkt     : {rate['fast'] / rate['dpkt']:7.1f}x   (goal >= 10x)")
    print(f"ratio fast / dpkt reference: {rate['fast'] / rate['ref']:7.1f}x")
    print(f"ratio fast / Python decoder: {rate['fast'] / rate['python']:7.1f}x")
    print(f"1M packets at the fast rate: {1e6 / rate['fast']:.2f} s (goal <= 3 s); "
          f"fast path == dpkt reference on the first {nb:,}: {same}")


if __name__ == "__main__":
    main()
