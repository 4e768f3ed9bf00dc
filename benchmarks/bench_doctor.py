"""Doctor speed: ``diagnose`` (running tallies, doctor.accumulate) vs the plain-Python reference loop.

    python -m benchmarks.bench_doctor [--packets 1000000] [--flows 100] [--baseline 100000]

Builds a bulk-transfer trace of N packets (two data packets and one ACK per
step, a resend every 500 packets, SACK on the ACK after it) spread over F
flows, then times ``offloadkit.doctor.diagnose`` on it, ``diagnose_file`` on the
same trace written as pcap (reading included), and the reference's per-packet
bookkeeping (``tests/reference/doctor_ref.py``) on the first ``--baseline``
packets. Rates are packets per second; the ratio compares rates.
Goal: 1 million packets diagnosed in a few seconds.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from offloadkit import codes as C
from offloadkit.doctor import diagnose, diagnose_file
from offloadkit.io.pcap import write_pcap
from offloadkit.trace import Trace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from reference.doctor_ref import flow_counts  # noqa: E402


def bulk_trace(n: int, flows: int) -> Trace:
    k = np.arange(n)
    flow = k % flows
    step = k // flows                      # packet index within its flow
    ack_row = step % 3 == 2
    seq = 1 + (step // 3) * 2 * 1448 + (step % 3) * 1448
    resend = (step % 500 == 1)
    seq = np.where(resend, seq - 1448, seq)
    ack = np.where(ack_row, 1 + (step // 3 + 1) * 2 * 1448, 1)
    sack_n = np.where(ack_row & (step % 500 == 2), 1, 0)
    sack = np.zeros((n, 8), np.uint32)
    sack[:, 0] = ack + 1448
    sack[:, 1] = ack + 2896
    return Trace.from_columns(
        flow=flow, direction=ack_row.astype(np.uint8), frame=k + 1, time_ns=k * 1000,
        src_ip=np.where(ack_row, 0xC6120202, 0xC6120101), dst_ip=np.where(ack_row, 0xC6120101, 0xC6120202),
        sport=np.where(ack_row, 5201, 40000 + flow), dport=np.where(ack_row, 40000 + flow, 5201),
        seq=np.where(ack_row, 1, seq), ack=ack, flags=C.ACK, payload_len=np.where(ack_row, 0, 1448),
        tcp_hlen=32, opt_ts=True, window=502, ttl=np.where(ack_row, 63, 64),
        ip_len=np.where(ack_row, 52, 1500), sack_n=sack_n, sack=sack)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--packets", type=int, default=1_000_000)
    ap.add_argument("--flows", type=int, default=100)
    ap.add_argument("--baseline", type=int, default=100_000)
    a = ap.parse_args()
    t = bulk_trace(a.packets, a.flows)
    diagnose(t[:1000])                                   # imports, first-call costs
    t0 = time.perf_counter()
    d = diagnose(t)
    dt = time.perf_counter() - t0
    rate = a.packets / dt
    print(f"diagnose: {a.packets} packets, {a.flows} flows: {dt:.2f} s ({rate / 1e6:.2f} M packets/s); "
          f"{len(d.findings)} findings, worst {d.worst()}")
    base = t[:a.baseline]
    t0 = time.perf_counter()
    flow_counts(base)
    dr = time.perf_counter() - t0
    rrate = a.baseline / dr
    t0 = time.perf_counter()
    diagnose(base)
    dn = time.perf_counter() - t0
    print(f"reference per-packet bookkeeping: {a.baseline} packets in {dr:.2f} s ({rrate / 1e6:.3f} M packets/s); "
          f"diagnose on the same packets {dn:.2f} s")
    print(f"ratio (diagnose, all checks, vs the reference's bookkeeping alone): {rate / rrate:.1f}x")
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "bulk.pcap"
        m = a.packets
        write_pcap(p, t[:m], header_only=True, snaplen=96)   # like tcpdump -s 96
        t0 = time.perf_counter()
        diagnose_file(p)
        df = time.perf_counter() - t0
        print(f"diagnose_file (read + diagnose): {m} packets in {df:.2f} s ({m / df / 1e6:.2f} M packets/s)")


if __name__ == "__main__":
    main()
