"""The TCP event loop of ``offloadkit.engine.tcp`` run as plain Python.

The loop's source is executed again with ``njit`` replaced by the identity
and the building blocks it imports from ``engine.segment``/``engine.path``
replaced by their plain-Python ``py_func``, so every rule runs in the
interpreter (numpy arrays as storage, Python control flow). It is the
benchmark baseline (same algorithm, same event count) and a cross-check that
compilation does not change results: ``simulate_ref(sc)`` must equal
``offloadkit.sim.simulate.simulate(sc)`` field for field.

Use small scenarios: it runs roughly 100-1000x slower than the compiled loop.
"""
from __future__ import annotations

import pathlib
import types

from offloadkit.sim import simulate as _sim
from offloadkit.engine import path as _path
from offloadkit.engine import segment as _seg
from offloadkit.engine import tcp as _tcp

_BLOCKS = {
    "mtu_drop_reason": _path.mtu_drop_reason,
    "nic_chunk_size": _seg.nic_chunk_size,
    "nic_effective": _seg.nic_effective,
    "segment_flags": _seg.segment_flags,
    "segment_ip_id": _seg.segment_ip_id,
    "segment_payload": _seg.segment_payload,
    "segments_for": _seg.segments_for,
}


def _identity_njit(*args, **kwargs):
    if args and callable(args[0]):
        return args[0]
    return lambda fn: fn


def _load() -> types.ModuleType:
    src = pathlib.Path(_tcp.__file__).read_text()
    src = src.replace("from numba import njit", "njit = _identity_njit")
    mod = types.ModuleType("tcp_ref_loop")
    mod.__package__ = "offloadkit.engine"
    mod.__file__ = _tcp.__file__
    mod.__dict__["_identity_njit"] = _identity_njit
    exec(compile(src, _tcp.__file__, "exec"), mod.__dict__)
    for name, fn in _BLOCKS.items():
        mod.__dict__[name] = getattr(fn, "py_func", fn)
    return mod


LOOP = _load()


def run_ref(scenario):
    """The World after running the plain-Python loop on ``scenario``."""
    W = LOOP.make_world(*_sim._params(scenario))
    LOOP.run_kernel(W)
    return W


def simulate_ref(scenario):
    """Like ``offloadkit.sim.simulate.simulate``, with the loop interpreted."""
    return _sim.assemble(scenario, run_ref(scenario))
