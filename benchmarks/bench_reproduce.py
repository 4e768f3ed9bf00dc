"""Benchmark: warm ``offloadkit reproduce`` for the five reports (target <= 10 s on 2 cores).

Runs the CLI as a user would (a fresh process, numba kernels loaded from the cache):
once to warm the cache, then ``--repeat`` timed runs. Also times each report's
``reproduce()`` in this process, and the same CLI with ``NUMBA_DISABLE_JIT=1``
(the kernels run as plain Python: the reference) to give the speed-up.

    python -m benchmarks.bench_reproduce [--repeat 3] [--no-reference]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

CLI = [sys.executable, "-m", "offloadkit", "reproduce", "--json"]


def run_cli(extra_env: dict | None = None, report: str | None = None, timeout: float = 900) -> tuple[float, int]:
    env = {**os.environ, "NUMBA_NUM_THREADS": "1", **(extra_env or {})}
    cmd = CLI + (["--report", report] if report else [])
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if p.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(cmd)} failed: {p.stderr.strip()[-400:]}")
    return time.perf_counter() - t0, p.returncode


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-reference", action="store_true", help="skip the NUMBA_DISABLE_JIT=1 reference runs")
    args = ap.parse_args(argv)

    from offloadkit.reports import get
    from offloadkit.reports.facts import REPORT_IDS

    run_cli()                                            # warm the numba cache
    walls = []
    for _ in range(args.repeat):
        wall, status = run_cli()
        walls.append(wall)
    warm = statistics.median(walls)
    print(f"offloadkit reproduce (all five, fresh process, warm cache): median {warm:.2f} s "
          f"over {args.repeat} runs (min {min(walls):.2f}, max {max(walls):.2f}); exit status {status}; "
          f"budget 10 s -> {'OK' if warm <= 10 else 'OVER'}")

    t_import = time.perf_counter()
    mods = {rid: get(rid) for rid in REPORT_IDS}
    t_import = time.perf_counter() - t_import
    print(f"  import of the five preset modules (and the engine): {t_import:.2f} s")
    per = {}
    for rid, mod in mods.items():
        t0 = time.perf_counter()
        table = mod.reproduce()                          # first call: fits + runs (cached afterwards)
        per[rid] = time.perf_counter() - t0
        print(f"  {rid:<9} reproduce(): {per[rid]:.2f} s, {len(table)} rows, "
              f"{sum(r.ok for r in table.rows)} ok")

    if args.no_reference:
        return
    print("reference: the same CLI with NUMBA_DISABLE_JIT=1 (kernels as plain Python), per report")
    tot_ref = tot_jit = 0.0
    for rid in REPORT_IDS:
        ref, _ = run_cli({"NUMBA_DISABLE_JIT": "1"}, report=rid)
        jit, _ = run_cli(report=rid)
        tot_ref += ref
        tot_jit += jit
        print(f"  {rid:<9} python {ref:6.2f} s   numba {jit:5.2f} s   speed-up x{ref / jit:5.1f}")
    print(f"  all five  python {tot_ref:6.2f} s   numba {tot_jit:5.2f} s   speed-up x{tot_ref / tot_jit:5.1f} "
          f"(separate processes; each pays the ~1.5 s import)")


if __name__ == "__main__":
    main()
