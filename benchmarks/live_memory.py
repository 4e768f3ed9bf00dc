"""``python -m benchmarks.live --memory``: resident memory of one dashboard, in a fresh process each.

For every dashboard: a fresh plain Python process builds it and makes 20 fresh,
seeded control changes (``benchmarks.live.Fresh``), then reports its RSS and what
it imported (numba, altair, vl_convert); and a fresh Jupyter kernel does the
same after displaying it (the kernel's RSS, by psutil). ``--tree DIR`` runs the
children on another checkout of the kit (e.g. main), so a change and its base are
measured in the same run. Goals (issue 18): <= 200 MB for the plain process,
<= 250 MB per notebook kernel.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

GOAL_PROCESS_MB, GOAL_KERNEL_MB = 200.0, 250.0
CHANGES = 20
ROOT = Path(__file__).resolve().parents[1]

# Run in the child (a plain process or a kernel): build, change, measure; prints one JSON line.
CHILD = """
import json, os, sys, psutil
sys.path.insert(0, {bench!r})
from live import Fresh, is_slider, other_value
from offloadkit import ui
dash = ui.dashboard({rid!r})
{display}
fresh, names = Fresh({seed}), list(dash.controls)
for k in range({changes}):
    name = names[k % len(names)]
    ctl = dash.controls[name]
    ctl.value = fresh.value(name, ctl) if is_slider(ctl) else other_value(ctl)
mods = [m for m in ("numba", "altair", "vl_convert", "pandas", "jsonschema") if m in sys.modules]
print(json.dumps({{"rss_mb": psutil.Process().memory_info().rss / 2**20, "modules": mods}}))
"""


def child_source(rid: str, seed: int, kernel: bool) -> str:
    return CHILD.format(bench=str(ROOT / "benchmarks"), rid=rid, seed=seed, changes=CHANGES,
                        display="from IPython.display import display; display(dash)" if kernel else "")


def child_env(tree: Path) -> dict:
    return dict(os.environ, PYTHONPATH=str(tree))


def process_rss(rid: str, seed: int, tree: Path) -> dict:
    """A fresh ``python -c``: build ``rid``, 20 changes, RSS."""
    out = subprocess.run([sys.executable, "-c", child_source(rid, seed, kernel=False)], env=child_env(tree),
                         capture_output=True, text=True, check=True, cwd=tree)
    return json.loads(out.stdout.strip().splitlines()[-1])


def kernel_rss(rid: str, seed: int, tree: Path) -> dict:
    """A fresh Jupyter kernel: display ``rid``, 20 changes, the kernel's RSS."""
    from jupyter_client.manager import start_new_kernel
    km, kc = start_new_kernel(kernel_name="python3", env=child_env(tree), cwd=str(tree))
    try:
        msg_id = kc.execute(child_source(rid, seed, kernel=True))
        while True:
            msg = kc.get_iopub_msg(timeout=300)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "error":
                raise RuntimeError("\n".join(msg["content"]["traceback"]))
            if msg["msg_type"] == "stream" and msg["content"]["text"].lstrip().startswith('{"rss_mb"'):
                return json.loads(msg["content"]["text"].strip().splitlines()[-1])
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def print_memory(ids, seed: int, tree: Path | None = None, kernel: bool = True) -> None:
    tree = Path(tree or ROOT).resolve()
    print(f"\nRSS after building one dashboard + {CHANGES} fresh changes, fresh process each ({tree}; goal: "
          f"process <= {GOAL_PROCESS_MB:.0f} MB, kernel <= {GOAL_KERNEL_MB:.0f} MB)")
    for rid in ids:
        p = process_rss(rid, seed, tree)
        k = kernel_rss(rid, seed, tree) if kernel else None
        ok = p["rss_mb"] <= GOAL_PROCESS_MB and (k is None or k["rss_mb"] <= GOAL_KERNEL_MB)
        ktext = f"kernel {k['rss_mb']:6.1f} MB" if k else "kernel      -"
        print(f"  {rid:10s} process {p['rss_mb']:6.1f} MB  {ktext}  (imports {', '.join(p['modules'])})"
              f" -> {'ok' if ok else 'MISSED'}")
