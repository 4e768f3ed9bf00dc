"""Live-dashboard latency: control assignment -> updated chart specs, and first-dashboard time.

``python -m benchmarks.live [--repeat 20] [--ids intro,...] [--reference-ids intro] [--no-kernel]``

1. For every registered dashboard and every control, 20 programmatic
   assignments; each is timed from ``control.value = x`` until it returns, at
   which point the recompute is done and every JupyterChart's ``spec`` is
   updated (synchronous observers; checked after each assignment). Values
   cycle through settings that the model accepts (found beforehand, untimed).
   Goals: median <= 50 ms, p95 <= 150 ms.
2. The same assignments with ``NUMBA_DISABLE_JIT=1`` (the engine as plain
   Python) in a subprocess, for ``--reference-ids``: the ratio shows what
   numba buys in the live loop.
3. A fresh Jupyter kernel (warm numba cache, warm JupyterChart bundle cache):
   time from kernel start to the first dashboard's display output. Goal <= 2 s.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

from offloadkit.ui.dashboard import control_values


def accepted_values(dash, name) -> list:
    """The ``control_values`` the model accepts (no error) with the other controls at their defaults."""
    ctl = dash.controls[name]
    default = ctl.value
    ok = []
    for v in control_values(ctl):
        ctl.value = v
        if dash.error is None:
            ok.append(v)
    ctl.value = default
    return ok


def time_dashboard(report_id: str, repeat: int) -> dict:
    from offloadkit import ui
    dash = ui.dashboard(report_id)
    out = {}
    for name, ctl in dash.controls.items():
        values = accepted_values(dash, name)
        if len(values) < 2:
            out[name] = {"skipped": f"only {len(values)} accepted value(s)"}
            continue
        default = ctl.value
        seq = [values[k % len(values)] for k in range(repeat)]
        if seq[0] == ctl.value:
            seq = seq[1:] + seq[:1]
        times, errors = [], 0
        for v in seq:
            if ctl.value == v:
                continue
            specs = {k: c.spec for k, c in dash.charts.items()}
            t0 = time.perf_counter()
            ctl.value = v
            times.append(time.perf_counter() - t0)
            errors += dash.error is not None
            assert dash.result.settings.get(name, v) == v or dash.error, (name, v)
            assert all(c.spec is not None for c in dash.charts.values())
            del specs
        ctl.value = default
        out[name] = {"n": len(times), "errors": errors, "median_ms": 1e3 * statistics.median(times),
                     "p95_ms": 1e3 * float(np.percentile(times, 95))}
    return out


def first_dashboard_s(report_id: str = "intro") -> dict:
    """Fresh kernel (jupyter_client) -> first dashboard display output, warm caches."""
    from jupyter_client.manager import start_new_kernel
    t0 = time.perf_counter()
    km, kc = start_new_kernel(kernel_name="python3")
    t_ready = time.perf_counter()
    try:
        msg_id = kc.execute(f"from offloadkit import ui\nui.dashboard({report_id!r})")
        shown = None
        while shown is None:
            msg = kc.get_iopub_msg(timeout=120)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] in ("execute_result", "display_data") and \
                    "application/vnd.jupyter.widget-view+json" in msg["content"]["data"]:
                shown = time.perf_counter()
            elif msg["msg_type"] == "error":
                raise RuntimeError("\n".join(msg["content"]["traceback"]))
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    return {"kernel_start_s": t_ready - t0, "dashboard_s": shown - t_ready, "total_s": shown - t0}


def _child(args) -> None:
    """Run in a subprocess: print the timing table as JSON."""
    print(json.dumps({rid: time_dashboard(rid, args.repeat) for rid in args.ids}))


def summarize(table: dict) -> tuple[float, float]:
    rows = [r for r in table.values() if "median_ms" in r]
    return statistics.median(r["median_ms"] for r in rows), max(r["p95_ms"] for r in rows)


def main(argv=None) -> int:
    from offloadkit import ui
    p = argparse.ArgumentParser(prog="python -m benchmarks.live")
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--ids", type=lambda s: s.split(","), default=None)
    p.add_argument("--no-kernel", action="store_true", help="skip the fresh-kernel measurement")
    p.add_argument("--reference-ids", type=lambda s: [x for x in s.split(",") if x], default=["intro"],
                   help="dashboards also timed with NUMBA_DISABLE_JIT=1 (slow for the TCP-simulating ones)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.ids = args.ids or ui.available()
    if args.child:
        _child(args)
        return 0
    from offloadkit import warmup
    warmup.main()
    ref = {}
    ref_ids = [i for i in args.reference_ids if i in args.ids]
    if ref_ids:
        env = dict(os.environ, NUMBA_DISABLE_JIT="1")
        proc = subprocess.run([sys.executable, "-m", "benchmarks.live", "--child", "--repeat",
                               str(args.repeat), "--ids", ",".join(ref_ids)], env=env, capture_output=True,
                              text=True, check=True)
        ref = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"assignment -> updated chart specs, {args.repeat} assignments per control "
          f"(goal: median <= 50 ms, p95 <= 150 ms)")
    for rid in args.ids:
        table = time_dashboard(rid, args.repeat)
        print(f"\n[{rid}]  {'control':18s} {'median':>9s} {'p95':>9s}  {'no-JIT median':>13s} {'ratio':>6s}")
        for name, r in table.items():
            if "median_ms" not in r:
                print(f"         {name:18s} {r['skipped']}")
                continue
            rr = ref.get(rid, {}).get(name, {})
            ratio = f"{rr['median_ms'] / r['median_ms']:5.1f}x" if "median_ms" in rr else "   -"
            refm = f"{rr['median_ms']:10.1f} ms" if "median_ms" in rr else "           -"
            print(f"         {name:18s} {r['median_ms']:6.1f} ms {r['p95_ms']:6.1f} ms  {refm}  {ratio}")
        med, p95 = summarize(table)
        verdict = "ok" if med <= 50 and p95 <= 150 else "MISSED"
        print(f"  {rid}: median of medians {med:.1f} ms, worst p95 {p95:.1f} ms -> {verdict}")
        if rid in ref:
            rmed, _ = summarize(ref[rid])
            print(f"  {rid}: pure-Python engine (NUMBA_DISABLE_JIT=1) median {rmed:.1f} ms, "
                  f"{rmed / med:.1f}x slower")
    if not args.no_kernel:
        first = first_dashboard_s(args.ids[0])
        verdict = "ok" if first["total_s"] <= 2 else "MISSED"
        print(f"\nfresh kernel -> first {args.ids[0]!r} dashboard: kernel start {first['kernel_start_s']:.2f} s"
              f" + dashboard {first['dashboard_s']:.2f} s = {first['total_s']:.2f} s (goal <= 2 s) -> {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
