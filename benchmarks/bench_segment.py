"""Segments per second of the numba GSO kernels vs the pure-Python reference.

``python -m benchmarks.bench_segment [--super N] [--segs K] [--ref-super M]``.
Input: N super-packets of K full segments (MSS 1448, timestamps). The kernel
figure times the building blocks the TCP simulator calls (count pass,
checksum base sums, fill pass) on plain arrays; the API figure times
``segment(trace)`` including the copy of every Trace column; the reference
(``tests/reference/segment_ref.py``) runs on M super-packets of the same
input, normalised per segment. Goal: >= 50 M segments/s, >= 100x reference.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from offloadkit.codes import ACK, PSH  # noqa: E402
from offloadkit.engine import segment as sg  # noqa: E402
from offloadkit.engine.csum_math import tcp_options_sum_kernel  # noqa: E402
from offloadkit.trace import FIELDS, Trace  # noqa: E402
from reference import segment_ref as ref  # noqa: E402

MSS = 1448


def make_trace(n: int, segs: int, seed: int = 1) -> Trace:
    rng = np.random.default_rng(seed)
    return Trace.from_columns(
        time_ns=np.arange(n, dtype=np.int64) * 1000, frame=np.arange(n), payload_len=segs * MSS, gso_size=MSS,
        gso_segs=segs, tcp_hlen=32, opt_ts=True, tsval=rng.integers(0, 2**32, n), ip_len=52 + segs * MSS,
        flags=ACK | PSH, seq=rng.integers(0, 2**32, n), ack=rng.integers(0, 2**32, n),
        ip_id=rng.integers(0, 2**16, n), src_ip=0xC6120001, dst_ip=0xC6120002, sport=5201, dport=40000,
        window=501)


def alloc(total: int) -> dict:
    out = {k: np.empty(total, dtype=FIELDS[k][0]) for k in sg._OUT}
    out["src_row"] = np.empty(total, dtype=np.int64)
    return out


def kernels(t: Trace, tx_csum: bool, o: dict | None = None) -> int:
    """Count, base sums and fill on plain arrays (what an njit caller does); ``o``: reused output buffers."""
    c = t.columns
    n = len(t)
    model = sg.NicModel("sw-gso")
    params = model.params()
    counts = np.empty(n, dtype=np.int64)
    total = sg.segment_count_kernel(c["payload_len"], c["gso_size"], 0, c["ip_version"], c["ip_hlen"],
                                    c["tcp_hlen"], c["drop"], model.code, params, counts)
    opt = np.empty(n, dtype=np.int64)
    tcp_options_sum_kernel(c["tcp_hlen"], c["opt_mss"], c["opt_sackok"], c["opt_ts"], c["tsval"], c["tsecr"],
                           c["opt_wscale"], c["sack_n"], c["sack"], opt)
    ip_base = np.empty(n, dtype=np.int64)
    tcp_base = np.empty(n, dtype=np.int64)
    pseudo_base = np.empty(n, dtype=np.int64)
    sg.segment_base_sums_kernel(c["ip_version"], c["ip_hlen"], c["tos"], c["df"], c["frag"], c["ttl"], c["src_ip"],
                                c["dst_ip"], c["src_ip6"], c["dst_ip6"], c["sport"], c["dport"], c["ack"],
                                c["window"], c["urg_ptr"], opt, ip_base, tcp_base, pseudo_base)
    if o is None:
        o = alloc(total)
    sg.segment_fill_kernel(counts, c["payload_len"], c["gso_size"], 0, c["ip_version"], c["drop"], model.code,
                           params, tx_csum, c["seq"], c["flags"], c["ip_id"], c["ip_len"], c["ip_csum"],
                           c["tcp_csum"], c["csum_state"], c["gso_segs"], c["gso_type"], c["ip_hlen"],
                           c["tcp_hlen"], c["hbh_jumbo"], ip_base, tcp_base, pseudo_base, o["src_row"], o["seq"],
                           o["payload_len"], o["flags"], o["ip_id"], o["ip_len"], o["ip_csum"], o["tcp_csum"],
                           o["csum_state"], o["gso_size"], o["gso_segs"], o["gso_type"], o["drop"], o["ip_hlen"],
                           o["hbh_jumbo"])
    return total


def best_of(fn, repeat: int) -> tuple[float, float, object]:
    """(best wall seconds, best CPU seconds, result). CPU time is less disturbed by a busy machine."""
    wall, cpu, out = float("inf"), float("inf"), None
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        wall = min(wall, time.perf_counter() - w0)
        cpu = min(cpu, time.process_time() - c0)
    return wall, cpu, out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--super", type=int, default=200_000, help="super-packets for the kernel (default 200000)")
    ap.add_argument("--segs", type=int, default=44, help="segments per super-packet (default 44)")
    ap.add_argument("--ref-super", type=int, default=300, help="super-packets for the reference (default 300)")
    a = ap.parse_args(argv)
    sg.warmup()
    t = make_trace(a.super, a.segs)
    small = make_trace(max(a.super // 10, 1), a.segs)
    rows = ref.trace_rows(make_trace(a.ref_super, a.segs))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"input: {a.super:,} super-packets x {a.segs} segments of {MSS} B (segment(): {len(small):,}; "
          f"reference: {a.ref_super:,}); load average {load:.1f} on {os.cpu_count()} CPUs")
    print("rates in M segments/s as wall (CPU-time) figures; ratios use CPU time")
    total = a.super * a.segs
    bufs = alloc(total)
    for tx in (True, False):
        label = "PARTIAL (tx csum)" if tx else "full checksum"
        kernels(t, tx, bufs)                                          # touch the reused buffers once
        w, c, total = best_of(lambda: kernels(t, tx, bufs), 3)
        wf, cf, _ = best_of(lambda: kernels(t, tx), 2)
        wa, ca, out = best_of(lambda: sg.segment(small, tx_csum=tx), 2)
        wc, cc, _ = best_of(lambda: [v for v in sg.segment(small, tx_csum=tx).columns.values()], 2)
        wr, cr, segs = best_of(lambda: ref.segment_rows(rows, tx_csum=tx), 1)
        r_rate = len(segs) / cr
        print(f"{label}:")
        print(f"  kernels, buffers reused     {total / w / 1e6:7.1f} ({total / c / 1e6:7.1f})   "
              f"{total / c / r_rate:7.0f}x reference")
        print(f"  kernels, fresh buffers      {total / wf / 1e6:7.1f} ({total / cf / 1e6:7.1f})   "
              f"{total / cf / r_rate:7.0f}x reference")
        print(f"  segment(trace)              {len(out) / wa / 1e6:7.1f} ({len(out) / ca / 1e6:7.1f})   "
              f"{len(out) / ca / r_rate:7.0f}x reference   {cf / total / (ca / len(out)):5.2f}x the kernels' rate")
        print(f"  segment(trace), every column {len(out) / wc / 1e6:6.1f} ({len(out) / cc / 1e6:7.1f})   "
              f"{len(out) / cc / r_rate:7.0f}x reference   (the columns it does not write made on first read)")
        print(f"  reference (pure Python)     {len(segs) / wr / 1e6:7.3f} ({r_rate / 1e6:7.3f})")
    print("goal: kernels >= 50 M segments/s on one core, >= 100x the reference; segment() >= 20 M segments/s")


if __name__ == "__main__":
    main()
