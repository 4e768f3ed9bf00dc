"""Human-readable text of a Diagnosis."""
from __future__ import annotations

import textwrap

from . import Diagnosis

MARK = {"error": "ERROR", "warning": "WARNING", "info": "info"}


def render_text(d: Diagnosis, width: int = 100) -> str:
    """Findings, most severe first, each wrapped, with a one-line evidence summary."""
    alarms = d.alarms()
    head = (f"{d.capture or 'capture'}: {d.packets} TCP packets, link MTU {d.mtu} ({d.mtu_from}). "
            + (f"{len(alarms)} problem(s) found." if alarms else "No problem found."))
    lines = textwrap.wrap(head, width)
    for f in d.findings:
        lines.append("")
        lines += textwrap.wrap(f"[{MARK[f.severity]}] {f.kind}: {f.message}", width,
                               subsequent_indent="    ")
        fr = f.evidence.get("frames") if isinstance(f.evidence, dict) else None
        if fr:
            lines.append(f"    packets: {', '.join('#' + str(x) for x in fr)}")
    return "\n".join(lines)
