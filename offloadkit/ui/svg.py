"""Vega-Lite specs as SVG, rendered by vl-convert in a short-lived child process.

A stored notebook's kernel-free copy of a dashboard carries its charts as SVG
(``Dashboard.static_html``). vl-convert renders through an embedded JavaScript
engine that stays resident once started: about 85 MB in the kernel, for a picture
drawn once per display. The child process pays the same start-up (the engine's)
plus a Python start, and takes the memory with it when it exits.
"""
from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping

_CHILD = ("import json, sys, vl_convert; specs = json.load(sys.stdin); "
          "json.dump({k: vl_convert.vegalite_to_svg(v) for k, v in specs.items()}, sys.stdout)")


def svgs(specs: Mapping[str, dict]) -> dict[str, str]:
    """{name: Vega-Lite spec} -> {name: SVG text}, in one child process."""
    if not specs:
        return {}
    out = subprocess.run([sys.executable, "-c", _CHILD], input=json.dumps(dict(specs)), capture_output=True,
                         text=True)
    if out.returncode:
        raise RuntimeError(f"vl-convert could not render the charts: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout)
