"""offloadkit: see what TSO/GSO, GRO/LRO and checksum offload do to TCP.

The public API, imported on first use (``import offloadkit`` itself is cheap)::

    Scenario, simulate      a scenario and its simulation (offloadkit.sim)
    Trace                   the columnar packet table every stage reads and writes
    read_capture            a pcap/pcapng file as a Trace (offloadkit.io.capture)
    segment, gro            Linux GSO segmentation and GRO aggregation of a Trace (offloadkit.engine)
    reproduce               the five reports, report vs model (offloadkit.reports)
    diagnose                what the offloads did to a capture (offloadkit.doctor)
    sweep                   offloadkit.sweep: every point of a parameter grid, on dask
"""
from __future__ import annotations

import importlib

from . import numba_cache

numba_cache.configure()

__version__ = "0.2.0.dev0"

# public name -> module that defines it
_API = {
    "Scenario": "offloadkit.sim.scenario",
    "simulate": "offloadkit.sim.simulate",
    "Trace": "offloadkit.trace",
    "read_capture": "offloadkit.io.capture",
    "segment": "offloadkit.engine.segment",
    "gro": "offloadkit.engine.gro",
    "reproduce": "offloadkit.reports",
    "diagnose": "offloadkit.doctor",
}

__all__ = [*_API, "sweep", "__version__"]


def __getattr__(name: str):
    if name == "sweep":          # the module offloadkit.sweep (pandas and dask), on first use
        return importlib.import_module(".sweep", __name__)
    if name in _API:
        value = getattr(importlib.import_module(_API[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'offloadkit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
