"""The "try it on a real kernel" cells of the notebooks: lab runs described as text.

:func:`kernel_lab_text` runs ``offloadkit.lab.compare.try_on_kernel`` for each
labelled ``LabSettings`` and prints what the real kernel did beside the kit's
engine on the same input (payload sizes per capture point, goodput).
"""
from __future__ import annotations

import dataclasses
import tempfile
import time
from typing import Any, Mapping

from ..lab.compare import try_on_kernel
from .table import format_rate


def _top_sizes(hist: Mapping[int, int], n: int = 4, smallest: int = 64) -> str:
    items = [(s, c) for s, c in hist.items() if s >= smallest][:n]
    return ", ".join(f"{c}×{s}" for s, c in items) or "-"


def kernel_lab_text(experiments: Mapping[str, Any], budget_s: float = 25.0) -> str:
    """Run ``offloadkit.lab.compare.try_on_kernel`` for each labelled ``LabSettings`` and describe
    what the real kernel did (payload sizes per capture point, kernel beside the kit's engine,
    goodput). Where the lab cannot run (no root, no namespaces: Binder) the result is its one
    sentence of refusal. Experiments that would start after ``budget_s`` seconds are left out."""
    t0, out = time.monotonic(), []
    for label, settings in experiments.items():
        left = budget_s - (time.monotonic() - t0)
        if left < 3:
            out.append(f"{label}: left out (the {budget_s:.0f} s budget of this cell is spent)")
            continue
        settings = dataclasses.replace(settings, iperf_timeout_s=min(settings.iperf_timeout_s, left))
        try:
            with tempfile.TemporaryDirectory(prefix="offloadkit-nb-") as tmp:
                r = try_on_kernel(settings, tmp)
        except (RuntimeError, OSError, ValueError) as e:   # a run that failed or timed out: say so, go on
            out.append(f"{label}: the lab run failed: {e}")
            continue
        if "skipped" in r:
            return f"Skipped: {r['skipped']}"
        out.append(f"{label}\n  goodput {format_rate(r['goodput_bps'])}, {r['retransmits']} retransmissions")
        out.append(f"  {'point':11s} {'kernel (payload bytes, most frequent)':40s} kit's engine on the same input")
        for p, hist in r["kernel"].items():
            out.append(f"  {p:11s} {_top_sizes(hist):40s} {_top_sizes(r['kit'].get(p, {}))}")
        for key in ("segmentation", "gro"):
            if key in r:
                out.append(f"  {key}: {'agrees' if r[key]['ok'] else 'DIFFERS'} ({r[key]['summary']})")
        out.extend(f"  note: {n}" for n in r.get("notes", []))
    out.append("(iperf3's control messages, under 64 bytes, are left out.)")
    return "\n".join(out)
