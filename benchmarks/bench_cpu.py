"""Cost of evaluating each CPU-model path on 1 million arriving packets.

``python -m benchmarks.bench_cpu [--packets N]``. For each path it prints the
wall time split into the engine calls the path makes (GRO/LRO, checksum
helpers, software GSO: other modules' kernels) and the CPU model's own stage
charging, plus the pure-Python per-packet reference charging
(``tests/reference/cpu_ref.py``) measured in the same run on a slice and scaled.
Building the arrival trace is timed separately and not counted.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from offloadkit.engine import cpu
from offloadkit.sim import host_paths as P  # noqa: E402
from reference import cpu_ref  # noqa: E402


def _time(fn, repeat=3):
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = fn()
        dt = time.perf_counter() - t0
        if dt < best:
            best, out = dt, r
    return best, out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packets", type=int, default=1_000_000)
    ap.add_argument("--ref-packets", type=int, default=100_000)
    a = ap.parse_args(argv)
    n = a.packets
    cpu.warmup()
    t0 = time.perf_counter()
    traces = {
        "router": cpu.arrival_trace(1e9, 1448, 1, packets=n, vlan=True),
        "vm": cpu.arrival_trace(10e9, 1398, 1, packets=n, vxlan=True, outer_udp_csum=0),
        "local": cpu.arrival_trace(40e9, 1448, 1, packets=n, csum_state=1),
        "splice": cpu.arrival_trace(10e9, 1448, 1000, packets=n),
    }
    print(f"arrival traces: 4 x {n:,} packets built in {time.perf_counter() - t0:.2f} s (not counted)")
    cases = [
        ("router_forward gro=off ct=1", lambda: P.router_forward(traces["router"], gro=False)),
        ("router_forward gro=on  ct=1", lambda: P.router_forward(traces["router"], gro=True)),
        ("vm_receive mlx4-like", lambda: P.vm_receive(traces["vm"], rx_csum="unnecessary-outer-only")),
        ("vm_receive bnx2x-like", lambda: P.vm_receive(traces["vm"], rx_csum="unnecessary")),
        ("local_receive gro=on", lambda: P.local_receive(traces["local"], gro=True)),
        ("splice_proxy 1000 sessions", lambda: P.splice_proxy(traces["splice"])),
    ]
    for _, fn in cases:                 # compile / warm every engine kernel on the shapes in use
        fn()
    host = cpu.load_host("bcm4708-router")
    m = min(a.ref_packets, n)
    pays = [int(x) for x in traces["router"].payload_len[:m]]
    t0 = time.perf_counter()
    for stage in ("driver_rx", "gro", "ip", "conntrack", "nat", "egress"):
        cpu_ref.charge_loop(host, stage, pays, {"gro_packet": 0} if stage == "gro" else None)
    ref_s = (time.perf_counter() - t0) * n / m
    print(f"pure-Python per-packet charging, router GRO off (6 stages): {ref_s * 1e3:,.0f} ms per {n:,} "
          f"packets (measured on {m:,}, scaled)")
    print(f"{'path':32s} {'total ms':>9s} {'engine ms':>10s} {'charge ms':>10s} {'vs ref':>8s}  result")
    for name, fn in cases:
        best, r = _time(fn)
        charge = r.info["charge_s"]
        ratio = f"{ref_s / charge:,.0f}x" if name.startswith("router_forward gro=off") else ""
        print(f"{name:32s} {best * 1e3:9.1f} {r.info['engine_s'] * 1e3:10.1f} {charge * 1e3:10.2f} "
              f"{ratio:>8s}  {r.rate_bps / 1e9:.2f} Gb/s, {r.bottleneck}-limited")
    print("goal: <= 20 ms per path on 1 M packets for the CPU model's own work (charge ms); "
          "engine ms are the GRO/LRO/GSO/checksum kernels of other modules, reported separately")


if __name__ == "__main__":
    main()
