"""``python -m benchmarks.live --browser``: slider release -> every chart updated, in Chromium.

One Voila server (the kit's template, offline) serves scratch copies of the
notebooks; Playwright drives Debian's chromium (``tests/browser/conftest.py``).
For each notebook, every control of its dashboard gets ``repeat`` fresh, seeded
values (``tests/browser/latency.py``). Goals (issue 18): median <= 50 ms and
p95 <= 150 ms per notebook.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = {"intro": "00-offloads-101.ipynb", "rtl8139": "01-rtl8139-tso-mss.ipynb", "mpls": "02-mpls-gso.ipynb",
             "vxlan": "03-vxlan-gro.ipynb", "splice": "04-splice-sessions.ipynb",
             "vlan-nat": "05-vlan-gro-nat.ipynb"}
GOAL_MEDIAN_MS, GOAL_P95_MS = 50.0, 150.0


def browser_table(ids, repeat: int, seed: int) -> dict[str, dict]:
    sys.path.insert(0, str(ROOT / "tests" / "browser"))
    from conftest import CHROMIUM, CHROMIUM_ARGS, voila_folder_server
    from latency import notebook_latencies, summary
    from playwright.sync_api import sync_playwright

    from offloadkit import ui
    out = {}
    with tempfile.TemporaryDirectory(prefix="offloadkit-live-") as tmp:
        server = voila_folder_server(Path(tmp), [NOTEBOOKS[rid] for rid in ids])
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                for rid in ids:
                    page = browser.new_context(viewport={"width": 1366, "height": 768}).new_page()
                    page.goto(server.url.format(nb=NOTEBOOKS[rid]), timeout=180_000)
                    page.wait_for_selector(".offloadkit-dashboard .offloadkit-text-trace pre", timeout=180_000)
                    page.wait_for_timeout(1500)
                    times = notebook_latencies(page, ui.dashboard(rid), repeat, seed)
                    out[rid] = {"per_control": {k: summary({k: v}) for k, v in times.items()},
                                **summary(times)}
                    page.context.close()
                browser.close()
        finally:
            server.stop()
    return out


def print_browser(ids, repeat: int, seed: int) -> None:
    table = browser_table(ids, repeat, seed)
    print(f"\nChromium (Voila): change -> every chart updated, {repeat} fresh values per control "
          f"(goal: median <= {GOAL_MEDIAN_MS:.0f} ms, p95 <= {GOAL_P95_MS:.0f} ms per notebook)")
    for rid, r in table.items():
        ok = "ok" if r["median_ms"] <= GOAL_MEDIAN_MS and r["p95_ms"] <= GOAL_P95_MS else "MISSED"
        worst = max(r["per_control"].items(), key=lambda kv: kv[1]["median_ms"])
        print(f"  {NOTEBOOKS[rid]:28s} median {r['median_ms']:6.1f} ms  p95 {r['p95_ms']:6.1f} ms  "
              f"max {r['max_ms']:6.1f} ms  (n={r['n']}; slowest control {worst[0]}: "
              f"median {worst[1]['median_ms']:.0f} ms) -> {ok}")
