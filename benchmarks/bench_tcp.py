"""TCP event loop: events/s and simulated packets per CPU second, numba vs the plain-Python loop.

``python -m benchmarks.bench_tcp``. Times are CPU time of this process (``time.process_time``:
the machine may be shared). Prints (best of 3 for the compiled loop):
- small: 2 flows x 300 KB over 20 Mbit/s, 10 ms, 1 % loss; the same loop run
  as plain Python (``tests/reference/tcp_ref.py``, one run) and the ratio;
- 1 Gbit/s, 20 ms, 0.1 % loss, 10 s simulated (goal: <= 0.5 s);
- 10 Gbit/s, 1 ms, no loss, 1 s simulated (event-heavy: GRO, big windows);
- report-000-like preset run through ``simulate()`` (a dashboard's cost);
- ns-3's bulk scenario (100 Mbit/s, 20 ms RTT, 0.1 % loss, NewReno, 20 s): the loop, and simulate()
  with traces as the CLI records them (20,000 rows per point) against simulate(trace=False);
- events/s with 1 and 64 flows and their ratio (goal: >= 5M events/s at 64 flows; hop events wait per
  hop behind the heap, so the heap stays shallow however many packets the flows queue).
ns-3 itself (pip ``ns3``, ``benchmarks/ns3_bulk.py`` in a child process) is the peer for the bulk scenario
when installed: its CPU time in the same run and the ratio of delivered segments per CPU second.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from offloadkit.sim import simulate as S  # noqa: E402
from offloadkit.engine import tcp as K  # noqa: E402
from offloadkit.sim.pack import pack  # noqa: E402
from offloadkit.sim.scenario import Hop, Nic, Receiver, Scenario, Tcp  # noqa: E402
from reference import tcp_ref  # noqa: E402


def kernel_time(sc: Scenario, loop=K, repeat: int = 3):
    """Best CPU time of the event loop alone (fresh arrays each run) and the World of the last run."""
    best, W = float("inf"), None
    for _ in range(repeat):
        W = K.make_world(*pack(sc))
        t0 = time.process_time()
        loop.run_kernel(W)
        best = min(best, time.process_time() - t0)
    return best, W


def line(name: str, t: float, W) -> float:
    ev = int(W.G[K.G_EVENTS])
    pk = int(W.G[K.G_WIRE_PKTS])
    print(f"{name:<34} {t * 1e3:9.2f} ms CPU  {ev:>9} events  {ev / t / 1e6:7.2f} M events/s  "
          f"{pk / t / 1e6:7.3f} M packets/s")
    return ev / t


def ns3_ratio(bulk: Scenario, loop_cpu: float, simulate_cpu: dict) -> None:
    """ns-3 on the same bulk scenario (when pip ``ns3`` is installed): delivered segments per CPU second."""
    if importlib.util.find_spec("ns") is None:
        print("  ns-3: not installed (pip install ns3), no peer line")
        return
    out = subprocess.run([sys.executable, "-m", "benchmarks.ns3_bulk"], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[1], timeout=1800)
    if out.returncode != 0:
        print(f"  ns-3: failed ({out.stderr.strip().splitlines()[-1:]})")
        return
    ns3 = json.loads(out.stdout.strip().splitlines()[-1])
    ns3_rate = ns3["rx_bytes"] / ns3["mss"] / ns3["cpu_s"]
    r = S.simulate(bulk, trace=False)
    kit_segs = r.delivered_bytes / bulk.mss_bytes
    print(f"  ns-3 (same scenario, this run): {ns3['cpu_s'] * 1e3:.0f} ms CPU, goodput "
          f"{ns3['rx_bytes'] * 8 / ns3['seconds'] / 1e6:.1f} Mbit/s (kit {r.goodput_bps / 1e6:.1f})")
    for name, cpu in (("loop", loop_cpu), ("simulate() untraced", simulate_cpu[False]),
                      ("simulate() with traces", simulate_cpu[True])):
        print(f"  kit {name}: {kit_segs / cpu / ns3_rate:.0f}x ns-3 delivered segments per CPU second")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    S.warmup()

    small = Scenario(path=(Hop(rate_bps=20_000_000, delay_ns=5_000_000, loss=0.01, queue_packets=50),),
                     flows=2, bytes_per_flow=300_000, trace_limit=0)
    t_nb, W = kernel_time(small, repeat=args.repeat)
    r_nb = line("small, numba", t_nb, W)
    t_py, Wp = kernel_time(small, loop=tcp_ref.LOOP, repeat=1)
    r_py = line("small, plain Python (reference)", t_py, Wp)
    same = all(int(W.G[i]) == int(Wp.G[i]) for i in range(K.G_LEN))
    print(f"  ratio numba / reference: {r_nb / r_py:.0f}x events/s (same counters: {same})")

    gig = Scenario.simple(rate_bps=1_000_000_000, rtt_ns=20_000_000, loss=0.001, duration_ns=10_000_000_000,
                          trace_limit=0)
    t, W = kernel_time(gig, repeat=args.repeat)
    line("1 Gbit/s 0.1% loss 10 s, loop", t, W)
    t0 = time.process_time()
    r = S.simulate(gig.replace(trace_limit=20_000))
    wall = time.process_time() - t0
    print(f"  simulate() with 20k-row traces: {wall * 1e3:.1f} ms CPU (goal <= 500 ms), "
          f"goodput {r.goodput_bps / 1e6:.1f} Mbit/s, {r.retransmits} retransmits")

    ten = Scenario.simple(rate_bps=10_000_000_000, rtt_ns=1_000_000, duration_ns=1_000_000_000, trace_limit=0,
                          queue_packets=2000)
    t, W = kernel_time(ten, repeat=args.repeat)
    line("10 Gbit/s 1 ms no loss 1 s, loop", t, W)

    bulk = Scenario.simple(rate_bps=100_000_000, rtt_ns=20_000_000, loss=0.001, cc="newreno",
                           duration_ns=20_000_000_000, trace_limit=20_000)
    t, W = kernel_time(bulk.replace(trace_limit=0), repeat=args.repeat)
    line("ns-3 bulk 100M 20ms 0.1% 20 s, loop", t, W)
    times = {}
    for traced in (False, True):
        best = float("inf")
        for _ in range(args.repeat):
            t0 = time.process_time()
            r = S.simulate(bulk, trace=traced)
            best = min(best, time.process_time() - t0)
        times[traced] = best
    print(f"  simulate(): {times[True] * 1e3:.1f} ms CPU with traces, {times[False] * 1e3:.1f} ms without "
          f"(ratio {times[True] / times[False]:.2f}, goal <= 1.5); {r.wire_packets / times[True] / 1e6:.2f} M "
          f"packets per CPU second with traces")
    ns3_ratio(bulk, t, times)
    rate = {}
    for flows in (1, 64):
        many = Scenario.simple(rate_bps=10_000_000_000, rtt_ns=1_000_000, duration_ns=200_000_000, flows=flows,
                               trace_limit=0)
        t, W = kernel_time(many, repeat=args.repeat)
        rate[flows] = line(f"{flows} flow(s), 10 Gbit/s 1 ms 0.2 s, loop", t, W)
    print(f"  64 flows / 1 flow: {rate[64] / rate[1]:.2f}x events/s (goal: >= 5 M events/s at 64 flows)")

    preset = Scenario(tcp=Tcp(mss_clamp=1452, psh_on_gso=False, tso_retransmits=False),
                      nic=Nic(model="rtl8139-legacy", rate_bps=100_000_000),
                      path=(Hop("ppp", rate_bps=9_600_000, delay_ns=14_500_000, mtu=1500, encap=("pppoe",)),),
                      receiver=Receiver(gro=False), duration_ns=20_000_000_000, sender_point="guest",
                      wire_point="macvtap", trace_limit=5000)
    best = float("inf")
    for _ in range(args.repeat):
        t0 = time.process_time()
        r = S.simulate(preset)
        best = min(best, time.process_time() - t0)
    print(f"report-000 preset (20 s simulated), simulate(): {best * 1e3:.1f} ms CPU, {r.events} events, "
          f"goodput {r.goodput_bps / 8e3:.0f} KB/s")


if __name__ == "__main__":
    main()
