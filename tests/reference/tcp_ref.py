"""The TCP event loop of ``offloadkit.engine.tcp`` run as plain Python.

Every module of the ``engine.tcp`` package is executed again, in import order,
as a sibling package ``offloadkit.engine.tcp_ref`` with ``njit`` replaced by the
identity; the building blocks the loop imports from ``engine.segment`` /
``engine.path`` / ``engine.gro_rules`` are replaced by their plain-Python
``py_func``, so every rule runs in the interpreter (numpy arrays as storage,
Python control flow). It is the benchmark baseline (same algorithm, same event
count) and a cross-check that compilation does not change results:
``simulate_ref(sc)`` must equal ``offloadkit.sim.simulate.simulate(sc)`` field
for field.

Use small scenarios: it runs roughly 100-1000x slower than the compiled loop.
"""
from __future__ import annotations

import pathlib
import sys
import types

from numba.core.dispatcher import Dispatcher

from offloadkit.engine import tcp as _tcp
from offloadkit.packet.jit import Kernel
from offloadkit.sim import simulate as _sim
from offloadkit.sim.pack import pack

ORDER = ("layout", "jiffies", "mtu", "rows", "world", "congestion", "recovery", "sender", "receiver", "hops", "loop")
NAME = "offloadkit.engine.tcp_ref"


def _identity_njit(*args, **kwargs):
    if args and callable(args[0]):
        return args[0]
    return lambda fn: fn


def _load() -> types.ModuleType:
    folder = pathlib.Path(_tcp.__file__).parent
    pkg = types.ModuleType(NAME)
    pkg.__path__ = [str(folder)]
    sys.modules[NAME] = pkg
    for name in ORDER:
        path = folder / f"{name}.py"
        src = path.read_text().replace("from ...packet.jit import njit", "njit = _identity_njit")
        assert "njit = _identity_njit" in src or "njit" not in src, f"{path}: the kit's njit import line moved"
        mod = types.ModuleType(f"{NAME}.{name}")
        mod.__package__ = NAME
        mod.__file__ = str(path)
        mod.__dict__["_identity_njit"] = _identity_njit
        sys.modules[mod.__name__] = mod
        setattr(pkg, name, mod)
        exec(compile(src, str(path), "exec"), mod.__dict__)
        for k, v in list(mod.__dict__.items()):    # compiled building blocks from outside the package
            if isinstance(v, Dispatcher) or isinstance(v, Kernel):
                mod.__dict__[k] = v.py_func
    return pkg


LOOP = _load().loop
_WORLD = sys.modules[f"{NAME}.world"]


def run_ref(scenario):
    """The World after running the plain-Python loop on ``scenario``."""
    W = _WORLD.make_world(*pack(scenario))
    LOOP.run_kernel(W)
    return W


def simulate_ref(scenario):
    """Like ``offloadkit.sim.simulate.simulate``, with the loop interpreted."""
    return _sim.assemble(scenario, run_ref(scenario))
