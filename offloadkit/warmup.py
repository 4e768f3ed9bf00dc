"""Compile every numba kernel once so that later imports load them from the cache.

``python -m offloadkit.warmup`` is run by ``make lab``/``make test`` and by
Binder's postBuild. Each engine module that has kernels defines ``warmup()``,
which calls them on tiny inputs with every signature in use.
"""
from __future__ import annotations

import importlib
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
    "offloadkit.ui.offline",   # caches altair's offline JupyterChart bundle (not numba)
]


def main() -> None:
    start = time.perf_counter()
    warmed = []
    for name in MODULES:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name == name:
                continue
            raise
        if hasattr(mod, "warmup"):
            mod.warmup()
            warmed.append(name.rsplit(".", 1)[1])
    print(f"numba kernels ready ({', '.join(warmed) or 'none'}) in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
