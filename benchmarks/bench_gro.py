"""GRO segments per second: the numba kernel vs the pure-Python reference, same input.

``python -m benchmarks.bench_gro [--packets N] [--ref-packets M]``. The input
is N full-MSS segments of 16 TCP flows arriving in bursts of 8 (PSH on each
burst's last segment, 1 µs apart, NAPI budget 64, HZ 1000, 1 ms poll gap: the
defaults). Prints, best of 3:
- kernel: ``gro_kernel`` on prepared arrays (the aggregation itself);
- gro(): the whole call (keys, checksum verdicts, kernel, output Trace: the columns it
  computes; the others are gathered from the input when first read), and with every
  output column read;
- the reference (``tests/reference/gro_ref.py``) on the first M packets, scaled;
and the ratios against the reference measured in this run. Times are CPU
seconds of this process (``time.process_time``), i.e. one core.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from offloadkit import codes  # noqa: E402
from offloadkit.engine import gro as G  # noqa: E402
from offloadkit.trace import Trace  # noqa: E402
from reference import gro_ref  # noqa: E402


def make_trace(n: int, flows: int = 16, burst: int = 8, mss: int = 1448) -> Trace:
    i = np.arange(n)
    turn, k = np.divmod(i, burst)
    flow = turn % flows
    nth = (turn // flows) * burst + k
    flags = np.where(k == burst - 1, codes.ACK | codes.PSH, codes.ACK)
    return Trace.from_columns(
        time_ns=i * 1000, sport=10000 + flow, dport=5001, src_ip=0xC6120001, dst_ip=0xC6120002,
        seq=(1 + nth * mss) & 0xFFFFFFFF, payload_len=mss, flags=flags, tcp_hlen=32, opt_ts=True,
        tsval=1 + (i // 1000), tsecr=7, ip_id=nth & 0xFFFF, ip_len=52 + mss, window=1024, ack=1)


def best(fn, repeat=3):
    """Best CPU time of ``repeat`` runs (process_time: one core, robust on a shared machine)."""
    t_best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.process_time()
        out = fn()
        t_best = min(t_best, time.process_time() - t0)
    return t_best, out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packets", type=int, default=2_000_000)
    ap.add_argument("--ref-packets", type=int, default=100_000)
    a = ap.parse_args(argv)
    G.warmup()
    t = make_trace(a.packets)
    params = G.GroParams()
    prep = G.prepare(t, params)
    t_kernel, (reasons, _, O) = best(lambda: G.run_kernel(prep, params))
    t_full, res = best(lambda: G.gro(t, params))
    t_cols, _ = best(lambda: [v for v in G.gro(t, params).out.columns.values()])
    t_prep, _ = best(lambda: G.prepare(t, params))
    m = min(a.ref_packets, a.packets)
    sub = t[:m]
    rows = gro_ref.trace_rows(sub)
    buckets = G.prepare(sub, params)["bucket"].tolist()
    t_ref, (rr, routs) = best(lambda: gro_ref.gro_reference(rows, buckets), repeat=1)
    assert rr == reasons[:m].tolist()[:len(rr)] or m < a.packets
    ref_rate = m / t_ref
    k_rate = a.packets / t_kernel
    f_rate = a.packets / t_full
    print(f"input: {a.packets:,} segments, 16 flows, bursts of 8 -> {O.shape[1]:,} packets after GRO "
          f"({a.packets / O.shape[1]:.1f} segments per packet)")
    print(f"numba kernel : {t_kernel * 1e3:8.1f} ms  {k_rate / 1e6:7.2f} M segments/s  "
          f"{k_rate / ref_rate:7.0f}x the reference")
    print(f"gro() total  : {t_full * 1e3:8.1f} ms  {f_rate / 1e6:7.2f} M segments/s  "
          f"{f_rate / ref_rate:7.0f}x the reference")
    print(f"prepare()    : {t_prep * 1e3:8.1f} ms  {a.packets / t_prep / 1e6:7.2f} M segments/s  (keys, checksum "
          f"verdicts: part of gro())")
    print(f"gro(), every output column read: {t_cols * 1e3:8.1f} ms  {a.packets / t_cols / 1e6:7.2f} M segments/s")
    print(f"reference    : {t_ref * 1e3:8.1f} ms for {m:,}  {ref_rate / 1e6:7.3f} M segments/s")
    print(f"gro() runs at {f_rate / k_rate:.2f}x the kernel's rate (same run)")
    print(f"goal: >= 20 M segments/s on one core and >= 100x the reference: kernel "
          f"{'met' if k_rate >= 20e6 and k_rate >= 100 * ref_rate else 'NOT met'}, gro() "
          f"{'met' if f_rate >= 20e6 else 'NOT met'}")


if __name__ == "__main__":
    main()
