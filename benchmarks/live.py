"""Live-dashboard latency at fresh values: control assignment -> updated charts, and first-dashboard time.

``python -m benchmarks.live [--repeat 20] [--seed 1] [--ids intro,...] [--reference-ids intro] [--no-kernel]``

1. For every registered dashboard and every control, ``--repeat`` timed
   assignments at settings never visited before in this process (random,
   seeded): a slider gets a random value not used before; before each timed
   toggle or dropdown change another slider (the MSS, or the first slider) is
   moved, untimed, to a fresh value, so the toggled setting is new too. No
   value is pre-visited, so no cache of the model can answer. Each time is from
   ``control.value = x`` until it returns (the recompute is synchronous: every
   chart and text panel is updated). Goals (issue 18): median <= 25 ms, p95 <= 100 ms.
2. The same with ``NUMBA_DISABLE_JIT=1`` (the engine as plain Python) in a
   subprocess, for ``--reference-ids``: the ratio shows what numba buys.
3. A fresh Jupyter kernel (warm numba cache, warm JupyterChart bundle cache):
   time from kernel start to the first dashboard's display output. Goal <= 2 s.
4. ``--phases``: where the time of one control change goes, per dashboard (mean ms
   over the same fresh changes): the engine (the TCP loop, ``one_packet``, the
   host paths), trace building (turning the loop's rows into Traces, handshakes),
   the dashboard's own compute (excerpts, readout rows), chart specs, text panels
   and widget sync (``JupyterChart.chart`` assignment and the other widgets' state).
5. ``--memory``: RSS of a fresh process and of a fresh Jupyter kernel that built one
   dashboard and made 20 fresh changes (``benchmarks/live_memory.py``; ``--tree DIR``
   measures another checkout, e.g. main, in the same run). Goals: <= 200 MB / <= 250 MB.
6. ``--baseline DIR``: every dashboard timed as in 1 on checkout DIR (e.g. main) and on this
   one, alternately, each in a fresh process: before/after in the same run.
7. ``--browser``: slider release -> every chart updated, in Chromium (Voila serving
   the notebooks; ``tests/browser/latency.py``), median and p95 per notebook.
   Goals (issue 18): median <= 50 ms, p95 <= 150 ms.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

import numpy as np

GOAL_MEDIAN_MS, GOAL_P95_MS = 25.0, 100.0


def is_slider(ctl) -> bool:
    return hasattr(ctl, "min") and not isinstance(ctl.value, bool)


class Fresh:
    """Random slider values never used before (per dashboard and control), from one seeded RNG."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.used: dict[str, set] = {}

    def value(self, name: str, ctl):
        used = self.used.setdefault(name, {ctl.value})
        lo, hi, step = ctl.min, ctl.max, max(getattr(ctl, "step", 1) or 1, 1)
        for _ in range(1000):
            v = lo + step * self.rng.randrange((hi - lo) // step + 1)
            if v not in used:
                used.add(v)
                return v
        raise RuntimeError(f"no fresh value left for {name} in {lo}..{hi}")


def other_value(ctl):
    """The next toggle state or dropdown option."""
    if isinstance(ctl.value, bool):
        return not ctl.value
    opts = [o[1] if isinstance(o, tuple) else o for o in ctl.options]
    return opts[(opts.index(ctl.value) + 1) % len(opts)]


def time_dashboard(report_id: str, repeat: int, seed: int = 1) -> dict:
    from offloadkit import ui
    dash = ui.dashboard(report_id)
    fresh = Fresh(seed)
    sliders = [n for n, c in dash.controls.items() if is_slider(c)]
    defaults = dict(dash.values)
    out = {}
    for name, ctl in dash.controls.items():
        dash.set(**defaults)
        mover = "mss" if "mss" in sliders and name != "mss" else next((s for s in sliders if s != name), None)
        times, errors = [], 0
        for _ in range(repeat):
            if is_slider(ctl):
                v = fresh.value(name, ctl)
            else:
                if mover is not None:
                    dash.controls[mover].value = fresh.value(mover, dash.controls[mover])   # untimed
                v = other_value(ctl)
            t0 = time.perf_counter()
            ctl.value = v
            times.append(time.perf_counter() - t0)
            errors += dash.error is not None
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


def tree_table(tree: str, report_id: str, repeat: int, seed: int) -> dict:
    """``time_dashboard`` in a fresh process on the checkout ``tree`` (this file's timing code)."""
    code = (f"import sys, json; sys.path[:0] = [{tree!r}, {os.path.dirname(os.path.abspath(__file__))!r}]; "
            f"import live; print(json.dumps(live.time_dashboard({report_id!r}, {repeat}, {seed})))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def print_baseline(ids, baseline: str, repeat: int, seed: int) -> None:
    """Each dashboard timed on ``baseline`` (e.g. main) and on this checkout, one after the other,
    fresh processes, the same seeded values: before/after in the same run."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    print(f"before ({baseline}) / after ({here}), {repeat} fresh settings per control (seed {seed})")
    for rid in ids:
        before, after = tree_table(baseline, rid, repeat, seed), tree_table(here, rid, repeat, seed)
        print(f"\n[{rid}]  {'control':18s} {'before median':>13s} {'p95':>7s} {'after median':>13s} {'p95':>7s}")
        for name, b in before.items():
            a = after.get(name, {})
            if "median_ms" in b and "median_ms" in a:
                print(f"         {name:18s} {b['median_ms']:10.1f} ms {b['p95_ms']:7.1f} {a['median_ms']:10.1f} ms "
                      f"{a['p95_ms']:7.1f}")
        (bm, bp), (am, ap) = summarize(before), summarize(after)
        print(f"  {rid}: worst median {bm:.1f} -> {am:.1f} ms ({bm / am:.2f}x), worst p95 {bp:.1f} -> {ap:.1f} ms")


def _child(args) -> None:
    """Run in a subprocess: print the timing table as JSON."""
    print(json.dumps({rid: time_dashboard(rid, args.repeat, args.seed) for rid in args.ids}))


def summarize(table: dict) -> tuple[float, float]:
    """(worst median, worst p95) over the controls: every control must meet the goal."""
    rows = [r for r in table.values() if "median_ms" in r]
    return max(r["median_ms"] for r in rows), max(r["p95_ms"] for r in rows)


def main(argv=None) -> int:
    from offloadkit import ui
    p = argparse.ArgumentParser(prog="python -m benchmarks.live")
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--ids", type=lambda s: s.split(","), default=None)
    p.add_argument("--no-kernel", action="store_true", help="skip the fresh-kernel measurement")
    p.add_argument("--reference-ids", type=lambda s: [x for x in s.split(",") if x], default=["intro"],
                   help="dashboards also timed with NUMBA_DISABLE_JIT=1 (slow for the TCP-simulating ones)")
    p.add_argument("--phases", action="store_true", help="also print where a control change spends its time")
    p.add_argument("--phases-only", action="store_true", help="only the phase table")
    p.add_argument("--browser", action="store_true",
                   help="only the Chromium measurement (Voila, tests/browser/latency.py)")
    p.add_argument("--memory", action="store_true", help="only the RSS per dashboard (fresh process, fresh kernel)")
    p.add_argument("--tree", default=None, help="with --memory: the checkout to measure (default: this one)")
    p.add_argument("--baseline", default=None,
                   help="only: time every dashboard on this checkout (e.g. /work/main) and on this one, alternately")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.ids = args.ids or ui.available()
    if args.child:
        _child(args)
        return 0
    from offloadkit import warmup
    warmup.main()
    if args.baseline:
        print_baseline(args.ids, args.baseline, args.repeat, args.seed)
        return 0
    if args.memory:
        from .live_memory import print_memory
        print_memory(args.ids, args.seed, args.tree, kernel=not args.no_kernel)
        return 0
    if args.browser:
        from .live_browser import print_browser
        print_browser(args.ids, args.repeat, args.seed)
        return 0
    if args.phases_only:
        from .live_phases import print_phases
        print_phases(args.ids, args.repeat, args.seed)
        return 0
    ref = {}
    ref_ids = [i for i in args.reference_ids if i in args.ids]
    if ref_ids:
        env = dict(os.environ, NUMBA_DISABLE_JIT="1")
        proc = subprocess.run([sys.executable, "-m", "benchmarks.live", "--child", "--repeat",
                               str(args.repeat), "--seed", str(args.seed), "--ids", ",".join(ref_ids)], env=env,
                              capture_output=True,
                              text=True, check=True)
        ref = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"assignment -> updated charts, {args.repeat} fresh settings per control (seed {args.seed}; "
          f"goal: median <= {GOAL_MEDIAN_MS:.0f} ms, p95 <= {GOAL_P95_MS:.0f} ms)")
    for rid in args.ids:
        table = time_dashboard(rid, args.repeat, args.seed)
        print(f"\n[{rid}]  {'control':18s} {'median':>9s} {'p95':>9s}  {'no-JIT median':>13s} {'ratio':>6s}")
        for name, r in table.items():
            if "median_ms" not in r:
                print(f"         {name:18s} {r['skipped']}")
                continue
            rr = ref.get(rid, {}).get(name, {})
            ratio = f"{rr['median_ms'] / r['median_ms']:5.1f}x" if "median_ms" in rr else "   -"
            refm = f"{rr['median_ms']:10.1f} ms" if "median_ms" in rr else "           -"
            err = f"  ({r['errors']} rejected)" if r["errors"] else ""
            print(f"         {name:18s} {r['median_ms']:6.1f} ms {r['p95_ms']:6.1f} ms  {refm}  {ratio}{err}")
        med, p95 = summarize(table)
        verdict = "ok" if med <= GOAL_MEDIAN_MS and p95 <= GOAL_P95_MS else "MISSED"
        print(f"  {rid}: worst median {med:.1f} ms, worst p95 {p95:.1f} ms -> {verdict}")
        if rid in ref:
            rmed, _ = summarize(ref[rid])
            print(f"  {rid}: pure-Python engine (NUMBA_DISABLE_JIT=1) median {rmed:.1f} ms, "
                  f"{rmed / med:.1f}x slower")
    if args.phases:
        from .live_phases import print_phases
        print_phases(args.ids, args.repeat, args.seed)
    if not args.no_kernel:
        first = first_dashboard_s(args.ids[0])
        verdict = "ok" if first["total_s"] <= 2 else "MISSED"
        print(f"\nfresh kernel -> first {args.ids[0]!r} dashboard: kernel start {first['kernel_start_s']:.2f} s"
              f" + dashboard {first['dashboard_s']:.2f} s = {first['total_s']:.2f} s (goal <= 2 s) -> {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
