"""Compile every numba kernel once so that later imports load them from the cache.

``offloadkit warmup`` (or ``python -m offloadkit.warmup``) is run by ``make lab``/``make test``
and by Binder's postBuild. Each engine module that has kernels defines ``warmup()``,
which calls them on tiny inputs with every signature in use. :func:`run` reports each
module as it goes (``[3/10] gro 12.3 s``).
"""
from __future__ import annotations

import importlib
import sys
import time

MODULES = [
    "offloadkit.engine.csum_math",
    "offloadkit.engine.segment",
    "offloadkit.engine.path",
    "offloadkit.engine.checksum",
    "offloadkit.engine.gro",
    "offloadkit.engine.lro",
    "offloadkit.sim.simulate",  # the TCP loop (engine.tcp) on a tiny scenario
    "offloadkit.engine.cpu",
    "offloadkit.io.capture",
    "offloadkit.doctor.context",
    "offloadkit.ui.offline",   # caches altair's offline JupyterChart bundle (not numba)
    "offloadkit.ui.live_chart",   # and the dashboards' LiveChart bundle
]


def run(progress=None) -> list[str]:
    """Import each module of MODULES and call its ``warmup()``; ``progress(line)`` after each.
    Returns the short names of the modules warmed."""
    start = time.perf_counter()
    warmed = []
    for i, name in enumerate(MODULES, 1):
        t0 = time.perf_counter()
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name == name:
                continue
            raise
        if hasattr(mod, "warmup"):
            mod.warmup()
            warmed.append(name.rsplit(".", 1)[-1])
            if progress:
                progress(f"[{i}/{len(MODULES)}] {name.removeprefix('offloadkit.'):<20} "
                         f"{time.perf_counter() - t0:5.1f} s")
    if progress:
        progress(f"numba kernels ready ({', '.join(warmed) or 'none'}) in {time.perf_counter() - start:.1f} s")
    return warmed


def main() -> None:
    run(progress=lambda line: print(line, file=sys.stderr, flush=True))


if __name__ == "__main__":
    main()
