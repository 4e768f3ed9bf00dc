"""Slider release -> every chart updated, in Chromium: the browser half of ``benchmarks/live.py``.

:func:`timed_change` arms a MutationObserver on the dashboard (children, text and
attributes: vega's SVG renderer updates marks in place on a data-only change),
performs one control change the way a student does (type into the slider's readout
and press Enter, click a checkbox, pick a dropdown option) and waits until the
"recomputing" indicator is clear and nothing in the dashboard changed for
``QUIET_MS``; the latency is the last change's time minus the moment of the Enter,
click or pick. :func:`notebook_latencies` does that for every control of one
notebook's dashboard at fresh, seeded random values (``benchmarks.live.Fresh``).
"""
from __future__ import annotations

import statistics

import numpy as np

QUIET_MS = 600

ARM = """() => {
    const d = document.querySelector('.offloadkit-dashboard');
    if (!window.__okArmed) {
        window.__okArmed = true;
        const start = () => { window.__okT0 = performance.now(); window.__okLast = window.__okT0; };
        document.addEventListener('keydown', e => { if (e.key === 'Enter') start(); }, true);
        document.addEventListener('click', e => { if (e.target.type === 'checkbox') start(); }, true);
        document.addEventListener('change', e => { if (e.target.tagName === 'SELECT') start(); }, true);
        new MutationObserver(() => { window.__okLast = performance.now(); })
            .observe(d, {subtree: true, childList: true, characterData: true, attributes: true});
    }
    window.__okT0 = null;
}"""

SETTLED = """(quiet) => {
    const b = document.querySelector('.offloadkit-busy');
    return window.__okT0 !== null && b && b.textContent.trim() === ''
        && performance.now() - window.__okLast > quiet;
}"""


def set_control(page, name: str, value) -> None:
    """Change control ``name`` as a student does: readout + Enter, checkbox click, dropdown pick."""
    root = page.locator(f".offloadkit-control-{name}")
    if isinstance(value, bool):
        root.locator("input[type=checkbox]").click()
    elif root.locator("select").count():
        root.locator("select").select_option(value=None, label=value)
    else:
        box = root.locator(".widget-readout")
        box.fill(str(value))
        box.press("Enter")


def timed_change(page, name: str, value, timeout_ms: int = 60_000) -> float:
    """ms from the change (Enter, click, pick) to the last update of the dashboard it caused."""
    page.evaluate(ARM)
    set_control(page, name, value)
    page.wait_for_function(SETTLED, arg=QUIET_MS, timeout=timeout_ms, polling=50)
    return float(page.evaluate("() => window.__okLast - window.__okT0"))


def option_labels(ctl) -> list[str]:
    return [o[0] if isinstance(o, tuple) else str(o) for o in ctl.options]


def notebook_latencies(page, dash, repeat: int, seed: int = 1) -> dict[str, list[float]]:
    """{control: latencies (ms)} for ``repeat`` fresh changes of every control of ``dash`` (the same
    dashboard, built in this process for the controls' ranges and options) on the loaded page."""
    from benchmarks.live import Fresh, is_slider
    fresh = Fresh(seed)
    out: dict[str, list[float]] = {}
    for name, ctl in dash.controls.items():
        times = []
        for k in range(repeat):
            if is_slider(ctl):
                v = fresh.value(name, ctl)
                ctl.value = v     # the same move here: the MSS maximum follows the MTU in both
            elif isinstance(ctl.value, bool):
                v = True          # a click toggles
            else:
                labels = option_labels(ctl)
                v = labels[(k + 1) % len(labels)]
            times.append(timed_change(page, name, v))
        out[name] = times
    return out


def summary(times: dict[str, list[float]]) -> dict[str, float]:
    every = [t for ts in times.values() for t in ts]
    return {"n": len(every), "median_ms": statistics.median(every), "p95_ms": float(np.percentile(every, 95)),
            "max_ms": max(every)}
