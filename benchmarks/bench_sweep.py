"""Sweeps on dask: points per second for 1 and 2 worker processes on a 200-point grid.

``python -m benchmarks.bench_sweep [--points 200] [--threads]``. Wall-clock times (a sweep's
point is parallelism), so the load average is printed too: the machine may be shared. Prints
- the peer: the same grid run in this process, one point after another (``scheduler="sync"``);
- 1 and 2 worker processes (a ``LocalCluster``, workers warmed first): points/s, the ratio
  2 workers / 1 worker (goal >= 1.8) and per-point overhead, (time - peer time / workers) / points
  (goal <= 10 ms), and the same in CPU time: workers' + this process's CPU - the peer's, per point
  (what the batching costs, whatever the load);
- per-task overhead: the round trip of empty batches through the scheduler, and the same grid
  with one point per task (what batching saves);
- memory per worker (RSS after the sweep);
- with ``--threads``: one worker with 2 threads (pays off only where the kernels release the GIL).
"""
from __future__ import annotations

import argparse
import os
import time

from offloadkit.sim.scenario import Scenario
from offloadkit.sweep import close_local, sweep
from offloadkit.sweep.rows import run_batch
from offloadkit.sweep.run import local_client

BASE = Scenario.simple(rate_bps=100_000_000, rtt_ns=10_000_000, bytes_per_flow=3_000_000)


def grid(points: int) -> dict:
    """``points`` (a multiple of 20) grid points: 5 MSS x 4 loss rates x points/20 seeds."""
    return {"tcp.mss": [536, 800, 1000, 1200, 1448], "path.0.loss": [0.0, 0.005, 0.01, 0.02],
            "seed": list(range(1, points // 20 + 1))}


def warm(client) -> None:
    """Every worker imports the kit and runs one point (numba cache loads) before timing."""
    client.run(run_batch, [(0, BASE.replace(bytes_per_flow=10_000))])


def rss_mb(client) -> list[float]:
    import psutil
    return sorted(v / 2**20 for v in client.run(lambda: psutil.Process().memory_info().rss).values())


def worker_cpu_s(client) -> float:
    """CPU seconds the worker processes have used so far (user + system)."""
    import psutil
    return sum(sum(t) for t in client.run(lambda: tuple(psutil.Process().cpu_times()[:2])).values())


def task_overhead_ms(client, n: int = 200) -> float:
    """Wall time per empty batch submitted and gathered (scheduler + serialization)."""
    t0 = time.perf_counter()
    client.gather([client.submit(run_batch, [], pure=False) for _ in range(n)])
    return (time.perf_counter() - t0) / n * 1e3


def timed(g: dict, scheduler, **kw):
    """Wall seconds, this process's CPU seconds and the rows."""
    t0, c0 = time.perf_counter(), time.process_time()
    df = sweep(BASE, g, scheduler, progress=False, **kw)
    return time.perf_counter() - t0, time.process_time() - c0, df


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=200)
    ap.add_argument("--threads", action="store_true", help="also one worker with 2 threads")
    args = ap.parse_args(argv)
    g = grid(args.points)
    n = 1
    for v in g.values():
        n *= len(v)
    print(f"{n} points; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    sweep(BASE, {"seed": [1]}, "sync", progress=False)                 # this process: compile/cache load
    t_peer, c_peer, ref = timed(g, "sync")
    print(f"peer, in this process     {t_peer:7.2f} s  {n / t_peer:7.1f} points/s  "
          f"({c_peer / n * 1e3:.1f} ms CPU/point)")
    rates = {}
    for workers in (1, 2):
        client = local_client("processes", workers)
        warm(client)
        cpu0 = worker_cpu_s(client)
        t, c_client, df = timed(g, None, workers=workers)
        cpu = worker_cpu_s(client) - cpu0 + c_client
        assert df.drop(columns="worker").equals(ref.drop(columns="worker")), "rows differ from the peer's"
        rates[workers] = n / t
        over = (t - t_peer / workers) / n * 1e3
        print(f"{workers} worker process(es)     {t:7.2f} s  {n / t:7.1f} points/s  "
              f"overhead {over:+.2f} ms/point wall, {(cpu - c_peer) / n * 1e3:+.2f} ms CPU/point  "
              f"per-task {task_overhead_ms(client):.2f} ms  "
              f"RSS/worker {', '.join(f'{m:.0f}' for m in rss_mb(client))} MB  "
              f"workers used {df.worker.nunique()}")
        if workers == 1:
            t1, _, _ = timed(g, None, workers=1, batch_size=1)
            print(f"  one point per task        {t1:7.2f} s  {n / t1:7.1f} points/s  "
                  f"(batching saves {(t1 - t) / n * 1e3:+.2f} ms/point)")
        close_local()
    print(f"  ratio 2 workers / 1 worker: {rates[2] / rates[1]:.2f}x points/s (goal >= 1.8)")
    if args.threads:
        client = local_client("threads", 2)
        warm(client)
        t, _, df = timed(g, "threads", workers=2)
        assert df.drop(columns="worker").equals(ref.drop(columns="worker")), "rows differ from the peer's"
        print(f"1 worker, 2 threads        {t:7.2f} s  {n / t:7.1f} points/s  "
              f"ratio vs 1 process {n / t / rates[1]:.2f}x")
        close_local()


if __name__ == "__main__":
    main()
