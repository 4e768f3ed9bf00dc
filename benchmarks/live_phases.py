"""Where one dashboard control change spends its time (``python -m benchmarks.live --phases``).

The library functions of each phase are wrapped (only the outermost call of a
phase counts, so nested calls are not counted twice), the dashboard's compute,
chart builders and text builders are wrapped too; widget sync is what is left of
the control change: ``JupyterChart.chart`` assignment, the HTML panels' state.
"""
from __future__ import annotations

import importlib
import sys
import time
from collections import defaultdict
from contextlib import contextmanager

# phase -> "module:function" of the library functions that belong to it (missing ones are skipped)
PHASE_FUNCTIONS = {
    "engine": ["offloadkit.sim.simulate:run", "offloadkit.sim.one_packet:one_packet",
               "offloadkit.engine.cpu:arrival_trace",
               *(f"offloadkit.sim.host_paths:{f}" for f in ("splice_proxy", "router_forward", "vm_receive",
                                                            "local_receive"))],
    "trace": ["offloadkit.sim.simulate:assemble", "offloadkit.reports.tcpsetup:with_setup"],
}
PHASES = ("engine", "trace", "compute", "charts", "texts", "sync")


class PhaseClock:
    """Wraps the phase functions in every loaded offloadkit module; ``totals`` in seconds."""

    def __init__(self):
        self.totals: dict[str, float] = defaultdict(float)
        self._depth: dict[str, int] = defaultdict(int)
        self._undo: list[tuple[object, str, object]] = []

    def timed(self, phase: str, fn):
        def wrapper(*a, **k):
            self._depth[phase] += 1
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                self._depth[phase] -= 1
                if self._depth[phase] == 0:
                    self.totals[phase] += time.perf_counter() - t0
        wrapper.__wrapped__ = fn
        return wrapper

    def install(self) -> None:
        targets = {}
        for phase, names in PHASE_FUNCTIONS.items():
            for name in names:
                mod, fn = name.split(":")
                try:
                    targets[id(getattr(importlib.import_module(mod), fn))] = phase
                except (ImportError, AttributeError):
                    continue
        for modname, mod in list(sys.modules.items()):
            if not modname.startswith("offloadkit") or mod is None:
                continue
            for attr, value in list(vars(mod).items()):
                if id(value) in targets and callable(value):
                    self._undo.append((mod, attr, value))
                    setattr(mod, attr, self.timed(targets[id(value)], value))

    def uninstall(self) -> None:
        for mod, attr, value in reversed(self._undo):
            setattr(mod, attr, value)
        self._undo.clear()

    @contextmanager
    def on(self, dash):
        """Wrap the library and ``dash``'s compute/views/texts while the block runs."""
        saved = dash._compute, dict(dash.views), dict(dash.texts)
        dash._compute = self.timed("compute", dash._compute)
        dash.views = {k: self.timed("charts", f) for k, f in dash.views.items()}
        dash.texts = {k: self.timed("texts", f) for k, f in dash.texts.items()}
        self.install()
        try:
            yield self
        finally:
            self.uninstall()
            dash._compute, dash.views, dash.texts = saved[0], saved[1], saved[2]


def phase_table(report_id: str, repeat: int, seed: int = 1) -> dict[str, float]:
    """Mean ms per control change, per phase, over ``repeat`` fresh changes of every control."""
    from offloadkit import ui

    from .live import Fresh, is_slider, other_value
    dash = ui.dashboard(report_id)
    fresh, clock, total, n = Fresh(seed), PhaseClock(), 0.0, 0
    sliders = [name for name, c in dash.controls.items() if is_slider(c)]
    defaults = dict(dash.values)
    for name, ctl in dash.controls.items():
        dash.set(**defaults)
        mover = "mss" if "mss" in sliders and name != "mss" else next((s for s in sliders if s != name), None)
        for _ in range(repeat):
            if is_slider(ctl):
                v = fresh.value(name, ctl)
            else:
                if mover is not None:
                    dash.controls[mover].value = fresh.value(mover, dash.controls[mover])
                v = other_value(ctl)
            with clock.on(dash):
                t0 = time.perf_counter()
                ctl.value = v
                total += time.perf_counter() - t0
            n += 1
    t = clock.totals
    own = t["compute"] - t["engine"] - t["trace"]
    out = {"engine": t["engine"], "trace": t["trace"], "compute": own, "charts": t["charts"],
           "texts": t["texts"], "sync": total - t["compute"] - t["charts"] - t["texts"], "total": total}
    return {k: 1e3 * v / max(n, 1) for k, v in out.items()}


def print_phases(ids, repeat: int, seed: int) -> None:
    print(f"\nwhere a control change goes (mean ms over {repeat} fresh changes per control):")
    print(f"  {'dashboard':10s}" + "".join(f"{p:>9s}" for p in (*PHASES, "total")))
    for rid in ids:
        row = phase_table(rid, repeat, seed)
        print(f"  {rid:10s}" + "".join(f"{row[p]:9.1f}" for p in (*PHASES, "total")))
